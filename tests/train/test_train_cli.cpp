// fpgallm train end to end: a few steps write a loadable checkpoint of the same shape;
// QAT's file runs on the accelerator (stories260K and a synthesized Qwen3); bad input leaves
// no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "model/model.hpp"
#include "model/safetensors.hpp"
#include "model/synth.hpp"
#include "quant/quant.hpp"
#include "small_qwen.hpp"
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

// Qwen3 (per-head q/k norms, heads of 32 on a width of 64), synthesized as a Hugging Face
// folder with distinct head norm gains: `train` writes a folder whose gains trained, and
// `train --qat w4a8` a GGUF that carries its trained gains and that `run --backend accel`
// (no --design) runs to the same greedy tokens as the quantized reference engine.
TEST(TrainCli, Qwen3TrainsAndItsQatExportRunsOnTheAccelerator) {
  const std::string dir = testing_support::scratch_dir("train_cli_qwen3");
  model::Config c = testing_support::small_qwen_config(model::Arch::qwen3);
  c.vocab_size = 512;  // models/tok512.bin
  c.seq_len = 256;
  model::Model start = model::synthesize(c, 31);
  testing_support::distinct_head_norm_gains(start);
  model::save_safetensors_dir(start, dir + "/model");
  const std::string model = dir + "/model -z " + testing_support::tok512();
  const std::string text_file = dir + "/stories.txt";
  testing_support::write_bytes(text_file, testing_support::sample_lines(8));
  const std::string steps = " --steps 4 --batch 4 --seq 32 --eval-every 4 --heldout-tokens 256 --lr 1e-2 --json";

  const auto f = run_fpgallm("train " + model + " --data " + text_file + steps + " -o " + dir + "/tuned");
  ASSERT_EQ(f.status, 0) << f.err;
  const model::Model tuned = model::load(dir + "/tuned");
  EXPECT_TRUE(tuned.config.qk_norm);
  EXPECT_EQ(tuned.config.head_dim(), 32);
  EXPECT_NE(tuned.weights.layers[1].q_norm, start.weights.layers[1].q_norm);
  EXPECT_NE(tuned.weights.layers[0].k_norm, start.weights.layers[0].k_norm);

  const std::string out = dir + "/qat.gguf";
  const auto r = run_fpgallm("train " + model + " --data " + text_file + " --qat w4a8" + steps + " -o " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("qat").at("scheme"), "w4a8");
  const quant::QuantModel qm = quant::load_gguf(out);
  ASSERT_EQ(qm.q_norm.size(), 2u);
  EXPECT_NE(qm.q_norm[1], start.weights.layers[1].q_norm);
  EXPECT_NE(qm.k_norm[0], start.weights.layers[0].k_norm);

  const std::string run = "run " + model + " --quant " + out + " -t 0 -n 24 -i 'Once upon a time' --json";
  const auto acc = run_fpgallm(run + " --backend accel");
  const auto sim = run_fpgallm(run);
  ASSERT_EQ(acc.status, 0) << acc.err;
  ASSERT_EQ(sim.status, 0) << sim.err;
  const auto ja = nlohmann::json::parse(acc.out), js = nlohmann::json::parse(sim.out);
  std::printf("qwen3 after QAT, greedy tokens on the accelerator: %s\n", ja["tokens"].dump().c_str());
  EXPECT_EQ(ja["tokens"], js["tokens"]);
  EXPECT_GE(ja["tokens"].size(), 24u);
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
