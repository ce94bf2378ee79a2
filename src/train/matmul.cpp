#include "train/matmul.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace train {

const char* to_string(Backend b) { return b == Backend::ref ? "ref" : "accel"; }

Backend backend_from_string(const std::string& s) {
  if (s == "ref") return Backend::ref;
  if (s == "accel") return Backend::accel;
  throw std::invalid_argument("unknown backend '" + s + "' (ref or accel)");
}

template <typename T>
void Matmul<T>::count(const Gemm<T>& g) {
  const auto macs = static_cast<std::uint64_t>(g.m) * static_cast<std::uint64_t>(g.n) * static_cast<std::uint64_t>(g.k);
#pragma omp atomic
  macs_ += macs;
}

namespace {

// op(A) as a contiguous [m][k] matrix: a pointer into A when it already is one, else a copy.
template <typename T>
const T* packed_a(const Gemm<T>& g, std::vector<T>& buf) {
  if (!g.trans_a && g.lda == g.k) return g.a;
  buf.resize(static_cast<std::size_t>(g.m) * g.k);
  for (int i = 0; i < g.m; ++i)
    for (int p = 0; p < g.k; ++p)
      buf[static_cast<std::size_t>(i) * g.k + p] =
          g.trans_a ? g.a[static_cast<std::size_t>(p) * g.lda + i] : g.a[static_cast<std::size_t>(i) * g.lda + p];
  return buf.data();
}

// op(B) transposed, contiguous [n][k].
template <typename T>
const T* packed_bt(const Gemm<T>& g, std::vector<T>& buf) {
  if (g.trans_b && g.ldb == g.k) return g.b;
  buf.resize(static_cast<std::size_t>(g.n) * g.k);
  for (int j = 0; j < g.n; ++j)
    for (int p = 0; p < g.k; ++p)
      buf[static_cast<std::size_t>(j) * g.k + p] =
          g.trans_b ? g.b[static_cast<std::size_t>(j) * g.ldb + p] : g.b[static_cast<std::size_t>(p) * g.ldb + j];
  return buf.data();
}

// Eight interleaved partial sums: vectorizes without reassociation flags, same bits on
// every run and thread count.
template <typename T>
__attribute__((target_clones("avx2", "default"))) T dot(const T* x, const T* y, int n) {
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int j = 0;
  for (; j + 8 <= n; j += 8)
    for (int q = 0; q < 8; ++q) acc[q] += x[j + q] * y[j + q];
  T tail = 0;
  for (; j < n; ++j) tail += x[j] * y[j];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

__attribute__((target_clones("avx2", "default"))) std::int32_t dot_i8(const std::int8_t* x, const std::int8_t* y, int n) {
  std::int32_t acc = 0;
  for (int j = 0; j < n; ++j) acc += static_cast<std::int32_t>(x[j]) * static_cast<std::int32_t>(y[j]);
  return acc;
}

// Threads pay off above this many multiply-accumulates.
constexpr long kParallelMacs = 1L << 18;
bool parallel_worthwhile(const Gemm<float>& g) { return static_cast<long>(g.m) * g.n * g.k > kParallelMacs && !omp_in_parallel(); }
bool parallel_worthwhile(const Gemm<double>& g) { return static_cast<long>(g.m) * g.n * g.k > kParallelMacs && !omp_in_parallel(); }

}  // namespace

template <typename T>
void RefMatmul<T>::gemm(const Gemm<T>& g) {
  this->count(g);
  std::vector<T> abuf, bbuf;
  const T* a = packed_a(g, abuf);
  const T* bt = packed_bt(g, bbuf);
#pragma omp parallel for schedule(static) if (parallel_worthwhile(g))
  for (int i = 0; i < g.m; ++i) {
    T* c = g.c + static_cast<std::size_t>(i) * g.ldc;
    const T* ai = a + static_cast<std::size_t>(i) * g.k;
    for (int j = 0; j < g.n; ++j) {
      const T v = g.alpha * dot(ai, bt + static_cast<std::size_t>(j) * g.k, g.k);
      c[j] = g.accumulate ? c[j] + v : v;
    }
  }
}

void quantize_rows_int8(const float* x, int rows, int cols, std::int8_t* q, float* scale) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    float amax = 0.0f;
    for (int j = 0; j < cols; ++j) amax = std::max(amax, std::abs(xr[j]));
    const float s = amax / 127.0f;
    scale[r] = s;
    std::int8_t* qr = q + static_cast<std::size_t>(r) * cols;
    if (s == 0.0f) {
      std::fill(qr, qr + cols, std::int8_t{0});
      continue;
    }
    const float inv = 1.0f / s;
    for (int j = 0; j < cols; ++j)
      qr[j] = static_cast<std::int8_t>(std::clamp(std::nearbyint(xr[j] * inv), -127.0f, 127.0f));
  }
}

void int8_gemm_i32(const std::int8_t* a, const std::int8_t* bt, std::int32_t* acc, int m, int n, int k) {
#pragma omp parallel for schedule(static) if (static_cast<long>(m) * n * k > kParallelMacs && !omp_in_parallel())
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      acc[static_cast<std::size_t>(i) * n + j] =
          dot_i8(a + static_cast<std::size_t>(i) * k, bt + static_cast<std::size_t>(j) * k, k);
}

void Int8Matmul::gemm(const Gemm<float>& g) {
  count(g);
  std::vector<float> abuf, bbuf;
  const float* a = packed_a(g, abuf);
  const float* bt = packed_bt(g, bbuf);
  // Blocks of `group_` consecutive elements along k (the whole row when group_ is 0),
  // each quantized with its own scale.
  const int block = group_ > 0 ? std::min(group_, g.k) : g.k;
  const int blocks = (g.k + block - 1) / block;
  std::vector<std::int8_t> qa(static_cast<std::size_t>(g.m) * g.k), qb(static_cast<std::size_t>(g.n) * g.k);
  std::vector<float> sa(static_cast<std::size_t>(g.m) * blocks), sb(static_cast<std::size_t>(g.n) * blocks);
  auto quantize = [&](const float* x, int rows, std::int8_t* q, float* s) {
    for (int r = 0; r < rows; ++r)
      for (int bl = 0; bl < blocks; ++bl) {
        const int p0 = bl * block, len = std::min(block, g.k - p0);
        const std::size_t off = static_cast<std::size_t>(r) * g.k + p0;
        quantize_rows_int8(x + off, 1, len, q + off, s + static_cast<std::size_t>(r) * blocks + bl);
      }
  };
  quantize(a, g.m, qa.data(), sa.data());
  quantize(bt, g.n, qb.data(), sb.data());
#pragma omp parallel for schedule(static) if (parallel_worthwhile(g))
  for (int i = 0; i < g.m; ++i) {
    float* c = g.c + static_cast<std::size_t>(i) * g.ldc;
    const float* sai = &sa[static_cast<std::size_t>(i) * blocks];
    for (int j = 0; j < g.n; ++j) {
      const float* sbj = &sb[static_cast<std::size_t>(j) * blocks];
      // docs/quantization.md section 4: an int32 accumulator per block, then in fp32,
      // blocks in increasing order: sum += (float(acc) * s_col) * s_row.
      float sum = 0.0f;
      for (int bl = 0; bl < blocks; ++bl) {
        const int p0 = bl * block, len = std::min(block, g.k - p0);
        const std::int32_t acc = dot_i8(&qa[static_cast<std::size_t>(i) * g.k + p0], &qb[static_cast<std::size_t>(j) * g.k + p0], len);
        sum = sum + (static_cast<float>(acc) * sbj[bl]) * sai[bl];
      }
      const float v = g.alpha * sum;
      c[j] = g.accumulate ? c[j] + v : v;
    }
  }
}

std::unique_ptr<Matmul<float>> make_matmul(Backend b) {
  if (b == Backend::accel) return std::make_unique<Int8Matmul>(Int8Matmul::kTrainingBlock);
  return std::make_unique<RefMatmul<float>>();
}

template class Matmul<float>;
template class Matmul<double>;
template class RefMatmul<float>;
template class RefMatmul<double>;

}  // namespace train
