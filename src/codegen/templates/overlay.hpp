#pragma once
// The overlay kernel: executes the encoded instruction list of one decode step (arch::Program,
// encoded by fpgallm emit) through the src/kernels templates, sized by a generated config
// struct CFG. Weights and fp32 parameters stay in off-chip memory (m_axi ports); the
// activations of the step live in on-chip buffers; the KV cache is off chip.
//
// Instruction word layout (kWords int32 per instruction), written by src/codegen:
//   op, layer, rows, cols, heads, kv_heads, head_dim, in, out, weight_bits, group,
//   weight_block (64-byte blocks into `weights`), scale_offset (floats into `params` for
//   int8 row scales, halves into `half_scales` for int4), aux (floats into `params`: norm
//   gain, embedding table or RoPE table), static_scale (fp32 bits of a static activation
//   scale), flags (bit 0: static activation quantization).
#include "kernels/attention.hpp"
#include "kernels/matrix_unit.hpp"
#include "kernels/vector_unit.hpp"

namespace overlay {

// The numbering of arch::Op and arch::Buf (src/arch/program.hpp); codegen checks it.
enum Op : int { op_embed, op_norm, op_quantize, op_matmul, op_rope, op_kv_store, op_attention, op_residual_add,
                op_swiglu, op_gelu };
enum Buf : int { buf_none, buf_token, buf_x, buf_xb, buf_xb2, buf_q, buf_k, buf_v, buf_att, buf_hb, buf_hb2,
                 buf_logits };
enum Field : int { f_op, f_layer, f_rows, f_cols, f_heads, f_kv_heads, f_head_dim, f_in, f_out, f_weight_bits,
                   f_group, f_weight_block, f_scale_offset, f_aux, f_static_scale, f_flags };
constexpr int kWords = 16;
constexpr int kWeightBlock = 64;

// The activations of one step, on chip.
template <class CFG>
struct Activations {
  float x[CFG::dim];
  float xb[CFG::dim];
  float xb2[CFG::dim];
  float q[CFG::q_dim];
  float k[CFG::kv_dim];
  float v[CFG::kv_dim];
  float att[CFG::q_dim];
  float hb[CFG::hidden_dim];
  float hb2[CFG::hidden_dim];
  float logits[CFG::vocab_size];
  kernels::i8 codes[CFG::max_cols];  // int8 input of the next matmuls
  float code_scale[1];
};

template <class CFG>
inline float* buffer(Activations<CFG>& a, int which) {
  switch (which) {
    case buf_x: return a.x;
    case buf_xb: return a.xb;
    case buf_xb2: return a.xb2;
    case buf_q: return a.q;
    case buf_k: return a.k;
    case buf_v: return a.v;
    case buf_att: return a.att;
    case buf_hb: return a.hb;
    case buf_hb2: return a.hb2;
    default: return a.logits;
  }
}

template <class CFG>
inline int buffer_width(int which) {
  switch (which) {
    case buf_x: case buf_xb: case buf_xb2: return CFG::dim;
    case buf_q: case buf_att: return CFG::q_dim;
    case buf_k: case buf_v: return CFG::kv_dim;
    case buf_hb: case buf_hb2: return CFG::hidden_dim;
    default: return CFG::vocab_size;
  }
}

// One decode step of token `token` at position `pos`: runs the first n_instructions of
// `program`, then copies buffer `result_buf` (its width in floats) to `result`.
template <class CFG>
void decode_step(const int* program, int n_instructions, int token, int pos, const kernels::i8* weights,
                 const std::uint16_t* half_scales, const float* params, typename CFG::kv_elem* kv_k,
                 typename CFG::kv_elem* kv_v, float* kv_k_scale, float* kv_v_scale, int result_buf, float* result) {
  using V = typename CFG::vector_unit;
  using M = typename CFG::matrix_unit;
  using A = typename CFG::attention_unit;
  static Activations<CFG> a;
  for (int i = 0; i < CFG::max_instructions; ++i) {
    if (i >= n_instructions) break;
    const int* w = program + i * kWords;
    const int op = w[f_op];
    const int rows = w[f_rows];
    const int cols = w[f_cols];
    if (op == op_embed) {
      const float* row = params + w[f_aux] + static_cast<long>(token) * CFG::dim;
      for (int c = 0; c < CFG::dim; ++c) a.x[c] = row[c];
    } else if (op == op_norm) {
      kernels::rmsnorm<V>(buffer(a, w[f_out]), buffer(a, w[f_in]), params + w[f_aux], cols, CFG::norm_eps);
    } else if (op == op_quantize) {
      if (w[f_flags] & 1) {
        const float s = kernels::bits_to_float(static_cast<kernels::u32>(w[f_static_scale]));
        kernels::quantize_static<V>(a.codes, buffer(a, w[f_in]), s, cols);
        a.code_scale[0] = s;
      } else {
        a.code_scale[0] = kernels::quantize_dynamic<V>(a.codes, buffer(a, w[f_in]), cols);
      }
    } else if (op == op_matmul) {
      const kernels::i8* wt = weights + static_cast<long>(w[f_weight_block]) * kWeightBlock;
      float* y = buffer(a, w[f_out]);
      if (w[f_weight_bits] == 8) {
        kernels::matmul_w8a8<M>(wt, params + w[f_scale_offset], a.codes, a.code_scale, y, nullptr, 1, rows, cols,
                                rows);
      } else {
        kernels::matmul_w4a8<M>(reinterpret_cast<const kernels::u8*>(wt), half_scales + w[f_scale_offset],
                                w[f_group], a.codes, a.code_scale, y, 1, rows, cols, rows);
      }
    } else if (op == op_rope) {
      const float* table = params + w[f_aux] + static_cast<long>(pos) * CFG::head_dim;
      for (int h = 0; h < CFG::n_heads; ++h) kernels::rope<V>(a.q + h * CFG::head_dim, table, CFG::head_dim);
      for (int h = 0; h < CFG::n_kv_heads; ++h) kernels::rope<V>(a.k + h * CFG::head_dim, table, CFG::head_dim);
    } else if (op == op_kv_store || op == op_attention) {
      const long off = static_cast<long>(w[f_layer]) * CFG::context * CFG::kv_dim;
      const long soff = static_cast<long>(w[f_layer]) * CFG::context * CFG::n_kv_heads;
      kernels::KvCache<CFG::kv_bits> cache{kv_k + off, kv_v + off, CFG::kv_bits == 8 ? kv_k_scale + soff : nullptr,
                                           CFG::kv_bits == 8 ? kv_v_scale + soff : nullptr, CFG::kv_dim,
                                           CFG::n_kv_heads};
      if (op == op_kv_store)
        kernels::kv_store<A, CFG::kv_bits>(cache, a.k, a.v, 1, pos, CFG::head_dim);
      else
        kernels::attention<A, CFG::kv_bits>(a.att, a.q, cache, 1, pos, CFG::n_heads, CFG::head_dim, 0,
                                            CFG::n_heads);
    } else if (op == op_residual_add) {
      kernels::residual_add<V>(buffer(a, w[f_out]), buffer(a, w[f_in]), cols);
    } else if (op == op_swiglu) {
      kernels::swiglu<V>(buffer(a, w[f_out]), buffer(a, w[f_in]), cols);
    }
  }
  const float* src = buffer(a, result_buf);
  const int width = buffer_width<CFG>(result_buf);
  for (int c = 0; c < CFG::max_width; ++c) {
    if (c >= width) break;
    result[c] = src[c];
  }
}

}  // namespace overlay
