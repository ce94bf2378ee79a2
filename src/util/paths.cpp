#include "util/paths.hpp"

#include <cstdlib>

#include "util/output.hpp"

namespace fpgallm {

std::string data_dir() {
  if (const char* env = std::getenv("FPGALLM_DATA"); env && *env) return env;
  return FPGALLM_DATA_DIR;
}

std::string source_dir() {
  if (const char* env = std::getenv("FPGALLM_SOURCE"); env && *env) return env;
  return FPGALLM_SOURCE_DIR;
}

void write_file_atomic(const std::string& path, const std::string& contents) {
  OutputFile out(path);
  out.write(contents.data(), contents.size());
  out.commit();
}

}  // namespace fpgallm
