#pragma once
// Numerics shared by the accelerator's units: the exact operations both C simulation and
// hardware perform. Vector-unit arithmetic is IEEE-754 binary32 with round-to-nearest-even
// (what Vitis HLS's floating-point operators implement), never fused (-ffp-contract=off),
// never through a vendor math library: exp is computed here from a table and a short
// polynomial, so g++ and the synthesized circuit give the same bits. See
// docs/accelerator.md, "Numerics".
#include <cstdint>
#include <cstring>

namespace kernels {

using i8 = std::int8_t;
using u8 = std::uint8_t;
using i32 = std::int32_t;
using u32 = std::uint32_t;

// Bit casts by memcpy (C++14; Vitis HLS maps a scalar memcpy to wires).
inline float bits_to_float(u32 b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
inline u32 float_to_bits(float f) {
  u32 b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Round to nearest, ties to even, of |x| < 2^22, using the adder's own rounding: adding and
// subtracting 1.5 * 2^23 leaves the integer part rounded as the FP adder rounds (RNE).
inline float round_half_even(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (x + kMagic) - kMagic;
}

// int8 from a real value already divided by its scale: clamp to [-127, 127] (symmetric;
// -128 is never produced), then round half to even. NaN maps to 0.
inline i8 saturate_round_i8(float v) {
  if (!(v == v)) return 0;
  if (v > 127.0f) v = 127.0f;
  if (v < -127.0f) v = -127.0f;
  return static_cast<i8>(static_cast<i32>(round_half_even(v)));
}

// 2^(i / 2^TABLE_BITS) for i in [0, 2^TABLE_BITS), rounded to binary32: the exp ROM.
// Built at compile time in double precision from a Taylor series (exact to well below
// binary32's half ulp), so the table is part of the source, not of a run-time library.
// Entry i of the 2^bits-entry table, in double then rounded once to binary32.
constexpr float exp2_entry(int i, int size) {
  constexpr double kLn2 = 0.69314718055994530942;
  const double y = kLn2 * static_cast<double>(i) / static_cast<double>(size);  // in [0, ln 2)
  double term = 1.0, sum = 1.0;
  for (int k = 1; k < 30; ++k) {
    term *= y / static_cast<double>(k);
    sum += term;
  }
  return static_cast<float>(sum);
}

template <int TABLE_BITS>
struct Exp2Table {
  static_assert(TABLE_BITS >= 4 && TABLE_BITS <= 12, "exp table address bits in 4..12");
  static constexpr int kSize = 1 << TABLE_BITS;
  float value[kSize];

  constexpr Exp2Table() : value() {
    for (int i = 0; i < kSize; ++i) value[i] = exp2_entry(i, kSize);
  }
};

// COPIES identical exp ROMs, one per lane of a vector loop (each entry computed once).
template <int TABLE_BITS, int COPIES>
struct Exp2Roms {
  static constexpr int kSize = 1 << TABLE_BITS;
  float value[COPIES][kSize];

  constexpr Exp2Roms() : value() {
    for (int i = 0; i < kSize; ++i) {
      const float v = exp2_entry(i, kSize);
      for (int c = 0; c < COPIES; ++c) value[c][i] = v;
    }
  }
};

// exp(x) in binary32 by table and polynomial (Cody-Waite range reduction):
//   k = round(x * log2(e) * 2^B), n = floor(k / 2^B), i = k mod 2^B,
//   r = x - (n + i/2^B) ln2 (ln2 split into a short exact part and a remainder),
//   exp(x) = 2^n * T[i] * (1 + r + r^2/2 + r^3/6),  |r| <= ln2 / 2^(B+1).
// Inputs below -87 give 0 (the hardware flushes subnormals); inputs above 88 are clamped
// to 88. tests/kernels bounds the error against double precision (a few ulp).
// `rom` is the 2^TABLE_BITS-entry table (Exp2Table::value): a unit that computes several
// exponentials per cycle gives each lane its own ROM.
template <int TABLE_BITS>
inline float exp_rom(float x, const float rom[1 << TABLE_BITS]) {
  constexpr int kSize = 1 << TABLE_BITS;
  constexpr float kLog2eScaled = 1.44269504088896340736f * static_cast<float>(kSize);
  constexpr float kLn2Hi = 0.693359375f;                 // 355/512: n*kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;              // ln2 - kLn2Hi
  constexpr float kStepHi = kLn2Hi / static_cast<float>(kSize);  // exact (power-of-two scale)
  constexpr float kStepLo = kLn2Lo / static_cast<float>(kSize);
  if (!(x == x)) return x;
  if (x < -87.0f) return 0.0f;
  if (x > 88.0f) x = 88.0f;
  const i32 k = static_cast<i32>(round_half_even(x * kLog2eScaled));
  const i32 n = k >> TABLE_BITS;  // arithmetic shift: floor
  const i32 idx = k & (kSize - 1);
  const float nf = static_cast<float>(n), idf = static_cast<float>(idx);
  const float r = ((x - nf * kLn2Hi) - idf * kStepHi) - (nf * kLn2Lo + idf * kStepLo);
  const float poly = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6.0f)));
  const float mant = rom[idx] * poly;
  // 2^n for n in [-126, 127] built from its exponent field.
  return mant * bits_to_float(static_cast<u32>(n + 127) << 23);
}


// exp(x) with one shared ROM (one exponential per cycle).
template <int TABLE_BITS>
inline float exp_table(float x) {
  static constexpr Exp2Table<TABLE_BITS> kTable{};
  return exp_rom<TABLE_BITS>(x, kTable.value);
}

}  // namespace kernels
