#include "util/json_file.hpp"


#include "util/error.hpp"
#include "util/input_file.hpp"

namespace fpgallm {

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::string text;
  try {
    text = read_regular_file(path);
  } catch (const InputError& e) {
    throw InputError(path, "cannot open " + what + ": " + e.problem());
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path, std::string("malformed JSON (") + e.what() + ")");
  }
}

}  // namespace fpgallm
