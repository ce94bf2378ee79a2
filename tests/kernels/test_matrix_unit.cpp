// The matrix unit against an exact integer reference (int64 sums computed here, then the
// requantization formula of docs/quantization.md section 4 evaluated in the stated order),
// on random matrices of several shapes, including edges that do not fill a tile, and on
// several unit shapes (PE x SIMD, tile sizes) that must give identical bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/attention.hpp"  // float_to_half
#include "kernels/matrix_unit.hpp"

namespace {

using kernels::i32;
using kernels::i8;

struct Shape {
  int tokens, rows, cols;
};
const Shape kShapes[] = {{1, 1, 1}, {1, 7, 13}, {1, 64, 172}, {3, 300, 700}, {2, 513, 257}, {4, 32, 1024}};

// Configurations that differ in every dimension the design sets.
using Small = kernels::MatrixUnitConfig<8, 8, 64, 128, 4, 4096, 4096>;
using Default = kernels::MatrixUnitConfig<32, 32, 128, 256, 4, 4096, 4096>;
using Wide = kernels::MatrixUnitConfig<64, 16, 256, 512, 4, 4096, 4096>;
using Tall = kernels::MatrixUnitConfig<16, 32, 64, 256, 4, 4096, 4096>;

struct W8Case {
  std::vector<i8> w, x;
  std::vector<float> ws, xs;
};

W8Case random_w8(const Shape& s, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(-127, 127);
  std::uniform_real_distribution<float> scale(1e-4f, 2e-2f);
  W8Case c;
  c.w.resize(static_cast<std::size_t>(s.rows) * s.cols);
  c.x.resize(static_cast<std::size_t>(s.tokens) * s.cols);
  for (auto& v : c.w) v = static_cast<i8>(code(rng));
  for (auto& v : c.x) v = static_cast<i8>(code(rng));
  // Extremes: a row and a token of all +-127 (the largest accumulator magnitudes).
  for (int j = 0; j < s.cols; ++j) {
    c.w[j] = 127;
    c.x[j] = (j % 2) ? -127 : 127;
  }
  c.ws.resize(s.rows);
  c.xs.resize(s.tokens);
  for (auto& v : c.ws) v = scale(rng);
  for (auto& v : c.xs) v = scale(rng);
  return c;
}

template <class CFG>
void run_w8(const Shape& s, const W8Case& c, std::vector<float>& y, std::vector<i32>& acc) {
  y.assign(static_cast<std::size_t>(s.tokens) * s.rows, NAN);
  acc.assign(y.size(), 0);
  kernels::matmul_w8a8<CFG>(c.w.data(), c.ws.data(), c.x.data(), c.xs.data(), y.data(), acc.data(), s.tokens, s.rows,
                            s.cols, s.rows);
}

TEST(MatrixUnit, W8A8IsExactAgainstIntegerReference) {
  unsigned seed = 10;
  for (const auto& s : kShapes) {
    const W8Case c = random_w8(s, seed++);
    std::vector<float> y;
    std::vector<i32> acc;
    run_w8<Default>(s, c, y, acc);
    for (int t = 0; t < s.tokens; ++t)
      for (int r = 0; r < s.rows; ++r) {
        std::int64_t ref = 0;
        for (int j = 0; j < s.cols; ++j)
          ref += std::int64_t(c.w[std::size_t(r) * s.cols + j]) * c.x[std::size_t(t) * s.cols + j];
        const std::size_t o = std::size_t(t) * s.rows + r;
        ASSERT_EQ(acc[o], ref) << s.rows << "x" << s.cols << " t" << t << " r" << r;
        const float want = (static_cast<float>(ref) * c.ws[r]) * c.xs[t];
        ASSERT_EQ(std::memcmp(&y[o], &want, 4), 0) << y[o] << " vs " << want;
      }
  }
}

TEST(MatrixUnit, W8A8BitsDoNotDependOnTheUnitShape) {
  unsigned seed = 20;
  for (const auto& s : kShapes) {
    const W8Case c = random_w8(s, seed++);
    std::vector<float> y0, y1, y2, y3;
    std::vector<i32> a0, a1, a2, a3;
    run_w8<Default>(s, c, y0, a0);
    run_w8<Small>(s, c, y1, a1);
    run_w8<Wide>(s, c, y2, a2);
    run_w8<Tall>(s, c, y3, a3);
    EXPECT_EQ(a0, a1);
    EXPECT_EQ(a0, a2);
    EXPECT_EQ(a0, a3);
    EXPECT_EQ(std::memcmp(y0.data(), y1.data(), y0.size() * 4), 0);
    EXPECT_EQ(std::memcmp(y0.data(), y2.data(), y0.size() * 4), 0);
    EXPECT_EQ(std::memcmp(y0.data(), y3.data(), y0.size() * 4), 0);
  }
}

// int4: codes -7..7 packed as docs/quantization.md 2.2 (32-column chunks, byte b = column b
// low nibble, column b+16 high nibble, nibble = code + 8), fp16 scales per group.
struct W4Case {
  std::vector<int> codes;  // [rows][cols]
  std::vector<std::uint8_t> packed;
  std::vector<std::uint16_t> scale;
  std::vector<i8> x;
  std::vector<float> xs;
  int group;
};

W4Case random_w4(const Shape& s, int group, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code4(-7, 7), code8(-127, 127);
  std::uniform_real_distribution<float> scale(1e-3f, 5e-2f);
  W4Case c;
  c.group = group;
  const int row_bytes = (s.cols + 31) / 32 * 16, groups = (s.cols + group - 1) / group;
  c.codes.resize(std::size_t(s.rows) * s.cols);
  for (auto& v : c.codes) v = code4(rng);
  c.packed.assign(std::size_t(s.rows) * row_bytes, 0);
  for (int r = 0; r < s.rows; ++r)
    for (int j = 0; j < row_bytes * 2; ++j) {
      const int nib = j < s.cols ? c.codes[std::size_t(r) * s.cols + j] + 8 : 8;
      const int chunk = j / 32, within = j % 32;
      auto& byte = c.packed[std::size_t(r) * row_bytes + chunk * 16 + within % 16];
      byte = static_cast<std::uint8_t>(within < 16 ? (byte & 0xf0) | nib : (byte & 0x0f) | (nib << 4));
    }
  c.scale.resize(std::size_t(s.rows) * groups);
  for (auto& v : c.scale) v = kernels::float_to_half(scale(rng));
  c.x.resize(std::size_t(s.tokens) * s.cols);
  for (auto& v : c.x) v = static_cast<i8>(code8(rng));
  c.xs.resize(s.tokens);
  for (auto& v : c.xs) v = scale(rng);
  return c;
}

template <class CFG>
std::vector<float> run_w4(const Shape& s, const W4Case& c) {
  std::vector<float> y(std::size_t(s.tokens) * s.rows, NAN);
  kernels::matmul_w4a8<CFG>(c.packed.data(), c.scale.data(), c.group, c.x.data(), c.xs.data(), y.data(), s.tokens,
                            s.rows, s.cols, s.rows);
  return y;
}

TEST(MatrixUnit, W4A8IsExactAgainstGroupwiseReference) {
  unsigned seed = 30;
  for (int group : {32, 64, 128})
    for (const auto& s : kShapes) {
      const W4Case c = random_w4(s, group, seed++);
      const std::vector<float> y = run_w4<Default>(s, c);
      const int groups = (s.cols + group - 1) / group;
      for (int t = 0; t < s.tokens; ++t)
        for (int r = 0; r < s.rows; ++r) {
          float sum = 0.0f;
          for (int g = 0; g < groups; ++g) {
            std::int64_t acc = 0;
            for (int j = g * group; j < std::min(s.cols, (g + 1) * group); ++j)
              acc += std::int64_t(c.codes[std::size_t(r) * s.cols + j]) * c.x[std::size_t(t) * s.cols + j];
            const _Float16* h = reinterpret_cast<const _Float16*>(&c.scale[std::size_t(r) * groups + g]);
            sum = sum + static_cast<float>(acc) * static_cast<float>(*h);
          }
          const float want = sum * c.xs[t];
          const float got = y[std::size_t(t) * s.rows + r];
          ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << "g" << group << " " << s.rows << "x" << s.cols << " r" << r;
        }
    }
}

TEST(MatrixUnit, W4A8BitsDoNotDependOnTheUnitShape) {
  // Groups spanning column tiles (tile_cols 32 < group 64, 128) and SIMD wider than a group.
  using Int4Small = kernels::MatrixUnitConfig<8, 8, 64, 32, 4, 4096, 4096>;
  using Int4Wide = kernels::MatrixUnitConfig<64, 128, 256, 512, 4, 4096, 4096>;
  unsigned seed = 40;
  for (int group : {32, 64, 128})
  for (const auto& s : kShapes) {
    const W4Case c = random_w4(s, group, seed++);
    const auto y0 = run_w4<Default>(s, c), y1 = run_w4<Int4Small>(s, c), y2 = run_w4<Int4Wide>(s, c);
    EXPECT_EQ(std::memcmp(y0.data(), y1.data(), y0.size() * 4), 0);
    EXPECT_EQ(std::memcmp(y0.data(), y2.data(), y0.size() * 4), 0);
  }
}

TEST(MatrixUnit, StaticRequantizationRoundsHalfToEvenAndSaturates) {
  const i32 acc[6] = {5, 7, -5, 1000000, -1000000, 0};
  const float ws[6] = {0.5f, 0.5f, 0.5f, 1.0f, 1.0f, 1.0f};
  i8 q[6];
  kernels::requantize_i8<16>(q, acc, ws, 1.0f, 1.0f, 6);
  EXPECT_EQ(q[0], 2);     // 2.5 -> 2
  EXPECT_EQ(q[1], 4);     // 3.5 -> 4
  EXPECT_EQ(q[2], -2);    // -2.5 -> -2
  EXPECT_EQ(q[3], 127);   // saturates
  EXPECT_EQ(q[4], -127);  // symmetric: never -128
  EXPECT_EQ(q[5], 0);
}

}  // namespace
