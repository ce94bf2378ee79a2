#pragma once
// The one adapter between the RTL testbench and the C model of the matrix unit
// (src/kernels/matrix_unit.hpp): it lays a weight matrix and an activation vector out as
// the RTL unit's input streams, in the kernel's tile and fold order, and takes the
// expected accumulators from the kernel itself, instantiated with the unit's PE, SIMD and
// tile shape. A change of the kernels' signatures is fixed here only.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/matrix_unit.hpp"

namespace rtl_tb {

// One matrix-vector instruction: rows x cols weights (int8 codes in -127..127, or int4
// codes in -8..7), one int8 activation vector.
struct Problem {
  int rows = 0, cols = 0;
  std::vector<std::int8_t> w;  // [rows][cols]
  std::vector<std::int8_t> x;  // [cols]
};

inline Problem random_problem(int rows, int cols, int wbits, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> w8(-127, 127), w4(-8, 7), a(-128, 127);
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.w.resize(std::size_t(rows) * cols);
  p.x.resize(cols);
  for (auto& v : p.w) v = static_cast<std::int8_t>(wbits == 4 ? w4(rng) : w8(rng));
  for (auto& v : p.x) v = static_cast<std::int8_t>(a(rng));
  // The extremes, where the packing's sign correction matters most.
  p.w[0] = wbits == 4 ? -8 : -127;
  p.x[0] = -128;
  return p;
}

struct Streams {
  int row_steps = 0, col_steps = 0;                // the unit's cfg_row_steps / cfg_col_steps
  std::vector<std::vector<std::uint8_t>> w_words;  // PE*SIMD fields each: int8 bytes or int4 nibbles
  std::vector<std::vector<std::int8_t>> x_words;   // SIMD activations each
  std::vector<std::int64_t> tile_steps;            // weight words of each tile, in tile order
  std::vector<std::vector<std::int32_t>> golden;   // expected result words, PE accumulators (or int8 codes) each
  // fpgallm_matrix_unit_q8 only: row-scale words (binary32 bits, one per result word) and
  // the requantizer's configuration.
  std::vector<std::vector<std::uint32_t>> s_words;
  std::uint32_t x_scale_bits = 0, inv_out_scale_bits = 0;
};

namespace detail {

// Row sums of the whole matrix from the int8 kernel (its acc_out).
template <class CFG>
std::vector<std::int32_t> kernel_acc_w8(const Problem& p) {
  std::vector<float> ws(p.rows, 1.0f), y(p.rows);
  const float xs = 1.0f;
  std::vector<std::int32_t> acc(p.rows);
  kernels::matmul_w8a8<CFG>(p.w.data(), ws.data(), p.x.data(), &xs, y.data(), acc.data(), 1, p.rows, p.cols,
                            p.rows);
  return acc;
}

// Packs int4 codes as the quant files do: per 32-column chunk 16 bytes, byte b holds
// column b (low nibble) and b + 16 (high nibble), nibble = code + 8.
inline std::vector<std::uint8_t> pack_w4(const Problem& p) {
  const int row_bytes = (p.cols + 31) / 32 * 16;
  std::vector<std::uint8_t> packed(std::size_t(p.rows) * row_bytes, 0x88);
  for (int r = 0; r < p.rows; ++r)
    for (int c = 0; c < p.cols; ++c) {
      const int chunk = c / 32, b = c % 32;
      std::uint8_t& byte = packed[std::size_t(r) * row_bytes + chunk * 16 + (b % 16)];
      const std::uint8_t nib = static_cast<std::uint8_t>(p.w[std::size_t(r) * p.cols + c] + 8);
      byte = b < 16 ? static_cast<std::uint8_t>((byte & 0xf0) | nib) : static_cast<std::uint8_t>((byte & 0x0f) | (nib << 4));
    }
  return packed;
}

// Group accumulators [group][row] from the int4 kernel: one run per group with scale 1
// (binary16 0x3c00) on that group and 0 on the others; |acc| < 2^24, so y is exact.
template <class CFG>
std::vector<std::vector<std::int32_t>> kernel_acc_w4(const Problem& p, int group) {
  const auto packed = pack_w4(p);
  const int groups = (p.cols + group - 1) / group;
  std::vector<std::vector<std::int32_t>> out(groups, std::vector<std::int32_t>(p.rows));
  const float xs = 1.0f;
  for (int g = 0; g < groups; ++g) {
    std::vector<std::uint16_t> scale(std::size_t(p.rows) * groups, 0);
    for (int r = 0; r < p.rows; ++r) scale[std::size_t(r) * groups + g] = 0x3c00;
    std::vector<float> y(p.rows);
    kernels::matmul_w4a8<CFG>(packed.data(), scale.data(), group, p.x.data(), &xs, y.data(), 1, p.rows, p.cols,
                              p.rows);
    for (int r = 0; r < p.rows; ++r) {
      if (std::nearbyint(y[r]) != y[r]) throw std::logic_error("int4 group sum not an integer");
      out[g][r] = static_cast<std::int32_t>(y[r]);
    }
  }
  return out;
}

}  // namespace detail

// Streams and golden result words for `p` on the unit with these Verilog parameters.
template <int PE, int SIMD, int WBITS, int TILE_ROWS, int TILE_COLS, int GROUP_COLS>
Streams make_streams(const Problem& p) {
  using CFG = kernels::MatrixUnitConfig<PE, SIMD, TILE_ROWS, TILE_COLS, 1, 4096, 4096>;
  static_assert(WBITS == 8 || GROUP_COLS > 0, "int4 accumulates per group");
  Streams s;
  s.row_steps = (p.rows + PE - 1) / PE;
  s.col_steps = (p.cols + SIMD - 1) / SIMD;
  std::vector<std::int32_t> acc8;
  std::vector<std::vector<std::int32_t>> acc4;
  if constexpr (WBITS == 8)
    acc8 = detail::kernel_acc_w8<CFG>(p);
  else
    acc4 = detail::kernel_acc_w4<CFG>(p, GROUP_COLS);
  const int trs = TILE_ROWS / PE, tcs = TILE_COLS / SIMD;
  auto weight = [&](int r, int c) -> std::uint8_t {
    const bool in = r < p.rows && c < p.cols;
    const int code = in ? p.w[std::size_t(r) * p.cols + c] : 0;
    return WBITS == 4 ? static_cast<std::uint8_t>(code + 8) : static_cast<std::uint8_t>(code);
  };
  auto result = [&](int r0, int group) {
    std::vector<std::int32_t> word(PE, 0);
    for (int q = 0; q < PE; ++q)
      if (r0 + q < p.rows) word[q] = WBITS == 8 ? acc8[r0 + q] : acc4[group][r0 + q];
    return word;
  };
  // Row tile by row tile, the column tiles of one row tile in order; inside a tile the
  // row fold outside the column fold (kernels::detail::compute_tile_i8).
  for (int rb = 0; rb < s.row_steps; rb += trs) {
    const int rsteps = std::min(trs, s.row_steps - rb);
    for (int cb = 0; cb < s.col_steps; cb += tcs) {
      const int csteps = std::min(tcs, s.col_steps - cb);
      s.tile_steps.push_back(std::int64_t(rsteps) * csteps);
      for (int cf = 0; cf < csteps; ++cf) {
        std::vector<std::int8_t> xw(SIMD);
        for (int k = 0; k < SIMD; ++k) {
          const int c = (cb + cf) * SIMD + k;
          xw[k] = c < p.cols ? p.x[c] : 0;
        }
        s.x_words.push_back(xw);
      }
      for (int rf = 0; rf < rsteps; ++rf) {
        const int r0 = (rb + rf) * PE;
        for (int cf = 0; cf < csteps; ++cf) {
          std::vector<std::uint8_t> ww(static_cast<std::size_t>(PE) * SIMD);
          for (int q = 0; q < PE; ++q)
            for (int k = 0; k < SIMD; ++k) ww[std::size_t(q) * SIMD + k] = weight(r0 + q, (cb + cf) * SIMD + k);
          s.w_words.push_back(ww);
          const int gcol = cb + cf;  // column step in the matrix
          const bool last_col = gcol == s.col_steps - 1;
          if (GROUP_COLS == 0) {
            if (last_col) s.golden.push_back(result(r0, 0));
          } else {
            const int gsteps = GROUP_COLS / SIMD;
            if ((gcol + 1) % gsteps == 0 || last_col) s.golden.push_back(result(r0, gcol / gsteps));
          }
        }
      }
    }
  }
  return s;
}

// The requantizer's configuration and row scales (rtl/fpgallm_requant_i8.v), the arguments
// of kernels::requantize_i8.
struct Requant {
  std::vector<float> w_scale;  // [rows]
  float x_scale = 1.0f, out_scale = 1.0f;
};

inline std::uint32_t float_bits(float f) { return kernels::float_to_bits(f); }

// The configuration word cfg_inv_out_scale: the reciprocal requantize_i8 computes once per
// call (it is not part of the per-row datapath, so the RTL takes it as configuration).
inline std::uint32_t inv_out_scale_bits(float out_scale) {
  return float_bits(out_scale == 0.0f ? 0.0f : 1.0f / out_scale);
}

// int8 codes of requantize_i8 for accumulators acc[rows] (the C model).
inline std::vector<std::int8_t> kernel_requant(const std::vector<std::int32_t>& acc, const Requant& rq) {
  constexpr int kMaxRows = 1 << 14;
  if (acc.size() > std::size_t(kMaxRows)) throw std::logic_error("kernel_requant: too many rows");
  std::vector<std::int8_t> q(acc.size());
  kernels::requantize_i8<kMaxRows>(q.data(), acc.data(), rq.w_scale.data(), rq.x_scale, rq.out_scale, int(acc.size()));
  return q;
}

// Streams of fpgallm_matrix_unit_q8 (int8 weights, whole rows): the unit's weight and
// activation words, one row-scale word per result word, and as golden words the int8
// codes requantize_i8 gives for the kernel's accumulators (padding rows: 0).
template <int PE, int SIMD, int TILE_ROWS, int TILE_COLS>
Streams make_streams_q8(const Problem& p, const Requant& rq) {
  Streams s = make_streams<PE, SIMD, 8, TILE_ROWS, TILE_COLS, 0>(p);
  std::vector<std::int32_t> acc(p.rows);
  for (int r = 0; r < p.rows; ++r) acc[r] = s.golden[r / PE][r % PE];
  const std::vector<std::int8_t> q = kernel_requant(acc, rq);
  for (std::size_t i = 0; i < s.golden.size(); ++i) {
    std::vector<std::uint32_t> sw(PE, 0);
    for (int k = 0; k < PE; ++k) {
      const int r = int(i) * PE + k;
      s.golden[i][k] = r < p.rows ? q[r] : 0;
      if (r < p.rows) sw[k] = float_bits(rq.w_scale[r]);
    }
    s.s_words.push_back(sw);
  }
  s.x_scale_bits = float_bits(rq.x_scale);
  s.inv_out_scale_bits = inv_out_scale_bits(rq.out_scale);
  return s;
}

}  // namespace rtl_tb
