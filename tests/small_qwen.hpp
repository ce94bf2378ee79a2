#pragma once
// The shape of a small synthesized Qwen2 (q/k/v biases) or Qwen3 (per-head q/k norms, heads
// of 32 on a width of 64, so q is 128 wide) for the accelerator, codegen and quantization
// tests: 2 blocks, 4 heads sharing 2 KV heads, vocabulary 256, context 64, theta 1e6,
// eps 1e-6, untied classifier (with random weights a tied one makes every greedy token the
// previous one, and attention over equal values does not depend on q or k).
#include "model/config.hpp"
#include "model/model.hpp"

namespace testing_support {

inline model::Config small_qwen_config(model::Arch arch) {
  model::Config c;
  c.name = arch == model::Arch::qwen2 ? "qwen2-synth" : "qwen3-synth";
  c.arch = arch;
  c.dim = 64;
  c.hidden_dim = 96;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.vocab_size = 256;
  c.seq_len = 64;
  c.rope_theta = 1e6f;
  c.norm_eps = 1e-6f;
  c.shared_classifier = false;
  c.qkv_bias = arch == model::Arch::qwen2;
  c.qk_norm = arch == model::Arch::qwen3;
  if (arch == model::Arch::qwen3) c.head_size = 32;
  return c;
}

// Qwen3's per-head q/k norm gains set to distinct values per element and block (synthesize
// makes them 1), so that a gain read at the wrong place shows.
inline void distinct_head_norm_gains(model::Model& m) {
  for (std::size_t l = 0; l < m.weights.layers.size(); ++l)
    for (std::size_t i = 0; i < m.weights.layers[l].q_norm.size(); ++i) {
      m.weights.layers[l].q_norm[i] = 0.5f + 0.03f * float(i) + 0.1f * float(l);
      m.weights.layers[l].k_norm[i] = 1.5f - 0.02f * float(i) - 0.1f * float(l);
    }
}

}  // namespace testing_support
