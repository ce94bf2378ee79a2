#include "model/config.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace model {

const char* to_string(Arch a) {
  switch (a) {
    case Arch::llama: return "llama";
    case Arch::gpt2: return "gpt2";
    case Arch::bert: return "bert";
  }
  return "?";
}

Arch arch_from_string(const std::string& s) {
  if (s == "llama") return Arch::llama;
  if (s == "gpt2") return Arch::gpt2;
  if (s == "bert") return Arch::bert;
  throw std::invalid_argument("unknown architecture '" + s + "' (llama, gpt2, bert)");
}

std::int64_t Config::n_params() const {
  const std::int64_t d = dim, h = hidden_dim, hd = head_dim();
  std::int64_t attn = d * (n_heads * hd) + 2 * d * (n_kv_heads * hd) + (n_heads * hd) * d;
  std::int64_t ffn = (gated_ffn() ? 3 : 2) * d * h;
  std::int64_t norms = (norm() == Norm::layer ? 4 : 2) * d;
  std::int64_t bias = has_bias() ? (n_heads * hd + 2 * n_kv_heads * hd + d + h + d) : 0;
  std::int64_t per_layer = attn + ffn + norms + bias;
  std::int64_t embed = static_cast<std::int64_t>(vocab_size) * d;
  std::int64_t pos = uses_rope() ? 0 : static_cast<std::int64_t>(seq_len) * d;
  return n_layers * per_layer + embed + pos + d + (shared_classifier ? 0 : embed);
}

std::string Config::invalid_reason() const {
  constexpr int kMax = 1 << 20;
  auto in_range = [](int v, int lo, int hi) { return v >= lo && v <= hi; };
  if (!in_range(dim, 1, kMax)) return fmt::format("dim {} out of range", dim);
  if (!in_range(hidden_dim, 1, 4 * kMax)) return fmt::format("hidden_dim {} out of range", hidden_dim);
  if (!in_range(n_layers, 1, 4096)) return fmt::format("n_layers {} out of range", n_layers);
  if (!in_range(n_heads, 1, 4096)) return fmt::format("n_heads {} out of range", n_heads);
  if (!in_range(n_kv_heads, 1, n_heads)) return fmt::format("n_kv_heads {} must be in 1..n_heads ({})", n_kv_heads, n_heads);
  if (n_heads % n_kv_heads != 0) return fmt::format("n_heads {} is not a multiple of n_kv_heads {}", n_heads, n_kv_heads);
  if (dim % n_heads != 0) return fmt::format("dim {} is not a multiple of n_heads {}", dim, n_heads);
  if (uses_rope() && head_dim() % 2 != 0) return fmt::format("head size {} must be even for rotary embedding", head_dim());
  if (!in_range(vocab_size, 1, 1 << 24)) return fmt::format("vocab_size {} out of range", vocab_size);
  if (!in_range(seq_len, 1, 1 << 24)) return fmt::format("seq_len {} out of range", seq_len);
  if (!(rope_theta > 0)) return "rope_theta must be positive";
  if (!(norm_eps > 0)) return "norm_eps must be positive";
  return "";
}

void to_json(nlohmann::json& j, const Config& c) {
  j = nlohmann::json{{"name", c.name},
                     {"arch", to_string(c.arch)},
                     {"dim", c.dim},
                     {"hidden_dim", c.hidden_dim},
                     {"n_layers", c.n_layers},
                     {"n_heads", c.n_heads},
                     {"n_kv_heads", c.n_kv_heads},
                     {"head_dim", c.head_dim()},
                     {"vocab_size", c.vocab_size},
                     {"seq_len", c.seq_len},
                     {"rope_theta", c.rope_theta},
                     {"norm_eps", c.norm_eps},
                     {"shared_classifier", c.shared_classifier},
                     {"n_params", c.n_params()}};
}

void from_json(const nlohmann::json& j, Config& c) {
  Config d;
  d.name = j.value("name", std::string());
  d.arch = arch_from_string(j.value("arch", std::string("llama")));
  d.dim = j.at("dim").get<int>();
  d.hidden_dim = j.at("hidden_dim").get<int>();
  d.n_layers = j.at("n_layers").get<int>();
  d.n_heads = j.at("n_heads").get<int>();
  d.n_kv_heads = j.value("n_kv_heads", d.n_heads);
  d.vocab_size = j.at("vocab_size").get<int>();
  d.seq_len = j.at("seq_len").get<int>();
  d.rope_theta = j.value("rope_theta", d.rope_theta);
  d.norm_eps = j.value("norm_eps", d.norm_eps);
  d.shared_classifier = j.value("shared_classifier", d.shared_classifier);
  if (j.contains("head_dim") && j.at("head_dim").get<int>() != d.head_dim())
    throw std::invalid_argument(fmt::format("head_dim {} is not dim / n_heads ({})", j.at("head_dim").get<int>(), d.head_dim()));
  c = d;
}

}  // namespace model
