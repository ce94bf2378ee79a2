// GPTQ (Frantar et al., ICLR'23, Algorithm 1) for int4 weights with per-group scales.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "model/gguf.hpp"
#include "quant/quant.hpp"

namespace quant {

namespace {

// In place: a [n][n] symmetric positive definite -> its lower Cholesky factor L (a = L L^T);
// the upper triangle is zeroed. Returns false when a pivot is not positive.
bool cholesky_lower(std::vector<double>& a, int n) {
  for (int j = 0; j < n; ++j) {
    double d = a[static_cast<std::size_t>(j) * n + j];
    for (int k = 0; k < j; ++k) d -= a[static_cast<std::size_t>(j) * n + k] * a[static_cast<std::size_t>(j) * n + k];
    if (!(d > 0.0)) return false;
    const double ljj = std::sqrt(d);
    a[static_cast<std::size_t>(j) * n + j] = ljj;
    for (int i = j + 1; i < n; ++i) {
      double s = a[static_cast<std::size_t>(i) * n + j];
      for (int k = 0; k < j; ++k) s -= a[static_cast<std::size_t>(i) * n + k] * a[static_cast<std::size_t>(j) * n + k];
      a[static_cast<std::size_t>(i) * n + j] = s / ljj;
    }
    for (int k = j + 1; k < n; ++k) a[static_cast<std::size_t>(j) * n + k] = 0.0;
  }
  return true;
}

// The inverse of L L^T from the lower factor L: (L^-1)^T L^-1.
std::vector<double> inverse_from_cholesky(const std::vector<double>& l, int n) {
  const auto N = static_cast<std::size_t>(n);
  std::vector<double> li(N * N, 0.0);  // L^-1, lower
  for (int j = 0; j < n; ++j) {
    li[j * N + j] = 1.0 / l[j * N + j];
    for (int i = j + 1; i < n; ++i) {
      double s = 0.0;
      for (int k = j; k < i; ++k) s -= l[i * N + k] * li[k * N + j];
      li[i * N + j] = s / l[i * N + i];
    }
  }
  std::vector<double> inv(N * N, 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) {
      double s = 0.0;
      for (int k = i; k < n; ++k) s += li[k * N + i] * li[k * N + j];
      inv[i * N + j] = inv[j * N + i] = s;
    }
  return inv;
}

}  // namespace

Int4Matrix gptq_int4(std::span<const float> w, int rows, int cols, int group, std::span<const double> h,
                     const GptqOptions& opt) {
  // The shape, finiteness and group checks of round to nearest, and the output layout.
  Int4Matrix m = quantize_int4(w, rows, cols, group);
  const auto N = static_cast<std::size_t>(cols);
  if (h.size() != N * N)
    throw std::invalid_argument("GPTQ: the Hessian has " + std::to_string(h.size()) + " entries; a layer of " +
                                std::to_string(cols) + " columns needs " + std::to_string(N * N));
  for (double v : h)
    if (!std::isfinite(v)) throw std::invalid_argument("GPTQ: the Hessian is not finite");
  if (!(opt.damp >= 0.0)) throw std::invalid_argument("GPTQ: dampening must be >= 0");

  // Column order: perm[k] is the original column visited k-th.
  std::vector<int> perm(N);
  std::iota(perm.begin(), perm.end(), 0);
  if (opt.act_order)
    std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return h[a * N + a] > h[b * N + b]; });

  // H and W in visiting order; a dead input (H_jj = 0) gets H_jj = 1 and zero weights.
  std::vector<double> H(N * N);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = 0; j < N; ++j) H[i * N + j] = h[perm[i] * N + perm[j]];
  std::vector<double> W(static_cast<std::size_t>(rows) * N);
  for (int r = 0; r < rows; ++r)
    for (std::size_t k = 0; k < N; ++k) W[r * N + k] = w[static_cast<std::size_t>(r) * N + perm[k]];
  double mean_diag = 0.0;
  for (std::size_t k = 0; k < N; ++k) {
    if (H[k * N + k] == 0.0) {
      H[k * N + k] = 1.0;
      for (int r = 0; r < rows; ++r) W[r * N + k] = 0.0;
    }
    mean_diag += H[k * N + k];
  }
  mean_diag /= static_cast<double>(N);
  for (std::size_t k = 0; k < N; ++k) H[k * N + k] += opt.damp * mean_diag;

  // U upper with H^-1 = U^T U: row k of U carries column k's error to the later columns.
  if (!cholesky_lower(H, cols)) throw std::invalid_argument("GPTQ: the dampened Hessian is not positive definite");
  std::vector<double> U = inverse_from_cholesky(H, cols);
  if (!cholesky_lower(U, cols)) throw std::invalid_argument("GPTQ: the inverse Hessian is not positive definite");
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = i + 1; j < N; ++j) std::swap(U[i * N + j], U[j * N + i]);  // L -> L^T

  std::vector<std::size_t> pos(N);  // visiting position of each original column
  for (std::size_t k = 0; k < N; ++k) pos[perm[k]] = k;
  const int G = m.groups();
  std::vector<bool> scaled(static_cast<std::size_t>(G), false);
  std::vector<float> scale(static_cast<std::size_t>(rows) * G, 0.0f);
  std::vector<double> cur(static_cast<std::size_t>(group));  // one group of a row, original order
  for (std::size_t k = 0; k < N; ++k) {
    const int c = perm[k], g = c / group;
    if (!scaled[g]) {
      scaled[g] = true;
      const int c0 = g * group, c1 = std::min(cols, c0 + group);
      for (int r = 0; r < rows; ++r) {
        std::uint16_t s16 = 0;
        if (opt.search_scales) {
          for (int j = c0; j < c1; ++j) cur[j - c0] = W[r * N + pos[j]];
          // The group's own rounding error, unweighted (as the reference code's MSE
          // quantizer): the error that follows is carried on to later columns anyway.
          s16 = search_int4_scale(cur.data(), c1 - c0, nullptr, N);
        } else {
          float amax = 0.0f;
          for (int j = c0; j < c1; ++j) amax = std::max(amax, std::fabs(static_cast<float>(W[r * N + pos[j]])));
          s16 = int4_scale_f16(amax);
        }
        m.scale[static_cast<std::size_t>(r) * G + g] = s16;
        scale[static_cast<std::size_t>(r) * G + g] = model::gguf::fp16_to_float(s16);
      }
    }
    const double d = U[k * N + k];
    for (int r = 0; r < rows; ++r) {
      double* row = W.data() + r * N;
      const float s = scale[static_cast<std::size_t>(r) * G + g];
      const int q = quantize_value(static_cast<float>(row[k]), s, kInt4Max);
      m.set_code(r, c, q);
      const double err = (row[k] - static_cast<double>(q) * static_cast<double>(s)) / d;
      const double* u = U.data() + k * N;
      for (std::size_t j = k + 1; j < N; ++j) row[j] -= err * u[j];
    }
  }
  return m;
}

}  // namespace quant
