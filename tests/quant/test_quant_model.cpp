// QuantModel: plans, GGUF write/read (identical re-read, deterministic bytes), and the
// file's standard ggml types (Q4_0 rows read back through the GGUF reader).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "model/gguf.hpp"
#include "model/model.hpp"
#include "model/synth.hpp"
#include "quant/quant.hpp"
#include "small_qwen.hpp"
#include "testing.hpp"
#include "util/error.hpp"

namespace {

using namespace quant;

model::Model synthetic_model(unsigned seed) {
  model::Model m;
  auto& c = m.config;
  c.name = "synthetic";
  c.dim = 64;
  c.hidden_dim = 80;  // not a multiple of 32: w2 takes the padded int4 layout
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.vocab_size = 96;
  c.seq_len = 32;
  c.shared_classifier = true;
  m.weights = model::allocate_weights(c);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.1f);
  auto fill = [&](std::vector<float>& v) {
    for (auto& x : v) x = d(rng);
  };
  fill(m.weights.token_embedding);
  for (auto& l : m.weights.layers) {
    for (model::Linear w : model::kBlockLinears) fill(l.linear(w));
    for (auto& x : l.attn_norm) x = 1.0f + d(rng);
    for (auto& x : l.ffn_norm) x = 1.0f + d(rng);
  }
  for (auto& x : m.weights.final_norm) x = 1.0f + d(rng);
  return m;
}

Plan varied_plan(const model::Config& c, int group) {
  Plan p = uniform_plan(c, Scheme::mixed, group);
  const WeightFormat cycle[] = {WeightFormat::f16, WeightFormat::int8, WeightFormat::int4, WeightFormat::f32};
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    p.layers[i].weight = cycle[i % 4];
    p.layers[i].act = i % 3 == 0 ? ActFormat::int8_static : ActFormat::f16;
    p.layers[i].act_scale = i % 3 == 0 ? 0.01f * static_cast<float>(i + 1) : 0.0f;
  }
  p.kv8 = true;
  p.smooth_alpha = 0.5f;
  return p;
}

void expect_same(const QuantModel& a, const QuantModel& b) {
  EXPECT_EQ(a.token_embedding, b.token_embedding);
  EXPECT_EQ(a.attn_norm, b.attn_norm);
  EXPECT_EQ(a.ffn_norm, b.ffn_norm);
  EXPECT_EQ(a.final_norm, b.final_norm);
  nlohmann::json pa = a.plan, pb = b.plan;
  EXPECT_EQ(pa, pb);
  ASSERT_EQ(a.linears.size(), b.linears.size());
  for (std::size_t i = 0; i < a.linears.size(); ++i) {
    const auto &x = a.linears[i], &y = b.linears[i];
    EXPECT_EQ(x.format, y.format) << i;
    EXPECT_EQ(x.f32, y.f32) << i;
    EXPECT_EQ(x.f16, y.f16) << i;
    EXPECT_EQ(x.int8.q, y.int8.q) << i;
    EXPECT_EQ(x.int8.scale, y.int8.scale) << i;
    EXPECT_EQ(x.int4.packed, y.int4.packed) << i;
    EXPECT_EQ(x.int4.scale, y.int4.scale) << i;
    EXPECT_EQ(x.dequantized(), y.dequantized()) << i;
  }
}

TEST(QuantModel, GgufReadsBackIdentically) {
  const auto m = synthetic_model(1);
  const auto dir = testing_support::scratch_dir("quant-gguf");
  for (int group : {32, 128}) {
    QuantModel qm = quantize_model(m, varied_plan(m.config, group));
    qm.calibration_file = "calib.txt";
    qm.calibration_fnv1a = fnv1a64("calibration text");
    const std::string path = dir + "/m" + std::to_string(group) + ".gguf";
    save_gguf(qm, path);
    const QuantModel back = load_gguf(path);
    expect_same(qm, back);
    EXPECT_EQ(back.calibration_file, "calib.txt");
    EXPECT_EQ(back.calibration_fnv1a, qm.calibration_fnv1a);
    EXPECT_EQ(back.linear_weight_bytes(), qm.linear_weight_bytes());
    EXPECT_EQ(back.linear_weight_bytes(), linear_weight_bytes(m.config, qm.plan));
  }
}

TEST(QuantModel, SameInputSameBytes) {
  const auto m = synthetic_model(2);
  const auto dir = testing_support::scratch_dir("quant-det");
  const Plan p = varied_plan(m.config, 32);
  save_gguf(quantize_model(m, p), dir + "/a.gguf");
  save_gguf(quantize_model(m, p), dir + "/b.gguf");
  EXPECT_EQ(testing_support::read_bytes(dir + "/a.gguf"), testing_support::read_bytes(dir + "/b.gguf"));
}

TEST(QuantModel, StandardGgmlTypesInTheFile) {
  const auto m = synthetic_model(3);
  const auto dir = testing_support::scratch_dir("quant-types");
  const QuantModel qm = quantize_model(m, uniform_plan(m.config, Scheme::w4a16, 32));
  save_gguf(qm, dir + "/q.gguf");
  model::gguf::Reader r(dir + "/q.gguf");
  EXPECT_EQ(r.get_string("fpgallm.quant.scheme"), "w4a16");
  EXPECT_EQ(r.get_strings("fpgallm.quant.weight_format").size(), qm.plan.layers.size());
  // wq (cols 64) is genuine Q4_0: ggml's dequantizer gives exactly our values.
  const auto& t = r.tensor("blk.0.attn_q.weight");
  EXPECT_EQ(t.type, model::gguf::GgmlType::q4_0);
  EXPECT_EQ(r.tensor_floats(t), qm.linear(0, model::Linear::wq).dequantized());
  // w2 (cols 80, not whole blocks) holds its exact dequantized values as F32, no side tensor.
  EXPECT_EQ(r.tensor("blk.0.ffn_down.weight").type, model::gguf::GgmlType::f32);
  EXPECT_EQ(r.tensor_floats(r.tensor("blk.0.ffn_down.weight")), qm.linear(0, model::Linear::w2).dequantized());
  EXPECT_EQ(r.find_tensor("blk.0.ffn_down.scale"), nullptr);
  // int8 per row is Q8_0 with the row's (fp16-exact) scale in every block.
  const QuantModel q8 = quantize_model(m, uniform_plan(m.config, Scheme::w8a8, 32));
  save_gguf(q8, dir + "/q8.gguf");
  model::gguf::Reader r8(dir + "/q8.gguf");
  EXPECT_EQ(r8.tensor("output.weight").type, model::gguf::GgmlType::q8_0);
  EXPECT_EQ(r8.tensor_floats(r8.tensor("output.weight")), q8.linear(-1, model::Linear::cls).dequantized());
  EXPECT_EQ(r8.tensors().size(), 2u + 9u * static_cast<std::size_t>(m.config.n_layers) + 1u);
}

TEST(QuantModel, WeightBytesPerFormat) {
  const auto m = synthetic_model(4);
  const auto& c = m.config;
  // wq: 64 x 64. int8: codes + fp32 row scales; int4 g32: 2 blocks of 18 bytes per row.
  EXPECT_EQ(weight_bytes(c, model::Linear::wq, WeightFormat::int8, 32), 64u * 64 + 64 * 4);
  EXPECT_EQ(weight_bytes(c, model::Linear::wq, WeightFormat::int4, 32), 64u * 2 * 18);
  EXPECT_EQ(weight_bytes(c, model::Linear::wq, WeightFormat::int4, 128), 64u * (32 + 2));
  EXPECT_EQ(weight_bytes(c, model::Linear::wq, WeightFormat::f16, 32), 64u * 64 * 2);
  // w2: 64 x 80 -> rows padded to 96 columns (48 bytes), 3 groups of 32.
  EXPECT_EQ(weight_bytes(c, model::Linear::w2, WeightFormat::int4, 32), 64u * (48 + 3 * 2));
}

TEST(QuantModel, RejectsAFileThatIsNotOurs) {
  const auto m = synthetic_model(5);
  const auto dir = testing_support::scratch_dir("quant-bad");
  model::gguf::Writer w;
  w.set("general.architecture", model::gguf::Value::string("llama"));
  w.write(dir + "/plain.gguf");
  EXPECT_THROW(load_gguf(dir + "/plain.gguf"), fpgallm::InputError);
  EXPECT_THROW(load_gguf(dir + "/missing.gguf"), fpgallm::InputError);
}

TEST(Plan, JsonRoundTripAndSchemes) {
  const auto m = synthetic_model(6);
  const Plan p = varied_plan(m.config, 64);
  nlohmann::json j = p;
  const Plan back = plan_from_json(j, m.config);
  nlohmann::json j2 = back;
  EXPECT_EQ(j, j2);
  EXPECT_EQ(scheme_from_string("w8a8-smooth"), Scheme::w8a8_smooth);
  EXPECT_THROW(scheme_from_string("w3a3"), fpgallm::InputError);
  j["layers"].erase(0);
  EXPECT_THROW(plan_from_json(j, m.config), std::invalid_argument);
}

TEST(Smooth, FoldsIntoNormsExactlyInRealArithmetic) {
  model::Model m = synthetic_model(7);
  const model::Model orig = m;
  ActStats stats = ActStats::zeros(m.config);
  for (auto& v : stats.attn_in)
    for (std::size_t j = 0; j < v.size(); ++j) v[j] = 0.5f + static_cast<float>(j % 7);
  for (auto& v : stats.ffn_in)
    for (std::size_t j = 0; j < v.size(); ++j) v[j] = 1.0f + static_cast<float>(j % 5) * 10.0f;
  const ActStats before = stats;
  smooth(m, stats, 0.5f);
  const auto& a = orig.weights.layers[0];
  const auto& b = m.weights.layers[0];
  const int dim = m.config.dim;
  for (int j = 0; j < dim; ++j) {
    const double s = static_cast<double>(a.attn_norm[j]) / b.attn_norm[j];
    // W' = W s_j (every row of wq, wk, wv), stats' = stats / s_j, s_j per the formula.
    for (int r = 0; r < 4; ++r) EXPECT_NEAR(b.wq[r * dim + j], a.wq[r * dim + j] * s, 1e-6 * std::fabs(a.wq[r * dim + j] * s) + 1e-9);
    EXPECT_NEAR(stats.attn_in[0][j], before.attn_in[0][j] / s, 1e-5 * before.attn_in[0][j]);
    double wmax = 0;
    for (const auto* w : {&a.wq, &a.wk, &a.wv}) {
      const int rows = static_cast<int>(w->size()) / dim;
      for (int r = 0; r < rows; ++r) wmax = std::max(wmax, std::fabs(static_cast<double>((*w)[r * dim + j])));
    }
    EXPECT_NEAR(s, std::sqrt(before.attn_in[0][j]) / std::sqrt(wmax), 1e-5 * s);
  }
  EXPECT_EQ(m.weights.layers[0].wo, a.wo);  // not smoothed
}

}  // namespace

namespace {

// small_qwen.hpp's small Qwen2 or Qwen3, synthesized, with random per-head gains.
model::Model qwen_model(model::Arch arch, unsigned seed) {
  model::Config c = testing_support::small_qwen_config(arch);
  c.seq_len = 32;
  model::Model m = model::synthesize(c, seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.1f);
  for (auto& l : m.weights.layers)
    for (auto* v : {&l.q_norm, &l.k_norm})
      for (auto& x : *v) x = 1.0f + d(rng);
  return m;
}

}  // namespace

// Qwen's biases, per-head gains and head width survive the file; its q/k rows are stored
// in Hugging Face's rotate-half order, which the fp32 GGUF reader (model::load_gguf, the
// reader of llama.cpp's qwen2/qwen3 files) turns back into exactly the quantized model's
// weights, every format of the varied plan included.
TEST(QuantModel, QwenGgufReadsBackIdenticallyInHuggingFaceRowOrder) {
  const auto dir = testing_support::scratch_dir("quant-qwen-gguf");
  for (auto arch : {model::Arch::qwen2, model::Arch::qwen3}) {
    const auto m = qwen_model(arch, 4);
    const QuantModel qm = quantize_model(m, varied_plan(m.config, 32));
    const std::string path = dir + "/" + model::to_string(arch) + ".gguf";
    save_gguf(qm, path);
    const QuantModel back = load_gguf(path);
    expect_same(qm, back);
    EXPECT_EQ(back.config.arch, arch);
    EXPECT_EQ(back.config.head_dim(), m.config.head_dim());
    EXPECT_EQ(back.config.qkv_bias, m.config.qkv_bias);
    EXPECT_EQ(back.config.qk_norm, m.config.qk_norm);
    EXPECT_EQ(back.config.rope_theta, 1e6f);
    EXPECT_EQ(back.bq, qm.bq);
    EXPECT_EQ(back.bk, qm.bk);
    EXPECT_EQ(back.bv, qm.bv);
    EXPECT_EQ(back.q_norm, qm.q_norm);
    EXPECT_EQ(back.k_norm, qm.k_norm);

    model::gguf::Reader r(path);
    EXPECT_EQ(r.get_string("general.architecture"), model::to_string(arch));
    const model::Model fp32 = model::load_gguf(path);
    const model::Model deq = qm.dequantized_model();
    for (std::size_t l = 0; l < deq.weights.layers.size(); ++l) {
      const auto &a = fp32.weights.layers[l], &b = deq.weights.layers[l];
      for (model::Linear w : model::kBlockLinears) EXPECT_EQ(a.linear(w), b.linear(w)) << model::to_string(w);
      EXPECT_EQ(a.bq, b.bq);
      EXPECT_EQ(a.bk, b.bk);
      EXPECT_EQ(a.bv, b.bv);
      EXPECT_EQ(a.q_norm, b.q_norm);
      EXPECT_EQ(a.k_norm, b.k_norm);
    }
    // The rows did move: rotate-half keeps a head's even elements first, so the file's
    // second q row is the interleaved model's third.
    const auto file_q = r.tensor_floats(r.tensor("blk.0.attn_q.weight"));
    const auto& mem_q = deq.weights.layers[0].wq;
    const std::size_t cols = std::size_t(m.config.dim);
    EXPECT_TRUE(std::equal(file_q.begin() + long(cols), file_q.begin() + long(2 * cols), mem_q.begin() + long(2 * cols)));
  }
}
