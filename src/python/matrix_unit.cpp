#include "python/matrix_unit.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#include <omp.h>

#include "engine/transformer.hpp"
#if FPGALLM_HAVE_KERNELS
#include "kernels/matrix_unit.hpp"
#include "kernels/vector_unit.hpp"
#include "quant/quant.hpp"
#endif

namespace fpgallm_python {

namespace {

// The most threads a call may ask for: far above any machine's cores, far below what
// creating threads could survive.
constexpr int kMaxThreads = 1024;

int thread_count(int threads, long work) {
  check_threads(threads);
  if (work < 65536) return 1;
  return threads > 0 ? threads : 0;
}

}  // namespace

void check_threads(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    throw std::invalid_argument("threads=" + std::to_string(threads) + " must be 0 (every core) or 1.." + std::to_string(kMaxThreads));
}

void quantize_rows(const float* x, int rows, int cols, std::int8_t* q, float* scales) {
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<std::size_t>(r) * cols;
    std::int8_t* out = q + static_cast<std::size_t>(r) * cols;
    float absmax = 0.0f;
    for (int j = 0; j < cols; ++j) absmax = std::max(absmax, std::fabs(row[j]));
    const float scale = absmax / static_cast<float>(kInt8Max);
    scales[r] = scale;
    if (scale == 0.0f) {
      std::fill(out, out + cols, std::int8_t{0});
      continue;
    }
    const float inv = 1.0f / scale;
    for (int j = 0; j < cols; ++j) {
      // nearbyint rounds half to even in the default rounding mode.
      const float v = std::nearbyint(row[j] * inv);
      out[j] = static_cast<std::int8_t>(std::clamp(v, -static_cast<float>(kInt8Max), static_cast<float>(kInt8Max)));
    }
  }
}

void matmul_int8_int32(const std::int8_t* a, const std::int8_t* b, std::int32_t* acc, int m_rows, int n_rows, int k,
                       int threads) {
  const long work = static_cast<long>(m_rows) * n_rows * k;
  const int t = thread_count(threads, work);
#pragma omp parallel for schedule(static) if (t != 1) num_threads(t > 0 ? t : omp_get_max_threads())
  for (int m = 0; m < m_rows; ++m)
    for (int n = 0; n < n_rows; ++n)
      acc[static_cast<std::size_t>(m) * n_rows + n] =
          quant::dot_int8(a + static_cast<std::size_t>(m) * k, b + static_cast<std::size_t>(n) * k, k);
}

void matmul_int8_dequant(const std::int8_t* qa, const float* sa, const std::int8_t* qb, const float* sb, float* y,
                         int m_rows, int n_rows, int k, int threads) {
  const long work = static_cast<long>(m_rows) * n_rows * k;
  const int t = thread_count(threads, work);
#pragma omp parallel for schedule(static) if (t != 1) num_threads(t > 0 ? t : omp_get_max_threads())
  for (int m = 0; m < m_rows; ++m)
    for (int n = 0; n < n_rows; ++n) {
      const std::int32_t acc = quant::dot_int8(qa + static_cast<std::size_t>(m) * k, qb + static_cast<std::size_t>(n) * k, k);
      y[static_cast<std::size_t>(m) * n_rows + n] = (static_cast<float>(acc) * sb[n]) * sa[m];
    }
}

void linear_int8_reference(const float* a, const float* b, float* y, int m_rows, int n_rows, int k, int threads) {
  std::vector<std::int8_t> qa(static_cast<std::size_t>(m_rows) * k), qb(static_cast<std::size_t>(n_rows) * k);
  std::vector<float> sa(static_cast<std::size_t>(m_rows)), sb(static_cast<std::size_t>(n_rows));
  quantize_rows(a, m_rows, k, qa.data(), sa.data());
  quantize_rows(b, n_rows, k, qb.data(), sb.data());
  matmul_int8_dequant(qa.data(), sa.data(), qb.data(), sb.data(), y, m_rows, n_rows, k, threads);
}

#if FPGALLM_HAVE_KERNELS

namespace {
// The instance the bindings run: the default arch::Design's matrix unit (32 x 32 MACs,
// 128 x 256 weight tiles) and vector unit (16 lanes); 64 tokens per weight tile.
// Integer results do not depend on these shapes (tests/kernels checks that across designs).
using MatrixUnit = kernels::MatrixUnitConfig<32, 32, 128, 256, kKernelTokens, 1 << 20, kKernelMaxCols>;
using VectorUnit = kernels::VectorUnitConfig<16, 8, kKernelMaxCols>;

void quantize_rows_on_vector_unit(const float* x, int rows, int cols, std::int8_t* q, float* scales) {
  for (int r = 0; r < rows; ++r)
    scales[r] = kernels::quantize_dynamic<VectorUnit>(q + static_cast<std::size_t>(r) * cols,
                                                      x + static_cast<std::size_t>(r) * cols, cols);
}
}  // namespace

void linear_int8(const float* a, const float* b, float* y, int m_rows, int n_rows, int k, int threads) {
  if (k > kKernelMaxCols || n_rows > (1 << 20))
    throw std::invalid_argument("linear_int8: a product larger than the matrix-unit instance (" +
                                std::to_string(kKernelMaxCols) + " columns, 2^20 rows)");
  std::vector<std::int8_t> qa(static_cast<std::size_t>(m_rows) * k), qb(static_cast<std::size_t>(n_rows) * k);
  std::vector<float> sa(static_cast<std::size_t>(m_rows)), sb(static_cast<std::size_t>(n_rows));
  quantize_rows_on_vector_unit(a, m_rows, k, qa.data(), sa.data());
  quantize_rows_on_vector_unit(b, n_rows, k, qb.data(), sb.data());
  // Activations go through the unit kKernelTokens at a time; token blocks are independent
  // invocations, spread over the CPU threads of the C simulation.
  const int blocks = (m_rows + kKernelTokens - 1) / kKernelTokens;
  const long work = static_cast<long>(m_rows) * n_rows * k;
  const int t = thread_count(threads, work);
#pragma omp parallel for schedule(dynamic) if (t != 1 && blocks > 1) num_threads(t > 0 ? t : omp_get_max_threads())
  for (int blk = 0; blk < blocks; ++blk) {
    const int t0 = blk * kKernelTokens;
    const int tokens = std::min(kKernelTokens, m_rows - t0);
    kernels::matmul_w8a8<MatrixUnit>(qb.data(), sb.data(), qa.data() + static_cast<std::size_t>(t0) * k,
                                     sa.data() + t0, y + static_cast<std::size_t>(t0) * n_rows, nullptr, tokens,
                                     n_rows, k, n_rows);
  }
}

const char* matrix_unit_source() {
  return "src/kernels: kernels::matmul_w8a8 (PE 32 x SIMD 32, tiles 128 x 256, 64 tokens) and "
         "kernels::quantize_dynamic (16 lanes)";
}

#else

void linear_int8(const float* a, const float* b, float* y, int m_rows, int n_rows, int k, int threads) {
  linear_int8_reference(a, b, y, m_rows, n_rows, k, threads);
}

const char* matrix_unit_source() { return "src/python/matrix_unit.cpp (plain C++ statement of the contract)"; }

#endif

void linear_fp32(const float* a, const float* b, float* y, int m_rows, int n_rows, int k) {
  for (int m = 0; m < m_rows; ++m)
    engine::matvec(b, a + static_cast<std::size_t>(m) * k, y + static_cast<std::size_t>(m) * n_rows, n_rows, k);
}

}  // namespace fpgallm_python
