#pragma once
// graph::Workload: a model lowered to the operations one phase executes, with shapes,
// precisions, FLOPs and bytes. Every FLOP and byte count in fpgallm comes from here.
//
// Shapes: a matmul computes C[M][N] = A[M][K] * B[K][N], `batch` times over independent
// instances. For a linear layer M = tokens, N = output features, K = input features and
// B is the weight. For attention scores M = queries, N = keys, K = head_dim; for the value
// product M = queries, N = head_dim, K = keys; batch = sequences x query heads.
// Elementwise operations use M = tokens, N = features, K = 1.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.hpp"

namespace graph {

enum class Phase { prefill, decode, train };
enum class Pass { forward, backward, optimizer };

enum class OpKind {
  embedding,        // token (and position) embedding lookup
  norm,             // RMSNorm or LayerNorm
  matmul,           // linear layer with a weight matrix (q, k, v, o, gate, up, down)
  rope,             // rotary position embedding on q and k
  attention_score,  // Q K^T, scaled (causal mask counted: only the needed scores)
  softmax,
  attention_value,  // P V
  activation,       // SiLU-gated product or GELU
  residual,         // residual add
  classifier,       // final projection to the vocabulary
  loss,             // cross-entropy (train)
  optimizer,        // AdamW update (train)
};

// The part of the model an operation belongs to, for per-kind shares.
enum class Group { embedding, attention, feed_forward, norm, residual, classifier, optimizer };

const char* to_string(Phase p);
const char* to_string(Pass p);
const char* to_string(OpKind k);
const char* to_string(Group g);
Phase phase_from_string(const std::string& s);  // throws std::invalid_argument

// FLOPs of softmax per score: scale, max, subtract, exp, sum (the divide folded in the 5th).
inline constexpr double kSoftmaxFlops = 5;

struct Op {
  std::string name;            // "blk.3.wq", "blk.3.attn.score", "blk.3.wq.dw"
  OpKind kind = OpKind::matmul;
  Group group = Group::attention;
  Pass pass = Pass::forward;
  int layer = -1;              // block index, -1 outside the blocks
  std::int64_t m = 0, n = 0, k = 1;
  std::int64_t batch = 1;
  int weight_bits = 0;         // bits of the B operand (weights; K/V for attention), 0 if none
  int act_bits = 0;            // bits of activations in and out
  double flops = 0;            // multiply and add counted as 2
  double weight_bytes = 0;     // weights (and their scales, biases) read
  double activation_bytes = 0; // activations read and written
  double kv_bytes = 0;         // KV cache read and written

  double bytes() const { return weight_bytes + activation_bytes + kv_bytes; }
  // FLOPs per byte of all traffic (0 when no bytes).
  double intensity() const;
  // FLOPs per byte of off-chip traffic if activations stay on chip (weights + KV).
  double offchip_intensity() const;
};

// Bit widths. Floating-point schemes use 16 or 32; integer weights carry per-output-
// channel fp32 scales (group_size 0) or fp16 scales per group of group_size inputs.
struct Precision {
  int weight_bits = 8;
  int act_bits = 8;
  int kv_bits = 8;
  int group_size = 0;
  bool float_weights = false;          // true for fp32/fp16/bf16 (no scales)
  bool static_act = false;             // int8 activations at calibrated scales ("-static")
  // Per-linear weight bits by model::linear_name ("blk.3.wq", "cls"); others use weight_bits.
  std::map<std::string, int> layer_weight_bits;

  int bits_for(const std::string& linear_name) const;
};

// "fp32", "fp16", "bf16", "int8" (= w8a8), "w8a16", "w4a8", "w4a16", "int4" (= w4a8),
// optionally with a group suffix "w4a16-g128". Throws fpgallm::InputError("--scheme", ...).
Precision parse_scheme(const std::string& scheme);
std::string to_string(const Precision& p);

struct Shape {
  Phase phase = Phase::decode;
  int batch = 1;     // sequences
  int prompt = 128;  // prefill: tokens of the prompt
  int context = 512; // decode: positions attended by the new token (the new one included)
  int seq = 512;     // train: tokens per sequence
};

struct Totals {
  double flops = 0, weight_bytes = 0, activation_bytes = 0, kv_bytes = 0;
  double bytes() const { return weight_bytes + activation_bytes + kv_bytes; }
  double intensity() const { return bytes() > 0 ? flops / bytes() : 0; }
};

struct Workload {
  model::Config config;
  Shape shape;
  Precision precision;
  std::vector<Op> ops;

  std::int64_t tokens() const;  // tokens this workload produces or consumes
  Totals totals() const;
  Totals totals(Group g) const;
  Totals totals(OpKind k) const;
  // Weights of the whole model in bytes at this precision (what must be stored).
  double model_weight_bytes() const;
  // KV cache of `batch` sequences at `positions` positions, in bytes.
  double kv_cache_bytes(int positions) const;
};

// Lowers a model to the operations of one phase. Decode: one new token per sequence,
// attending `context` positions. Prefill: `prompt` tokens from an empty cache; the
// classifier runs on the last token of each causal sequence, on every token for encoders
// (BERT: masked-LM head). Train: forward, backward (input and weight gradients) and an
// AdamW step over batch x seq tokens. Throws fpgallm::InputError for a bad shape.
Workload lower(const model::Config& config, const Shape& shape, const Precision& precision);

// Expected number of distinct experts that `tokens` tokens route to when each picks
// `active` of `experts` uniformly at random (an assumption: trained routers are skewed and
// touch fewer): experts * (1 - (1 - active/experts)^tokens).
double experts_touched(int experts, int active, double tokens);

void to_json(nlohmann::json& j, const Op& op);
void to_json(nlohmann::json& j, const Totals& t);
void to_json(nlohmann::json& j, const Workload& w);

}  // namespace graph
