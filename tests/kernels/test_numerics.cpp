// The scalar numerics of the kernels against independent references: std::nearbyint for
// ties-to-even, the compiler's _Float16 for binary16 conversions, and exp in double
// precision for the table exp (error stated in ulp and asserted).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/attention.hpp"
#include "kernels/numerics.hpp"

namespace {

double ulp_of(float v) {
  const float a = std::fabs(v);
  return static_cast<double>(std::nextafter(a, INFINITY) - a);
}

TEST(Numerics, RoundHalfEvenMatchesNearbyint) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-300.0f, 300.0f);
  for (float v : {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 0.49999997f, 3.0f})
    EXPECT_EQ(kernels::round_half_even(v), std::nearbyint(v)) << v;
  for (int i = 0; i < 200000; ++i) {
    const float v = u(rng);
    ASSERT_EQ(kernels::round_half_even(v), std::nearbyint(v)) << v;
  }
  for (int k = -600; k <= 600; ++k) {  // every half-integer in range
    const float v = static_cast<float>(k) * 0.5f;
    ASSERT_EQ(kernels::round_half_even(v), std::nearbyint(v)) << v;
  }
}

TEST(Numerics, SaturatingInt8IsSymmetric) {
  EXPECT_EQ(kernels::saturate_round_i8(127.4f), 127);
  EXPECT_EQ(kernels::saturate_round_i8(127.5f), 127);
  EXPECT_EQ(kernels::saturate_round_i8(1e9f), 127);
  EXPECT_EQ(kernels::saturate_round_i8(-1e9f), -127);
  EXPECT_EQ(kernels::saturate_round_i8(-127.6f), -127);
  EXPECT_EQ(kernels::saturate_round_i8(-2.5f), -2);
  EXPECT_EQ(kernels::saturate_round_i8(NAN), 0);
}

TEST(Numerics, HalfConversionsMatchTheCompilersFloat16) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    _Float16 ref;
    std::memcpy(&ref, &bits, 2);
    const float f = kernels::half_to_float(bits);
    if (std::isnan(static_cast<float>(ref))) {
      ASSERT_TRUE(std::isnan(f));
      continue;
    }
    ASSERT_EQ(f, static_cast<float>(ref)) << h;
    ASSERT_EQ(kernels::float_to_half(f), bits) << h;  // round trip of every finite half
  }
  std::mt19937 rng(2);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 300000; ++i) {
    const float f = kernels::bits_to_float(any(rng));
    if (std::isnan(f)) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    std::uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    ASSERT_EQ(kernels::float_to_half(f), rb) << f;
  }
}

// Bound stated in docs/accelerator.md: the table exp is within 2 ulp of exp (computed in
// double) for every input in [-87, 88], for each supported table size.
template <int BITS>
double max_exp_ulp_error() {
  double worst = 0;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-87.0f, 88.0f);
  auto check = [&](float x) {
    const double ref = std::exp(static_cast<double>(x));
    const float got = kernels::exp_table<BITS>(x);
    worst = std::max(worst, std::fabs(static_cast<double>(got) - ref) / ulp_of(static_cast<float>(ref)));
  };
  for (int i = 0; i < 400000; ++i) check(u(rng));
  for (float x = -20.0f; x <= 20.0f; x += 0.0009765625f) check(x);  // the softmax / SiLU range, densely
  return worst;
}

TEST(Numerics, TableExpIsWithinTwoUlp) {
  EXPECT_LE(max_exp_ulp_error<6>(), 2.0);
  EXPECT_LE(max_exp_ulp_error<8>(), 2.0);
  EXPECT_LE(max_exp_ulp_error<10>(), 2.0);
  EXPECT_EQ(kernels::exp_table<8>(0.0f), 1.0f);  // the online softmax relies on exp(0) == 1
  EXPECT_EQ(kernels::exp_table<8>(-INFINITY), 0.0f);
  EXPECT_EQ(kernels::exp_table<8>(-100.0f), 0.0f);
  EXPECT_TRUE(std::isfinite(kernels::exp_table<8>(1000.0f)));
}

}  // namespace
