#include "model/config.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <cmath>
#include <stdexcept>

namespace model {

const char* to_string(Arch a) {
  switch (a) {
    case Arch::llama: return "llama";
    case Arch::gpt2: return "gpt2";
    case Arch::bert: return "bert";
    case Arch::qwen2: return "qwen2";
    case Arch::qwen3: return "qwen3";
  }
  return "?";
}

Arch arch_from_string(const std::string& s) {
  if (s == "llama") return Arch::llama;
  if (s == "gpt2") return Arch::gpt2;
  if (s == "bert") return Arch::bert;
  if (s == "qwen2") return Arch::qwen2;
  if (s == "qwen3") return Arch::qwen3;
  throw std::invalid_argument("unknown architecture '" + s + "' (llama, gpt2, bert, qwen2, qwen3)");
}

std::int64_t Config::n_params() const {
  const std::int64_t d = dim, h = hidden_dim, hd = head_dim();
  std::int64_t attn = d * (n_heads * hd) + 2 * d * (n_kv_heads * hd) + (n_heads * hd) * d;
  const std::int64_t ffn = (gated_ffn() ? 3 : 2) * d * h;
  const std::int64_t moe_ffn = 3 * d * std::int64_t(expert_hidden_dim) * (n_experts + n_shared_experts) + d * n_experts;
  std::int64_t norms = (norm() == Norm::layer ? 4 : 2) * d;
  std::int64_t bias = has_bias() ? (n_heads * hd + 2 * n_kv_heads * hd + d + h + d) : 0;
  if (qkv_bias) bias += (n_heads + 2 * n_kv_heads) * hd;
  if (qk_norm) norms += 2 * hd;
  std::int64_t per_layer = attn + norms + bias;
  std::int64_t embed = static_cast<std::int64_t>(vocab_size) * d;
  std::int64_t pos = uses_rope() ? 0 : static_cast<std::int64_t>(seq_len) * d;
  const std::int64_t moe_layers = moe() ? n_layers - n_dense_layers : 0;
  return n_layers * per_layer + (n_layers - moe_layers) * ffn + moe_layers * moe_ffn + embed + pos + d +
         (shared_classifier ? 0 : embed);
}

std::vector<float> Config::rope_freq_factors() const {
  const int half = head_dim() / 2;
  std::vector<float> f(static_cast<std::size_t>(half), 1.0f);
  if (rope_scaling.factor == 0) return f;
  const RopeScaling& r = rope_scaling;
  const double low_wavelen = r.original_context / r.low_freq_factor, high_wavelen = r.original_context / r.high_freq_factor;
  for (int i = 0; i < half; ++i) {
    const double freq = std::pow(double(rope_theta), -2.0 * i / head_dim());
    const double wavelen = 2 * M_PI / freq;
    double scaled = freq;
    if (wavelen > low_wavelen) {
      scaled = freq / r.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (r.original_context / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      scaled = (1 - smooth) * freq / r.factor + smooth * freq;
    }
    f[static_cast<std::size_t>(i)] = static_cast<float>(freq / scaled);
  }
  return f;
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
  if (head_size < 0 || head_size > kMax) return fmt::format("head_size {} out of range", head_size);
  if (head_size == 0 && dim % n_heads != 0) return fmt::format("dim {} is not a multiple of n_heads {}", dim, n_heads);
  if (uses_rope() && head_dim() % 2 != 0) return fmt::format("head size {} must be even for rotary embedding", head_dim());
  if (!in_range(vocab_size, 1, 1 << 24)) return fmt::format("vocab_size {} out of range", vocab_size);
  if (!in_range(seq_len, 1, 1 << 24)) return fmt::format("seq_len {} out of range", seq_len);
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) return fmt::format("rope_theta {} must be finite and positive", rope_theta);
  if (rope_scaling.factor != 0 &&
      !(rope_scaling.factor >= 1 && rope_scaling.low_freq_factor > 0 && rope_scaling.high_freq_factor > rope_scaling.low_freq_factor &&
        rope_scaling.original_context > 0))
    return "rope_scaling needs factor >= 1, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0";
  if (n_experts < 0 || n_experts > 4096) return fmt::format("n_experts {} out of range", n_experts);
  if (moe()) {
    if (!in_range(n_experts_active, 1, n_experts)) return fmt::format("n_experts_active {} must be in 1..n_experts ({})", n_experts_active, n_experts);
    if (!in_range(expert_hidden_dim, 1, 4 * kMax)) return fmt::format("expert_hidden_dim {} out of range", expert_hidden_dim);
    if (!in_range(n_shared_experts, 0, n_experts)) return fmt::format("n_shared_experts {} out of range", n_shared_experts);
    if (!in_range(n_dense_layers, 0, n_layers - 1)) return fmt::format("n_dense_layers {} must be below n_layers", n_dense_layers);
    if (!gated_ffn()) return "mixture-of-experts blocks are modelled for SwiGLU (llama-family) models only";
  }
  if (!(norm_eps > 0) || !std::isfinite(norm_eps)) return fmt::format("norm_eps {} must be finite and positive", norm_eps);
  if (rope_scaling.factor != 0 && !(std::isfinite(rope_scaling.factor) && std::isfinite(rope_scaling.high_freq_factor)))
    return "rope_scaling factors must be finite";
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
                     {"qkv_bias", c.qkv_bias},
                     {"qk_norm", c.qk_norm},
                     {"n_params", c.n_params()}};
  if (c.head_size) j["head_size"] = c.head_size;
  if (c.rope_scaling.factor != 0)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", c.rope_scaling.original_context}};
  if (c.moe())
    j["moe"] = {{"n_experts", c.n_experts},
                {"n_experts_active", c.n_experts_active},
                {"expert_hidden_dim", c.expert_hidden_dim},
                {"n_shared_experts", c.n_shared_experts},
                {"n_dense_layers", c.n_dense_layers}};
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
