#include "util/paths.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "util/error.hpp"

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
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, std::string("cannot write: ") + std::strerror(errno));
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError(path, "write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw InputError(path, std::string("cannot write: ") + std::strerror(err));
  }
}

}  // namespace fpgallm
