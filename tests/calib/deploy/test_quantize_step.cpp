// deploy's quantize step on stories260K tries RTN, AWQ, then GPTQ for 4-bit weights and
// takes the first within budget; with a budget that only GPTQ meets, it picks GPTQ; QAT comes
// after them when asked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "deploy/deploy.hpp"
#include "engine/perplexity.hpp"
#include "model/model.hpp"
#include "testing.hpp"

namespace {

TEST(Deploy, QuantizeStepTakesTheFirstMethodWithinBudget) {
  struct {
    model::Model m = model::load(testing_support::stories260k());
    model::Tokenizer tok = model::load_tokenizer(testing_support::tok512());
  } s;
  // The first 4 stories of the sample: 2 calibrate, 2 are held out.
  const auto stories = engine::split_stories(engine::read_text_file(testing_support::sample_text()));
  std::string text;
  for (std::size_t i = 0; i < 4; ++i) text += stories.at(i) + "\n";
  // As deploy tries 4-bit weights (deploy::accel_schemes without the code generator).
  const std::vector<deploy::SchemeChoice> w4 = {
      {quant::Scheme::w4a8, 32, {quant::Method::rtn, quant::Method::awq, quant::Method::gptq}, true}};
  // No budget met: every method tried, the least loss deployed.
  const deploy::Quantized all = deploy::choose_quantization(s.m, s.tok, text, "sample", -1.0, w4);
  ASSERT_EQ(all.rows.size(), 3u);
  EXPECT_FALSE(all.budget_met);
  double rel[3];
  for (int i = 0; i < 3; ++i) {
    rel[i] = all.rows[i]["rel_increase"].get<double>();
    EXPECT_GT(all.seconds[static_cast<std::size_t>(i)], 0.0);
    EXPECT_GT(all.rows[i]["weight_bytes"].get<double>(), 0.0);
  }
  EXPECT_EQ(all.rows[0]["method"], "rtn");
  EXPECT_EQ(all.rows[1]["method"], "awq");
  EXPECT_EQ(all.rows[2]["method"], "gptq");
  EXPECT_EQ(all.rows[0]["search_scales"], false);
  EXPECT_EQ(all.rows[1]["search_scales"], true);
  EXPECT_EQ(all.rows[2]["search_scales"], true);
  EXPECT_EQ(all.rows[0]["calibration_passes"], 1);
  EXPECT_EQ(all.rows[1]["calibration_passes"], 3);  // statistics, AWQ's Hessians, the folded model's
  EXPECT_EQ(all.rows[2]["calibration_passes"], 1 + s.m.config.n_layers + 1);
  std::printf("w4a8 g32 held-out: rtn %+.3f%%, awq %+.3f%%, gptq %+.3f%%\n", 100 * rel[0], 100 * rel[1], 100 * rel[2]);
  // A budget between GPTQ's increase and the better of RTN's and AWQ's: only GPTQ meets it.
  ASSERT_LT(rel[2], std::min(rel[0], rel[1]));
  const double budget = (rel[2] + std::min(rel[0], rel[1])) / 2;
  const deploy::Quantized q = deploy::choose_quantization(s.m, s.tok, text, "sample", budget, w4);
  EXPECT_TRUE(q.budget_met);
  ASSERT_EQ(q.rows.size(), 3u);
  EXPECT_EQ(q.chosen.method, quant::Method::gptq);
  EXPECT_FALSE(q.rows[0]["deployed"].get<bool>());
  EXPECT_FALSE(q.rows[1]["deployed"].get<bool>());
  EXPECT_TRUE(q.rows[2]["deployed"].get<bool>());
  EXPECT_DOUBLE_EQ(q.rows[2]["rel_increase"].get<double>(), rel[2]);
}

TEST(Deploy, QuantizeStepTriesQatWhenAskedAndThePostTrainingMethodsMiss) {
  const model::Model m = model::load(testing_support::stories260k());
  const model::Tokenizer tok = model::load_tokenizer(testing_support::tok512());
  const auto stories = engine::split_stories(engine::read_text_file(testing_support::sample_text()));
  std::string text;
  for (std::size_t i = 0; i < 4; ++i) text += stories.at(i) + "\n";
  const std::vector<deploy::SchemeChoice> w4 = {{quant::Scheme::w4a8, 32}};
  // Not asked: RTN only.
  EXPECT_EQ(deploy::choose_quantization(m, tok, text, "sample", -1.0, w4).rows.size(), 1u);
  // Asked, and RTN misses the budget: 16 steps of QAT are tried next, scored on the same half.
  const deploy::Quantized q = deploy::choose_quantization(m, tok, text, "sample", -1.0, w4, {}, nullptr, 16);
  ASSERT_EQ(q.rows.size(), 2u);
  EXPECT_EQ(q.rows[0]["method"], "rtn");
  EXPECT_EQ(q.rows[1]["method"], "qat");
  EXPECT_EQ(q.rows[1]["qat_steps"], 16);
  EXPECT_EQ(q.rows[1]["weight_bytes"], q.rows[0]["weight_bytes"]);
  const double rtn = q.rows[0]["rel_increase"].get<double>(), qat = q.rows[1]["rel_increase"].get<double>();
  std::printf("w4a8 g32 held-out: rtn %+.3f%%, 16 QAT steps %+.3f%%\n", 100 * rtn, 100 * qat);
  EXPECT_LT(qat, rtn);
  // Nothing met the budget: the least loss is deployed, here QAT's.
  EXPECT_FALSE(q.budget_met);
  EXPECT_TRUE(q.rows[1]["deployed"].get<bool>());
  EXPECT_EQ(q.chosen.qat_steps, 16);
  EXPECT_EQ(q.chosen.qm.calibration_fnv1a, quant::fnv1a64(text));
  // Asked, and RTN meets the budget: no QAT.
  EXPECT_EQ(deploy::choose_quantization(m, tok, text, "sample", 10.0, w4, {}, nullptr, 16).rows.size(), 1u);
}

}  // namespace
