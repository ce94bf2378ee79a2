// GPTQ (quant::gptq_int4) against round to nearest and against the output error it
// minimizes; the NumPy transcription of the paper's algorithm is tests/python/gptq.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "model/gguf.hpp"
#include "quant/quant.hpp"

namespace {

using namespace quant;

std::vector<float> gaussian(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Inputs x = A z (z standard normal, A random with a few strong channels), n of them,
// as columns of X [cols][n]; returns H = X X^T.
std::vector<double> correlated_hessian(int cols, int n, unsigned seed, std::vector<double>* x_out = nullptr) {
  const auto a = gaussian(static_cast<std::size_t>(cols) * cols, seed);
  const auto z = gaussian(static_cast<std::size_t>(cols) * n, seed + 1);
  std::vector<double> x(static_cast<std::size_t>(cols) * n, 0.0);
  for (int i = 0; i < cols; ++i)
    for (int k = 0; k < cols; ++k) {
      const double aik = a[static_cast<std::size_t>(i) * cols + k] * (i % 7 == 0 ? 4.0 : 1.0);
      for (int t = 0; t < n; ++t) x[static_cast<std::size_t>(i) * n + t] += aik * z[static_cast<std::size_t>(k) * n + t];
    }
  std::vector<double> h(static_cast<std::size_t>(cols) * cols, 0.0);
  for (int i = 0; i < cols; ++i)
    for (int j = 0; j < cols; ++j)
      for (int t = 0; t < n; ++t)
        h[static_cast<std::size_t>(i) * cols + j] += x[static_cast<std::size_t>(i) * n + t] * x[static_cast<std::size_t>(j) * n + t];
  if (x_out) *x_out = std::move(x);
  return h;
}

// ||(W - Q) X||_F^2 with X [cols][n].
double output_error(const std::vector<float>& w, const Int4Matrix& q, const std::vector<double>& x, int n) {
  std::vector<float> dq(w.size());
  dequantize(q, dq);
  double total = 0.0;
  for (int r = 0; r < q.rows; ++r)
    for (int t = 0; t < n; ++t) {
      double y = 0.0;
      for (int c = 0; c < q.cols; ++c)
        y += (static_cast<double>(w[static_cast<std::size_t>(r) * q.cols + c]) - dq[static_cast<std::size_t>(r) * q.cols + c]) *
             x[static_cast<std::size_t>(c) * n + t];
      total += y * y;
    }
  return total;
}

TEST(Gptq, DiagonalHessianEqualsRoundToNearestBitForBit) {
  // H^-1 is diagonal: no error is carried to another column, so every code and scale is
  // round to nearest's, in either column order.
  for (int group : {32, 64, 128}) {
    const int rows = 12, cols = 160;
    const auto w = gaussian(static_cast<std::size_t>(rows) * cols, 7);
    std::vector<double> identity(static_cast<std::size_t>(cols) * cols, 0.0), diagonal = identity;
    for (int i = 0; i < cols; ++i) {
      identity[static_cast<std::size_t>(i) * cols + i] = 1.0;
      diagonal[static_cast<std::size_t>(i) * cols + i] = 1.0 + (i * 37 % 11);
    }
    const Int4Matrix rtn = quantize_int4(w, rows, cols, group);
    for (const auto* h : {&identity, &diagonal})
      for (bool act_order : {false, true}) {
        const Int4Matrix g = gptq_int4(w, rows, cols, group, *h, {.damp = 0.01, .act_order = act_order});
        EXPECT_EQ(g.packed, rtn.packed) << "group " << group << " act_order " << act_order;
        EXPECT_EQ(g.scale, rtn.scale) << "group " << group << " act_order " << act_order;
      }
  }
}

TEST(Gptq, LowersTheOutputErrorOnCorrelatedInputs) {
  const int rows = 16, cols = 96, n = 256;
  const auto w = gaussian(static_cast<std::size_t>(rows) * cols, 11);
  std::vector<double> x;
  const auto h = correlated_hessian(cols, n, 21, &x);
  const double e_rtn = output_error(w, quantize_int4(w, rows, cols, 32), x, n);
  const double e_gptq = output_error(w, gptq_int4(w, rows, cols, 32, h), x, n);
  const double e_act = output_error(w, gptq_int4(w, rows, cols, 32, h, {.damp = 0.01, .act_order = true}), x, n);
  EXPECT_LT(e_gptq, e_rtn);
  EXPECT_LT(e_act, e_rtn);
  std::printf("||(W-Q)X||^2: rtn %.4g, gptq %.4g, gptq act-order %.4g\n", e_rtn, e_gptq, e_act);
}

TEST(Gptq, DeadInputsGetZeroCodes) {
  const int rows = 4, cols = 32;
  const auto w = gaussian(static_cast<std::size_t>(rows) * cols, 3);
  auto h = correlated_hessian(cols, 64, 5);
  for (int j = 0; j < cols; ++j) h[static_cast<std::size_t>(5) * cols + j] = h[static_cast<std::size_t>(j) * cols + 5] = 0.0;
  const Int4Matrix q = gptq_int4(w, rows, cols, 32, h);
  for (int r = 0; r < rows; ++r) EXPECT_EQ(q.code(r, 5), 0);
}

// sum e^T H e (or e^T e) of one group quantized with fp16 scale bits s16.
double group_error(const std::vector<double>& w, std::uint16_t s16, const std::vector<double>* h) {
  const float s = model::gguf::fp16_to_float(s16);
  const std::size_t n = w.size();
  std::vector<double> e(n);
  for (std::size_t i = 0; i < n; ++i) e[i] = w[i] - quantize_value(static_cast<float>(w[i]), s, kInt4Max) * static_cast<double>(s);
  double err = 0.0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) err += e[i] * (h ? (*h)[i * n + j] : (i == j ? 1.0 : 0.0)) * e[j];
  return err;
}

TEST(ScaleSearch, NeverWorseThanMaxOverSevenAndKeepsItWhenItIsExact) {
  const int n = 32;
  const auto h = correlated_hessian(n, 64, 9);
  for (unsigned seed = 0; seed < 20; ++seed) {
    const auto wf = gaussian(n, 100 + seed);
    std::vector<double> w(wf.begin(), wf.end());
    w[seed % n] *= 5.0;  // an outlier worth clipping
    float amax = 0.0f;
    for (double v : w) amax = std::max(amax, std::fabs(static_cast<float>(v)));
    for (const std::vector<double>* hw : {static_cast<const std::vector<double>*>(nullptr), &h}) {
      const std::uint16_t s = search_int4_scale(w.data(), n, hw ? hw->data() : nullptr, n);
      EXPECT_LE(group_error(w, s, hw), group_error(w, int4_scale_f16(amax), hw)) << seed;
      EXPECT_LE(model::gguf::fp16_to_float(s), model::gguf::fp16_to_float(int4_scale_f16(amax))) << seed;
    }
  }
  // Codes -7..7 times 0.5 exactly: max |w| / 7 has zero error, so it is kept.
  std::vector<double> exact(n);
  for (int i = 0; i < n; ++i) exact[static_cast<std::size_t>(i)] = 0.5 * ((i % 15) - 7);
  EXPECT_EQ(search_int4_scale(exact.data(), n, nullptr, n), int4_scale_f16(3.5f));
}

TEST(Gptq, RejectsAHessianOfTheWrongSizeOrNotPositiveDefinite) {
  const int rows = 4, cols = 32;
  const auto w = gaussian(static_cast<std::size_t>(rows) * cols, 3);
  std::vector<double> small(static_cast<std::size_t>(cols) * cols - 1, 0.0);
  EXPECT_THROW(gptq_int4(w, rows, cols, 32, small), std::invalid_argument);
  std::vector<double> negative(static_cast<std::size_t>(cols) * cols, 0.0);
  for (int i = 0; i < cols; ++i) negative[static_cast<std::size_t>(i) * cols + i] = -1.0;
  EXPECT_THROW(gptq_int4(w, rows, cols, 32, negative), std::invalid_argument);
  auto nan = correlated_hessian(cols, 64, 5);
  nan[3] = std::nan("");
  EXPECT_THROW(gptq_int4(w, rows, cols, 32, nan), std::invalid_argument);
  EXPECT_THROW(gptq_int4(w, rows, cols, 48, correlated_hessian(cols, 64, 5)), std::invalid_argument);
}

}  // namespace
