#pragma once
// A straight transcription of llama2.c's encode (run.c): split into UTF-8 code points (byte
// tokens for those not in the vocabulary), then rescan every adjacent pair and merge the
// highest-scoring one, the leftmost of equal scores, until none merges. Quadratic: the
// reference the O(n log n) Tokenizer::encode is checked against (tests/model, fuzz_text).
#include <string>
#include <unordered_map>
#include <vector>

#include "model/tokenizer.hpp"

namespace reference {

inline std::vector<int> llama2c_encode(const model::Tokenizer& tok, const std::string& text, bool bos, bool eos) {
  std::unordered_map<std::string, int> index;
  for (int i = tok.vocab_size() - 1; i >= 0; --i) index[tok.piece(i)] = i;  // the first id of a piece wins
  auto lookup = [&](const std::string& s) {
    auto it = index.find(s);
    return it == index.end() ? -1 : it->second;
  };
  const int byte0 = lookup("<0x00>");
  const int base = byte0 >= 0 ? byte0 : 3;
  const bool byte_tokens = base + 255 < tok.vocab_size();
  std::vector<int> tokens;
  if (tok.vocab_size() == 0) return tokens;
  if (bos && model::Tokenizer::kBos < tok.vocab_size()) tokens.push_back(model::Tokenizer::kBos);
  if (!text.empty() && lookup(" ") >= 0) tokens.push_back(lookup(" "));
  for (std::size_t i = 0; i < text.size();) {
    std::size_t len = 1;
    while (i + len < text.size() && len < 4 && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80) ++len;
    const int id = lookup(text.substr(i, len));
    if (id >= 0) {
      tokens.push_back(id);
    } else {
      for (std::size_t k = 0; k < len; ++k)
        tokens.push_back(byte_tokens ? static_cast<unsigned char>(text[i + k]) + base : 0);
    }
    i += len;
  }
  while (true) {
    float best_score = -1e10f;
    int best_id = -1;
    std::size_t best_at = 0;
    for (std::size_t k = 0; k + 1 < tokens.size(); ++k) {
      const int id = lookup(tok.piece(tokens[k]) + tok.piece(tokens[k + 1]));
      if (id >= 0 && tok.score(id) > best_score) {
        best_score = tok.score(id);
        best_id = id;
        best_at = k;
      }
    }
    if (best_id < 0) break;
    tokens[best_at] = best_id;
    tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  if (eos && model::Tokenizer::kEos < tok.vocab_size()) tokens.push_back(model::Tokenizer::kEos);
  return tokens;
}

}  // namespace reference
