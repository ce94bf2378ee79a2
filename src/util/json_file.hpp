#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace fpgallm {

// The deepest nesting of arrays and objects a JSON file read by fpgallm may have. Real
// tokenizer.json, config.json and design files nest fewer than 10 levels.
inline constexpr int kMaxJsonDepth = 256;

// Parses text (the contents of source) as JSON. Throws InputError naming source when it
// nests deeper than kMaxJsonDepth ("nests deeper than ...") or does not parse
// ("malformed JSON (...)"). Every JSON that comes from a user's file goes through here.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

// Parses the JSON file at path. Throws InputError naming path: "cannot open <what>" when
// it cannot be read, and as parse_json_text when it does not parse.
nlohmann::json read_json_file(const std::string& path, const std::string& what);

// Checked field access for readers of user JSON: a field that is present with the wrong
// type is an InputError naming source and the field (its dotted name, e.g. model.type),
// never a nlohmann type_error. A missing or null field gives the fallback.
const nlohmann::json* json_field(const nlohmann::json& obj, std::string_view key);
std::string json_string(const nlohmann::json& obj, std::string_view key, const std::string& fallback,
                        const std::string& source, const std::string& name);
bool json_bool(const nlohmann::json& obj, std::string_view key, bool fallback, const std::string& source,
               const std::string& name);
// The field if it is an object (or array), an empty one when missing; otherwise InputError.
const nlohmann::json& json_object(const nlohmann::json& obj, std::string_view key, const std::string& source,
                                  const std::string& name);
const nlohmann::json& json_array(const nlohmann::json& obj, std::string_view key, const std::string& source,
                                 const std::string& name);

// Runs read (which walks JSON from source) and turns a nlohmann exception it lets out (a
// missing key read with at(), a field of an unexpected type) into an InputError naming
// source: the file's fault, never an internal error.
template <class Read>
auto reading_json(const std::string& source, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(source, std::string("unexpected content (") + e.what() + ")");
  }
}

}  // namespace fpgallm
