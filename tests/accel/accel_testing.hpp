#pragma once
// Helpers of the accelerator tests: a design of given unit, tile and lane shape, and the
// logits of a transformer over a token sequence.
#include <algorithm>
#include <cmath>
#include <vector>

#include "arch/design.hpp"
#include "engine/transformer.hpp"

inline arch::Design design(int rows, int cols, int tile_rows, int tile_cols, int lanes, int kv_bits = 32) {
  arch::Design d;
  d.matrix_unit.rows = rows;
  d.matrix_unit.cols = cols;
  d.tiling.tile_rows = tile_rows;
  d.tiling.tile_cols = tile_cols;
  d.vector_unit.lanes = lanes;
  d.kv_bits = kv_bits;
  d.buffers.weight_bytes = 2LL * tile_rows * tile_cols;
  return d;
}

// The logits of tokens[0..n) at positions 0..n-1, one decode step each, concatenated [n][vocab].
inline std::vector<float> logits_of(engine::Transformer& t, const std::vector<int>& tokens) {
  std::vector<float> all;
  for (int pos = 0; pos < int(tokens.size()); ++pos) {
    const float* l = t.forward(tokens[std::size_t(pos)], pos);
    all.insert(all.end(), l, l + t.config().vocab_size);
  }
  return all;
}

// Relative error of a logit vector: max |a - b| / max |b|.
inline double rel_err(const float* a, const float* b, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / den;
}
