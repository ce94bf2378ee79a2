// The RTL requantizer (rtl/fpgallm_requant_i8.v) in Verilator against the C model
// (kernels::requantize_i8 through golden.hpp), bit-exact on every lane: on its own over
// random accumulators, row scales and configurations chosen to reach every case of the
// binary32 datapath (rounding of the int -> float conversion, ties, subnormal and
// overflowing products, infinities, NaN, a zero output scale) and of the saturation; and
// behind the matrix unit (rtl/fpgallm_matrix_unit_q8.v) for whole matrix-vector
// instructions, with its cycles.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <limits>
#include <numeric>

#include "Vrequant_i8_4.h"
#include "golden.hpp"
#include "harness.hpp"
#include "hw/matrix_unit_rtl.hpp"
#include "rtl_shapes.hpp"

namespace {

constexpr int kLanes = 4;  // PE of the standalone model (tests/rtl/CMakeLists.txt)

float from_bits(std::uint32_t b) { return kernels::bits_to_float(b); }

// Accumulators and row scales that reach every branch of the datapath.
struct Case {
  std::vector<std::int32_t> acc;
  std::vector<float> w_scale;
};

Case random_case(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, 9);
  std::uniform_int_distribution<std::uint32_t> bits;
  std::uniform_int_distribution<int> small(-300, 300), exp_mid(100, 140), exp_tiny(1, 30), sign(0, 1);
  Case c;
  for (int i = 0; i < n; ++i) {
    std::int32_t a;
    switch (pick(rng) % 5) {
      case 0: a = static_cast<std::int32_t>(bits(rng)); break;   // full range: conversion rounds
      case 1: a = small(rng); break;                                // exact, ties with scale 0.5
      case 2: a = (1 << 24) + small(rng) * (sign(rng) ? 1 : -1); break;
      case 3: a = -(1 << 25) - 3 * small(rng); break;
      default: {
        const std::int32_t ext[] = {INT_MIN, INT_MAX, 0, 1, -1, INT_MIN + 1, (1 << 24) + 1, -(1 << 24) - 3};
        a = ext[bits(rng) % 8];
      }
    }
    c.acc.push_back(a);
    std::uint32_t w;
    switch (pick(rng)) {
      case 0: case 1: case 2:   // ordinary normal scales
        w = (std::uint32_t(sign(rng)) << 31) | (std::uint32_t(exp_mid(rng)) << 23) | (bits(rng) & 0x7fffffu);
        break;
      case 3: w = kernels::float_to_bits(0.5f); break;
      case 4: w = kernels::float_to_bits(sign(rng) ? 1.0f : -0.25f); break;
      case 5: w = bits(rng) & 0x807fffffu; break;   // subnormal (or zero)
      case 6: w = (std::uint32_t(exp_tiny(rng)) << 23) | (bits(rng) & 0x7fffffu); break;  // products go subnormal
      case 7: w = bits(rng); break;                  // any pattern: infinities and NaNs included
      case 8: {
        const std::uint32_t sp[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00000000u, 0x80000000u, 0x7f7fffffu};
        w = sp[bits(rng) % 6];
        break;
      }
      default: w = (std::uint32_t(200 + bits(rng) % 54) << 23) | (bits(rng) & 0x7fffffu); break;  // huge: overflow
    }
    c.w_scale.push_back(from_bits(w));
  }
  return c;
}

struct RequantTrace {
  std::vector<std::int8_t> q;
  std::vector<std::int64_t> a_cycles, q_cycles;
};

// One configuration, every accumulator word through the standalone requantizer, with
// random gaps on both inputs and a sink refusing `refuse` of the cycles.
RequantTrace run_requant(const Case& c, float x_scale, float out_scale, double gap, double refuse, unsigned seed) {
  VerilatedContext ctx;
  Vrequant_i8_4 top{&ctx};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const std::size_t words = c.acc.size() / kLanes;
  top.cfg_x_scale = rtl_tb::float_bits(x_scale);
  top.cfg_inv_out_scale = rtl_tb::inv_out_scale_bits(out_scale);
  top.a_valid = top.s_valid = top.q_ready = 0;
  rtl_tb::reset(top);
  RequantTrace r;
  std::size_t ai = 0, si = 0;
  for (std::int64_t cycle = 0; r.q.size() < words * kLanes && cycle < 64 + 16 * std::int64_t(words); ++cycle) {
    top.a_valid = ai < words && u(rng) >= gap;
    top.s_valid = si < words && u(rng) >= gap;
    top.q_ready = u(rng) >= refuse;
    for (int k = 0; k < kLanes; ++k) {
      if (ai < words) rtl_tb::set_field(top.a_data, k * 32, 32, static_cast<std::uint32_t>(c.acc[ai * kLanes + k]));
      if (si < words) rtl_tb::set_field(top.s_data, k * 32, 32, rtl_tb::float_bits(c.w_scale[si * kLanes + k]));
    }
    top.clk = 0;
    top.eval();
    const bool afire = top.a_valid && top.a_ready, sfire = top.s_valid && top.s_ready;
    if (afire) r.a_cycles.push_back(cycle);
    if (top.q_valid && top.q_ready) {
      for (int k = 0; k < kLanes; ++k) r.q.push_back(static_cast<std::int8_t>(rtl_tb::get_field(top.q_data, k * 8, 8)));
      r.q_cycles.push_back(cycle);
    }
    top.clk = 1;
    top.eval();
    ai += afire;
    si += sfire;
  }
  top.final();
  return r;
}

std::size_t mismatches(const std::vector<std::int8_t>& got, const std::vector<std::int8_t>& want) {
  std::size_t bad = got.size() > want.size() ? got.size() - want.size() : want.size() - got.size();
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) bad += got[i] != want[i];
  return bad;
}

// Configurations (x_scale, out_scale): plain, exact ties, saturating, products that go
// subnormal or overflow, a zero / infinite / NaN output scale.
const std::pair<float, float> kConfigs[] = {
    {1.0f, 1.0f},        {1.0f, 2.0f},           {0.0078125f, 0.03125f}, {3.1e-3f, 7.7e-4f},
    {1e-30f, 1e-20f},    {1e30f, 1e5f},          {1.0f, 0.0f},           {1.0f, -0.0f},
    {2.5f, std::numeric_limits<float>::infinity()}, {1.0f, std::numeric_limits<float>::quiet_NaN()},
    {1.0f, 1e-40f},      {std::numeric_limits<float>::denorm_min(), 1.0f}, {-0.37f, 1.3e-2f}};

TEST(RtlRequant, BitExactOnEveryCase) {
  const Case c = random_case(4096 * kLanes, 2024u);
  std::size_t sat_pos = 0, sat_neg = 0, inner = 0, zero = 0, total = 0;
  unsigned seed = 1;
  for (const auto& [xs, os] : kConfigs) {
    rtl_tb::Requant rq{c.w_scale, xs, os};
    const std::vector<std::int8_t> want = rtl_tb::kernel_requant(c.acc, rq);
    const RequantTrace r = run_requant(c, xs, os, 0.2, 0.3, seed++);
    ASSERT_EQ(r.q.size(), want.size()) << "x_scale " << xs << " out_scale " << os;
    EXPECT_EQ(mismatches(r.q, want), 0u) << "x_scale " << xs << " out_scale " << os;
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(int(r.q[i]), int(want[i])) << "lane " << i << " acc " << c.acc[i] << " w_scale " << c.w_scale[i]
                                           << " x_scale " << xs << " out_scale " << os;
    for (std::int8_t v : want) {
      sat_pos += v == 127;
      sat_neg += v == -127;
      inner += v != 0 && v > -127 && v < 127;
      zero += v == 0;
    }
    total += want.size();
  }
  // The cases the test is for were reached, each in at least 1% of the lanes: saturation
  // both ways, codes inside the range, zeros (NaN, a zero output scale, |v| < 1/2).
  EXPECT_GT(sat_pos, total / 100);
  EXPECT_GT(sat_neg, total / 100);
  EXPECT_GT(inner, total / 100);
  EXPECT_GT(zero, total / 100);
}

// Exact ties: acc * 0.5 = k + 1/2 rounds to the even neighbour, and -128 is never produced.
TEST(RtlRequant, TiesToEvenAndSymmetricClamp) {
  Case c;
  for (int a = -260; a < 260; ++a) {
    c.acc.push_back(a);
    c.w_scale.push_back(0.5f);
  }
  const RequantTrace r = run_requant(c, 1.0f, 1.0f, 0.0, 0.0, 3u);
  ASSERT_EQ(r.q.size(), c.acc.size());
  for (std::size_t i = 0; i < c.acc.size(); ++i) {
    // Hand-computed: round half to even of a / 2, clamped to [-127, 127].
    const int a = c.acc[i];
    int want = a / 2;                             // a even: exact
    if (a % 2 != 0) want = (a / 2) % 2 == 0 ? a / 2 : a / 2 + (a > 0 ? 1 : -1);  // k + 1/2 -> even
    want = std::max(-127, std::min(127, want));
    EXPECT_EQ(int(r.q[i]), want) << "acc " << a;
  }
}

// Ties inside the binary32 steps, built so that their rounding decides the code: with
// x_scale = inv = 1, q = rne(fl(fl(acc) * w_scale)) and fl(...) lands on k + 1/2 exactly
// only if the step rounds half to even; rounding half up would give k + 1 for even k.
//   product ties: acc = A (small odd), w_scale = W with A * W = k + 1/2 + ulp/2 exactly;
//   conversion ties: acc = 2^(24+j) + 2^j rounds to 2^(24+j), w_scale = (2k + 1) 2^-(25+j).
// Expected by hand: round half to even of +-(k + 1/2), i.e. the even one of k, k + 1.
TEST(RtlRequant, TiesInsideTheFloatSteps) {
  std::mt19937 rng(77u);
  std::uniform_int_distribution<int> kk(0, 126), aa(1, 31), sg(0, 1);
  Case c;
  std::vector<int> want;
  while (c.acc.size() < 2048) {
    const int k = kk(rng), sign = sg(rng) ? -1 : 1;
    const double half = k + 0.5;
    const double ulp = std::ldexp(1.0, std::ilogb(half) - 23);
    const int a = 2 * aa(rng) + 1;
    const double w = double(float((half + ulp / 2) / a));
    if (w * a != half + ulp / 2) continue;  // (products of 24 x 6 bits are exact in double)
    c.acc.push_back(sign * a);
    c.w_scale.push_back(float(w));
    want.push_back(sign * (k % 2 == 0 ? k : k + 1));
  }
  for (int j = 0; j < 6; ++j)
    for (int k = 0; k < 127; k += 2)
      for (int sign : {1, -1}) {
        c.acc.push_back(sign * ((1 << (24 + j)) + (1 << j)));
        c.w_scale.push_back(float(std::ldexp(2.0 * k + 1, -(25 + j))));
        want.push_back(sign * k);
      }
  while (c.acc.size() % kLanes != 0) {
    c.acc.push_back(0);
    c.w_scale.push_back(1.0f);
    want.push_back(0);
  }
  const rtl_tb::Requant rq{c.w_scale, 1.0f, 1.0f};
  const std::vector<std::int8_t> model = rtl_tb::kernel_requant(c.acc, rq);
  const RequantTrace r = run_requant(c, 1.0f, 1.0f, 0.0, 0.0, 5u);
  ASSERT_EQ(r.q.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(int(model[i]), want[i]) << "C model, acc " << c.acc[i] << " w_scale " << c.w_scale[i];
    ASSERT_EQ(int(r.q[i]), want[i]) << "RTL, acc " << c.acc[i] << " w_scale " << c.w_scale[i];
  }
}

TEST(RtlRequant, FlippedGoldenBitFails) {
  const Case c = random_case(64 * kLanes, 7u);
  rtl_tb::Requant rq{c.w_scale, 3.1e-3f, 7.7e-4f};
  std::vector<std::int8_t> want = rtl_tb::kernel_requant(c.acc, rq);
  const RequantTrace r = run_requant(c, rq.x_scale, rq.out_scale, 0.0, 0.0, 9u);
  ASSERT_EQ(mismatches(r.q, want), 0u);
  want[want.size() / 2] ^= 1 << 3;
  EXPECT_EQ(mismatches(r.q, want), 1u);
}

TEST(RtlRequant, LatencyWithoutStalls) {
  const Case c = random_case(32 * kLanes, 11u);
  const RequantTrace r = run_requant(c, 1.0f, 1.0f, 0.0, 0.0, 1u);
  ASSERT_EQ(r.q_cycles.size(), r.a_cycles.size());
  for (std::size_t i = 0; i < r.a_cycles.size(); ++i) {
    EXPECT_EQ(r.a_cycles[i], std::int64_t(i));  // one word per cycle
    EXPECT_EQ(r.q_cycles[i] - r.a_cycles[i], hw::rtl_requant_latency());
  }
}

// ------------------------------------------------------------ behind the matrix unit

// Row scales and an output scale that put about a fifth of the codes in saturation.
rtl_tb::Requant saturating_requant(const rtl_tb::Problem& p, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> ws(0.5f / 127, 1.5f / 127);
  rtl_tb::Requant rq;
  for (int r = 0; r < p.rows; ++r) rq.w_scale.push_back(ws(rng));
  rq.x_scale = 1.0f / 127;
  // |acc| has a spread of about 73 * 74 * sqrt(cols); codes at that spread are about 100.
  rq.out_scale = float(73.0 * 74.0 * std::sqrt(double(p.cols)) / (127.0 * 127.0) / 100.0);
  return rq;
}

template <class Model, int PE, int SIMD, int TR, int TC>
void check_q8(int rows, int cols) {
  const auto p = rtl_tb::random_problem(rows, cols, 8, 4321u + PE + SIMD);
  const rtl_tb::Requant rq = saturating_requant(p, 17u);
  const rtl_tb::Streams s = rtl_tb::make_streams_q8<PE, SIMD, TR, TC>(p, rq);
  const rtl_tb::Trace t = rtl_tb::run<Model, PE, SIMD, 8, 8>(s);
  ASSERT_FALSE(t.timed_out);
  ASSERT_EQ(t.results.size(), s.golden.size());
  std::size_t sat = 0;
  for (std::size_t i = 0; i < s.golden.size(); ++i)
    for (int q = 0; q < PE; ++q) {
      ASSERT_EQ(t.results[i][q], s.golden[i][q]) << "result word " << i << " row " << q;
      sat += s.golden[i][q] == 127 || s.golden[i][q] == -127;
    }
  EXPECT_GT(sat, 0u) << "no saturating row: the test would not see the saturation";
  EXPECT_LT(sat, std::size_t(rows)) << "every row saturates: the test would not see the rounding";
  auto flipped = s.golden;
  flipped[flipped.size() / 2][0] ^= 1 << 2;
  EXPECT_EQ(rtl_tb::mismatches(t, flipped), 1u);
  // Cycles: one weight word per cycle, the last code word the unit's latency plus the
  // requantizer's after the last weight word.
  const std::int64_t steps = std::accumulate(s.tile_steps.begin(), s.tile_steps.end(), std::int64_t(0));
  arch::MatrixUnit mu;
  mu.rows = PE;
  mu.cols = SIMD;
  EXPECT_EQ(t.w_cycles.back() - t.w_cycles.front() + 1, steps);
  EXPECT_EQ(t.y_cycles.back() - t.w_cycles.back(), hw::rtl_matrix_unit_latency(mu) + hw::rtl_requant_latency());
  // Random gaps and a refusing sink: still bit-exact.
  const rtl_tb::Trace ts = rtl_tb::run<Model, PE, SIMD, 8, 8>(s, rtl_tb::Stalls{0.3, 0.3, 0.4, 5u});
  ASSERT_FALSE(ts.timed_out);
  EXPECT_EQ(rtl_tb::mismatches(ts, s.golden), 0u);
}

#define FPGALLM_RTL_Q8_TESTS(name, pe, simd, tr, tc, rows, cols) \
  TEST(RtlMatrixUnitQ8, BitExactSaturating_##name) { check_q8<V##name, pe, simd, tr, tc>(rows, cols); }
FPGALLM_RTL_Q8_SHAPES(FPGALLM_RTL_Q8_TESTS)

}  // namespace
