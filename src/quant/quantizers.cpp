#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/gguf.hpp"
#include "quant/quant.hpp"

namespace quant {

std::int32_t round_saturate(float v, int qmax) {
  const float r = std::nearbyint(v);  // default rounding mode: ties to even
  if (!(r >= static_cast<float>(-qmax))) return r != r ? 0 : -qmax;
  if (r > static_cast<float>(qmax)) return qmax;
  return static_cast<std::int32_t>(r);
}

std::int32_t quantize_value(float v, float scale, int qmax) {
  if (scale == 0.0f) return 0;
  const float inv = 1.0f / scale;
  return round_saturate(v * inv, qmax);
}

float int8_scale(float amax) { return amax == 0.0f ? 0.0f : amax / static_cast<float>(kInt8Max); }

float int8_weight_scale(float amax) {
  if (amax == 0.0f) return 0.0f;
  const float s = std::min(amax / static_cast<float>(kInt8Max), 65504.0f);
  std::uint16_t h = model::gguf::float_to_fp16(s);
  if (model::gguf::fp16_to_float(h) < s) ++h;  // the next fp16 up (s is positive and <= 65504)
  return model::gguf::fp16_to_float(h);
}

std::uint16_t int4_scale_f16(float amax) {
  if (amax == 0.0f) return 0;
  const float s = std::min(amax / static_cast<float>(kInt4Max), 65504.0f);
  return model::gguf::float_to_fp16(s);
}

std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : bytes) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

float max_abs(std::span<const float> x) {
  float m = 0.0f;
  for (float v : x) m = std::max(m, std::fabs(v));
  return m;
}

const char* to_string(WeightFormat f) {
  switch (f) {
    case WeightFormat::f32: return "f32";
    case WeightFormat::f16: return "f16";
    case WeightFormat::int8: return "int8";
    case WeightFormat::int4: return "int4";
  }
  return "?";
}

const char* to_string(ActFormat f) {
  switch (f) {
    case ActFormat::f32: return "f32";
    case ActFormat::f16: return "f16";
    case ActFormat::int8_dynamic: return "int8-dynamic";
    case ActFormat::int8_static: return "int8-static";
  }
  return "?";
}

WeightFormat weight_format_from_string(const std::string& s) {
  for (auto f : {WeightFormat::f32, WeightFormat::f16, WeightFormat::int8, WeightFormat::int4})
    if (s == to_string(f)) return f;
  throw std::invalid_argument("unknown weight format '" + s + "'");
}

ActFormat act_format_from_string(const std::string& s) {
  for (auto f : {ActFormat::f32, ActFormat::f16, ActFormat::int8_dynamic, ActFormat::int8_static})
    if (s == to_string(f)) return f;
  throw std::invalid_argument("unknown activation format '" + s + "'");
}

namespace {

void check_matrix(std::span<const float> w, int rows, int cols) {
  if (rows <= 0 || cols <= 0 || w.size() != static_cast<std::size_t>(rows) * cols)
    throw std::invalid_argument("matrix size does not match its shape");
  for (float v : w)
    if (!std::isfinite(v)) throw std::invalid_argument("weight is not finite");
}

}  // namespace

Int8Matrix quantize_int8(std::span<const float> w, int rows, int cols) {
  check_matrix(w, rows, cols);
  Int8Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.q.resize(w.size());
  m.scale.resize(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    const auto row = w.subspan(static_cast<std::size_t>(r) * cols, static_cast<std::size_t>(cols));
    const float s = int8_weight_scale(max_abs(row));
    m.scale[static_cast<std::size_t>(r)] = s;
    std::int8_t* q = m.q.data() + static_cast<std::size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) q[c] = static_cast<std::int8_t>(quantize_value(row[static_cast<std::size_t>(c)], s, kInt8Max));
  }
  return m;
}

void dequantize(const Int8Matrix& m, std::span<float> out) {
  if (out.size() != m.q.size()) throw std::invalid_argument("dequantize: size mismatch");
  for (int r = 0; r < m.rows; ++r)
    for (int c = 0; c < m.cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r) * m.cols + c;
      out[i] = static_cast<float>(m.q[i]) * m.scale[static_cast<std::size_t>(r)];
    }
}

int Int4Matrix::code(int r, int c) const {
  const std::uint8_t byte = packed[static_cast<std::size_t>(r) * row_bytes() + (c / 32) * 16 + (c % 32) % 16];
  const int nibble = (c % 32) < 16 ? (byte & 0x0F) : (byte >> 4);
  return nibble - 8;
}

void Int4Matrix::set_code(int r, int c, int q) {
  const auto nibble = static_cast<std::uint8_t>(q + 8);
  std::uint8_t& byte = packed[static_cast<std::size_t>(r) * row_bytes() + (c / 32) * 16 + (c % 32) % 16];
  byte = (c % 32) < 16 ? static_cast<std::uint8_t>((byte & 0xF0) | nibble)
                       : static_cast<std::uint8_t>((byte & 0x0F) | (nibble << 4));
}

Int4Matrix quantize_int4(std::span<const float> w, int rows, int cols, int group) {
  check_matrix(w, rows, cols);
  if (group != 32 && group != 64 && group != 128) throw std::invalid_argument("int4 group must be 32, 64 or 128");
  Int4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.group = group;
  const int G = m.groups(), rb = m.row_bytes();
  m.packed.assign(static_cast<std::size_t>(rows) * rb, 0x88);  // nibble 8 = code 0 (padding)
  m.scale.resize(static_cast<std::size_t>(rows) * G);
  for (int r = 0; r < rows; ++r) {
    const float* row = w.data() + static_cast<std::size_t>(r) * cols;
    for (int k = 0; k < G; ++k) {
      const int c0 = k * group, c1 = std::min(cols, c0 + group);
      const std::uint16_t s16 = int4_scale_f16(max_abs({row + c0, static_cast<std::size_t>(c1 - c0)}));
      m.scale[static_cast<std::size_t>(r) * G + k] = s16;
      const float s = model::gguf::fp16_to_float(s16);
      for (int c = c0; c < c1; ++c) m.set_code(r, c, quantize_value(row[c], s, kInt4Max));
    }
  }
  return m;
}

std::uint16_t search_int4_scale(const double* w, int n, const double* h, std::size_t ld) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(static_cast<float>(w[i])));
  constexpr int kGrid = 20;
  constexpr float kStep = 0.025f;  // down to 1 - 19 * 0.025 = 0.525 of max |w|
  std::uint16_t best = int4_scale_f16(amax);
  double best_err = -1.0;
  std::vector<double> e(static_cast<std::size_t>(n));
  for (int k = 0; k < kGrid; ++k) {
    const std::uint16_t s16 = int4_scale_f16(amax * (1.0f - kStep * static_cast<float>(k)));
    const float s = model::gguf::fp16_to_float(s16);
    for (int i = 0; i < n; ++i)
      e[i] = w[i] - static_cast<double>(quantize_value(static_cast<float>(w[i]), s, kInt4Max)) * static_cast<double>(s);
    double err = 0.0;
    for (int i = 0; i < n; ++i) {
      if (!h) {
        err += e[i] * e[i];
        continue;
      }
      double hi = 0.0;
      for (int j = 0; j < n; ++j) hi += h[static_cast<std::size_t>(i) * ld + j] * e[j];
      err += e[i] * hi;
    }
    if (best_err < 0.0 || err < best_err) best_err = err, best = s16;
  }
  return best;
}

Int4Matrix quantize_int4_searched(std::span<const float> w, int rows, int cols, int group, std::span<const double> h) {
  Int4Matrix m = quantize_int4(w, rows, cols, group);
  const auto N = static_cast<std::size_t>(cols);
  if (!h.empty() && h.size() != N * N) throw std::invalid_argument("scale search: the Hessian does not match the layer");
  std::vector<double> g(static_cast<std::size_t>(group));
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < m.groups(); ++k) {
      const int c0 = k * group, c1 = std::min(cols, c0 + group);
      for (int c = c0; c < c1; ++c) g[c - c0] = w[static_cast<std::size_t>(r) * N + c];
      const std::uint16_t s16 = search_int4_scale(g.data(), c1 - c0, h.empty() ? nullptr : h.data() + c0 * N + c0, N);
      m.scale[static_cast<std::size_t>(r) * m.groups() + k] = s16;
      const float s = model::gguf::fp16_to_float(s16);
      for (int c = c0; c < c1; ++c) m.set_code(r, c, quantize_value(w[static_cast<std::size_t>(r) * N + c], s, kInt4Max));
    }
  return m;
}

void dequantize(const Int4Matrix& m, std::span<float> out) {
  if (out.size() != static_cast<std::size_t>(m.rows) * m.cols) throw std::invalid_argument("dequantize: size mismatch");
  const int G = m.groups();
  for (int r = 0; r < m.rows; ++r)
    for (int c = 0; c < m.cols; ++c) {
      const float s = model::gguf::fp16_to_float(m.scale[static_cast<std::size_t>(r) * G + c / m.group]);
      out[static_cast<std::size_t>(r) * m.cols + c] = static_cast<float>(m.code(r, c)) * s;
    }
}

std::vector<std::uint16_t> to_f16(std::span<const float> w) {
  std::vector<std::uint16_t> out(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) out[i] = model::gguf::float_to_fp16(w[i]);
  return out;
}

float quantize_activation_dynamic(std::span<const float> x, std::span<std::int8_t> q) {
  const float s = int8_scale(max_abs(x));
  quantize_activation_static(x, s, q);
  return s;
}

namespace {

// q[i] = round_saturate(x[i] * inv, kInt8Max) for i < n, 16 at a time: the same float
// product, vroundps to nearest even without exceptions (nearbyintf in the default rounding
// mode), the clamp to +-127 and NaN to 0 as round_saturate does; the tail by round_saturate.
__attribute__((target("avx2"))) std::size_t quantize_int8_avx2(const float* x, std::size_t n, float inv, std::int8_t* q) {
  const __m256 vinv = _mm256_set1_ps(inv), lo = _mm256_set1_ps(-static_cast<float>(kInt8Max)),
               hi = _mm256_set1_ps(static_cast<float>(kInt8Max));
  const auto codes = [&](const float* p) __attribute__((target("avx2"))) {
    const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(p), vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 c = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
    return _mm256_cvttps_epi32(_mm256_andnot_ps(_mm256_cmp_ps(r, r, _CMP_UNORD_Q), c));  // NaN -> 0
  };
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(codes(x + i), codes(x + i + 8)), 0xD8);
    const __m128i p8 = _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), p8);
  }
  return i;
}

}  // namespace

void quantize_activation_static(std::span<const float> x, float s_x, std::span<std::int8_t> q) {
  if (s_x == 0.0f) {
    std::fill(q.begin(), q.end(), std::int8_t{0});
    return;
  }
  const float inv = 1.0f / s_x;
  static const bool avx2 = __builtin_cpu_supports("avx2");
  std::size_t i = avx2 ? quantize_int8_avx2(x.data(), x.size(), inv, q.data()) : 0;
  for (; i < x.size(); ++i) q[i] = static_cast<std::int8_t>(round_saturate(x[i] * inv, kInt8Max));
}

namespace {

std::int32_t dot_int8_portable(const std::int8_t* a, const std::int8_t* b, int n) {
  std::int32_t acc = 0;
  for (int j = 0; j < n; ++j) acc += static_cast<std::int32_t>(a[j]) * static_cast<std::int32_t>(b[j]);
  return acc;
}

// 32 products per step: both operands widened to int16 and multiplied pairwise into int32
// (vpmaddwd, exact for every int8 value, -128 included), two independent accumulators.
// Integer sums: the same result as the portable loop in any order.
__attribute__((target("avx2"))) std::int32_t dot_int8_avx2(const std::int8_t* a, const std::int8_t* b, int n) {
  __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
  int j = 0;
  for (; j + 32 <= n; j += 32) {
    const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + j));
    const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + j));
    const __m256i a_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(va));
    const __m256i a_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(va, 1));
    const __m256i b_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(vb));
    const __m256i b_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(vb, 1));
    acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(a_lo, b_lo));
    acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(a_hi, b_hi));
  }
  const __m256i acc = _mm256_add_epi32(acc0, acc1);
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s) + dot_int8_portable(a + j, b + j, n - j);
}

}  // namespace

std::int32_t dot_int8(const std::int8_t* a, const std::int8_t* b, int n) {
  static const auto impl = __builtin_cpu_supports("avx2") ? dot_int8_avx2 : dot_int8_portable;
  return impl(a, b, n);
}

namespace {

// acc[i * ld + r] = dot_int8(w row r, x row i), one dot_int8 per output.
void rows_plain(const std::int8_t* w, int rows, const std::int8_t* x, int n, int cols, std::int32_t* acc, int ld) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < n; ++i)
      acc[static_cast<std::size_t>(i) * ld + r] =
          dot_int8(w + static_cast<std::size_t>(r) * cols, x + static_cast<std::size_t>(i) * cols, cols);
}

bool has_vnni() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vnni");
  return yes;
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

// R weight rows against C inputs, 16 columns a step: both operands widened to int16 and
// multiplied pairwise into int32 (vpmaddwd, exact for every int8 value, -128 included); the
// last cols % 16 columns one by one. Integer sums: exact in any order.
template <int R, int C>
__attribute__((target("avx2"))) void tile_avx2(const std::int8_t* w, const std::int8_t* x, int cols, std::int32_t* acc,
                                               int ld_acc) {
  __m256i s[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) s[r][c] = _mm256_setzero_si256();
  int j = 0;
  for (; j + 16 <= cols; j += 16) {
    __m256i wv[R], xv[C];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      wv[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + static_cast<std::size_t>(r) * cols + j)));
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c)
      xv[c] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + static_cast<std::size_t>(c) * cols + j)));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) s[r][c] = _mm256_add_epi32(s[r][c], _mm256_madd_epi16(wv[r], xv[c]));
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      __m128i q = _mm_add_epi32(_mm256_castsi256_si128(s[r][c]), _mm256_extracti128_si256(s[r][c], 1));
      q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4E));
      q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xB1));
      std::int32_t sum = _mm_cvtsi128_si32(q);
      const std::int8_t* wr = w + static_cast<std::size_t>(r) * cols;
      const std::int8_t* xc = x + static_cast<std::size_t>(c) * cols;
      for (int k = j; k < cols; ++k) sum += static_cast<std::int32_t>(wr[k]) * static_cast<std::int32_t>(xc[k]);
      acc[static_cast<std::size_t>(c) * ld_acc + r] = sum;
    }
}

// acc[i * ld + r] = dot(w row r, x row i) by tile_avx2.
__attribute__((target("avx2"))) void block_avx2(const std::int8_t* w, int rows, const std::int8_t* x, int n, int cols,
                                                std::int32_t* acc, int ld) {
  constexpr int R = 2, C = 4;
  for (int r = 0; r < rows; r += R) {
    const std::int8_t* wr = w + static_cast<std::size_t>(r) * cols;
    for (int i = 0; i < n; i += C) {
      const std::int8_t* xi = x + static_cast<std::size_t>(i) * cols;
      std::int32_t* out = acc + static_cast<std::size_t>(i) * ld + r;
      const bool full_r = r + R <= rows, full_c = i + C <= n;
      if (full_r && full_c) {
        tile_avx2<R, C>(wr, xi, cols, out, ld);
      } else if (full_c) {
        tile_avx2<1, C>(wr, xi, cols, out, ld);
      } else {
        for (int c = 0; c < n - i; ++c) {
          const std::int8_t* xc = xi + static_cast<std::size_t>(c) * cols;
          std::int32_t* oc = out + static_cast<std::size_t>(c) * ld;
          if (full_r) tile_avx2<R, 1>(wr, xc, cols, oc, ld);
          else tile_avx2<1, 1>(wr, xc, cols, oc, ld);
        }
      }
    }
  }
}

#define FPGALLM_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

// The 256-bit halves of v added (zero-masking extracts: GCC 12's unmasked 512-bit
// shuffles, _mm512_reduce_add_epi32 among them, warn of an uninitialized operand).
FPGALLM_VNNI inline __m256i fold_halves(__m512i v) {
  return _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xF, v, 0), _mm512_maskz_extracti64x4_epi64(0xF, v, 1));
}

// The lane sums of a0..a3, as one vector of 4.
FPGALLM_VNNI inline __m128i sum_lanes4(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(fold_halves(a0), fold_halves(a1)),
                                      _mm256_hadd_epi32(fold_halves(a2), fold_halves(a3)));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

FPGALLM_VNNI inline std::int32_t sum_lanes(__m512i v) {
  const __m256i h = fold_halves(v);
  __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4E));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xB1));
  return _mm_cvtsi128_si32(q);
}

template <int R, int C>
FPGALLM_VNNI inline void step_vnni(__m512i (&s)[R][C], const std::int8_t* w, const std::uint8_t* xu, int cols, int j,
                                   __mmask64 m) {
  __m512i wv[R], xv[C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) wv[r] = _mm512_maskz_loadu_epi8(m, w + static_cast<std::size_t>(r) * cols + j);
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) xv[c] = _mm512_maskz_loadu_epi8(m, xu + static_cast<std::size_t>(c) * cols + j);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) s[r][c] = _mm512_dpbusd_epi32(s[r][c], xv[c], wv[r]);
}

// R weight rows against C inputs, 64 columns a step: vpdpbusd multiplies unsigned bytes by
// signed bytes, so the inputs come offset by 128 (xu = x + 128, 0..255) and each row's
// 128 * sum(w) is taken off after: sum (x + 128) w - 128 sum w = sum x w. The products
// (at most 255 * 128) and every partial sum fit in int32, so the result is exact (and the
// same in any order). A tail of under 64 columns is loaded masked (zeros add nothing).
template <int R, int C>
FPGALLM_VNNI void tile_vnni(const std::int8_t* w, const std::uint8_t* xu, int cols, const std::int32_t* wsum,
                            std::int32_t* acc, int ld_acc) {
  __m512i s[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) s[r][c] = _mm512_setzero_si512();
  int j = 0;
  for (; j + 64 <= cols; j += 64) step_vnni<R, C>(s, w, xu, cols, j, ~__mmask64{0});
  if (j < cols) step_vnni<R, C>(s, w, xu, cols, j, (__mmask64{1} << (cols - j)) - 1);
  const __m128i offset = R == 4 ? _mm_mullo_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wsum)), _mm_set1_epi32(128))
                                : _mm_setzero_si128();
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) {
    std::int32_t* out = acc + static_cast<std::size_t>(c) * ld_acc;
    if constexpr (R == 4) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_sub_epi32(sum_lanes4(s[0][c], s[1][c], s[2][c], s[3][c]), offset));
    } else {
      for (int r = 0; r < R; ++r) out[r] = sum_lanes(s[r][c]) - 128 * wsum[r];
    }
  }
}

template <int R>
FPGALLM_VNNI void rows_vnni(const std::int8_t* w, const std::uint8_t* xu, int n, int cols, const std::int32_t* wsum,
                            std::int32_t* acc, int ld) {
  constexpr int C = 4;
  int i = 0;
  for (; i + C <= n; i += C)
    tile_vnni<R, C>(w, xu + static_cast<std::size_t>(i) * cols, cols, wsum, acc + static_cast<std::size_t>(i) * ld, ld);
  for (; i < n; ++i)
    tile_vnni<R, 1>(w, xu + static_cast<std::size_t>(i) * cols, cols, wsum, acc + static_cast<std::size_t>(i) * ld, ld);
}

// xu = x + 128 as unsigned bytes (the flipped sign bit), the inputs of block_vnni.
FPGALLM_VNNI void offset_inputs(const std::int8_t* x, std::size_t elements, std::uint8_t* xu) {
  for (std::size_t e = 0; e < elements; ++e) xu[e] = static_cast<std::uint8_t>(x[e] ^ 0x80);
}

// acc[i * ld + r] = dot(w row r, x row i) from the offset inputs xu [n][cols].
FPGALLM_VNNI void block_vnni(const std::int8_t* w, int rows, const std::uint8_t* xu, int n, int cols, std::int32_t* acc,
                             int ld) {
  constexpr int R = 4;
  for (int r = 0; r < rows; r += R) {
    const int rr = std::min(R, rows - r);
    std::int32_t wsum[R] = {};
    for (int k = 0; k < rr; ++k) {
      const std::int8_t* row = w + static_cast<std::size_t>(r + k) * cols;
      std::int32_t sum = 0;
      for (int j = 0; j < cols; ++j) sum += row[j];
      wsum[k] = sum;
    }
    const std::int8_t* wr = w + static_cast<std::size_t>(r) * cols;
    std::int32_t* out = acc + r;
    if (rr == 4) rows_vnni<4>(wr, xu, n, cols, wsum, out, ld);
    else if (rr == 3) rows_vnni<3>(wr, xu, n, cols, wsum, out, ld);
    else if (rr == 2) rows_vnni<2>(wr, xu, n, cols, wsum, out, ld);
    else rows_vnni<1>(wr, xu, n, cols, wsum, out, ld);
  }
}

#undef FPGALLM_VNNI

}  // namespace

bool int8_rows_supported(Int8Rows kernel) {
  switch (kernel) {
    case Int8Rows::vnni: return has_vnni();
    case Int8Rows::avx2: return has_avx2();
    default: return true;
  }
}

namespace {

Int8Rows best_int8_rows() {
  static const Int8Rows k = has_vnni() ? Int8Rows::vnni : has_avx2() ? Int8Rows::avx2 : Int8Rows::plain;
  return k;
}

}  // namespace

void dot_int8_rows(const std::int8_t* w, int rows, const std::int8_t* x, int n, int cols, std::int32_t* acc,
                   Int8Rows kernel) {
  if (kernel == Int8Rows::best) kernel = best_int8_rows();
  if (!int8_rows_supported(kernel)) throw std::invalid_argument("dot_int8_rows: this CPU lacks the kernel asked for");
  if (kernel == Int8Rows::vnni) {
    std::vector<std::uint8_t> xu(static_cast<std::size_t>(n) * cols);
    offset_inputs(x, xu.size(), xu.data());
    return block_vnni(w, rows, xu.data(), n, cols, acc, rows);
  }
  if (kernel == Int8Rows::avx2) return block_avx2(w, rows, x, n, cols, acc, rows);
  rows_plain(w, rows, x, n, cols, acc, rows);
}

void linear_w8a8(const Int8Matrix& w, const std::int8_t* qx, float s_x, float* y) {
#pragma omp parallel for schedule(static) if (static_cast<long>(w.rows) * w.cols > 65536)
  for (int r = 0; r < w.rows; ++r) {
    const std::int32_t acc = dot_int8(w.q.data() + static_cast<std::size_t>(r) * w.cols, qx, w.cols);
    y[r] = (static_cast<float>(acc) * w.scale[static_cast<std::size_t>(r)]) * s_x;
  }
}

void linear_w4a8(const Int4Matrix& w, const std::int8_t* qx, float s_x, float* y) {
  const int G = w.groups(), rb = w.row_bytes();
#pragma omp parallel for schedule(static) if (static_cast<long>(w.rows) * w.cols > 65536)
  for (int r = 0; r < w.rows; ++r) {
    const std::uint8_t* row = w.packed.data() + static_cast<std::size_t>(r) * rb;
    float sum = 0.0f;
    for (int k = 0; k < G; ++k) {
      const int c0 = k * w.group, c1 = std::min(w.cols, c0 + w.group);
      std::int32_t acc = 0;
      for (int c = c0; c < c1; ++c) {
        const std::uint8_t byte = row[(c / 32) * 16 + (c % 32) % 16];
        const int code = ((c % 32) < 16 ? (byte & 0x0F) : (byte >> 4)) - 8;
        acc += code * qx[c];
      }
      sum = sum + static_cast<float>(acc) * model::gguf::fp16_to_float(w.scale[static_cast<std::size_t>(r) * G + k]);
    }
    y[r] = sum * s_x;
  }
}

void linear_w8a8_rows(const Int8Matrix& w, const std::int8_t* qx, const float* s_x, int n, float* y, int ldy) {
  // Chunks of rows: every weight row is read once per chunk for all n inputs, each input
  // block is reused across 4 rows (VNNI) or 2 (AVX2), the integer sums land [input][row] and
  // are scaled row after row of y.
  const Int8Rows kernel = best_int8_rows();
  const bool vnni = kernel == Int8Rows::vnni;
  thread_local std::vector<std::uint8_t> offset;
  if (vnni) {
    offset.resize(static_cast<std::size_t>(n) * w.cols);
    offset_inputs(qx, offset.size(), offset.data());
  }
  const std::uint8_t* xu = offset.data();
  constexpr int kChunk = 128;
  const int chunks = (w.rows + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (static_cast<long>(w.rows) * w.cols * n > 65536)
  for (int k = 0; k < chunks; ++k) {
    const int r0 = k * kChunk, rr = std::min(kChunk, w.rows - r0);
    thread_local std::vector<std::int32_t> acc;
    acc.resize(static_cast<std::size_t>(rr) * n);
    const std::int8_t* wk = w.q.data() + static_cast<std::size_t>(r0) * w.cols;
    if (vnni) block_vnni(wk, rr, xu, n, w.cols, acc.data(), rr);
    else if (kernel == Int8Rows::avx2) block_avx2(wk, rr, qx, n, w.cols, acc.data(), rr);
    else rows_plain(wk, rr, qx, n, w.cols, acc.data(), rr);
    const float* s_w = w.scale.data() + r0;
    for (int i = 0; i < n; ++i) {
      const std::int32_t* a = acc.data() + static_cast<std::size_t>(i) * rr;
      float* yi = y + static_cast<std::size_t>(i) * ldy + r0;
      const float sx = s_x[i];
      for (int r = 0; r < rr; ++r) yi[r] = (static_cast<float>(a[r]) * s_w[r]) * sx;
    }
  }
}

void linear_w4a8_rows(const Int4Matrix& w, const std::int8_t* qx, const float* s_x, int n, float* y, int ldy) {
  const int G = w.groups(), rb = w.row_bytes();
#pragma omp parallel for schedule(static) if (static_cast<long>(w.rows) * w.cols * n > 65536)
  for (int r = 0; r < w.rows; ++r) {
    // The row's codes unpacked once (as linear_w4a8 reads them), then one pass per input.
    thread_local std::vector<std::int8_t> codes;
    codes.resize(static_cast<std::size_t>(w.cols));
    const std::uint8_t* row = w.packed.data() + static_cast<std::size_t>(r) * rb;
    for (int c = 0; c < w.cols; ++c) {
      const std::uint8_t byte = row[(c / 32) * 16 + (c % 32) % 16];
      codes[static_cast<std::size_t>(c)] = static_cast<std::int8_t>(((c % 32) < 16 ? (byte & 0x0F) : (byte >> 4)) - 8);
    }
    const std::uint16_t* scales = w.scale.data() + static_cast<std::size_t>(r) * G;
    for (int i = 0; i < n; ++i) {
      const std::int8_t* x = qx + static_cast<std::size_t>(i) * w.cols;
      float sum = 0.0f;
      for (int k = 0; k < G; ++k) {
        const int c0 = k * w.group, c1 = std::min(w.cols, c0 + w.group);
        const std::int32_t acc = dot_int8(codes.data() + c0, x + c0, c1 - c0);
        sum = sum + static_cast<float>(acc) * model::gguf::fp16_to_float(scales[k]);
      }
      y[static_cast<std::size_t>(i) * ldy + r] = sum * s_x[i];
    }
  }
}

void fake_quantize_int8(std::span<float> x) {
  const float s = int8_scale(max_abs(x));
  for (float& v : x) v = static_cast<float>(quantize_value(v, s, kInt8Max)) * s;
}

}  // namespace quant
