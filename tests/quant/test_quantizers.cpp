// Quantizers against hand-computed cases and a double-precision reference
// (docs/quantization.md sections 1-5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "model/gguf.hpp"
#include "quant/quant.hpp"

namespace {

using namespace quant;

std::vector<float> gaussian(std::size_t n, unsigned seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// round half to even in double, saturating.
long ref_round(double v, long qmax) {
  double f = std::floor(v);
  double r = v - f;
  long q = static_cast<long>(f);
  if (r > 0.5 || (r == 0.5 && (q % 2 != 0))) ++q;
  return std::clamp(q, -qmax, qmax);
}

TEST(Rounding, TiesToEvenAndSaturation) {
  EXPECT_EQ(round_saturate(0.5f, 127), 0);
  EXPECT_EQ(round_saturate(1.5f, 127), 2);
  EXPECT_EQ(round_saturate(2.5f, 127), 2);
  EXPECT_EQ(round_saturate(-0.5f, 127), 0);
  EXPECT_EQ(round_saturate(-1.5f, 127), -2);
  EXPECT_EQ(round_saturate(-2.5f, 127), -2);
  EXPECT_EQ(round_saturate(126.5f, 127), 126);
  EXPECT_EQ(round_saturate(127.5f, 127), 127);
  EXPECT_EQ(round_saturate(1e9f, 127), 127);
  EXPECT_EQ(round_saturate(-1e9f, 127), -127);  // -128 is never produced
  EXPECT_EQ(round_saturate(-127.5f, 127), -127);
  EXPECT_EQ(round_saturate(6.5f, 7), 6);
  EXPECT_EQ(round_saturate(7.5f, 7), 7);
  EXPECT_EQ(round_saturate(-8.0f, 7), -7);  // int4 -8 is never produced
}

TEST(Int8, DotIsTheExactIntegerSumForEveryLengthAndCode) {
  // Every int8 code, -128 included, at lengths around the vector width.
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> code(-128, 127);
  for (int n : {0, 1, 7, 31, 32, 33, 63, 64, 100, 768, 1031}) {
    std::vector<std::int8_t> a(static_cast<std::size_t>(n)), b(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::int8_t>(code(rng)), b[i] = static_cast<std::int8_t>(code(rng));
    if (n >= 32) std::fill(a.begin(), a.begin() + 32, std::int8_t{-128}), std::fill(b.begin(), b.begin() + 32, std::int8_t{-128});
    std::int64_t want = 0;
    for (std::size_t i = 0; i < a.size(); ++i) want += std::int64_t{a[i]} * std::int64_t{b[i]};
    EXPECT_EQ(quant::dot_int8(a.data(), b.data(), n), want) << n;
  }
}

TEST(Int8, RowsDotIsTheExactIntegerSumWithTails) {
  // Every kernel this CPU has: rows and inputs not a multiple of the tiles (4x4, 2x4),
  // columns not a multiple of the steps (64, 16), every code (-128 included, and runs of
  // -128 and 127 at both ends), against an int64 sum and against dot_int8.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> code(-128, 127);
  for (int rows : {1, 3, 4, 5, 9})
    for (int n : {1, 2, 4, 7})
      for (int cols : {1, 31, 63, 64, 65, 100, 768, 1031}) {
        std::vector<std::int8_t> w(static_cast<std::size_t>(rows) * cols), x(static_cast<std::size_t>(n) * cols);
        for (auto& v : w) v = static_cast<std::int8_t>(code(rng));
        for (auto& v : x) v = static_cast<std::int8_t>(code(rng));
        const std::size_t edge = std::min<std::size_t>(static_cast<std::size_t>(cols), 40);
        std::fill(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(edge), std::int8_t{-128});
        std::fill(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(edge), std::int8_t{-128});
        std::fill(w.end() - static_cast<std::ptrdiff_t>(edge), w.end(), std::int8_t{127});
        std::fill(x.end() - static_cast<std::ptrdiff_t>(edge), x.end(), std::int8_t{-128});
        for (auto kernel : {quant::Int8Rows::best, quant::Int8Rows::vnni, quant::Int8Rows::avx2, quant::Int8Rows::plain}) {
          if (!quant::int8_rows_supported(kernel)) continue;
          std::vector<std::int32_t> got(static_cast<std::size_t>(rows) * n, -1);
          quant::dot_int8_rows(w.data(), rows, x.data(), n, cols, got.data(), kernel);
          for (int r = 0; r < rows; ++r)
            for (int i = 0; i < n; ++i) {
              std::int64_t want = 0;
              for (int j = 0; j < cols; ++j)
                want += std::int64_t{w[static_cast<std::size_t>(r) * cols + j]} *
                      std::int64_t{x[static_cast<std::size_t>(i) * cols + j]};
              const std::int32_t g = got[static_cast<std::size_t>(i) * rows + r];
              ASSERT_EQ(g, want) << rows << "x" << cols << " n " << n << " row " << r << " input " << i << " kernel "
                                 << static_cast<int>(kernel);
              ASSERT_EQ(g, quant::dot_int8(w.data() + static_cast<std::size_t>(r) * cols,
                                           x.data() + static_cast<std::size_t>(i) * cols, cols));
            }
        }
      }
}

TEST(Int8, HandComputedRow) {
  // amax 127 -> scale exactly 1, so the ties below are exact.
  const std::vector<float> w = {127.0f, -2.5f, 3.5f, -127.0f, 0.5f, 1.5f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const Int8Matrix m = quantize_int8(w, 2, 6);
  EXPECT_EQ(m.scale[0], 1.0f);
  EXPECT_EQ(m.scale[1], 0.0f);  // an all-zero row
  const std::vector<int> expect = {127, -2, 4, -127, 0, 2, 0, 0, 0, 0, 0, 0};
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_EQ(m.q[i], expect[i]) << i;
}

TEST(Int8, MatchesDoubleReferenceAndErrorBound) {
  const int rows = 64, cols = 200;
  auto w = gaussian(static_cast<std::size_t>(rows) * cols, 1);
  w[5] = 40.0f;  // an outlier row
  const Int8Matrix m = quantize_int8(w, rows, cols);
  std::vector<float> deq(w.size());
  dequantize(m, deq);
  double err = 0, ref = 0;
  for (int r = 0; r < rows; ++r) {
    double amax = 0;
    for (int c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(static_cast<double>(w[r * cols + c])));
    // The smallest fp16 value >= amax / 127 (Q8_0 holds it exactly; no code exceeds 127).
    const double s = m.scale[r];
    EXPECT_EQ(model::gguf::fp16_to_float(model::gguf::float_to_fp16(m.scale[r])), m.scale[r]);
    EXPECT_GE(s, amax / 127.0 * (1 - 1e-7));
    EXPECT_LE(s, amax / 127.0 * (1 + std::ldexp(1.0, -10)));
    for (int c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r) * cols + c;
      const double v = w[i] / s;
      if (std::fabs(v - std::floor(v) - 0.5) > 1e-4) {
        EXPECT_EQ(m.q[i], ref_round(v, 127)) << r << "," << c;
      }
      EXPECT_LE(std::fabs(deq[i] - w[i]), 0.5 * s * (1 + 1e-5)) << r << "," << c;
      err += (deq[i] - w[i]) * (deq[i] - w[i]);
      ref += static_cast<double>(w[i]) * w[i];
    }
  }
  // Normalized error against its expectation for uniform rounding noise, sum_r cols s_r^2 / 12.
  double expected = 0;
  for (int r = 0; r < rows; ++r) expected += cols * static_cast<double>(m.scale[r]) * m.scale[r] / 12.0;
  EXPECT_LT(err, 1.5 * expected);
  EXPECT_LT(err / ref, 3e-4);  // int8 per-channel budget (gaussian rows, one outlier row)
}

TEST(Int4, HandComputedPacking) {
  // One row of 32: codes c%15 - 7 with amax 3.5, so the fp16 scale is exactly 0.5.
  std::vector<float> w(32);
  for (int c = 0; c < 32; ++c) w[c] = static_cast<float>(c % 15 - 7) * 0.5f;
  const Int4Matrix m = quantize_int4(w, 1, 32, 32);
  ASSERT_EQ(m.scale.size(), 1u);
  EXPECT_EQ(model::gguf::fp16_to_float(m.scale[0]), 0.5f);
  ASSERT_EQ(m.packed.size(), 16u);
  for (int b = 0; b < 16; ++b) {
    const int lo = b % 15 - 7 + 8, hi = (b + 16) % 15 - 7 + 8;
    EXPECT_EQ(m.packed[b], lo | (hi << 4)) << b;
  }
  for (int c = 0; c < 32; ++c) EXPECT_EQ(m.code(0, c), c % 15 - 7);
}

TEST(Int4, GroupsPaddingAndErrorBound) {
  for (int group : {32, 64, 128}) {
    const int rows = 8, cols = 172;  // stories260K's w2: not a multiple of 32
    auto w = gaussian(static_cast<std::size_t>(rows) * cols, 2 + group);
    const Int4Matrix m = quantize_int4(w, rows, cols, group);
    EXPECT_EQ(m.groups(), (cols + group - 1) / group);
    EXPECT_EQ(m.row_bytes(), 96);
    std::vector<float> deq(w.size());
    dequantize(m, deq);
    double err = 0, ref = 0;
    for (int r = 0; r < rows; ++r) {
      for (int k = 0; k < m.groups(); ++k) {
        const int c0 = k * group, c1 = std::min(cols, c0 + group);
        double amax = 0;
        for (int c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(static_cast<double>(w[r * cols + c])));
        const double s = model::gguf::fp16_to_float(m.scale[r * m.groups() + k]);
        EXPECT_NEAR(s, amax / 7.0, amax / 7.0 * 1e-3);  // fp16 rounding
        for (int c = c0; c < c1; ++c) {
          const std::size_t i = static_cast<std::size_t>(r) * cols + c;
          EXPECT_GE(m.code(r, c), -7);
          EXPECT_LE(m.code(r, c), 7);
          EXPECT_LE(std::fabs(deq[i] - w[i]), 0.5 * s * (1 + 1e-5));
          err += (deq[i] - w[i]) * (deq[i] - w[i]);
          ref += static_cast<double>(w[i]) * w[i];
        }
      }
      for (int c = cols; c < 192; ++c) EXPECT_EQ(m.code(r, c), 0);  // padding
    }
    EXPECT_LT(err / ref, group == 32 ? 0.02 : 0.03) << group;
  }
}

TEST(Int4, ScaleExtremes) {
  EXPECT_EQ(int4_scale_f16(0.0f), 0);
  EXPECT_EQ(int4_scale_f16(1e9f), 0x7BFF);  // capped at 65504
  EXPECT_EQ(model::gguf::fp16_to_float(int4_scale_f16(7.0f)), 1.0f);
  // A scale that rounds to an fp16 subnormal still quantizes within -7..7.
  const std::vector<float> w = {1e-7f, -1e-7f, 3e-8f, 0.0f};
  const Int4Matrix m = quantize_int4(w, 1, 4, 32);
  for (int c = 0; c < 4; ++c) EXPECT_LE(std::abs(m.code(0, c)), 7);
}

TEST(Int4, MatchesGgmlQ4_0Dequantization) {
  // With g32 and cols % 32 == 0 our rows are Q4_0 blocks: ggml's dequantizer gives our values.
  const int rows = 4, cols = 64;
  const auto w = gaussian(static_cast<std::size_t>(rows) * cols, 3);
  const Int4Matrix m = quantize_int4(w, rows, cols, 32);
  std::vector<std::uint8_t> blocks;
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < 2; ++k) {
      blocks.push_back(m.scale[r * 2 + k] & 0xFF);
      blocks.push_back(m.scale[r * 2 + k] >> 8);
      for (int b = 0; b < 16; ++b) blocks.push_back(m.packed[r * 32 + k * 16 + b]);
    }
  std::vector<float> ggml(w.size()), ours(w.size());
  model::gguf::dequantize(model::gguf::GgmlType::q4_0, blocks, ggml);
  dequantize(m, ours);
  EXPECT_EQ(ggml, ours);
}

TEST(Activations, DynamicAndStaticSaturation) {
  // amax 127 -> s_x exactly 1, so the ties are exact.
  const std::vector<float> x = {127.0f, -63.5f, 62.5f, -127.0f};
  std::vector<std::int8_t> q(4);
  const float s = quantize_activation_dynamic(x, q);
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], -64);
  EXPECT_EQ(q[2], 62);
  EXPECT_EQ(q[3], -127);
  const std::vector<float> big = {500.0f, -500.0f, 63.5f};
  quantize_activation_static(big, 1.0f, q);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[2], 64);
  std::vector<float> zeros(4, 0.0f);
  EXPECT_EQ(quantize_activation_dynamic(zeros, q), 0.0f);
  EXPECT_EQ(q[0], 0);
}

TEST(Activations, StaticCodesEqualRoundSaturateForEveryKindOfValue) {
  // The vectorized codes (16 at a time, the tail one by one) against round_saturate of the
  // same product: ties both ways, +-0, the clamp edges, infinities, NaN, random values, at
  // lengths around the vector width.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> special = {0.5f,   1.5f,    2.5f,   -0.5f,  -1.5f,  -2.5f,  126.5f, -126.5f, 127.49f, 127.5f,
                                128.0f, -127.5f, -128.f, 1e30f,  -1e30f, inf,    -inf,   nan,     -nan,    0.0f,
                                -0.0f,  1e-40f,  -0.49f, 63.5f,  64.5f,  -63.5f, 3.0f,   -3.0f,   100.2f,  -99.7f};
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 60.0f);
  for (float s_x : {1.0f, 0.37f, 3.0f})
    for (std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17}, std::size_t{30},
                          std::size_t{33}, std::size_t{100}}) {
      std::vector<float> x(n);
      for (std::size_t i = 0; i < n; ++i) x[i] = i < special.size() && n >= special.size() ? special[i] : nd(rng);
      std::vector<std::int8_t> q(n, 99);
      quantize_activation_static(x, s_x, q);
      const float inv = 1.0f / s_x;
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(q[i], quant::round_saturate(x[i] * inv, quant::kInt8Max)) << "x " << x[i] << " s_x " << s_x << " n " << n;
    }
}

TEST(Linear, W8A8IsExactRequantizationOfIntegerProduct) {
  const int rows = 16, cols = 96;
  const auto w = gaussian(static_cast<std::size_t>(rows) * cols, 4);
  const auto x = gaussian(cols, 5, 3.0f);
  const Int8Matrix m = quantize_int8(w, rows, cols);
  std::vector<std::int8_t> qx(cols);
  const float s_x = quantize_activation_dynamic(x, qx);
  std::vector<float> y(rows);
  linear_w8a8(m, qx.data(), s_x, y.data());
  for (int r = 0; r < rows; ++r) {
    long long acc = 0;
    double ref = 0, xw = 0;
    for (int c = 0; c < cols; ++c) {
      acc += static_cast<long long>(m.q[r * cols + c]) * qx[c];
      ref += static_cast<double>(w[r * cols + c]) * x[c];
      xw += std::fabs(static_cast<double>(w[r * cols + c]) * x[c]);
    }
    EXPECT_EQ(y[r], (static_cast<float>(acc) * m.scale[r]) * s_x) << r;  // the contract, bit for bit
    EXPECT_NEAR(y[r], ref, 0.02 * xw) << r;  // and close to the real product
  }
}

TEST(Linear, W4A8GroupsAccumulateInOrder) {
  const int rows = 8, cols = 172, group = 64;
  const auto w = gaussian(static_cast<std::size_t>(rows) * cols, 6);
  const auto x = gaussian(cols, 7);
  const Int4Matrix m = quantize_int4(w, rows, cols, group);
  std::vector<std::int8_t> qx(cols);
  const float s_x = quantize_activation_dynamic(x, qx);
  std::vector<float> y(rows);
  linear_w4a8(m, qx.data(), s_x, y.data());
  for (int r = 0; r < rows; ++r) {
    float sum = 0.0f;
    double ref = 0, xw = 0;
    for (int k = 0; k < m.groups(); ++k) {
      long long acc = 0;
      for (int c = k * group; c < std::min(cols, (k + 1) * group); ++c) acc += m.code(r, c) * qx[c];
      sum = sum + static_cast<float>(acc) * model::gguf::fp16_to_float(m.scale[r * m.groups() + k]);
    }
    for (int c = 0; c < cols; ++c) {
      ref += static_cast<double>(w[r * cols + c]) * x[c];
      xw += std::fabs(static_cast<double>(w[r * cols + c]) * x[c]);
    }
    EXPECT_EQ(y[r], sum * s_x) << r;
    EXPECT_NEAR(y[r], ref, 0.15 * xw) << r;
  }
}

TEST(Quantizers, RejectNonFiniteAndBadGroup) {
  std::vector<float> w = {1.0f, NAN};
  EXPECT_THROW(quantize_int8(w, 1, 2), std::invalid_argument);
  std::vector<float> ok = {1.0f, 2.0f};
  EXPECT_THROW(quantize_int4(ok, 1, 2, 16), std::invalid_argument);
}

TEST(Quantizers, Deterministic) {
  const auto w = gaussian(64 * 128, 8);
  EXPECT_EQ(quantize_int8(w, 64, 128).q, quantize_int8(w, 64, 128).q);
  EXPECT_EQ(quantize_int4(w, 64, 128, 32).packed, quantize_int4(w, 64, 128, 32).packed);
}

}  // namespace
