#pragma once
// Drives a Verilated fpgallm_matrix_unit (or fpgallm_matrix_unit_q8, which adds the row-scale
// stream s and int8 result words) with the streams of golden.hpp, one clock at a time, and
// records every transfer with its cycle number.
#include <verilated.h>

#include <cstdint>
#include <random>
#include <vector>

#include "golden.hpp"

namespace rtl_tb {

// Bit fields of a port: an integer for ports up to 64 bits, VlWide beyond.
template <class T>
void set_field(T& port, int off, int width, std::uint64_t v) {
  const std::uint64_t mask = (width >= 64 ? ~0ull : (1ull << width) - 1) << off;
  port = static_cast<T>((static_cast<std::uint64_t>(port) & ~mask) | ((v << off) & mask));
}
template <std::size_t N>
void set_field(VlWide<N>& port, int off, int width, std::uint64_t v) {
  for (int b = 0; b < width; ++b) {
    const int bit = off + b;
    const EData m = EData(1) << (bit % 32);
    if ((v >> b) & 1)
      port[bit / 32] |= m;
    else
      port[bit / 32] &= ~m;
  }
}
template <class T>
std::uint64_t get_field(const T& port, int off, int width) {
  return (static_cast<std::uint64_t>(port) >> off) & (width >= 64 ? ~0ull : (1ull << width) - 1);
}
template <std::size_t N>
std::uint64_t get_field(const VlWide<N>& port, int off, int width) {
  std::uint64_t v = 0;
  for (int b = 0; b < width; ++b) v |= std::uint64_t((port[(off + b) / 32] >> ((off + b) % 32)) & 1) << b;
  return v;
}

struct Trace {
  std::vector<std::vector<std::int32_t>> results;  // result words in arrival order
  std::vector<std::int64_t> w_cycles;              // cycle of every accepted weight word
  std::vector<std::int64_t> y_cycles;              // cycle of every accepted result word
  bool timed_out = false;
};

// Stalls: probability that a source holds back a word, or the sink refuses one, in a cycle.
struct Stalls {
  double w = 0, x = 0, y = 0;
  unsigned seed = 1;
};

// Two clock cycles with the synchronous reset high, inputs as the caller set them.
template <class Model>
void reset(Model& top) {
  top.rst = 1;
  for (int i = 0; i < 2; ++i) {
    top.clk = 0;
    top.eval();
    top.clk = 1;
    top.eval();
  }
  top.rst = 0;
}

// A model with the requantizer's row-scale stream (fpgallm_matrix_unit_q8).
template <class Model>
constexpr bool kHasScales = requires(Model& m) { m.s_valid; };

// OUT_BITS: bits per row of a result word (32: accumulators, 8: int8 codes), sign-extended.
template <class Model, int PE, int SIMD, int WBITS, int OUT_BITS = 32>
Trace run(const Streams& s, const Stalls& stalls = {}) {
  VerilatedContext ctx;
  Model top{&ctx};
  std::mt19937 rng(stalls.seed);
  std::uniform_real_distribution<double> u(0, 1);
  Trace t;
  top.cfg_row_steps = s.row_steps;
  top.cfg_col_steps = s.col_steps;
  top.w_valid = 0;
  top.x_valid = 0;
  top.y_ready = 0;
  if constexpr (kHasScales<Model>) {
    top.cfg_x_scale = s.x_scale_bits;
    top.cfg_inv_out_scale = s.inv_out_scale_bits;
    top.s_valid = 0;
  }
  reset(top);
  std::size_t wi = 0, xi = 0, si = 0;
  const std::int64_t limit = 64 + 8 * std::int64_t(s.w_words.size() + s.golden.size()) * (stalls.w + stalls.y > 0 ? 8 : 1);
  for (std::int64_t cycle = 0; t.results.size() < s.golden.size(); ++cycle) {
    if (cycle > limit) {
      t.timed_out = true;
      break;
    }
    const bool wv = wi < s.w_words.size() && u(rng) >= stalls.w;
    const bool xv = xi < s.x_words.size() && u(rng) >= stalls.x;
    top.w_valid = wv;
    top.x_valid = xv;
    top.y_ready = u(rng) >= stalls.y;
    if constexpr (kHasScales<Model>) {
      top.s_valid = si < s.s_words.size() && u(rng) >= stalls.x;
      if (si < s.s_words.size())
        for (int q = 0; q < PE; ++q) set_field(top.s_data, q * 32, 32, s.s_words[si][q]);
    }
    if (wi < s.w_words.size())
      for (int f = 0; f < PE * SIMD; ++f) set_field(top.w_data, f * WBITS, WBITS, s.w_words[wi][f]);
    if (xi < s.x_words.size())
      for (int k = 0; k < SIMD; ++k) set_field(top.x_data, k * 8, 8, static_cast<std::uint8_t>(s.x_words[xi][k]));
    top.clk = 0;
    top.eval();
    const bool wfire = top.w_valid && top.w_ready, xfire = top.x_valid && top.x_ready;
    bool sfire = false;
    if constexpr (kHasScales<Model>) sfire = top.s_valid && top.s_ready;
    if (top.y_valid && top.y_ready) {
      std::vector<std::int32_t> word(PE);
      for (int q = 0; q < PE; ++q) {
        const std::uint64_t v = get_field(top.y_data, q * OUT_BITS, OUT_BITS);
        word[q] = OUT_BITS == 32 ? static_cast<std::int32_t>(v) : static_cast<std::int32_t>(static_cast<std::int8_t>(v));
      }
      t.results.push_back(word);
      t.y_cycles.push_back(cycle);
    }
    if (wfire) t.w_cycles.push_back(cycle);
    top.clk = 1;
    top.eval();
    wi += wfire;
    xi += xfire;
    si += sfire;
  }
  top.final();
  return t;
}

// Result words that differ from the golden ones (and any missing or extra word).
inline std::size_t mismatches(const Trace& t, const std::vector<std::vector<std::int32_t>>& golden) {
  std::size_t bad = t.results.size() > golden.size() ? t.results.size() - golden.size() : golden.size() - t.results.size();
  for (std::size_t i = 0; i < std::min(t.results.size(), golden.size()); ++i) bad += t.results[i] != golden[i];
  return bad;
}

}  // namespace rtl_tb
