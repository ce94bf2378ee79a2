#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "testing.hpp"

namespace {

TEST(PlanTrainCli, BertBaseOnU55cStatesTheBoundAndNeverBeatsIt) {
  auto r = testing_support::run_fpgallm("plan bert-base --device u55c --phase train --batch 32 --seq 128");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("bound: no step can be faster than"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a100-80gb"), std::string::npos);
  auto j = testing_support::run_fpgallm("plan bert-base --device u55c --phase train --batch 32 --seq 128 --json");
  ASSERT_EQ(j.status, 0) << j.err;
  auto out = nlohmann::json::parse(j.out);
  const auto& card = out["card"];
  // Hand check of the bound: 2 x 9024 DSPs x 2 int8 MACs x 225 MHz (DS890, WP486; the U55C family clock in data/devices.json).
  EXPECT_NEAR(card["peak_ops_per_s"].get<double>(), 2.0 * 9024 * 2 * 225e6, 1e6);
  EXPECT_GE(card["step_s"].get<double>(), card["min_step_s"].get<double>());
  // "29 ms per step on an Alveo U55C" needs more than the card's peak arithmetic rate.
  EXPECT_GT(card["min_step_s"].get<double>(), 0.029);
}

}  // namespace
