#pragma once
// Config-only models with their published shapes (data/presets.json, each with a source),
// for planning hardware without downloading weights.
#include <optional>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace model {

struct Preset {
  Config config;
  std::string source;  // where the shape was published
};

const std::vector<Preset>& presets();
std::optional<Config> find_preset(const std::string& name);  // case-insensitive
// " (did you mean: a, b?)" for close names, or "".
std::string preset_suggestion(const std::string& name);

// Names within a small edit distance of `name` among `candidates`, closest first.
std::vector<std::string> close_names(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace model
