// The accelerator backend on synthesized Qwen2 (q/k/v biases, theta 1e6, eps 1e-6) and Qwen3
// (per-head q/k RMSNorm, heads of 32 on a width of 64) models, W8A8: the bias epilogue of
// the matrix units against the quantization module's reference plus the bias (bit-exact),
// the logits against the simulated quantization of the same plan within Llama's bound
// (tests/accel/test_accel.cpp), prefill = decode and unit shapes bit for bit, and a test
// that fails when the accelerator's bias or per-head gain differs from the model's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "calib/simulated.hpp"
#include "engine/accel.hpp"
#include "engine/accel_kernels.hpp"
#include "model/safetensors.hpp"
#include "model/synth.hpp"
#include "quant/quant.hpp"
#include "accel_testing.hpp"
#include "small_qwen.hpp"
#include "testing.hpp"

namespace {

// The synthesized model, with per-head gains that differ by element and by layer (synth
// makes them 1) so that a gain read at the wrong place shows.
const model::Model& qwen(model::Arch arch) {
  static const model::Model q2 = model::synthesize(testing_support::small_qwen_config(model::Arch::qwen2), 11);
  static const model::Model q3 = [] {
    model::Model m = model::synthesize(testing_support::small_qwen_config(model::Arch::qwen3), 12);
    testing_support::distinct_head_norm_gains(m);
    return m;
  }();
  return arch == model::Arch::qwen2 ? q2 : q3;
}

const quant::QuantModel& quantized(model::Arch arch) {
  static const quant::QuantModel q2 =
      quant::quantize_model(qwen(model::Arch::qwen2), quant::uniform_plan(testing_support::small_qwen_config(model::Arch::qwen2), quant::Scheme::w8a8, 32));
  static const quant::QuantModel q3 =
      quant::quantize_model(qwen(model::Arch::qwen3), quant::uniform_plan(testing_support::small_qwen_config(model::Arch::qwen3), quant::Scheme::w8a8, 32));
  return arch == model::Arch::qwen2 ? q2 : q3;
}

const std::vector<int> kTokens = {1, 17, 200, 45, 3, 99, 128, 7, 64, 250, 31, 5, 180, 77, 12, 140, 2, 90, 33, 211};

struct Agreement {
  double worst_rel = 0;   // max over tokens of max |a - b| / max |b|
  double max_abs = 0;     // max |a - b| over all logits
  int argmax_agree = 0;
};

Agreement compare(const std::vector<float>& a, const std::vector<float>& b, int vocab) {
  Agreement r;
  for (std::size_t t = 0; t * vocab < a.size(); ++t) {
    double num = 0, den = 0;
    for (int i = 0; i < vocab; ++i) {
      const double d = std::fabs(double(a[t * vocab + i]) - b[t * vocab + i]);
      num = std::max(num, d);
      den = std::max(den, std::fabs(double(b[t * vocab + i])));
    }
    r.worst_rel = std::max(r.worst_rel, num / den);
    r.max_abs = std::max(r.max_abs, num);
    const auto am = [&](const std::vector<float>& v) {
      return std::max_element(v.begin() + long(t * vocab), v.begin() + long((t + 1) * vocab)) - v.begin();
    };
    r.argmax_agree += am(a) == am(b);
  }
  return r;
}

// The store stage adds the bias after the requantization: exactly the reference engine's
// linear (quant::linear_w8a8 / linear_w4a8) followed by y[r] += b[r], in every kernel.
TEST(AccelQwen, BiasEpilogueIsTheReferenceBitForBit) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (auto [rows, cols] : {std::pair{64, 64}, {96, 64}, {72, 160}}) {
    std::vector<float> w(std::size_t(rows) * cols), x(static_cast<std::size_t>(cols)), bias(static_cast<std::size_t>(rows));
    for (auto& v : w) v = nd(rng);
    for (auto& v : x) v = nd(rng) * 40.0f;
    for (auto& v : bias) v = nd(rng) * 20.0f;
    const quant::Int8Matrix m8 = quant::quantize_int8(w, rows, cols);
    std::vector<std::int8_t> qx(x.size() + 64, 0);
    const float sx = quant::quantize_activation_dynamic(x, std::span<std::int8_t>(qx.data(), x.size()));
    std::vector<float> want(static_cast<std::size_t>(rows)), got(static_cast<std::size_t>(rows));
    quant::linear_w8a8(m8, qx.data(), sx, want.data());
    for (int r = 0; r < rows; ++r) want[std::size_t(r)] += bias[std::size_t(r)];
    for (auto [pe, simd, tr, tc] : {std::tuple{8, 8, 64, 128}, {32, 32, 128, 256}}) {
      const auto k = engine::accel::matrix_kernels(pe, simd, tr, tc);
      ASSERT_TRUE(k.w8a8);
      std::fill(got.begin(), got.end(), NAN);
      k.w8a8(m8.q.data(), m8.scale.data(), qx.data(), &sx, got.data(), nullptr, 1, rows, cols, rows, bias.data());
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "tiled " << rows << "x" << cols;
      const auto mv = engine::accel::matrix_vector_kernel(pe, simd);
      if (mv.w8a8) {
        const auto steps = engine::accel::pack_steps(m8.q.data(), rows, cols, pe, simd);
        std::fill(got.begin(), got.end(), NAN);
        mv.w8a8(steps.data(), 0, qx.data(), m8.scale.data(), sx, got.data(), nullptr, rows, cols, bias.data());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "streaming " << rows << "x" << cols;
      }
      const quant::Int4Matrix m4 = quant::quantize_int4(w, rows, cols, 32);
      std::vector<float> want4(static_cast<std::size_t>(rows));
      quant::linear_w4a8(m4, qx.data(), sx, want4.data());
      for (int r = 0; r < rows; ++r) want4[std::size_t(r)] += bias[std::size_t(r)];
      std::fill(got.begin(), got.end(), NAN);
      k.w4a8(m4.packed.data(), m4.scale.data(), 32, qx.data(), &sx, got.data(), 1, rows, cols, rows, bias.data());
      ASSERT_EQ(std::memcmp(got.data(), want4.data(), got.size() * 4), 0) << "int4 " << rows << "x" << cols;
    }
  }
}

class AccelQwenArch : public ::testing::TestWithParam<model::Arch> {};

// As Accel.LogitsFollowTheSimulatedQuantization for Llama: the integer products are the
// simulation's bit for bit; the vector unit's lane sums and table exp (docs/accelerator.md)
// keep the logits within the same bound of it.
TEST_P(AccelQwenArch, LogitsFollowTheSimulatedQuantization) {
  const auto arch = GetParam();
  const auto& qm = quantized(arch);
  calib::SimulatedTransformer sim(qwen(arch), qm.plan, qm.linears);
  engine::AccelTransformer acc(qwen(arch), qm, design(32, 32, 128, 256, 16));
  const int vocab = qm.config.vocab_size;
  const auto a = compare(logits_of(acc, kTokens), logits_of(sim, kTokens), vocab);
  std::printf("%s accel vs simulated W8A8 over %zu tokens: worst logit relative error %.3g, max |diff| %.3g, argmax "
              "agrees %d/%zu\n",
              qm.config.name.c_str(), kTokens.size(), a.worst_rel, a.max_abs, a.argmax_agree, kTokens.size());
  EXPECT_LT(a.worst_rel, 2e-3);
  EXPECT_GE(a.argmax_agree, int(kTokens.size()) - 1);
}

TEST_P(AccelQwenArch, PrefillAndUnitShapesDoNotChangeAnyBit) {
  const auto arch = GetParam();
  const auto& qm = quantized(arch);
  const int vocab = qm.config.vocab_size;
  std::vector<float> first;
  for (auto d : {design(32, 32, 128, 256, 16), design(8, 64, 64, 128, 16), design(64, 8, 256, 512, 16)}) {
    engine::AccelTransformer acc(qwen(arch), qm, d);
    const auto l = logits_of(acc, kTokens);
    if (first.empty()) first = l;
    ASSERT_EQ(std::memcmp(l.data(), first.data(), l.size() * 4), 0) << "rows " << d.matrix_unit.rows;
  }
  auto d = design(32, 32, 128, 256, 16);
  d.tiling.prefill_block = 16;
  engine::AccelTransformer pre(qwen(arch), qm, d);
  const float* p = pre.prefill(std::vector<int>(kTokens.begin(), kTokens.begin() + 16), 0);
  ASSERT_EQ(std::memcmp(p, &first[15 * std::size_t(vocab)], std::size_t(vocab) * 4), 0);
  p = pre.prefill(std::vector<int>(kTokens.begin() + 16, kTokens.end()), 16);
  ASSERT_EQ(std::memcmp(p, &first[(kTokens.size() - 1) * vocab], std::size_t(vocab) * 4), 0);
}

// The agreement above can fail: the accelerator given one bias element (Qwen2) or one
// per-head gain element (Qwen3) other than the model's leaves the bound.
TEST_P(AccelQwenArch, AWrongBiasOrHeadGainIsSeen) {
  const auto arch = GetParam();
  const auto& qm = quantized(arch);
  quant::QuantModel wrong = qm;
  if (arch == model::Arch::qwen2)
    wrong.bk[1][3] += 1.0f;
  else
    wrong.k_norm[1][3] *= 1.5f;
  calib::SimulatedTransformer sim(qwen(arch), qm.plan, qm.linears);
  engine::AccelTransformer acc(qwen(arch), wrong, design(32, 32, 128, 256, 16));
  const auto a = compare(logits_of(acc, kTokens), logits_of(sim, kTokens), qm.config.vocab_size);
  std::printf("%s with one %s element changed: worst logit relative error %.3g\n", qm.config.name.c_str(),
              arch == model::Arch::qwen2 ? "bias" : "k gain", a.worst_rel);
  EXPECT_GT(a.worst_rel, 2e-3);
}

INSTANTIATE_TEST_SUITE_P(Qwen, AccelQwenArch, ::testing::Values(model::Arch::qwen2, model::Arch::qwen3),
                         [](const auto& info) { return std::string(model::to_string(info.param)); });

// The program the accelerator ran: biases on wq/wk/wv (Qwen2), head_norm before rope (Qwen3).
TEST(AccelQwen, ProgramCarriesTheQwenOperations) {
  engine::AccelTransformer a2(qwen(model::Arch::qwen2), quantized(model::Arch::qwen2), design(32, 32, 128, 256, 16));
  a2.forward(1, 0);
  int biased = 0;
  for (const auto& in : a2.last_program().instructions) biased += in.bias;
  EXPECT_EQ(biased, 3 * 2);
  engine::AccelTransformer a3(qwen(model::Arch::qwen3), quantized(model::Arch::qwen3), design(32, 32, 128, 256, 16));
  a3.forward(1, 0);
  int norms = 0;
  for (const auto& in : a3.last_program().instructions) norms += in.op == arch::Op::head_norm;
  EXPECT_EQ(norms, 2);
}

// The command line on a synthesized Qwen2 and Qwen3 written as a Hugging Face folder:
// `quantize --scheme w8a8`, then `run` and `eval --backend accel` against the simulated
// quantization of the same file (`run --quant` on the reference engine): the same greedy
// tokens, and perplexities within Llama's bound of each other.
TEST(AccelQwenCli, QuantizeRunAndEvalOnTheAccelerator) {
  using testing_support::run_fpgallm;
  // The sample's first stories: calibration on half, perplexity on the held-out half.
  const std::string text = testing_support::sample_lines(8);
  const std::string text_file = testing_support::scratch_dir("accel-cli-text") + "/stories.txt";
  testing_support::write_bytes(text_file, text);
  for (auto arch : {model::Arch::qwen2, model::Arch::qwen3}) {
    const std::string name = model::to_string(arch);
    const std::string root = testing_support::scratch_dir("accel-cli-" + name);
    model::Config c = testing_support::small_qwen_config(arch);
    c.vocab_size = 512;  // models/tok512.bin
    c.seq_len = 256;
    model::Model m = model::synthesize(c, 31);
    model::save_safetensors_dir(m, root + "/model");
    const std::string model_args = root + "/model -z " + testing_support::tok512();
    const auto q = run_fpgallm("quantize " + model_args + " --calib " + text_file +
                               " --scheme w8a8 -o " + root + "/q.gguf", 300);
    ASSERT_EQ(q.status, 0) << q.err;
    const std::string run = "run " + model_args + " --quant " + root + "/q.gguf -t 0 -n 24 -i 'Once upon a time' --json";
    const auto acc = run_fpgallm(run + " --backend accel");
    const auto sim = run_fpgallm(run);
    ASSERT_EQ(acc.status, 0) << acc.err;
    ASSERT_EQ(sim.status, 0) << sim.err;
    const auto ja = nlohmann::json::parse(acc.out), js = nlohmann::json::parse(sim.out);
    EXPECT_EQ(ja["tokens"], js["tokens"]) << name;
    const auto ev = run_fpgallm("eval " + model_args + " --quant " + root + "/q.gguf --backend accel --text " +
                                    text_file + " --json",
                                300);
    ASSERT_EQ(ev.status, 0) << ev.err;
    const auto je = nlohmann::json::parse(ev.out);
    std::printf("%s: greedy tokens %s; perplexity accel %.6f, simulated %.6f (relative %.3g) over %d tokens\n",
                name.c_str(), ja["tokens"].dump().c_str(), je["perplexity"].get<double>(),
                je["simulated_perplexity"].get<double>(), je["rel_diff_vs_simulated"].get<double>(),
                je["tokens"].get<int>());
    EXPECT_LT(std::fabs(je["rel_diff_vs_simulated"].get<double>()), 2e-3) << name;
  }
}

}  // namespace
