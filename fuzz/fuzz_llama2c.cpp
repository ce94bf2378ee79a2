// llama2.c .bin reader: any bytes either load or raise InputError; nothing else.
#include <cstdio>

#include "fuzz_input.hpp"
#include "model/model.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::input_file(data, size, ".bin");
  try {
    model::Model m = model::load_llama2c(path);
    if (m.weights.final_norm.size() != static_cast<std::size_t>(m.config.dim)) __builtin_trap();
  } catch (const fpgallm::InputError&) {
  }
  std::remove(path.c_str());
  return 0;
}
