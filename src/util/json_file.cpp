#include "util/json_file.hpp"

#include <fstream>

#include "util/error.hpp"

namespace fpgallm {

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open " + what);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path, std::string("malformed JSON (") + e.what() + ")");
  }
}

}  // namespace fpgallm
