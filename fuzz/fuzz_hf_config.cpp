// config.json of a Hugging Face folder: config_from_hf_json on arbitrary bytes. Anything
// but an InputError naming the file is a finding; a config it accepts must pass the
// engine's own checks (the same ones every format's reader applies).
#include <string>

#include "model/safetensors.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const model::Config c = model::safetensors::config_from_hf_json(text, "config.json");
    if (!c.invalid_reason().empty()) __builtin_trap();  // accepted a config the engine refuses
  } catch (const fpgallm::InputError& e) {
    if (e.source() != "config.json" || e.problem().empty()) __builtin_trap();
  }
  return 0;
}
