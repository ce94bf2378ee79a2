#include "model/presets.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/paths.hpp"
#include "util/json_file.hpp"

namespace model {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<Preset> read_presets() {
  const std::string path = fpgallm::data_dir() + "/presets.json";
  const nlohmann::json j = fpgallm::read_json_file(path, "the preset table");
  std::vector<Preset> out;
  for (const auto& p : j.at("presets")) {
    Preset preset;
    Config& c = preset.config;
    c.name = p.at("name").get<std::string>();
    c.arch = arch_from_string(p.value("arch", "llama"));
    c.dim = p.at("dim");
    c.hidden_dim = p.at("hidden_dim");
    c.n_layers = p.at("n_layers");
    c.n_heads = p.at("n_heads");
    c.n_kv_heads = p.value("n_kv_heads", c.n_heads);
    c.vocab_size = p.at("vocab_size");
    c.seq_len = p.at("seq_len");
    c.rope_theta = p.value("rope_theta", 10000.0f);
    c.norm_eps = p.value("norm_eps", 1e-5f);
    c.shared_classifier = p.value("shared_classifier", false);
    c.head_size = p.value("head_size", 0);
    c.qkv_bias = p.value("qkv_bias", c.arch == Arch::qwen2);
    c.qk_norm = p.value("qk_norm", c.arch == Arch::qwen3);
    if (auto rs = p.find("rope_scaling"); rs != p.end()) {
      if (rs->value("rope_type", "") != "llama3") throw fpgallm::InputError(path, "preset " + c.name + ": rope_scaling is not llama3");
      c.rope_scaling.factor = rs->at("factor");
      c.rope_scaling.low_freq_factor = rs->at("low_freq_factor");
      c.rope_scaling.high_freq_factor = rs->at("high_freq_factor");
      c.rope_scaling.original_context = rs->at("original_max_position_embeddings");
    }
    if (auto moe = p.find("moe"); moe != p.end()) {
      c.n_experts = moe->at("n_experts");
      c.n_experts_active = moe->at("n_experts_active");
      c.expert_hidden_dim = moe->at("expert_hidden_dim");
      c.n_shared_experts = moe->value("n_shared_experts", 0);
      c.n_dense_layers = moe->value("n_dense_layers", 0);
    }
    preset.source = p.at("source");
    if (auto why = c.invalid_reason(); !why.empty())
      throw fpgallm::InputError(path, "preset " + c.name + ": " + why);
    out.push_back(std::move(preset));
  }
  return out;
}

}  // namespace

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = read_presets();
  return table;
}

std::optional<Config> find_preset(const std::string& name) {
  const std::string key = lower(name);
  for (const auto& p : presets())
    if (lower(p.config.name) == key) return p.config;
  return std::nullopt;
}

std::vector<std::string> close_names(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string key = lower(name);
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& c : candidates) {
    std::string lc = lower(c);
    std::size_t d = edit_distance(key, lc);
    bool related = lc.find(key) != std::string::npos || (key.size() >= 3 && key.find(lc) != std::string::npos);
    if (d <= std::max<std::size_t>(2, key.size() / 3) || related) scored.emplace_back(related ? 0 : d, c);
  }
  std::stable_sort(scored.begin(), scored.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (auto& s : scored) out.push_back(s.second);
  return out;
}

std::string preset_suggestion(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& p : presets()) names.push_back(p.config.name);
  auto close = close_names(name, names);
  if (close.empty()) return "";
  std::string s = " (did you mean: ";
  for (std::size_t i = 0; i < close.size() && i < 4; ++i) s += (i ? ", " : "") + close[i];
  return s + "?)";
}

}  // namespace model
