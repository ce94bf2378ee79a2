// tokenizer.json of a Hugging Face folder: BpeTokenizer::from_hf_json on arbitrary bytes,
// then encode and decode with what it accepted. Anything but an InputError naming the file
// is a finding; every id encode gives must be in the vocabulary.
#include <cstdio>
#include <string>

#include "fuzz_input.hpp"
#include "model/bpe_tokenizer.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::input_file(data, size, ".tokenizer.json");
  try {
    const auto tok = model::BpeTokenizer::from_hf_json(path);
    for (bool special : {false, true}) {
      const auto ids = tok.encode("Once upon a time, caf\xc3\xa9 <|im_start|>user\n42 \xf0\x9f\x98\x80", true, special);
      for (int id : ids)
        if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
      (void)tok.decode(ids);
    }
  } catch (const fpgallm::InputError& e) {
    if (e.source() != path || e.problem().empty()) __builtin_trap();
  }
  std::remove(path.c_str());
  return 0;
}
