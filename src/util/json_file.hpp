#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace fpgallm {

// Parses the JSON file at path. Throws InputError naming path: "cannot open <what>" when
// it cannot be read, "malformed JSON (...)" when it does not parse.
nlohmann::json read_json_file(const std::string& path, const std::string& what);

}  // namespace fpgallm
