#pragma once
// The accelerator's instruction set, written once: the operations, the on-chip buffers an
// instruction names, and the layout of one encoded instruction (kWords int32 words). Read
// by arch::Program (src/arch/program.hpp), the encoder (src/codegen) and the emitted
// overlay kernel, which gets this file as src/fpgallm_isa.hpp. C++14, no includes.
//
// Operations (numbered in this order):
//   embed         token ids -> x: rows of the embedding table (weights memory)
//   norm          RMSNorm (or LayerNorm) of `in` with the layer's gain -> `out`, fp32
//   quantize      fp32 `in` -> int8 `in` (per-token dynamic or static scale), vector unit
//   matmul        `out`[tokens][rows] = W[rows][cols] . `in`[tokens][cols], matrix unit
//   rope          rotary embedding of q and k (in place), vector unit
//   kv_store      k, v of the new tokens -> KV cache (kv memory)
//   attention     q . K^T, online softmax, . V over the KV cache -> `out`
//   residual_add  `out` += `in`
//   swiglu        `out` = silu(`out`) * `in` (gate in hb, up in hb2)
//   gelu          `out` = gelu(`out`)
//   head_norm     RMSNorm of every q head and every k head (gains [head_dim] each), vector unit
#define FPGALLM_ISA_OPS(X) \
  X(embed) X(norm) X(quantize) X(matmul) X(rope) X(kv_store) X(attention) X(residual_add) X(swiglu) X(gelu) \
  X(head_norm)

// On-chip activation buffers, then the two off-chip regions an instruction may name.
#define FPGALLM_ISA_BUFS(X) \
  X(none) X(token) X(x) X(xb) X(xb2) X(q) X(k) X(v) X(att) X(hb) X(hb2) X(logits) X(kv_cache) X(weights)

// Words of one encoded instruction, in order:
//   op, layer, rows, cols, heads, kv_heads, head_dim, in, out (the numbering above),
//   weight_bits, group, weight_beat (first word of the matrix on every weight channel),
//   scale_word (first FloatWord of its row scales), aux (first FloatWord of the norm gain,
//   embedding table or RoPE table in `params`; of a matmul with a bias, the first FloatWord
//   of the bias, laid out per row fold as the row scales are; of a head_norm, the q gain,
//   then the k gain at the next whole FloatWord), static_scale (fp32 bits of a static
//   activation scale), flags (kFlagStatic: static activation quantization; kFlagBias: the
//   matmul adds a bias).
#define FPGALLM_ISA_FIELDS(X)                                                                                 \
  X(op) X(layer) X(rows) X(cols) X(heads) X(kv_heads) X(head_dim) X(in) X(out) X(weight_bits) X(group) \
  X(weight_beat) X(scale_word) X(aux) X(static_scale) X(flags)

namespace fpgallm_isa {

#define FPGALLM_ISA_OP_ITEM(name) op_##name,
#define FPGALLM_ISA_BUF_ITEM(name) buf_##name,
#define FPGALLM_ISA_FIELD_ITEM(name) f_##name,
enum Op : int { FPGALLM_ISA_OPS(FPGALLM_ISA_OP_ITEM) op_count };
enum Buf : int { FPGALLM_ISA_BUFS(FPGALLM_ISA_BUF_ITEM) buf_count };
enum Field : int { FPGALLM_ISA_FIELDS(FPGALLM_ISA_FIELD_ITEM) kWords };
enum Flag : int { kFlagStatic = 1, kFlagBias = 2 };
#undef FPGALLM_ISA_OP_ITEM
#undef FPGALLM_ISA_BUF_ITEM
#undef FPGALLM_ISA_FIELD_ITEM

}  // namespace fpgallm_isa
