#pragma once
// Attention over a KV cache in off-chip memory, for one decode step (one query token) or a
// prefill block (several query tokens, causal), with streaming ("online") softmax: keys
// and values are read in blocks of KV_BLOCK positions, each block once per step whatever
// the number of queries, and every query keeps a running maximum m, denominator l and
// weighted sum acc, rescaled by exp(m_old - m_new) when the maximum grows. On-chip
// storage is one block plus the per-query state, so the context is not bounded by
// on-chip memory.
//
// A query at position p sees keys 0..p split into the same blocks in a prefill block as
// in a decode step, so prefill and decode give identical bits.
//
// KV cache element formats (design kv_bits): 32 = fp32; 16 = IEEE binary16; 8 = int8 codes
// with one fp32 scale per (position, kv head) for k and for v (docs/quantization.md 5).
#include <cmath>
#include <cstdint>

#include "kernels/matrix_unit.hpp"
#include "kernels/numerics.hpp"
#include "kernels/vector_unit.hpp"

namespace kernels {

// binary32 -> binary16, round to nearest even (overflow to infinity, subnormals kept).
inline std::uint16_t float_to_half(float f) {
  const u32 x = float_to_bits(f);
  const u32 sign = (x >> 16) & 0x8000u;
  const u32 e = (x >> 23) & 0xffu;
  u32 m = x & 0x7fffffu;
  if (e == 255) return static_cast<std::uint16_t>(sign | 0x7c00u | (m ? 0x200u : 0u));
  const int exp = static_cast<int>(e) - 112;  // re-biased for binary16
  if (exp >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<std::uint16_t>(sign);
    m |= 0x800000u;
    const int shift = 14 - exp;
    u32 hm = m >> shift;
    const u32 rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (hm & 1u))) ++hm;
    return static_cast<std::uint16_t>(sign | hm);
  }
  u32 h = sign | (static_cast<u32>(exp) << 10) | (m >> 13);
  const u32 rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rounds up the exponent
  return static_cast<std::uint16_t>(h);
}

template <int KV_BITS>
struct KvElement;
template <>
struct KvElement<32> {
  using type = float;
};
template <>
struct KvElement<16> {
  using type = std::uint16_t;
};
template <>
struct KvElement<8> {
  using type = i8;
};

// One layer's cache in memory: k, v [position][kv_dim]; k_scale, v_scale [position][kv_heads]
// (read and written for int8 only; for other formats they point at one spare float, never
// null, as every memory argument of the kernels).
template <int KV_BITS>
struct KvCache {
  using elem = typename KvElement<KV_BITS>::type;
  elem* k;
  elem* v;
  float* k_scale;
  float* v_scale;
  int kv_dim;
  int kv_heads;
};

// The top widens the kv_k and kv_v bundles to 512 bits (max_widen_bitwidth): one beat.
constexpr int kKvBeatBits = 512;

// Elements of a head vector the attention's load, scores and values loops take per cycle:
// one beat of each KV bundle (64 int8, 32 fp16 or 16 fp32 elements), and never fewer than
// the vector unit's lanes. The lane count of the vector unit is a choice of its own; the
// attention keeps up with its KV ports whatever it is.
constexpr int attention_lanes(int vector_lanes, int kv_bits) {
  return vector_lanes > kKvBeatBits / kv_bits ? vector_lanes : kKvBeatBits / kv_bits;
}

// The binary32 multipliers, adders and subtracters that the vector unit, attention and the
// KV store share in the emitted top (their functions are inlined there; its ALLOCATION
// pragmas set these limits), the most any one of their pipelined loops takes at II=1:
//   vector operations   lanes x kLaneFmul, kLaneFadd, kLaneFsub (vector_unit.hpp);
//   attention values    per element, the cached value converted (int8: code x scale;
//                       fp16: the subnormal's mantissa x 2^-24; fp32: nothing), p v and its
//                       sum into the slot, A elements per cycle; plus one lane's worth of
//                       scalar work per position (exp_rom's 10 products and 5 sums,
//                       s - m_new, the denominator's slot) within kLaneFmul, kLaneFadd.
// The scores loop (the key converted, q k, the A-lane tree and the beat sum) takes no more.
constexpr int shared_fmul_cores(int vector_lanes, int kv_bits) {
  const int lanes = vector_lanes * kLaneFmul;
  const int values = attention_lanes(vector_lanes, kv_bits) * (kv_bits == 32 ? 1 : 2) + kLaneFmul;
  return lanes > values ? lanes : values;
}
constexpr int shared_fadd_cores(int vector_lanes, int kv_bits) {
  const int a = attention_lanes(vector_lanes, kv_bits), lanes = vector_lanes * kLaneFadd, values = a + kLaneFadd;
  return lanes > values ? lanes : values;
}
constexpr int shared_fsub_cores(int vector_lanes) { return vector_lanes * kLaneFsub; }

template <class VCFG, int KV_BITS>
struct SharedCores {
  static constexpr int fmul = shared_fmul_cores(VCFG::lanes, KV_BITS);
  static constexpr int fadd = shared_fadd_cores(VCFG::lanes, KV_BITS);
  static constexpr int fsub = shared_fsub_cores(VCFG::lanes);
};

// Compile-time shape of the attention unit.
//   VCFG         the vector unit it runs on (lanes, exp table, max_dim >= head_dim)
//   MAX_HEAD_DIM longest head vector
//   KV_BLOCK     key/value positions read per block
//   MAX_QUERIES  query tokens per step (1 for decode, the prefill block otherwise)
//   MAX_CONTEXT  longest context (loop bound)
//   MAX_HEADS    most query heads
template <class VCFG, int MAX_HEAD_DIM, int KV_BLOCK, int MAX_QUERIES, int MAX_CONTEXT, int MAX_HEADS>
struct AttentionConfig {
  using vector_unit = VCFG;
  static constexpr int max_head_dim = MAX_HEAD_DIM;
  static constexpr int kv_block = KV_BLOCK;
  static constexpr int max_queries = MAX_QUERIES;
  static constexpr int max_context = MAX_CONTEXT;
  static constexpr int max_heads = MAX_HEADS;
  static constexpr int max_blocks = (MAX_CONTEXT + KV_BLOCK - 1) / KV_BLOCK;
  static_assert(VCFG::max_dim >= MAX_HEAD_DIM, "the vector unit must hold a head vector");
  static_assert(MAX_HEAD_DIM % 2 == 0, "rotary pairs need an even head size");
  static_assert(KV_BLOCK >= 1 && MAX_QUERIES >= 1 && MAX_HEADS >= 1, "positive sizes");
};

namespace detail {

// One head vector into the cache's element format (overloads on the element type: the
// format is chosen at compile time). int8 writes the per-(position, head) scale.
template <class VCFG, int MAX_HEAD_DIM>
inline void kv_write(i8* dst, float* scale, const float* src, int n) {
#pragma HLS INLINE
  *scale = quantize_dynamic<VCFG>(dst, src, n);
}
template <class VCFG, int MAX_HEAD_DIM>
inline void kv_write(std::uint16_t* dst, float*, const float* src, int n) {
#pragma HLS INLINE
  for (int i = 0; i < MAX_HEAD_DIM; ++i) {
#pragma HLS PIPELINE II=1
    if (i >= n) break; else FPGALLM_TRIP("kv_write");
    dst[i] = float_to_half(src[i]);
  }
}
template <class VCFG, int MAX_HEAD_DIM>
inline void kv_write(float* dst, float*, const float* src, int n) {
#pragma HLS INLINE
  for (int i = 0; i < MAX_HEAD_DIM; ++i) {
#pragma HLS PIPELINE II=1
    if (i >= n) break; else FPGALLM_TRIP("kv_write");
    dst[i] = src[i];
  }
}

// A cached element in fp32 (its key's int8 scale at `scale`; other formats read none).
inline float kv_read(i8 code, const float* scale) { return static_cast<float>(code) * scale[0]; }
inline float kv_read(std::uint16_t half, const float*) { return half_to_float(half); }
inline float kv_read(float x, const float*) { return x; }

// Offset of the scale of (position, kv head) for int8 caches; other formats have no
// scales and read none.
template <int KV_BITS>
inline long kv_scale_index(long position, int kv_heads, int head) {
  return KV_BITS == 8 ? position * kv_heads + head : 0;
}

}  // namespace detail

// Writes key and value of `tokens` new positions (starting at pos0) into the cache:
// k_new, v_new [tokens][kv_dim] in fp32 (token t at t x `stride`, kv_dim when 0),
// converted to the cache's element format.
// k_scale and v_scale must point at valid memory for every format (one float suffices
// when KV_BITS != 8); they are written only for int8.
template <class ACFG, int KV_BITS>
void kv_store(KvCache<KV_BITS> cache, const float* k_new, const float* v_new, int tokens, int pos0, int head_dim,
              int stride = 0) {
#pragma HLS INLINE
  using VCFG = typename ACFG::vector_unit;
  const long row_in = stride > 0 ? stride : cache.kv_dim;
  for (int t = 0; t < ACFG::max_queries; ++t) {
    if (t >= tokens) break;
    const long row = static_cast<long>(pos0 + t) * cache.kv_dim;
    for (int h = 0; h < ACFG::max_heads; ++h) {
      if (h >= cache.kv_heads) break;
      const float* ks = k_new + static_cast<long>(t) * row_in + h * head_dim;
      const float* vs = v_new + static_cast<long>(t) * row_in + h * head_dim;
      const long srow = detail::kv_scale_index<KV_BITS>(pos0 + t, cache.kv_heads, h);
      detail::kv_write<VCFG, ACFG::max_head_dim>(cache.k + row + h * head_dim, cache.k_scale + srow, ks, head_dim);
      detail::kv_write<VCFG, ACFG::max_head_dim>(cache.v + row + h * head_dim, cache.v_scale + srow, vs, head_dim);
    }
  }
}

// out[t][h*head_dim + i] = sum_p softmax_p(q_t,h · k_p / sqrt(head_dim)) v_p[i] over the
// positions p <= pos0 + t, for query heads h in [head_begin, head_end) (grouped-query:
// head h reads kv head h / (n_heads / kv_heads)). q and out are [tokens][n_heads*head_dim]
// (token t at t x `stride`, n_heads * head_dim when 0).
template <class ACFG, int KV_BITS>
void attention(float* out, const float* q, KvCache<KV_BITS> cache, int tokens, int pos0, int n_heads, int head_dim,
               int head_begin, int head_end, int stride = 0) {
#pragma HLS INLINE
  using VCFG = typename ACFG::vector_unit;
  constexpr int B = ACFG::kv_block;
  constexpr int D = ACFG::max_head_dim;
  constexpr int Q = ACFG::max_queries;
  // A elements per cycle in the load, scores and values loops (attention_lanes); L, the
  // vector unit's lanes, in the clear and combine loops, whose per-element adder trees stay
  // within the vector unit's cores. Head vectors on chip hold whole groups of A (a head
  // size of 48 on 32: 64 elements, the last 16 never read past head_dim).
  constexpr int A = attention_lanes(VCFG::lanes, KV_BITS);
  constexpr int L = VCFG::lanes;
  constexpr int DL = (D + A - 1) / A * A;
  static_assert(B >= kAddSlots, "a block holds at least kAddSlots positions (the partial sums' slots)");
  static_assert(A % L == 0, "the attention's lanes are whole groups of the vector unit's");
  using elem = typename KvElement<KV_BITS>::type;
  elem kblk[B][DL], vblk[B][DL];  // the block as stored: codes, converted where they are used
  float m[Q] = {}, l[Q] = {};         // set per query at each head; zero here only for the compiler's sake
  float acc[Q][DL], s[B], p[B];
  float qh[Q][DL];                    // the queries' vectors of the current head
  float part[kAddSlots][DL], lpart[kAddSlots];  // partial sums of p v and of p, slot j mod kAddSlots
  float kscale[B], vscale[B];  // the block's int8 scales (unused for other formats)
#pragma HLS ARRAY_RESHAPE variable=kblk dim=2 cyclic factor=A
#pragma HLS ARRAY_RESHAPE variable=vblk dim=2 cyclic factor=A
#pragma HLS ARRAY_PARTITION variable=acc dim=2 cyclic factor=L
#pragma HLS ARRAY_PARTITION variable=qh dim=2 cyclic factor=A
#pragma HLS ARRAY_PARTITION variable=part complete dim=1
#pragma HLS ARRAY_PARTITION variable=part dim=2 cyclic factor=A
#pragma HLS ARRAY_PARTITION variable=lpart complete
  const int q_dim = stride > 0 ? stride : n_heads * head_dim;  // token stride of q and out
  const int kv_mul = n_heads / cache.kv_heads;
  const float scale = std::sqrt(static_cast<float>(head_dim));
  const int last_key = pos0 + tokens - 1;
  for (int h = 0; h < ACFG::max_heads; ++h) {
    if (h >= head_end) break;
    if (h < head_begin) continue;
    const int kvh = h / kv_mul;
    for (int t = 0; t < Q; ++t) {
      if (t >= tokens) break;
      m[t] = -INFINITY;
      l[t] = 0.0f;
      for (int i = 0; i < DL; i += L) {
#pragma HLS PIPELINE II=1
        if (i >= head_dim) break; else FPGALLM_TRIP("attention_clear");
        for (int e = 0; e < L; ++e) acc[t][i + e] = 0.0f;
      }
      // The query head on chip, one element per cycle: its offset in q is a run-time
      // value, so no lane-wide read of a partitioned array happens at it.
      const float* qt = q + static_cast<long>(t) * q_dim + h * head_dim;
      for (int i = 0; i < DL; ++i) {
#pragma HLS PIPELINE II=1
        if (i >= head_dim) break; else FPGALLM_TRIP("attention_load_q");
        qh[t][i] = qt[i];
      }
    }
    for (int b = 0; b < ACFG::max_blocks; ++b) {
      const int p0 = b * B;
      if (p0 > last_key) break;
      // The block's keys: nb, every key a query of this step sees in it.
      const int nb = last_key - p0 + 1 < B ? last_key - p0 + 1 : B;
      bool loaded = false;  // the first query that sees the block loads it, in its scores loop
      // Every query of the step against this block, in three pipelined loops (II=1) that
      // never wait for a result of their own previous iteration:
      //   scores  (beat c, position j): s[j] gathers the lane tree of q . k over the beats
      //           (the same s[j] returns nn >= kAddSlots iterations later, no sooner than
      //           an adder's latency);
      //           on the last beat s[j] / sqrt(d) and kAddSlots running maxima. The first
      //           query that sees the block loads it here, as it computes: beat c of key j
      //           of K and of V from their bundles (A elements each: one 512-bit beat, the
      //           top declares them with max_widen_bitwidth=512) into kblk, vblk as stored
      //           (the compute converts them; each array is reshaped into words of A
      //           elements), a key's int8 scales from their own bundles on its first beat;
      //           its sweep covers the nb keys of the block, those past its own taking
      //           their cycle with nothing added;
      //   values  (beat c, position j): p[j] = exp(s[j] - m_new) on the first beat, then
      //           kAddSlots partial sums (slot j mod kAddSlots) of p v per element and of p;
      //   combine (beat c): acc = acc x corr + the tree of the slots, l likewise.
      // The scores and values loops sweep the block's n keys of this query (the loading
      // query's scores loop its nb), and never fewer than kAddSlots positions (those past
      // the last key take their cycle with nothing added): a query at the start of a block
      // pays for its keys, not for the block.
      for (int t = 0; t < Q; ++t) {
        if (t >= tokens) break;
        const int last = pos0 + t;
        if (p0 > last) continue;  // this query ends before the block; a later one may not
        const int n = last - p0 + 1 < B ? last - p0 + 1 : B;
        float mx[kAddSlots];
#pragma HLS ARRAY_PARTITION variable=mx complete
        for (int d = 0; d < kAddSlots; ++d) mx[d] = -INFINITY;
        const int beats = (head_dim + A - 1) / A;
        const bool load = !loaded;
        loaded = true;
        const int swept = load ? nb : n;
        const int nn = swept > kAddSlots ? swept : kAddSlots;
        int c = 0, j = 0;
        for (int x = 0; x < (DL / A) * B; ++x) {
#pragma HLS PIPELINE II=1
#pragma HLS DEPENDENCE variable=s inter distance=kAddSlots true
#pragma HLS DEPENDENCE variable=mx inter distance=kAddSlots true
          if (c >= beats) break; else FPGALLM_TRIP("attention_scores");
          if (load && j < nb) {
            const long row = static_cast<long>(p0 + j) * cache.kv_dim + kvh * head_dim;
            if (KV_BITS == 8 && c == 0) {
              const long srow = detail::kv_scale_index<KV_BITS>(p0 + j, cache.kv_heads, kvh);
              kscale[j] = cache.k_scale[srow];
              vscale[j] = cache.v_scale[srow];
            }
            for (int e = 0; e < A; ++e) {
              const int i = c * A + e;
              if (i < head_dim) {
                kblk[j][i] = cache.k[row + i];
                vblk[j][i] = cache.v[row + i];
              }
            }
          }
          float prod[A];
#pragma HLS ARRAY_PARTITION variable=prod complete
          for (int e = 0; e < A; ++e) {
            const int i = c * A + e;
            prod[e] = j < n && i < head_dim ? qh[t][i] * detail::kv_read(kblk[j][i], kscale + j) : 0.0f;
          }
          const float sum = tree_sum<A>(prod);
          const float total = c == 0 ? sum : s[j] + sum;
          if (c == beats - 1) {
            const float v = total / scale;
            s[j] = v;
            if (j < n && v > mx[j % kAddSlots]) mx[j % kAddSlots] = v;
          } else {
            s[j] = total;
          }
          if (++j == nn) {
            j = 0;
            ++c;
          }
        }
        FPGALLM_TRIP("attention_correction");  // sequential: the block's maximum and one exp
        float bmax = mx[0];
        for (int d = 1; d < kAddSlots; ++d)
          if (mx[d] > bmax) bmax = mx[d];
        const float m_new = bmax > m[t] ? bmax : m[t];
        const float corr = exp_table<VCFG::exp_table_bits>(m[t] - m_new);
        const int nv = n > kAddSlots ? n : kAddSlots;  // the values sweep the query's own keys
        c = 0;
        j = 0;
        for (int x = 0; x < (DL / A) * B; ++x) {
#pragma HLS PIPELINE II=1
#pragma HLS DEPENDENCE variable=part inter distance=kAddSlots true
#pragma HLS DEPENDENCE variable=lpart inter distance=kAddSlots true
#pragma HLS DEPENDENCE variable=p inter distance=kAddSlots true
          if (c >= beats) break; else FPGALLM_TRIP("attention_values");
          const int slot = j % kAddSlots;
          if (c == 0) {
            p[j] = j < n ? exp_table<VCFG::exp_table_bits>(s[j] - m_new) : 0.0f;
            lpart[slot] = j < kAddSlots ? p[j] : lpart[slot] + p[j];
          }
          const float pj = p[j];
          for (int e = 0; e < A; ++e) {
            const int i = c * A + e;
            const float pv = j < n && i < head_dim ? pj * detail::kv_read(vblk[j][i], vscale + j) : 0.0f;
            part[slot][i] = j < kAddSlots ? pv : part[slot][i] + pv;
          }
          if (++j == nv) {
            j = 0;
            ++c;
          }
        }
        l[t] = l[t] * corr + tree_sum<kAddSlots>(lpart);
        for (int i = 0; i < DL; i += L) {
#pragma HLS PIPELINE II=1
          if (i >= head_dim) break; else FPGALLM_TRIP("attention_combine");
          for (int e = 0; e < L; ++e) {
            float slots[kAddSlots];
#pragma HLS ARRAY_PARTITION variable=slots complete
            for (int d = 0; d < kAddSlots; ++d) slots[d] = part[d][i + e];
            acc[t][i + e] = acc[t][i + e] * corr + tree_sum<kAddSlots>(slots);
          }
        }
        m[t] = m_new;
      }
    }
    // Store stage.
    for (int t = 0; t < Q; ++t) {
      if (t >= tokens) break;
      float* ot = out + static_cast<long>(t) * q_dim + h * head_dim;
      for (int i = 0; i < D; ++i) {
#pragma HLS PIPELINE II=1
        if (i >= head_dim) break; else FPGALLM_TRIP("attention_store");
        ot[i] = acc[t][i] / l[t];
      }
    }
  }
}

}  // namespace kernels
