// Text input (calibration, training, evaluation, prompts): the UTF-8/NUL check against a
// second, value-based UTF-8 decoder; text it accepts is encoded by the tokenizer, which must
// decode back to the same bytes and, on short texts, give the tokens of llama2.c's
// quadratic encode (reference_encode.hpp).
#include <string>
#include <string_view>

#include "model/tokenizer.hpp"
#include "reference_encode.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/paths.hpp"

namespace {

// Decodes each code point's value and checks the ranges (not the byte patterns).
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    std::uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (std::size_t k = 1; k < len; ++k) {
      const unsigned b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    static const std::uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const model::Tokenizer tok =
      model::Tokenizer::load_llama2c(fpgallm::source_dir() + "/models/tok512.bin", 512);
  const std::string text(reinterpret_cast<const char*>(data), size);
  bool accepted = true;
  try {
    fpgallm::require_utf8_text(text, "text");
  } catch (const fpgallm::InputError& e) {
    accepted = false;
  }
  const bool expected = valid_utf8(text) && text.find('\0') == std::string::npos;
  if (accepted != expected) __builtin_trap();
  if (!accepted) return 0;
  const auto ids = tok.encode(text, true, false);
  std::string back;
  for (std::size_t i = 1; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= tok.vocab_size()) __builtin_trap();
    back += tok.decode(ids[i - 1], ids[i]);
  }
  if (back != text) __builtin_trap();
  // The quadratic reference on short texts only (it would dominate the run time).
  if (size <= 128 && ids != reference::llama2c_encode(tok, text, true, false)) __builtin_trap();
  return 0;
}
