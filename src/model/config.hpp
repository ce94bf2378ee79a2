#pragma once
// The shape of a transformer language model: everything needed to run it (with weights)
// or to plan hardware for it (presets, without weights).
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace model {

enum class Arch { llama, gpt2, bert };
enum class Norm { rms, layer };
enum class Activation { silu, gelu };

const char* to_string(Arch a);
Arch arch_from_string(const std::string& s);  // throws std::invalid_argument

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

  // Derived from arch; explicit so that planning code does not switch on arch.
  Norm norm() const { return arch == Arch::llama ? Norm::rms : Norm::layer; }
  Activation activation() const { return arch == Arch::llama ? Activation::silu : Activation::gelu; }
  bool gated_ffn() const { return arch == Arch::llama; }      // SwiGLU: gate, up, down
  bool uses_rope() const { return arch == Arch::llama; }
  bool has_bias() const { return arch != Arch::llama; }
  bool causal() const { return arch != Arch::bert; }

  int head_dim() const { return n_heads ? dim / n_heads : 0; }
  int kv_dim() const { return head_dim() * n_kv_heads; }
  std::int64_t n_params() const;  // weights only, embeddings included once if shared

  // Checks the invariants a loader must enforce; returns "" when valid, else the problem.
  std::string invalid_reason() const;
};

void to_json(nlohmann::json& j, const Config& c);
// The inverse (the derived fields head_dim and n_params are checked or ignored); throws
// nlohmann::json::exception for a missing field, std::invalid_argument for a wrong one.
void from_json(const nlohmann::json& j, Config& c);

}  // namespace model
