#pragma once
#include <string>
#include <string_view>

namespace model {

// `bytes` with each ill-formed UTF-8 subpart replaced by U+FFFD (what a JSON document or a
// Python str can hold: tokens of a byte-level vocabulary may split a character, and a
// sampled sequence need not complete it). Defined in bpe_tokenizer.cpp.
std::string valid_utf8(std::string_view bytes);

}  // namespace model
