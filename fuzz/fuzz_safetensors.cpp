// safetensors header and tensors, and config.json: any bytes either parse or raise
// InputError; every tensor the reader accepts lies inside the input.
#include <string>
#include <vector>

#include "model/safetensors.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    model::safetensors::File f({data, size}, "fuzz.safetensors");
    for (const auto& t : f.tensors()) {
      auto bytes = f.bytes(t);
      if (bytes.data() < data || bytes.data() + bytes.size() > data + size) __builtin_trap();
      if (t.n_elements <= (1u << 16) && (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16")) {
        std::vector<float> out(t.n_elements);
        f.read_floats(t, out);
      }
    }
  } catch (const fpgallm::InputError&) {
  }
  try {
    model::safetensors::config_from_hf_json(std::string(reinterpret_cast<const char*>(data), size), "config.json");
  } catch (const fpgallm::InputError&) {
  }
  return 0;
}
