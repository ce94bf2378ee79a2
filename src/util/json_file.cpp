#include "util/json_file.hpp"

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/input_file.hpp"

namespace fpgallm {

namespace {

// The deepest nesting of [ and { outside strings, stopping once past the limit. Linear in
// the text and independent of the parser, so the parse that follows is bounded.
int nesting_beyond_limit(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return depth;
    } else if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return 0;
}

const char* type_name(const nlohmann::json& j) { return j.type_name(); }

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  if (nesting_beyond_limit(text))
    throw InputError(source, fmt::format("malformed JSON (nests deeper than {} levels)", kMaxJsonDepth));
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw InputError(source, std::string("malformed JSON (") + e.what() + ")");
  }
}

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::string text;
  try {
    text = read_regular_file(path);
  } catch (const InputError& e) {
    throw InputError(path, "cannot open " + what + ": " + e.problem());
  }
  return parse_json_text(text, path);
}

const nlohmann::json* json_field(const nlohmann::json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string json_string(const nlohmann::json& obj, std::string_view key, const std::string& fallback,
                        const std::string& source, const std::string& name) {
  const nlohmann::json* f = json_field(obj, key);
  if (!f) return fallback;
  if (!f->is_string()) throw InputError(source, fmt::format("{} is a {}, not a string", name, type_name(*f)));
  return f->get<std::string>();
}

bool json_bool(const nlohmann::json& obj, std::string_view key, bool fallback, const std::string& source,
               const std::string& name) {
  const nlohmann::json* f = json_field(obj, key);
  if (!f) return fallback;
  if (!f->is_boolean()) throw InputError(source, fmt::format("{} is a {}, not a boolean", name, type_name(*f)));
  return f->get<bool>();
}

namespace {
const nlohmann::json& container(const nlohmann::json& obj, std::string_view key, const std::string& source,
                                const std::string& name, bool object) {
  static const nlohmann::json empty_object = nlohmann::json::object();
  static const nlohmann::json empty_array = nlohmann::json::array();
  const nlohmann::json* f = json_field(obj, key);
  if (!f) return object ? empty_object : empty_array;
  if (object ? !f->is_object() : !f->is_array())
    throw InputError(source, fmt::format("{} is a {}, not an {}", name, type_name(*f), object ? "object" : "array"));
  return *f;
}
}  // namespace

const nlohmann::json& json_object(const nlohmann::json& obj, std::string_view key, const std::string& source,
                                  const std::string& name) {
  return container(obj, key, source, name, true);
}
const nlohmann::json& json_array(const nlohmann::json& obj, std::string_view key, const std::string& source,
                                 const std::string& name) {
  return container(obj, key, source, name, false);
}

}  // namespace fpgallm
