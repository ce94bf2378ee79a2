// fpgallm train end to end: a few steps write a loadable checkpoint of the same shape;
// bad input leaves no output file.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "model/model.hpp"
#include "testing.hpp"

namespace {

using testing_support::run_fpgallm;

TEST(TrainCli, FewStepsWriteALoadableCheckpoint) {
  const std::string dir = testing_support::scratch_dir("train_cli");
  const std::string out = dir + "/tuned.bin";
  const auto r = run_fpgallm("train " + testing_support::stories260k() + " -z " + testing_support::tok512() + " --data " +
                             testing_support::sample_text() + " --steps 3 --batch 2 --seq 16 --eval-every 3 --heldout-tokens 256 --lr 1e-3 --json -o " +
                             out);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("curve").size(), 2u);
  EXPECT_EQ(j.at("curve")[1].at("step").get<int>(), 3);
  const model::Model before = model::load(testing_support::stories260k());
  const model::Model after = model::load(out);
  EXPECT_EQ(after.config.dim, before.config.dim);
  EXPECT_EQ(after.weights.token_embedding.size(), before.weights.token_embedding.size());
  EXPECT_NE(after.weights.layers[0].wq, before.weights.layers[0].wq);
}

TEST(TrainCli, SequenceLongerThanContextIsAnInputErrorAndWritesNothing) {
  const std::string dir = testing_support::scratch_dir("train_cli_bad");
  const std::string out = dir + "/never.bin";
  const auto r = run_fpgallm("train " + testing_support::stories260k() + " -z " + testing_support::tok512() + " --data " +
                             testing_support::sample_text() + " --steps 1 --seq 100000 -o " + out);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--seq"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
