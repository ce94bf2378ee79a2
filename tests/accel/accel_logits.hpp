#pragma once
// The logits of a transformer for tokens[0..n) at positions 0..n-1, one decode step each,
// concatenated [n][vocab] (the accelerator tests compare backends on them).
#include <vector>

#include "engine/transformer.hpp"

inline std::vector<float> logits_of(engine::Transformer& t, const std::vector<int>& tokens) {
  std::vector<float> all;
  for (int pos = 0; pos < int(tokens.size()); ++pos) {
    const float* l = t.forward(tokens[std::size_t(pos)], pos);
    all.insert(all.end(), l, l + t.config().vocab_size);
  }
  return all;
}
