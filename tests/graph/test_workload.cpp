// Workload FLOP and byte counts against hand counts written out independently here.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/workload.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "util/error.hpp"

namespace {

model::Config preset(const char* name) {
  auto c = model::find_preset(name);
  EXPECT_TRUE(c.has_value()) << name;
  return *c;
}

graph::Workload decode(const model::Config& c, int context, const char* scheme = "int8", int batch = 1) {
  graph::Shape s;
  s.phase = graph::Phase::decode;
  s.context = context;
  s.batch = batch;
  return graph::lower(c, s, graph::parse_scheme(scheme));
}

double sum_flops(const graph::Workload& w, graph::OpKind k, graph::Pass pass = graph::Pass::forward) {
  double f = 0;
  for (const auto& op : w.ops)
    if (op.kind == k && op.pass == pass) f += op.flops;
  return f;
}

const graph::Op& find_op(const graph::Workload& w, const std::string& name) {
  for (const auto& op : w.ops)
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

TEST(Workload, Llama2_7bDecodeMatmulFlopsAreTwicePerLinearWeight) {
  const model::Config c = preset("llama2-7b");
  const graph::Workload w = decode(c, 1);
  // Per layer: q, k, v, o are 4096 x 4096; gate, up, down are 11008 x 4096. Classifier 32000 x 4096.
  const double per_layer = 4.0 * 4096 * 4096 + 3.0 * 11008 * 4096;
  const double linear_weights = 32 * per_layer + 32000.0 * 4096;
  EXPECT_DOUBLE_EQ(sum_flops(w, graph::OpKind::matmul) + sum_flops(w, graph::OpKind::classifier), 2 * linear_weights);
  // ~2 x 6.7e9 FLOPs per token, as usually quoted for the 7B model.
  EXPECT_NEAR(w.totals().flops / 13.2e9, 1.0, 0.01);
}

TEST(Workload, DecodeAttentionFlopsAndKvBytesGrowWithContext) {
  const model::Config c = preset("llama2-7b");
  const int L = 4096;
  const graph::Workload w = decode(c, L);
  // Scores: 2 x L x head_dim per head; values the same; 32 heads x 128 = 4096, 32 layers.
  const double expected = 2.0 * L * 4096 * 32;
  EXPECT_DOUBLE_EQ(sum_flops(w, graph::OpKind::attention_score), expected);
  EXPECT_DOUBLE_EQ(sum_flops(w, graph::OpKind::attention_value), expected);
  // KV: read K and V for L positions (int8), write one new K and V entry, every layer.
  const double read = 2.0 * L * 4096 * 32, write = 2.0 * 4096 * 32;
  EXPECT_DOUBLE_EQ(w.totals().kv_bytes, read + write);
  EXPECT_DOUBLE_EQ(w.kv_cache_bytes(L), read);
}

TEST(Workload, GroupedQueryAttentionReadsTheSmallerCache) {
  const model::Config c = preset("llama3-8b");  // 8 KV heads of 128: kv_dim 1024
  const graph::Workload w = decode(c, 1000, "w8a16-kv16");
  const double read = 2.0 * 1000 * 1024 * 32 * 2;  // 2 bytes per element
  const double write = 2.0 * 1024 * 32 * 2;
  EXPECT_DOUBLE_EQ(w.totals().kv_bytes, read + write);
  // Score FLOPs still count all 32 query heads.
  EXPECT_DOUBLE_EQ(sum_flops(w, graph::OpKind::attention_score), 2.0 * 1000 * 128 * 32 * 32);
}

TEST(Workload, WeightBytesPerScheme) {
  const model::Config c = preset("llama2-7b");
  const double n = 4096, k = 4096;
  EXPECT_DOUBLE_EQ(find_op(decode(c, 1, "int8"), "blk.0.wq").weight_bytes, n * k + 4 * n);          // fp32 scale per row
  EXPECT_DOUBLE_EQ(find_op(decode(c, 1, "int4"), "blk.0.wq").weight_bytes, n * k / 2 + 4 * n);
  EXPECT_DOUBLE_EQ(find_op(decode(c, 1, "w4a16-g128"), "blk.0.wq").weight_bytes, n * k / 2 + n * (k / 128) * 2);
  EXPECT_DOUBLE_EQ(find_op(decode(c, 1, "fp16"), "blk.0.wq").weight_bytes, n * k * 2);
  // Down projection at int4: 4096 x 11008.
  EXPECT_DOUBLE_EQ(find_op(decode(c, 1, "int4"), "blk.5.w2").weight_bytes, 4096.0 * 11008 / 2 + 4 * 4096.0);
}

TEST(Workload, PerLayerWidthsOverrideTheScheme) {
  const model::Config c = preset("stories15m");
  graph::Precision p = graph::parse_scheme("int8");
  p.layer_weight_bits["blk.2.w1"] = 4;
  graph::Shape s;
  const graph::Workload w = graph::lower(c, s, p);
  EXPECT_EQ(find_op(w, "blk.2.w1").weight_bits, 4);
  EXPECT_EQ(find_op(w, "blk.1.w1").weight_bits, 8);
  EXPECT_DOUBLE_EQ(find_op(w, "blk.2.w1").weight_bytes, 768.0 * 288 / 2 + 4 * 768);
}

TEST(Workload, FullPrecisionWeightsOfLlamaEqualItsParameterCount) {
  for (const char* name : {"stories15m", "llama2-7b", "llama3-8b", "tinyllama-1.1b"}) {
    const model::Config c = preset(name);
    EXPECT_DOUBLE_EQ(decode(c, 1, "fp32").model_weight_bytes(), 4.0 * c.n_params()) << name;
  }
}

TEST(Workload, CausalPrefillCountsTheTriangle) {
  const model::Config c = preset("stories15m");  // 6 layers, 6 heads of 48
  graph::Shape s;
  s.phase = graph::Phase::prefill;
  s.prompt = 100;
  const graph::Workload w = graph::lower(c, s, graph::parse_scheme("int8"));
  // Query i attends i keys: sum_{i=1..P} 2 i hd = hd P (P+1) per head.
  EXPECT_DOUBLE_EQ(sum_flops(w, graph::OpKind::attention_score), 48.0 * 100 * 101 * 6 * 6);
  // The classifier runs on the last token only.
  EXPECT_EQ(find_op(w, "cls").m, 1);
  EXPECT_EQ(find_op(w, "blk.0.wq").m, 100);
}

TEST(Workload, BertBaseForwardHandCount) {
  const model::Config c = preset("bert-base");
  const double P = 128, d = 768, h = 3072;
  graph::Shape s;
  s.phase = graph::Phase::prefill;
  s.prompt = 128;
  const graph::Workload w = graph::lower(c, s, graph::parse_scheme("int8"));
  // Per layer: four d x d and two d x h matrices, biases added per output, full (non-causal) attention.
  const double linear = 2 * P * (4 * d * d + 2 * d * h) + P * (4 * d + h + d);
  const double attention = 2 * (2 * P * P * d);
  EXPECT_DOUBLE_EQ(sum_flops(w, graph::OpKind::matmul), 12 * linear);
  EXPECT_DOUBLE_EQ(sum_flops(w, graph::OpKind::attention_score) + sum_flops(w, graph::OpKind::attention_value),
                   12 * attention);
  // ~22.5 GFLOPs for the encoder at 128 tokens (the usual figure: 11.2 GMACs).
  EXPECT_NEAR((12 * linear + 12 * attention) / 22.5e9, 1.0, 0.02);
  // Encoders keep no KV cache.
  EXPECT_EQ(w.totals().kv_bytes, 0);
}

TEST(Workload, TrainingBackwardIsTwiceTheForwardMatmuls) {
  const model::Config c = preset("gpt2");
  graph::Shape s;
  s.phase = graph::Phase::train;
  s.batch = 2;
  s.seq = 64;
  const graph::Workload w = graph::lower(c, s, graph::parse_scheme("fp32"));
  double fwd = 0, bwd = 0;
  for (const auto& op : w.ops) {
    if (op.kind != graph::OpKind::matmul && op.kind != graph::OpKind::classifier) continue;
    const double mnk2 = 2.0 * op.m * op.n * op.k;
    (op.pass == graph::Pass::forward ? fwd : bwd) += mnk2;
  }
  EXPECT_DOUBLE_EQ(bwd, 2 * fwd);
  // AdamW touches every parameter once: GPT-2 small has 124,439,808 (tied classifier).
  const graph::Op& adam = find_op(w, "adamw");
  EXPECT_EQ(adam.m, 124439808);
  EXPECT_DOUBLE_EQ(adam.weight_bytes, 28.0 * 124439808);
}

TEST(Workload, BytesOfIntermediatesFollowActivationWidth) {
  const model::Config c = preset("stories15m");
  const graph::Op a8 = find_op(decode(c, 10, "int8"), "blk.0.w2");
  const graph::Op a16 = find_op(decode(c, 10, "w8a16"), "blk.0.w2");
  // Input 768 hidden values, output 288 values.
  EXPECT_DOUBLE_EQ(a8.activation_bytes, 768 + 288);
  EXPECT_DOUBLE_EQ(a16.activation_bytes, 2 * (768 + 288));
}

TEST(Workload, BadInputIsAnInputError) {
  const model::Config c = preset("stories15m");
  EXPECT_THROW(graph::parse_scheme("int3"), fpgallm::InputError);
  EXPECT_THROW(graph::parse_scheme("fp16-g128"), fpgallm::InputError);
  EXPECT_THROW(graph::parse_scheme("int8-kv7"), fpgallm::InputError);
  EXPECT_THROW(graph::parse_scheme("w4a16-static"), fpgallm::InputError);  // static scales are for int8 activations
  EXPECT_THROW(graph::parse_scheme("fp16-static"), fpgallm::InputError);
  graph::Shape s;
  s.batch = 0;
  EXPECT_THROW(graph::lower(c, s, graph::parse_scheme("int8")), fpgallm::InputError);
  graph::Shape enc;
  enc.phase = graph::Phase::decode;
  EXPECT_THROW(graph::lower(preset("bert-base"), enc, graph::parse_scheme("int8")), fpgallm::InputError);
  EXPECT_THROW(graph::phase_from_string("generate"), std::invalid_argument);
}

TEST(Workload, SchemesRoundTrip) {
  EXPECT_EQ(graph::to_string(graph::parse_scheme("int8")), "w8a8");
  EXPECT_EQ(graph::to_string(graph::parse_scheme("w4a16-g128")), "w4a16-g128");
  EXPECT_EQ(graph::to_string(graph::parse_scheme("w8a8-kv16")), "w8a8-kv16");
  EXPECT_EQ(graph::to_string(graph::parse_scheme("w8a8-static")), "w8a8-static");
  EXPECT_TRUE(graph::parse_scheme("w4a8-g32-static").static_act);
  EXPECT_FALSE(graph::parse_scheme("w8a8").static_act);
  EXPECT_EQ(graph::parse_scheme("bf16").weight_bits, 16);
}

}  // namespace
