// The RTL matrix unit (rtl/fpgallm_matrix_unit.v) in Verilator against the C model
// (kernels::matmul_w8a8 / matmul_w4a8 through golden.hpp): every result word bit-exact,
// a flipped golden bit caught, and cycles per tile and per instruction equal to the
// schedule of hw::matrix_unit_tile_steps plus the stated latency.
#include <gtest/gtest.h>

#include <numeric>

#include "golden.hpp"
#include "harness.hpp"
#include "hw/matrix_unit_rtl.hpp"
#include "rtl_shapes.hpp"

namespace {

using rtl_tb::Stalls;
using rtl_tb::Streams;
using rtl_tb::Trace;

// The pipeline depth `fpgallm plan` writes into a design for a unit of `cols` columns; the
// RTL must not be deeper.
int planned_pipeline_depth(int cols) { return arch::hls_matrix_unit_depth(cols); }

template <class Model, int PE, int SIMD, int WBITS, int TR, int TC, int G>
void check_bit_exact(int rows, int cols) {
  const auto p = rtl_tb::random_problem(rows, cols, WBITS, 1234u + PE * 7 + SIMD);
  const Streams s = rtl_tb::make_streams<PE, SIMD, WBITS, TR, TC, G>(p);
  const Trace t = rtl_tb::run<Model, PE, SIMD, WBITS>(s);
  ASSERT_FALSE(t.timed_out);
  ASSERT_EQ(t.results.size(), s.golden.size());
  for (std::size_t i = 0; i < s.golden.size(); ++i)
    for (int q = 0; q < PE; ++q)
      ASSERT_EQ(t.results[i][q], s.golden[i][q]) << "result word " << i << " row " << q;
  EXPECT_EQ(rtl_tb::mismatches(t, s.golden), 0u);
  // The comparison can fail: one flipped bit of one golden word is one mismatch.
  auto flipped = s.golden;
  flipped[flipped.size() / 2][PE - 1] ^= 1 << 5;
  EXPECT_EQ(rtl_tb::mismatches(t, flipped), 1u);
}

template <class Model, int PE, int SIMD, int WBITS, int TR, int TC, int G>
void check_cycles(int rows, int cols) {
  const auto p = rtl_tb::random_problem(rows, cols, WBITS, 99u);
  const Streams s = rtl_tb::make_streams<PE, SIMD, WBITS, TR, TC, G>(p);
  const Trace t = rtl_tb::run<Model, PE, SIMD, WBITS>(s);
  ASSERT_FALSE(t.timed_out);
  ASSERT_EQ(rtl_tb::mismatches(t, s.golden), 0u);
  arch::MatrixUnit mu;
  mu.rows = PE;
  mu.cols = SIMD;
  mu.weight_bits = WBITS;
  // Per tile: the cycles between the first weight words of consecutive tiles equal the
  // tile's schedule steps, computed from the tile's own rows and columns.
  std::size_t word = 0;
  for (std::size_t i = 0; i < s.tile_steps.size(); ++i) {
    const int rt = int(i) / ((cols + TC - 1) / TC), ct = int(i) % ((cols + TC - 1) / TC);
    const std::int64_t tr = std::min(TR, rows - rt * TR), tc = std::min(TC, cols - ct * TC);
    const std::int64_t steps = hw::matrix_unit_tile_steps(mu, tr, tc, 1);
    ASSERT_EQ(s.tile_steps[i], steps) << "tile " << i;
    const std::size_t next = word + std::size_t(steps);
    const std::int64_t end = next < t.w_cycles.size() ? t.w_cycles[next] : t.w_cycles.back() + 1;
    EXPECT_EQ(end - t.w_cycles[word], steps) << "tile " << i;
    word = next;
  }
  ASSERT_EQ(word, t.w_cycles.size());
  // Per instruction: first weight word to last result word.
  const std::int64_t total = std::accumulate(s.tile_steps.begin(), s.tile_steps.end(), std::int64_t(0));
  const int latency = hw::rtl_matrix_unit_latency(mu);
  EXPECT_EQ(t.y_cycles.back() - t.w_cycles.front() + 1, total + latency);
  EXPECT_EQ(t.y_cycles.back() - t.w_cycles.back(), latency);
  EXPECT_LE(latency, planned_pipeline_depth(SIMD));
}

template <class Model, int PE, int SIMD, int WBITS, int TR, int TC, int G>
void check_stalls(int rows, int cols) {
  const auto p = rtl_tb::random_problem(rows, cols, WBITS, 7u);
  const Streams s = rtl_tb::make_streams<PE, SIMD, WBITS, TR, TC, G>(p);
  const Trace t = rtl_tb::run<Model, PE, SIMD, WBITS>(s, Stalls{0.3, 0.3, 0.4, 5u});
  ASSERT_FALSE(t.timed_out);
  EXPECT_EQ(rtl_tb::mismatches(t, s.golden), 0u);
  EXPECT_GT(t.y_cycles.back() - t.w_cycles.front() + 1,
            std::accumulate(s.tile_steps.begin(), s.tile_steps.end(), std::int64_t(0)));
}

#define FPGALLM_RTL_TESTS(name, pe, simd, wbits, tr, tc, g, rows, cols)                                     \
  TEST(RtlMatrixUnit, BitExact_##name) { check_bit_exact<V##name, pe, simd, wbits, tr, tc, g>(rows, cols); } \
  TEST(RtlMatrixUnit, Cycles_##name) { check_cycles<V##name, pe, simd, wbits, tr, tc, g>(rows, cols); }      \
  TEST(RtlMatrixUnit, Backpressure_##name) { check_stalls<V##name, pe, simd, wbits, tr, tc, g>(rows, cols); }
FPGALLM_RTL_SHAPES(FPGALLM_RTL_TESTS)

}  // namespace
