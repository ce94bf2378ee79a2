#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "testing.hpp"

namespace {

TEST(ProfileCli, JsonSharesAddUpAndMatchTheLowering) {
  auto r = testing_support::run_fpgallm("profile llama2-7b --phase decode --context 4096 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["phase"], "decode");
  EXPECT_EQ(j["tokens"], 1);
  double share = 0;
  for (const auto& [name, g] : j["groups"].items()) share += g["flops_share"].get<double>();
  EXPECT_NEAR(share, 1.0, 1e-9);
  // Decode at batch 1 is ~2 FLOPs per byte of weights and KV: bandwidth-bound on every card.
  const double f = j["total"]["flops"], wb = j["total"]["weight_bytes"], kv = j["total"]["kv_bytes"];
  EXPECT_NEAR(f / (wb + kv), 2.0, 0.05);
  EXPECT_FALSE(j.contains("ops"));
}

TEST(ProfileCli, TableAndOperationList) {
  auto r = testing_support::run_fpgallm("profile " + testing_support::stories260k() + " --phase prefill --prompt 32 --ops");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("feed_forward"), std::string::npos);
  EXPECT_NE(r.out.find("blk.4.w2"), std::string::npos);
  EXPECT_NE(r.out.find("attention_score"), std::string::npos);
}

TEST(ProfileCli, BadInputIsOneLineAndExitTwo) {
  auto r = testing_support::run_fpgallm("profile bert-base --phase decode");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("encoder"), std::string::npos) << r.err;
  r = testing_support::run_fpgallm("profile llama2-7b --scheme int3");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--scheme"), std::string::npos) << r.err;
  r = testing_support::run_fpgallm("profile llama2-7b --batch 0");
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
