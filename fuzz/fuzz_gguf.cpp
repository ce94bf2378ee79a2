// GGUF reader, llama model and tokenizer from its metadata: any bytes either load or raise
// InputError; every tensor the reader accepts lies inside the input.
#include "model/gguf.hpp"
#include "model/gguf_llama.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    model::gguf::Reader r({data, size}, "fuzz.gguf");
    for (const auto& t : r.tensors()) {
      auto bytes = r.tensor_bytes(t);
      if (bytes.data() < data || bytes.data() + bytes.size() > data + size) __builtin_trap();
      if (t.n_elements <= (1u << 16) && model::gguf::type_traits(t.type)->dequantizable) r.tensor_floats(t);
    }
    for (const auto& [key, value] : r.metadata()) (void)r.int_or_none(key);
  } catch (const fpgallm::InputError&) {
  }
  try {
    model::gguf::Reader r({data, size}, "fuzz.gguf");
    model::Model m = model::load_gguf(r);
    if (m.tokenizer) m.tokenizer->encode("Once upon a time", true, false);
  } catch (const fpgallm::InputError&) {
  }
  return 0;
}
