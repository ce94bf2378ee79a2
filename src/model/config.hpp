#pragma once
// The shape of a transformer language model: everything needed to run it (with weights)
// or to plan hardware for it (presets, without weights).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace model {

// qwen2 and qwen3 are the llama block with extras: q/k/v biases (qwen2), per-head q/k
// RMSNorm and a free head width (qwen3).
enum class Arch { llama, gpt2, bert, qwen2, qwen3 };
enum class Norm { rms, layer };
enum class Activation { silu, gelu };

const char* to_string(Arch a);
Arch arch_from_string(const std::string& s);  // throws std::invalid_argument

// Llama 3's RoPE frequency scaling (config.json rope_scaling, rope_type "llama3"): pairs
// whose wavelength exceeds original_context / low_freq_factor turn `factor` times slower,
// those under original_context / high_freq_factor keep theirs, and those between blend.
struct RopeScaling {
  float factor = 0;  // 0: no scaling
  float low_freq_factor = 1;
  float high_freq_factor = 4;
  int original_context = 0;
};

struct Config {
  std::string name;            // preset or file stem, for reports
  Arch arch = Arch::llama;
  int dim = 0;                 // model width
  int hidden_dim = 0;          // feed-forward width
  int n_layers = 0;
  int n_heads = 0;             // query heads
  int n_kv_heads = 0;          // key/value heads (grouped-query attention when < n_heads)
  int vocab_size = 0;
  int seq_len = 0;             // maximum context
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  bool shared_classifier = true;  // classifier weight == token embedding
  int head_size = 0;           // attention head width when it is not dim / n_heads (Qwen3); else 0
  bool qkv_bias = false;       // biases on the q, k and v projections (Qwen2)
  bool qk_norm = false;        // RMSNorm of each q and k head before RoPE (Qwen3)
  RopeScaling rope_scaling;
  // Mixture of experts (planning only; the engine runs dense models): a MoE block's
  // feed-forward is n_experts SwiGLU experts of expert_hidden_dim, a router picks
  // n_experts_active of them per token, and n_shared_experts more run on every token.
  int n_experts = 0;           // 0: every feed-forward is dense (hidden_dim)
  int n_experts_active = 0;
  int expert_hidden_dim = 0;
  int n_shared_experts = 0;
  int n_dense_layers = 0;      // the first blocks keep a dense feed-forward (DeepSeek's first_k_dense_replace)

  // Derived from arch; explicit so that planning code does not switch on arch.
  bool llama_family() const { return arch == Arch::llama || arch == Arch::qwen2 || arch == Arch::qwen3; }
  Norm norm() const { return llama_family() ? Norm::rms : Norm::layer; }
  Activation activation() const { return llama_family() ? Activation::silu : Activation::gelu; }
  bool gated_ffn() const { return llama_family(); }      // SwiGLU: gate, up, down
  bool uses_rope() const { return llama_family(); }
  bool has_bias() const { return !llama_family(); }      // every linear layer and norm (GPT-2, BERT)
  bool causal() const { return arch != Arch::bert; }

  bool moe() const { return n_experts > 0; }
  bool moe_layer(int layer) const { return moe() && layer >= n_dense_layers; }

  int head_dim() const { return head_size ? head_size : n_heads ? dim / n_heads : 0; }
  int kv_dim() const { return head_dim() * n_kv_heads; }
  std::int64_t n_params() const;
  // Per rotary pair i < head_dim/2: the divisor of theta^(-2i/head_dim) (1 without scaling),
  // as llama.cpp's rope_freqs tensor holds it.
  std::vector<float> rope_freq_factors() const;  // weights only, embeddings included once if shared

  // Checks the invariants a loader must enforce; returns "" when valid, else the problem.
  std::string invalid_reason() const;
};

void to_json(nlohmann::json& j, const Config& c);
// The inverse (the derived fields head_dim and n_params are checked or ignored); throws
// nlohmann::json::exception for a missing field, std::invalid_argument for a wrong one.
void from_json(const nlohmann::json& j, Config& c);

}  // namespace model
