#pragma once
// ggml's quantized block formats, decoded to fp32 exactly as ggml's dequantize_row_* and
// gguf-py's dequantize() do (same operations in the same order, no fused multiply-add), so
// the floats are bit-equal to llama.cpp's. Block layouts (little-endian, fp16 = IEEE half):
//
//   32-element blocks        bytes  value of element j
//   Q4_0   d, qs[16]            18  d * (q - 8)         q: low nibbles of qs = j 0..15,
//   Q4_1   d, m, qs[16]         20  d * q + m              high nibbles = j 16..31
//   Q5_0   d, qh[4], qs[16]     22  d * (q - 16)        q = nibble | bit j of u32 qh << 4
//   Q5_1   d, m, qh[4], qs[16]  24  d * q + m
//   Q8_0   d, qs[32] (int8)     34  d * qs[j]
//   IQ4_NL d, qs[16]            18  d * kIq4nlValues[nibble]
//
//   256-element super-blocks (QK_K)
//   Q2_K   scales[16], qs[64], d, dmin                 84  16 sub-blocks of 16; scale/min nibbles
//   Q3_K   hmask[32], qs[64], scales[12], d           110  16 sub-blocks of 16; 6-bit signed scales
//   Q4_K   d, dmin, scales[12], qs[128]               144  8 sub-blocks of 32; 6-bit scale and min
//   Q5_K   d, dmin, scales[12], qh[32], qs[128]       176  as Q4_K plus a fifth bit from qh
//   Q6_K   ql[128], qh[64], scales[16] (int8), d      210  16 sub-blocks of 16; q - 32
//   IQ4_XS d, scales_h (u16), scales_l[4], qs[128]    136  8 sub-blocks of 32; 6-bit scale - 32
//
// The bit-level details are in ggml_quants.cpp beside each decoder.
#include <cstddef>
#include <cstdint>

#include "model/gguf.hpp"

namespace model::gguf {

// IQ4_NL's (and IQ4_XS's) non-linear 4-bit code book.
inline constexpr std::int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

// Decodes n_blocks consecutive blocks of `type` from `in` into `out` (n_blocks times the
// type's block size floats). Returns false, writing nothing, for a type that is not one of
// the block formats above.
bool dequantize_blocks(GgmlType type, const std::uint8_t* in, std::size_t n_blocks, float* out);

}  // namespace model::gguf
