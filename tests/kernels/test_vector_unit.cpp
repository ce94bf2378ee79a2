// The vector unit against double-precision references on random inputs of several
// lengths. Bounds (u = 2^-24, the binary32 unit roundoff; d = n/LANES + log2(LANES), the
// depth of a lane-partitioned sum):
//   lane sums of positive terms     relative error <= d u
//   RMSNorm, LayerNorm              |out - ref| <= (d + 8) u |ref| (+ the variance's
//                                   cancellation for LayerNorm: (d + 8) u |x - mean| * inv)
//   softmax                         relative error <= (d + 10 + |x - max|) u per element
//   SiLU-gate product, GELU         relative error <= 12 u (table exp within 2 ulp)
//   RoPE                            |out - ref| <= 4 u (|v0| + |v1|)
//   residual add, quantization, argmax, max: exact
// and the bound between two LANES settings is the sum of their bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/vector_unit.hpp"

namespace {

constexpr double kU = 1.0 / 16777216.0;  // 2^-24
using V8 = kernels::VectorUnitConfig<8, 8, 8192>;
using V16 = kernels::VectorUnitConfig<16, 8, 8192>;
using V64 = kernels::VectorUnitConfig<64, 8, 8192>;
const int kLengths[] = {1, 7, 64, 172, 768, 2048, 5000};

double depth(int n, int lanes) { return std::ceil(double(n) / lanes) + std::log2(double(lanes)); }

std::vector<float> random_vec(int n, unsigned seed, float lo = -3.0f, float hi = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

template <class CFG>
void check_rmsnorm(int n, unsigned seed) {
  auto x = random_vec(n, seed), g = random_vec(n, seed + 1, 0.5f, 2.0f);
  std::vector<float> out(x.size());
  kernels::rmsnorm<CFG>(out.data(), x.data(), g.data(), n, 1e-5f);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double inv = 1.0 / std::sqrt(ss / n + double(1e-5f));
  const double bound = (depth(n, CFG::lanes) + 8) * kU;
  for (int i = 0; i < n; ++i) {
    const double ref = double(g[i]) * x[i] * inv;
    ASSERT_LE(std::fabs(out[i] - ref), bound * std::fabs(ref) + 1e-30) << "n=" << n << " i=" << i;
  }
}

TEST(VectorUnit, RmsNormWithinBound) {
  unsigned seed = 100;
  for (int n : kLengths) {
    check_rmsnorm<V8>(n, seed);
    check_rmsnorm<V16>(n, seed);
    check_rmsnorm<V64>(n, seed);
    seed += 2;
  }
}

TEST(VectorUnit, LayerNormWithinBound) {
  unsigned seed = 200;
  for (int n : kLengths) {
    auto x = random_vec(n, seed, 1.0f, 4.0f), g = random_vec(n, seed + 1), b = random_vec(n, seed + 2);
    std::vector<float> out(x.size());
    kernels::layernorm<V16>(out.data(), x.data(), g.data(), b.data(), n, 1e-5f);
    double mean = 0;
    for (float v : x) mean += v;
    mean /= n;
    double var = 0;
    for (float v : x) var += (v - mean) * (v - mean);
    var /= n;
    const double inv = 1.0 / std::sqrt(var + double(1e-5f));
    const double bound = (depth(n, 16) + 8) * kU;
    for (int i = 0; i < n; ++i) {
      const double centered = (x[i] - mean) * inv * g[i];
      const double ref = centered + b[i];
      // The mean's error moves every centred value by up to d u |mean| * inv.
      const double tol = bound * (std::fabs(centered) + std::fabs(b[i]) + std::fabs(mean) * inv * std::fabs(g[i]));
      ASSERT_LE(std::fabs(out[i] - ref), tol + 1e-30) << "n=" << n << " i=" << i;
    }
    seed += 3;
  }
}

TEST(VectorUnit, SoftmaxWithinBound) {
  unsigned seed = 300;
  for (int n : kLengths) {
    auto x = random_vec(n, seed++, -12.0f, 12.0f);
    std::vector<float> out = x;
    kernels::softmax<V16>(out.data(), n);
    double m = x[0];
    for (float v : x) m = std::max(m, double(v));
    double s = 0;
    for (float v : x) s += std::exp(double(v) - m);
    double total = 0;
    for (int i = 0; i < n; ++i) {
      const double ref = std::exp(double(x[i]) - m) / s;
      // x - max is rounded once: a relative error of |x - max| u in the exponential.
      const double bound = (depth(n, 16) + 10 + std::fabs(x[i] - m)) * kU;
      ASSERT_LE(std::fabs(out[i] - ref), bound * ref) << "n=" << n << " i=" << i;
      total += out[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST(VectorUnit, ActivationsWithinBound) {
  unsigned seed = 400;
  for (int n : kLengths) {
    auto gate = random_vec(n, seed, -15.0f, 15.0f), up = random_vec(n, seed + 1);
    std::vector<float> out = gate;
    kernels::swiglu<V16>(out.data(), up.data(), n);
    std::vector<float> gel = gate;
    kernels::gelu<V16>(gel.data(), n);
    for (int i = 0; i < n; ++i) {
      const double g = gate[i];
      const double ref = g / (1.0 + std::exp(-g)) * up[i];
      ASSERT_LE(std::fabs(out[i] - ref), 12 * kU * std::fabs(ref) + 1e-37) << g;
      const double u = 0.7978845608028654 * (g + 0.044715 * g * g * g);
      const double gref = 0.5 * g * (1.0 + std::tanh(u));
      // tanh near -1 cancels in 1 + tanh: bound relative to 0.5 |x| instead.
      ASSERT_LE(std::fabs(gel[i] - gref), 12 * kU * (std::fabs(gref) + 0.5 * std::fabs(g)) + 1e-37) << g;
    }
    seed += 2;
  }
}

TEST(VectorUnit, RopeWithinBound) {
  const int head = 64;
  for (int pos : {0, 1, 17, 511, 4000}) {
    auto v = random_vec(head, 500 + pos);
    std::vector<float> table(head), out = v;
    for (int i = 0; i < head; i += 2) {
      const double freq = 1.0 / std::pow(10000.0, double(i) / head);
      table[i] = static_cast<float>(std::cos(pos * freq));
      table[i + 1] = static_cast<float>(std::sin(pos * freq));
    }
    kernels::rope<V16>(out.data(), table.data(), head);
    for (int i = 0; i < head; i += 2) {
      const double c = table[i], s = table[i + 1];
      const double r0 = v[i] * c - v[i + 1] * s, r1 = v[i] * s + v[i + 1] * c;
      const double tol = 4 * kU * (std::fabs(v[i]) + std::fabs(v[i + 1]));
      ASSERT_LE(std::fabs(out[i] - r0), tol);
      ASSERT_LE(std::fabs(out[i + 1] - r1), tol);
    }
  }
}

TEST(VectorUnit, ExactOperations) {
  unsigned seed = 600;
  for (int n : kLengths) {
    auto x = random_vec(n, seed, -50.0f, 50.0f), y = random_vec(n, seed + 1);
    // Residual add: one IEEE addition per element.
    auto sum = x;
    kernels::residual_add<V16>(sum.data(), y.data(), n);
    for (int i = 0; i < n; ++i) ASSERT_EQ(sum[i], x[i] + y[i]);
    // Dynamic quantization: s = amax / 127, q = sat(nearbyint(x * (1 / s)), 127).
    std::vector<kernels::i8> q(x.size());
    const float s = kernels::quantize_dynamic<V16>(q.data(), x.data(), n);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    ASSERT_EQ(s, amax / 127.0f);
    const float inv = 1.0f / s;
    for (int i = 0; i < n; ++i) {
      const float r = std::nearbyint(x[i] * inv);
      ASSERT_EQ(q[i], static_cast<int>(std::min(127.0f, std::max(-127.0f, r))));
    }
    // Argmax: the first maximum, for every lane count (a tie planted late and early).
    x[n / 2] = 100.0f;
    x[n - 1] = 100.0f;
    EXPECT_EQ(kernels::argmax<V8>(x.data(), n), n / 2);
    EXPECT_EQ(kernels::argmax<V16>(x.data(), n), n / 2);
    EXPECT_EQ(kernels::argmax<V64>(x.data(), n), n / 2);
    seed += 2;
  }
  std::vector<kernels::i8> q(4, 9);
  const float zeros[4] = {0, 0, 0, 0};
  EXPECT_EQ(kernels::quantize_dynamic<V8>(q.data(), zeros, 4), 0.0f);
  for (auto c : q) EXPECT_EQ(c, 0);
}

TEST(VectorUnit, LaneCountChangesSumsOnlyWithinTheBound) {
  unsigned seed = 700;
  for (int n : kLengths) {
    auto x = random_vec(n, seed++);
    const float d8 = kernels::sum_squares<V8>(x.data(), 0.0f, n);
    const float d64 = kernels::sum_squares<V64>(x.data(), 0.0f, n);
    double ref = 0;
    for (float v : x) ref += double(v) * v;
    EXPECT_LE(std::fabs(d8 - ref), depth(n, 8) * kU * ref);
    EXPECT_LE(std::fabs(d64 - ref), depth(n, 64) * kU * ref);
    EXPECT_LE(std::fabs(double(d8) - d64), (depth(n, 8) + depth(n, 64)) * kU * ref);
  }
}

}  // namespace
