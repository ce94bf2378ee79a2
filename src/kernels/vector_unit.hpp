#pragma once
// The vector unit: LANES elements per cycle through norms, activation quantization,
// softmax, SiLU/GELU, RoPE, residual adds and argmax, in binary32 (see numerics.hpp).
//
// Reductions (sums) are formed the way the hardware forms them at II=1: lane l keeps
// kAddSlots running sums used in turn (iteration j adds to slot j mod kAddSlots), so that
// an adder result is needed again only kAddSlots iterations later, more than a binary32
// adder's latency. Slot s of lane l holds the elements l + LANES*j, j = s mod kAddSlots,
// summed in order. The slots of each lane are combined by a binary tree (pairs
// (s, s + kAddSlots/2), halving each level), then the LANES lane sums by another (pairs
// (l, l + LANES/2), ...). The result therefore depends on LANES, within the bound
// docs/accelerator.md states and tests/kernels asserts. Maxima and argmax do not depend
// on LANES.
#include <cmath>
#include "kernels/numerics.hpp"
#include "kernels/trip_count.hpp"

namespace kernels {

// Running sums per lane (see above): the depth of the shift register, at least the
// latency of Vitis HLS's binary32 adder at the design clocks (4 to 8 cycles, UG1399
// "Floating-point" / the fadd core's latency at 300-500 MHz).
constexpr int kAddSlots = 8;

// The binary32 cores one lane needs at once: the most that any one pipelined loop body of
// the vector unit, attention or the KV store takes per element. Multipliers and
// differences: swiglu's (exp_rom, numerics.hpp, has 10 products, 5 sums (round_half_even's
// + magic, nf*ln2_lo + i*step_lo, the three Horner sums) and 4 differences, then 1 + e,
// v x (...), x up). Sums: attention's combine (the tree over kAddSlots partial sums and
// the sum into acc: kAddSlots), more than swiglu's 6. The emitted top
// limits its fmul, fadd and fsub cores to lanes x these (ALLOCATION over the inlined
// vector functions), so every vector operation shares one set of cores per lane and each
// loop still runs at II=1. hw::unit_resources counts the cores from these constants and
// checks that no loop it lists needs more.
constexpr int kLaneFmul = 12;
constexpr int kLaneFadd = kAddSlots;
constexpr int kLaneFsub = 4;

// The vector unit's compile-time shape (hls4ml-style config: a struct of constants).
//   LANES           elements processed per cycle (array partition factor)
//   EXP_TABLE_BITS  address bits of the exp ROM (numerics.hpp)
//   MAX_DIM         the longest vector the unit handles (loop bound; run-time n <= MAX_DIM)
template <int LANES, int EXP_TABLE_BITS, int MAX_DIM>
struct VectorUnitConfig {
  static constexpr int lanes = LANES;
  static constexpr int fmul_cores = LANES * kLaneFmul;  // the top's ALLOCATION limits
  static constexpr int fadd_cores = LANES * kLaneFadd;
  static constexpr int fsub_cores = LANES * kLaneFsub;
  static constexpr int exp_table_bits = EXP_TABLE_BITS;
  static constexpr int max_dim = MAX_DIM;
  static_assert(LANES >= 1 && LANES <= 256 && (LANES & (LANES - 1)) == 0, "lanes: a power of two in 1..256");
  static_assert(MAX_DIM % LANES == 0, "max_dim must be a multiple of the lanes");
  static_assert(EXP_TABLE_BITS >= 4 && EXP_TABLE_BITS <= 12, "exp table address bits in 4..12");
};

// Combines the lane partial sums by a binary tree (in place; result in acc[0]).
template <int LANES>
inline float tree_sum(float acc[LANES]) {
#pragma HLS INLINE
  for (int width = LANES / 2; width > 0; width /= 2) {
#pragma HLS UNROLL
    for (int l = 0; l < LANES / 2; ++l) {
#pragma HLS UNROLL
      if (l < width) acc[l] = acc[l] + acc[l + width];
    }
  }
  return acc[0];
}

// sum_i term(i) for i < n <= MAX_N at LANES elements per cycle, II=1: lane l accumulates
// term(l), term(l+LANES), ... into kAddSlots partial sums used in turn (see above).
template <class CFG, int MAX_N, class Term>
inline float lane_reduce(int n, const Term& term) {
#pragma HLS INLINE
  float acc[kAddSlots][CFG::lanes];
#pragma HLS ARRAY_PARTITION variable=acc complete dim=0
  for (int d = 0; d < kAddSlots; ++d)
    for (int l = 0; l < CFG::lanes; ++l) acc[d][l] = 0.0f;
  int slot = 0;
  for (int i = 0; i < MAX_N; i += CFG::lanes) {
#pragma HLS PIPELINE II=1
#pragma HLS DEPENDENCE variable=acc inter distance=kAddSlots true
    if (i >= n) break; else FPGALLM_TRIP("lane_reduce");
    for (int l = 0; l < CFG::lanes; ++l)
      if (i + l < n) acc[slot][l] = acc[slot][l] + term(i + l);
    slot = slot == kAddSlots - 1 ? 0 : slot + 1;
  }
  float lane[CFG::lanes];
#pragma HLS ARRAY_PARTITION variable=lane complete
  for (int l = 0; l < CFG::lanes; ++l) {
#pragma HLS UNROLL
    float slots[kAddSlots];
    for (int d = 0; d < kAddSlots; ++d) slots[d] = acc[d][l];
    lane[l] = tree_sum<kAddSlots>(slots);
  }
  return tree_sum<CFG::lanes>(lane);
}

// sum_i a[i] * b[i] for n <= MAX_N (a head vector: MAX_N is the head dimension).
template <class CFG, int MAX_N = CFG::max_dim>
inline float dot(const float* a, const float* b, int n) {
#pragma HLS INLINE
  return lane_reduce<CFG, MAX_N>(n, [&](int i) { return a[i] * b[i]; });
}

// sum_i (x[i] - shift)^2, lane-partitioned (shift = 0 for RMSNorm).
template <class CFG>
inline float sum_squares(const float* x, float shift, int n) {
#pragma HLS INLINE
  return lane_reduce<CFG, CFG::max_dim>(n, [&](int i) {
    const float d = x[i] - shift;
    return d * d;
  });
}

// sum_i x[i], lane-partitioned.
template <class CFG>
inline float lane_sum(const float* x, int n) {
#pragma HLS INLINE
  return lane_reduce<CFG, CFG::max_dim>(n, [&](int i) { return x[i]; });
}

// max_i |x(i)| for i < n (exact; independent of LANES), with kAddSlots running maxima per
// lane used in turn as the sums are. `x` gives element i (an array read, or a choice among
// arrays: one loop serves every source).
template <class CFG, class X>
inline float max_abs_of(int n, const X& x) {
#pragma HLS INLINE
  float acc[kAddSlots][CFG::lanes];
#pragma HLS ARRAY_PARTITION variable=acc complete dim=0
  for (int d = 0; d < kAddSlots; ++d)
    for (int l = 0; l < CFG::lanes; ++l) acc[d][l] = 0.0f;
  int slot = 0;
  for (int i = 0; i < CFG::max_dim; i += CFG::lanes) {
#pragma HLS PIPELINE II=1
#pragma HLS DEPENDENCE variable=acc inter distance=kAddSlots true
    if (i >= n) break; else FPGALLM_TRIP("max_abs");
    for (int l = 0; l < CFG::lanes; ++l) {
      if (i + l < n) {
        const float a = std::fabs(x(i + l));
        if (a > acc[slot][l]) acc[slot][l] = a;
      }
    }
    slot = slot == kAddSlots - 1 ? 0 : slot + 1;
  }
  float m = 0.0f;
  for (int d = 0; d < kAddSlots; ++d)
    for (int l = 0; l < CFG::lanes; ++l)
      if (acc[d][l] > m) m = acc[d][l];
  return m;
}

template <class CFG>
inline float max_abs(const float* x, int n) {
#pragma HLS INLINE
  return max_abs_of<CFG>(n, [&](int i) { return x[i]; });
}

// RMSNorm: out[i] = gain[i] * (x[i] * (1 / sqrt(sum(x^2) / n + eps))). out may alias x.
template <class CFG>
inline void rmsnorm(float* out, const float* x, const float* gain, int n, float eps) {
#pragma HLS INLINE
  float ss = sum_squares<CFG>(x, 0.0f, n);
  ss = ss / static_cast<float>(n);
  ss = ss + eps;
  const float inv = 1.0f / std::sqrt(ss);
  for (int i = 0; i < CFG::max_dim; i += CFG::lanes) {
#pragma HLS PIPELINE II=1
    if (i >= n) break; else FPGALLM_TRIP("rmsnorm_scale");
    for (int l = 0; l < CFG::lanes; ++l) {
#pragma HLS UNROLL
      if (i + l < n) out[i + l] = gain[i + l] * (inv * x[i + l]);
    }
  }
}

// Per-head RMSNorm in place (Qwen3's q_norm / k_norm): each of `heads` vectors of
// head_dim elements, x + h * head_dim, normalized by rmsnorm with the one gain [head_dim]
// all heads share.
template <class CFG, int MAX_HEADS>
inline void head_rmsnorm(float* x, const float* gain, int heads, int head_dim, float eps) {
#pragma HLS INLINE
  for (int h = 0; h < MAX_HEADS; ++h) {
    if (h >= heads) break;
    rmsnorm<CFG>(x + h * head_dim, x + h * head_dim, gain, head_dim, eps);
  }
}

// LayerNorm: out[i] = (x[i] - mean) * (1 / sqrt(var + eps)) * gain[i] + bias[i], with the
// biased variance sum((x - mean)^2) / n (two passes over x). out may alias x.
template <class CFG>
inline void layernorm(float* out, const float* x, const float* gain, const float* bias, int n, float eps) {
#pragma HLS INLINE
  const float mean = lane_sum<CFG>(x, n) / static_cast<float>(n);
  const float var = sum_squares<CFG>(x, mean, n) / static_cast<float>(n);
  const float inv = 1.0f / std::sqrt(var + eps);
  for (int i = 0; i < CFG::max_dim; i += CFG::lanes) {
#pragma HLS PIPELINE II=1
    if (i >= n) break; else FPGALLM_TRIP("layernorm_scale");
    for (int l = 0; l < CFG::lanes; ++l) {
#pragma HLS UNROLL
      if (i + l < n) out[i + l] = (x[i + l] - mean) * inv * gain[i + l] + bias[i + l];
    }
  }
}

// int8 codes of x(i), i < n, with a given scale (docs/quantization.md section 1):
// q = sat(rne(x * (1 / scale)), 127), all zero when scale == 0.
template <class CFG, class X>
inline void quantize_codes(i8* q, int n, float scale, const X& x) {
#pragma HLS INLINE
  const float inv = scale == 0.0f ? 0.0f : 1.0f / scale;
  for (int i = 0; i < CFG::max_dim; i += CFG::lanes) {
#pragma HLS PIPELINE II=1
    if (i >= n) break; else FPGALLM_TRIP("quantize_codes");
    for (int l = 0; l < CFG::lanes; ++l) {
#pragma HLS UNROLL
      if (i + l < n) q[i + l] = scale == 0.0f ? i8(0) : saturate_round_i8(x(i + l) * inv);
    }
  }
}

template <class CFG>
inline void quantize_static(i8* q, const float* x, float scale, int n) {
#pragma HLS INLINE
  quantize_codes<CFG>(q, n, scale, [&](int i) { return x[i]; });
}

// Dynamic per-token int8 (section 3.1): scale = max|x| / 127; returns the scale.
template <class CFG>
inline float quantize_dynamic(i8* q, const float* x, int n) {
#pragma HLS INLINE
  const float scale = max_abs<CFG>(x, n) / 127.0f;
  quantize_static<CFG>(q, x, scale, n);
  return scale;
}

// x[i] += y[i]
template <class CFG>
inline void residual_add(float* x, const float* y, int n) {
#pragma HLS INLINE
  for (int i = 0; i < CFG::max_dim; i += CFG::lanes) {
#pragma HLS PIPELINE II=1
    if (i >= n) break; else FPGALLM_TRIP("residual_add");
    for (int l = 0; l < CFG::lanes; ++l) {
#pragma HLS UNROLL
      if (i + l < n) x[i + l] = x[i + l] + y[i + l];
    }
  }
}

// SwiGLU: gate[i] = (gate[i] * (1 / (1 + exp(-gate[i])))) * up[i]
template <class CFG>
inline void swiglu(float* gate, const float* up, int n) {
#pragma HLS INLINE
  static constexpr Exp2Roms<CFG::exp_table_bits, CFG::lanes> kRom{};  // one exp ROM per lane
#pragma HLS ARRAY_PARTITION variable=kRom.value complete dim=1
  for (int i = 0; i < CFG::max_dim; i += CFG::lanes) {
#pragma HLS PIPELINE II=1
    if (i >= n) break; else FPGALLM_TRIP("swiglu");
    for (int l = 0; l < CFG::lanes; ++l) {
#pragma HLS UNROLL
      if (i + l < n) {
        float v = gate[i + l];
        v = v * (1.0f / (1.0f + exp_rom<CFG::exp_table_bits>(-v, kRom.value[l])));
        gate[i + l] = v * up[i + l];
      }
    }
  }
}

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), with
// tanh(u) = 1 - 2 / (exp(2u) + 1) on the table exp.
template <class CFG>
inline void gelu(float* x, int n) {
#pragma HLS INLINE
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  static constexpr Exp2Roms<CFG::exp_table_bits, CFG::lanes> kRom{};  // one exp ROM per lane
#pragma HLS ARRAY_PARTITION variable=kRom.value complete dim=1
  for (int i = 0; i < CFG::max_dim; i += CFG::lanes) {
#pragma HLS PIPELINE II=1
    if (i >= n) break; else FPGALLM_TRIP("gelu");
    for (int l = 0; l < CFG::lanes; ++l) {
#pragma HLS UNROLL
      if (i + l < n) {
        const float v = x[i + l];
        const float u = kSqrt2OverPi * (v + 0.044715f * v * v * v);
        const float t = 1.0f - 2.0f / (exp_rom<CFG::exp_table_bits>(2.0f * u, kRom.value[l]) + 1.0f);
        x[i + l] = 0.5f * v * (1.0f + t);
      }
    }
  }
}

// Rotary embedding of one vector of `n` elements (pairs (2j, 2j+1)), by the cos/sin of
// its position: cos_sin[2j] = cos(pos * f_j), cos_sin[2j+1] = sin(pos * f_j), a table the
// host computes once per position and the unit reads from memory (no trigonometry on chip).
// LANES elements (LANES/2 pairs) per cycle.
template <class CFG>
inline void rope(float* vec, const float* cos_sin, int n) {
#pragma HLS INLINE
  constexpr int kStep = CFG::lanes < 2 ? 2 : CFG::lanes;
  for (int i = 0; i < CFG::max_dim; i += kStep) {
#pragma HLS PIPELINE II=1
    if (i >= n) break; else FPGALLM_TRIP("rope");
    for (int j = 0; j < kStep; j += 2) {
      if (i + j < n) {
        const float fcr = cos_sin[i + j], fci = cos_sin[i + j + 1];
        const float v0 = vec[i + j], v1 = vec[i + j + 1];
        vec[i + j] = v0 * fcr - v1 * fci;
        vec[i + j + 1] = v0 * fci + v1 * fcr;
      }
    }
  }
}

// Softmax in place: exp(x - max) / sum, with the table exp and the lane sum.
template <class CFG>
inline void softmax(float* x, int n) {
#pragma HLS INLINE
  float m = x[0];
  for (int i = 1; i < CFG::max_dim; ++i) {
#pragma HLS PIPELINE II=1
    if (i >= n) break;
    if (x[i] > m) m = x[i];
  }
  for (int i = 0; i < CFG::max_dim; ++i) {
#pragma HLS PIPELINE II=1
    if (i >= n) break;
    x[i] = exp_table<CFG::exp_table_bits>(x[i] - m);
  }
  const float s = lane_sum<CFG>(x, n);
  for (int i = 0; i < CFG::max_dim; ++i) {
#pragma HLS PIPELINE II=1
    if (i >= n) break;
    x[i] = x[i] / s;
  }
}

// Index of the largest element; the lowest index among equal maxima (as a sequential scan
// with '>' finds it), whatever LANES is.
template <class CFG>
inline int argmax(const float* x, int n) {
#pragma HLS INLINE
  float best[CFG::lanes];
  int where[CFG::lanes];
#pragma HLS ARRAY_PARTITION variable=best complete
#pragma HLS ARRAY_PARTITION variable=where complete
  for (int l = 0; l < CFG::lanes; ++l) {
    best[l] = x[0];
    where[l] = 0;
  }
  for (int i = 0; i < CFG::max_dim; i += CFG::lanes) {
#pragma HLS PIPELINE II=1
    if (i >= n) break;
    for (int l = 0; l < CFG::lanes; ++l) {
#pragma HLS UNROLL
      if (i + l < n && x[i + l] > best[l]) {
        best[l] = x[i + l];
        where[l] = i + l;
      }
    }
  }
  float b = best[0];
  int w = where[0];
  for (int l = 1; l < CFG::lanes; ++l)
    if (best[l] > b || (best[l] == b && where[l] < w)) {
      b = best[l];
      w = where[l];
    }
  return w;
}

}  // namespace kernels
