// llama2.c tokenizer.bin reader, then encode/decode with what it accepted. The first byte
// picks the vocabulary size the file is checked against.
#include <cstdio>

#include "fuzz_input.hpp"
#include "model/tokenizer.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const int vocab = 1 + data[0] * 3;
  const std::string path = fuzz::input_file(data + 1, size - 1, ".tok");
  try {
    auto tok = model::Tokenizer::load_llama2c(path, vocab);
    auto ids = tok.encode("Once upon a time \xE2\x96\x81 <0x0A>\n\xFF", true, true);
    int prev = ids.empty() ? 1 : ids[0];
    for (int id : ids) {
      if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
      (void)tok.printable(prev, id);
      prev = id;
    }
  } catch (const fpgallm::InputError&) {
  }
  std::remove(path.c_str());
  return 0;
}
