#include "train/matmul.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/matrix_unit.hpp"

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

namespace {

// The matrix unit instance training runs on: 8 x 32 MACs, 64 x 32 weight tiles, 64 tokens
// per pass; rows and columns are only loop bounds (kernels/matrix_unit.hpp).
using TrainUnit = kernels::MatrixUnitConfig<8, 32, 64, 32, 64, 1 << 20, 131071>;

}  // namespace

void int8_gemm_i32(const std::int8_t* a, const std::int8_t* bt, std::int32_t* acc, int m, int n, int k) {
  // The kernel multiplies "weights" [rows][cols] by "tokens" [tokens][cols]: here the rows
  // are bt's n columns of op(B) and the tokens are a's m rows, fed 64 at a time. Its
  // requantized fp32 output is not used (unit scales); the int32 accumulators are.
  const int chunks = (m + TrainUnit::max_tokens - 1) / TrainUnit::max_tokens;
  const std::vector<float> ones(static_cast<std::size_t>(std::max(n, TrainUnit::max_tokens)), 1.0f);
#pragma omp parallel for schedule(static) if (static_cast<long>(m) * n * k > kParallelMacs && !omp_in_parallel())
  for (int ch = 0; ch < chunks; ++ch) {
    const int t0 = ch * TrainUnit::max_tokens, tokens = std::min(TrainUnit::max_tokens, m - t0);
    std::vector<float> y(static_cast<std::size_t>(tokens) * n);
    kernels::matmul_w8a8<TrainUnit>(bt, ones.data(), a + static_cast<std::size_t>(t0) * k, ones.data(), y.data(),
                                    acc + static_cast<std::size_t>(t0) * n, tokens, n, k, n);
  }
}

void Int8Matmul::gemm(const Gemm<float>& g) {
  count(g);
  std::vector<float> abuf, bbuf;
  const float* a = packed_a(g, abuf);
  const float* bt = packed_bt(g, bbuf);
  // Blocks of `group_` consecutive elements along k (the whole row when group_ is 0), each
  // quantized with its own scale; codes stored block by block so that each block is one
  // contiguous matrix-unit pass.
  const int block = group_ > 0 ? std::min(group_, g.k) : g.k;
  const int blocks = (g.k + block - 1) / block;
  const std::size_t mk = static_cast<std::size_t>(g.m) * g.k, nk = static_cast<std::size_t>(g.n) * g.k;
  std::vector<std::int8_t> qa(mk), qb(nk);
  std::vector<float> sa(static_cast<std::size_t>(g.m) * blocks), sb(static_cast<std::size_t>(g.n) * blocks);
  std::vector<std::int32_t> acc(static_cast<std::size_t>(blocks) * g.m * g.n);
  std::vector<float> slice;
  for (int bl = 0; bl < blocks; ++bl) {
    const int p0 = bl * block, len = std::min(block, g.k - p0);
    std::int8_t* qa_bl = &qa[static_cast<std::size_t>(p0) * g.m];
    std::int8_t* qb_bl = &qb[static_cast<std::size_t>(p0) * g.n];
    for (int side = 0; side < 2; ++side) {
      const int rows = side == 0 ? g.m : g.n;
      const float* src = side == 0 ? a : bt;
      slice.resize(static_cast<std::size_t>(rows) * len);
      for (int r = 0; r < rows; ++r)
        std::copy_n(src + static_cast<std::size_t>(r) * g.k + p0, len, &slice[static_cast<std::size_t>(r) * len]);
      std::vector<float> s(static_cast<std::size_t>(rows));
      quantize_rows_int8(slice.data(), rows, len, side == 0 ? qa_bl : qb_bl, s.data());
      float* dst = side == 0 ? sa.data() : sb.data();
      for (int r = 0; r < rows; ++r) dst[static_cast<std::size_t>(r) * blocks + bl] = s[static_cast<std::size_t>(r)];
    }
    int8_gemm_i32(qa_bl, qb_bl, &acc[static_cast<std::size_t>(bl) * g.m * g.n], g.m, g.n, len);
  }
  const std::size_t mn = static_cast<std::size_t>(g.m) * g.n;
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
        const std::int32_t v = acc[bl * mn + static_cast<std::size_t>(i) * g.n + j];
        sum = sum + (static_cast<float>(v) * sbj[bl]) * sai[bl];
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
