#pragma once
// Readers that take a path get the fuzz input through a file in /dev/shm (or /tmp).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace fuzz {

inline std::string input_file(const std::uint8_t* data, std::size_t size, const char* ext) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  std::string path = dir + "/fpgallm-fuzz-" + std::to_string(getpid()) + ext;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

}  // namespace fuzz
