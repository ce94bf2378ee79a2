// fpgallm train end to end: a few steps write a loadable checkpoint of the same shape;
// bad input leaves no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

// `train --qat w4a8 -o q.gguf` writes the quantized GGUF that `quantize` writes: `run
// --backend accel` takes it with the default design, and `eval --backend accel` measures a
// perplexity within the accelerator tests' bound (2e-3) of the simulated quantization of
// the same file (greedy tokens: QatTraining.ExportedModelRunsOnTheAcceleratorAsTheReferenceEngineDoes).
// With learned scales (the default), from RTN's start and from GPTQ's: group scales that
// are not max |w| / 7 (w2's 172 columns stored as F32 values with their scales beside
// them, docs/quantization.md 8).
TEST(TrainCli, QatExportRunsOnTheAccelerator) {
  using testing_support::run_fpgallm;
  const std::string dir = testing_support::scratch_dir("train_cli_qat");
  const std::string model = testing_support::stories260k() + " -z " + testing_support::tok512();
  // The sample's first 8 stories: 4 train, 4 held out (what eval on the accelerator scores).
  const std::string text = testing_support::sample_lines(8);
  const std::string text_file = dir + "/stories.txt";
  testing_support::write_bytes(text_file, text);
  for (const std::string extra : {"", " --method gptq --search-scales"}) {
    const std::string out = dir + "/qat" + std::to_string(extra.size()) + ".gguf";
    const auto r = run_fpgallm("train " + model + " --data " + text_file +
                               " --qat w4a8 --steps 6 --batch 4 --seq 32 --eval-every 6 --heldout-tokens 256 --lr 1e-3 "
                               "--lr-schedule cosine --json -o " + out + extra);
    ASSERT_EQ(r.status, 0) << extra << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("loss"), "distill");
    EXPECT_EQ(j.at("qat").at("scheme"), "w4a8");
    EXPECT_EQ(j.at("qat").at("learn_scales"), true);
    EXPECT_GT(j.at("qat").at("perplexity").get<double>(), 1.0);
    // No --design: the default accelerator takes the file's 4-bit weights.
    const auto acc = run_fpgallm("run " + model + " --quant " + out + " -t 0 -n 8 -i 'Once upon a time' --backend accel");
    ASSERT_EQ(acc.status, 0) << extra << acc.err;
    const auto ev = run_fpgallm("eval " + model + " --quant " + out + " --backend accel --text " + text_file + " --json", 300);
    ASSERT_EQ(ev.status, 0) << extra << ev.err;
    const auto je = nlohmann::json::parse(ev.out);
    // The file carries the training text's fingerprint: eval scores the held-out half, as
    // train's own report did.
    EXPECT_NEAR(je["simulated_perplexity"].get<double>(), j["qat"]["perplexity"].get<double>(), 1e-9) << extra;
    EXPECT_LT(std::fabs(je["rel_diff_vs_simulated"].get<double>()), 2e-3) << extra;
  }
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
