#include "python/matrix_unit.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <omp.h>

#include "engine/transformer.hpp"

namespace fpgallm_python {

namespace {

__attribute__((target_clones("avx2", "default"))) std::int32_t dot_int8(const std::int8_t* a, const std::int8_t* b,
                                                                          int k) {
  std::int32_t acc = 0;
  for (int j = 0; j < k; ++j) acc += static_cast<std::int32_t>(a[j]) * static_cast<std::int32_t>(b[j]);
  return acc;
}

int thread_count(int threads, long work) {
  if (work < 65536) return 1;
  return threads > 0 ? threads : 0;
}

}  // namespace

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
          dot_int8(a + static_cast<std::size_t>(m) * k, b + static_cast<std::size_t>(n) * k, k);
}

void matmul_int8_dequant(const std::int8_t* qa, const float* sa, const std::int8_t* qb, const float* sb, float* y,
                         int m_rows, int n_rows, int k, int threads) {
  const long work = static_cast<long>(m_rows) * n_rows * k;
  const int t = thread_count(threads, work);
#pragma omp parallel for schedule(static) if (t != 1) num_threads(t > 0 ? t : omp_get_max_threads())
  for (int m = 0; m < m_rows; ++m)
    for (int n = 0; n < n_rows; ++n) {
      const std::int32_t acc = dot_int8(qa + static_cast<std::size_t>(m) * k, qb + static_cast<std::size_t>(n) * k, k);
      y[static_cast<std::size_t>(m) * n_rows + n] = (static_cast<float>(acc) * sb[n]) * sa[m];
    }
}

void linear_int8(const float* a, const float* b, float* y, int m_rows, int n_rows, int k, int threads) {
  std::vector<std::int8_t> qa(static_cast<std::size_t>(m_rows) * k), qb(static_cast<std::size_t>(n_rows) * k);
  std::vector<float> sa(static_cast<std::size_t>(m_rows)), sb(static_cast<std::size_t>(n_rows));
  quantize_rows(a, m_rows, k, qa.data(), sa.data());
  quantize_rows(b, n_rows, k, qb.data(), sb.data());
  matmul_int8_dequant(qa.data(), sa.data(), qb.data(), sb.data(), y, m_rows, n_rows, k, threads);
}

void linear_fp32(const float* a, const float* b, float* y, int m_rows, int n_rows, int k) {
  for (int m = 0; m < m_rows; ++m)
    engine::matvec(b, a + static_cast<std::size_t>(m) * k, y + static_cast<std::size_t>(m) * n_rows, n_rows, k);
}

}  // namespace fpgallm_python
