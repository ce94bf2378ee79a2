#include "model/ggml_quants.hpp"

#include <cstring>

namespace model::gguf {

namespace {

constexpr int kQK = 32;    // elements of a Q4_0 .. Q8_0 / IQ4_NL block
constexpr int kQK_K = 256;  // elements of a K-quant / IQ4_XS super-block

float half_at(const std::uint8_t* p) { return fp16_to_float(static_cast<std::uint16_t>(p[0] | (p[1] << 8))); }

std::uint32_t u32_at(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

void q4_0(const std::uint8_t* b, float* y) {
  const float d = half_at(b);
  const std::uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void q4_1(const std::uint8_t* b, float* y) {
  const float d = half_at(b), m = half_at(b + 2);
  const std::uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// The fifth bit of element j is bit j of the 32-bit qh.
void q5_0(const std::uint8_t* b, float* y) {
  const float d = half_at(b);
  const std::uint32_t qh = u32_at(b + 2);
  const std::uint8_t* qs = b + 6;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    y[j] = static_cast<float>(lo - 16) * d;
    y[j + 16] = static_cast<float>(hi - 16) * d;
  }
}

void q5_1(const std::uint8_t* b, float* y) {
  const float d = half_at(b), m = half_at(b + 2);
  const std::uint32_t qh = u32_at(b + 4);
  const std::uint8_t* qs = b + 8;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    y[j] = static_cast<float>(lo) * d + m;
    y[j + 16] = static_cast<float>(hi) * d + m;
  }
}

void q8_0(const std::uint8_t* b, float* y) {
  const float d = half_at(b);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(static_cast<std::int8_t>(b[2 + j])) * d;
}

void iq4_nl(const std::uint8_t* b, float* y) {
  const float d = half_at(b);
  const std::uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>(kIq4nlValues[qs[j] & 0x0F]);
    y[j + 16] = d * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
  }
}

// Q2_K: sub-block s (16 elements) has scale nibble scales[s] & 15 and min nibble
// scales[s] >> 4. The 64 qs bytes hold 2-bit codes: for half h (128 elements), bytes
// qs[32h .. 32h+31] hold four 32-element runs at bit shifts 0, 2, 4, 6.
void q2_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* scales = b;
  const std::uint8_t* qs = b + 16;
  const float d = half_at(b + 80), dmin = half_at(b + 82);
  int s = 0;
  for (int half = 0; half < 2; ++half, qs += 32)
    for (int shift = 0; shift < 8; shift += 2)
      for (int run = 0; run < 2; ++run, ++s) {  // two 16-element sub-blocks per shift
        const float dl = d * static_cast<float>(scales[s] & 0x0F);
        const float ml = dmin * static_cast<float>(scales[s] >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((qs[16 * run + l] >> shift) & 3) - ml;
      }
}

// Q3_K: 16 six-bit scales: the low 4 bits of scale s are the low nibble of byte s (s < 8) or
// the high nibble of byte s - 8; the high 2 bits are bits 2*(s/4) of byte 8 + s%4; the
// scale is that value - 32. A code is its 2 bits from qs (as Q2_K) minus 4 when its bit in
// hmask is clear; hmask bit (run index 0..7) of byte l covers element l of each 32-run.
void q3_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* hmask = b;
  const std::uint8_t* qs = b + 32;
  const std::uint8_t* sc = b + 96;
  const float d = half_at(b + 108);
  int scale[16];
  for (int s = 0; s < 16; ++s) {
    const int low = s < 8 ? (sc[s] & 0x0F) : (sc[s - 8] >> 4);
    const int high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    scale[s] = (low | (high << 4)) - 32;
  }
  int s = 0, bit = 0;
  for (int half = 0; half < 2; ++half, qs += 32)
    for (int shift = 0; shift < 8; shift += 2, ++bit)
      for (int run = 0; run < 2; ++run, ++s) {
        const float dl = d * static_cast<float>(scale[s]);
        for (int l = 0; l < 16; ++l) {
          const int i = 16 * run + l;
          const int q = ((qs[i] >> shift) & 3) - ((hmask[i] >> bit) & 1 ? 0 : 4);
          *y++ = dl * static_cast<float>(q);
        }
      }
}

// The 12 scale bytes of Q4_K and Q5_K hold eight 6-bit (scale, min) pairs: for j < 4,
// scale = bytes[j] & 63 and min = bytes[j+4] & 63; for j >= 4, the low 4 bits come from
// bytes[j+4] (scale: low nibble, min: high nibble) and the high 2 bits from the top bits of
// bytes[j-4] (scale) and bytes[j] (min).
void scale_min_k4(int j, const std::uint8_t* q, int& scale, int& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The fp32 scale and min of Q4_K / Q5_K sub-blocks 2c and 2c+1 (64-element chunk c):
// d * scale and dmin * min.
struct ChunkScales {
  float d0, min0, d1, min1;
};
ChunkScales chunk_scales(const std::uint8_t* sc, int c, float d, float dmin) {
  int s0, m0, s1, m1;
  scale_min_k4(2 * c, sc, s0, m0);
  scale_min_k4(2 * c + 1, sc, s1, m1);
  return {d * static_cast<float>(s0), dmin * static_cast<float>(m0), d * static_cast<float>(s1),
          dmin * static_cast<float>(m1)};
}

// Q4_K: 64-element chunk c uses sub-blocks 2c (low nibbles of qs[32c..32c+31]) and 2c+1
// (high nibbles); value = d * scale * q - dmin * min.
void q4_k(const std::uint8_t* b, float* y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const std::uint8_t* sc = b + 4;
  const std::uint8_t* qs = b + 16;
  for (int c = 0; c < 4; ++c, qs += 32) {
    const ChunkScales k = chunk_scales(sc, c, d, dmin);
    for (int l = 0; l < 32; ++l) *y++ = k.d0 * static_cast<float>(qs[l] & 0x0F) - k.min0;
    for (int l = 0; l < 32; ++l) *y++ = k.d1 * static_cast<float>(qs[l] >> 4) - k.min1;
  }
}

// Q5_K: as Q4_K, and element l of sub-block s gets 16 when bit s of qh[l] is set.
void q5_k(const std::uint8_t* b, float* y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const std::uint8_t* sc = b + 4;
  const std::uint8_t* qh = b + 16;
  const std::uint8_t* qs = b + 48;
  for (int c = 0; c < 4; ++c, qs += 32) {
    const ChunkScales k = chunk_scales(sc, c, d, dmin);
    for (int l = 0; l < 32; ++l)
      *y++ = k.d0 * static_cast<float>((qs[l] & 0x0F) + (((qh[l] >> (2 * c)) & 1) << 4)) - k.min0;
    for (int l = 0; l < 32; ++l)
      *y++ = k.d1 * static_cast<float>((qs[l] >> 4) + (((qh[l] >> (2 * c + 1)) & 1) << 4)) - k.min1;
  }
}

// Q6_K: per 128-element half, element l (0..31) of run r (four runs of 32) takes its low 4
// bits from ql[l] (r = 0: low nibble, r = 2: high nibble) or ql[l + 32] (r = 1, 3), and its
// high 2 bits from qh[l] at shift 2r; value = d * scales[sub-block] * (code - 32).
void q6_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* ql = b;
  const std::uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192);
  const float d = half_at(b + 208);
  for (int half = 0; half < 2; ++half, ql += 64, qh += 32, scales += 8, y += 128)
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;       // run 0
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;  // run 1
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;         // run 2
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;    // run 3
      y[l] = d * static_cast<float>(scales[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(scales[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(scales[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(scales[is + 6]) * static_cast<float>(q4);
    }
}

// IQ4_XS: sub-block s (32 elements, IQ4_NL nibble order) has the 6-bit scale
// (scales_l[s/2] >> 4*(s%2)) & 15 | ((scales_h >> 2s) & 3) << 4, minus 32.
void iq4_xs(const std::uint8_t* b, float* y) {
  const float d = half_at(b);
  const unsigned scales_h = static_cast<unsigned>(b[2] | (b[3] << 8));
  const std::uint8_t* scales_l = b + 4;
  const std::uint8_t* qs = b + 8;
  for (int s = 0; s < 8; ++s, qs += 16, y += 32) {
    const int ls = static_cast<int>(((scales_l[s / 2] >> (4 * (s % 2))) & 0x0F) | (((scales_h >> (2 * s)) & 3u) << 4));
    const float dl = d * static_cast<float>(ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0x0F]);
      y[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
    }
  }
}

struct Decoder {
  void (*decode)(const std::uint8_t*, float*);
  int elements;
  int bytes;
};

bool decoder_of(GgmlType t, Decoder& d) {
  switch (t) {
    case GgmlType::q4_0: d = {q4_0, kQK, 18}; return true;
    case GgmlType::q4_1: d = {q4_1, kQK, 20}; return true;
    case GgmlType::q5_0: d = {q5_0, kQK, 22}; return true;
    case GgmlType::q5_1: d = {q5_1, kQK, 24}; return true;
    case GgmlType::q8_0: d = {q8_0, kQK, 34}; return true;
    case GgmlType::iq4_nl: d = {iq4_nl, kQK, 18}; return true;
    case GgmlType::q2_k: d = {q2_k, kQK_K, 84}; return true;
    case GgmlType::q3_k: d = {q3_k, kQK_K, 110}; return true;
    case GgmlType::q4_k: d = {q4_k, kQK_K, 144}; return true;
    case GgmlType::q5_k: d = {q5_k, kQK_K, 176}; return true;
    case GgmlType::q6_k: d = {q6_k, kQK_K, 210}; return true;
    case GgmlType::iq4_xs: d = {iq4_xs, kQK_K, 136}; return true;
    default: return false;
  }
}

}  // namespace

bool dequantize_blocks(GgmlType type, const std::uint8_t* in, std::size_t n_blocks, float* out) {
  Decoder d{};
  if (!decoder_of(type, d)) return false;
  for (std::size_t b = 0; b < n_blocks; ++b) d.decode(in + b * d.bytes, out + b * d.elements);
  return true;
}

}  // namespace model::gguf
