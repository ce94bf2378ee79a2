#pragma once
// The overlay kernel's building blocks: the instruction fields of one step (arch::Program,
// encoded by fpgallm emit; a decode step of one token, or a prefill block of the prompt
// call, which runs the same words over several tokens) and the processes the generated top function
// (src/fpgallm_overlay.cpp) calls for each instruction, sized by the generated config
// struct CFG (src/fpgallm_config.hpp).
//
// Memory: weights stream through CFG::matrix_vector::channels 512-bit m_axi bundles; the
// row scales, the fp32 parameters (embedding, norm gains, RoPE table), KV data and KV
// scales each have their own bundle. The activations of the step live in on-chip arrays
// that the top function declares; every array an instruction touches is chosen by the
// control flow (a call site per array), never by a pointer picked at run time.
//
// The instruction word layout and the numbering of operations and buffers:
// fpgallm_isa.hpp (fpgallm's src/arch/isa.hpp, the one copy the encoder also reads).
#include "fpgallm_isa.hpp"
#include "kernels/attention.hpp"
#include "kernels/matrix_unit.hpp"
#include "kernels/stream.hpp"
#include "kernels/vector_unit.hpp"

namespace overlay {

using namespace fpgallm_isa;

// Copies n floats from `params` starting at FloatWord `word` into an on-chip array, one
// 512-bit word per cycle.
template <class CFG>
void load_floats(const kernels::FloatWord* params, int word, int n, float dst[CFG::max_width]) {
  for (int i = 0; i < CFG::max_width / kernels::kFloatsPerWord; ++i) {
#pragma HLS PIPELINE II=1
    if (i * kernels::kFloatsPerWord >= n) break; else FPGALLM_TRIP("load_floats");
    const kernels::FloatWord w = params[word + i];
    for (int l = 0; l < kernels::kFloatsPerWord; ++l) dst[i * kernels::kFloatsPerWord + l] = w.value[l];
  }
}

// Row r of a matmul's result into the on-chip array `dest` names (one write enable per
// array: no array chosen by a run-time pointer).
template <class CFG>
inline void write_row(int dest, int r, float y, float q[CFG::q_dim], float k[CFG::kv_dim], float v[CFG::kv_dim],
                      float xb2[CFG::dim], float hb[CFG::hidden_dim], float hb2[CFG::hidden_dim],
                      float logits[CFG::vocab_size]) {
#pragma HLS INLINE
  if (dest == buf_q) q[r] = y;
  if (dest == buf_k) k[r] = y;
  if (dest == buf_v) v[r] = y;
  if (dest == buf_xb2) xb2[r] = y;
  if (dest == buf_hb) hb[r] = y;
  if (dest == buf_hb2) hb2[r] = y;
  if (dest == buf_logits) logits[r] = y;
}

// The store stage of the matrix unit: per row fold, the PE accumulators requantized with
// their row scales (one FloatWord read per 16 rows), plus the bias when bias_word >= 0
// (read from `params` in the same iteration, laid out as the scales), and written to the
// destination array the instruction names (a write enable per array).
template <class CFG, class AccIn>
void store_rows(AccIn& acc, const kernels::FloatWord* row_scales, int scale_word, const kernels::FloatWord* params,
                int bias_word, float x_scale, int rows, int dest, float q[CFG::q_dim], float k[CFG::kv_dim],
                float v[CFG::kv_dim], float xb2[CFG::dim], float hb[CFG::hidden_dim], float hb2[CFG::hidden_dim],
                float logits[CFG::vocab_size]) {
  using MV = typename CFG::matrix_vector;
  for (int nf = 0; nf < MV::max_row_folds; ++nf) {
#pragma HLS PIPELINE II=MV::scale_words
    if (nf * MV::pe >= rows) break; else FPGALLM_TRIP("store_rows");
    const kernels::AccWord<MV::pe> a = acc.read();
    kernels::FloatWord sw[MV::scale_words], bw[MV::scale_words];
#pragma HLS ARRAY_PARTITION variable=sw complete
#pragma HLS ARRAY_PARTITION variable=bw complete
    for (int j = 0; j < MV::scale_words; ++j) {
      sw[j] = row_scales[scale_word + nf * MV::scale_words + j];
      if (bias_word >= 0) bw[j] = params[bias_word + nf * MV::scale_words + j];
    }
    for (int pe = 0; pe < MV::pe; ++pe) {
      const int r = nf * MV::pe + pe;
      if (r < rows) {
        const int word = pe / kernels::kFloatsPerWord, lane = pe % kernels::kFloatsPerWord;
        const float requantized = kernels::requantize_w8a8(a.acc[pe], sw[word].value[lane], x_scale);
        const float y = bias_word >= 0 ? kernels::add_bias(requantized, bw[word].value[lane]) : requantized;
        write_row<CFG>(dest, r, y, q, k, v, xb2, hb, hb2, logits);
      }
    }
  }
}

// An int4 matrix on the weight channels (written by fpgallm emit): its packed int4 bytes
// ([rows][(cols + 31) / 32 * 16], quant::Int4Matrix's layout), then its fp16 group scales
// ([rows][groups], little-endian), each part starting on a whole beat and padded to whole
// beats; word w of a part lies on channel w % CH at word first_beat + w / CH of that
// channel, as the int8 stream's words do (CH = MV::channels). Element i of a part (T: u8
// bytes or uint16 fp16 bits), read through + and [] as kernels::matmul_w4a8 reads a pointer
// in the accelerator backend; the channel of a word is chosen by the control flow (one read
// site per bundle).
template <class MV, class T>
struct StripedWeights {
  static_assert(sizeof(T) <= 2, "bytes or fp16 bits");
  const kernels::PackedWord* const* port;  // the MV::channels weight bundles
  int first_beat;
  long offset;  // elements of T
  StripedWeights operator+(long n) const {
    StripedWeights s = *this;
    s.offset += n;
    return s;
  }
  T operator[](long i) const {
    const long byte = (offset + i) * static_cast<long>(sizeof(T));
    const long word = byte / kernels::kWordBytes;
    const int lane = static_cast<int>(byte % kernels::kWordBytes);  // sizeof(T) divides 64: one word
    const long beat = first_beat + word / MV::channels;
    const int ch = static_cast<int>(word % MV::channels);
    kernels::PackedWord w = {};
    for (int c = 0; c < MV::channels; ++c) {
#pragma HLS UNROLL
      if (c == ch) w = port[c][beat];
    }
    unsigned v = 0;
    for (int b = 0; b < 2; ++b) {
#pragma HLS UNROLL
      if (b < static_cast<int>(sizeof(T))) v |= static_cast<unsigned>(static_cast<kernels::u8>(w.lane[lane + b])) << (8 * b);
    }
    return static_cast<T>(v);
  }
};

// An int8 matrix on the weight channels as the streaming unit reads it (written by fpgallm
// emit: PE x SIMD steps in (row fold, column fold) order, W[nf*PE + pe][sf*SIMD + k] at byte
// pe*SIMD + k of step nf * col_folds + sf; word w of the matrix on channel w % CH at word
// first_beat + w / CH of that channel), read as the row-major matrix kernels::matmul_w8a8
// takes (element r * cols + c, through + and []): the prompt call's tiled unit reads the
// decode step's weights where they lie. The SIMD codes of one tile-row word are one run of
// lanes of one 512-bit word on one channel; the channel is chosen by the control flow.
template <class MV>
struct StreamedMatrix {
  const kernels::PackedWord* const* port;  // the MV::channels weight bundles
  int first_beat;
  int cols;
  long offset;  // elements, row-major
  StreamedMatrix operator+(long n) const {
    StreamedMatrix s = *this;
    s.offset += n;
    return s;
  }
  kernels::i8 operator[](long i) const {
    const long e = offset + i, r = e / cols, c = e % cols;
    const long col_folds = (cols + MV::simd - 1) / MV::simd;
    const long byte = ((r / MV::pe) * col_folds + c / MV::simd) * (MV::pe * MV::simd) + (r % MV::pe) * MV::simd +
                      c % MV::simd;
    const long word = byte / kernels::kWordBytes;
    const long beat = first_beat + word / MV::channels;
    const int ch = static_cast<int>(word % MV::channels);
    kernels::PackedWord w = {};
    for (int k = 0; k < MV::channels; ++k) {
#pragma HLS UNROLL
      if (k == ch) w = port[k][beat];
    }
    return w.lane[byte % kernels::kWordBytes];
  }
};

// Per-row floats laid out per row fold of PE as fpgallm emit writes the row scales (and a
// matmul's bias): row r at lane (r % PE) % 16 of FloatWord first + (r / PE) * scale_words +
// (r % PE) / 16. `first` < 0: none (a matmul without a bias).
template <class MV>
struct FoldedRows {
  const kernels::FloatWord* words;
  int first;
  explicit operator bool() const { return first >= 0; }
  float operator[](long r) const {
    const int in_fold = static_cast<int>(r % MV::pe);
    const kernels::FloatWord w = words[first + (r / MV::pe) * MV::scale_words + in_fold / kernels::kFloatsPerWord];
    return w.value[in_fold % kernels::kFloatsPerWord];
  }
};

// The output of a tiled matmul over a block of tokens (element t * row + r, row the
// destination array's row, row_of) into the block array the instruction names, a write
// enable per array; the logits array keeps the last token's row only (what the host samples
// from).
template <class CFG>
struct BlockRows {
  int dest;
  long last;  // element of the last token's first row
  float* q;
  float* k;
  float* v;
  float* xb2;
  float* hb;
  float* hb2;
  float* logits;
  struct Element {
    const BlockRows* to;
    long i;
    void operator=(float y) const {
      const BlockRows& b = *to;
      if (b.dest == buf_q) b.q[i] = y;
      if (b.dest == buf_k) b.k[i] = y;
      if (b.dest == buf_v) b.v[i] = y;
      if (b.dest == buf_xb2) b.xb2[i] = y;
      if (b.dest == buf_hb) b.hb[i] = y;
      if (b.dest == buf_hb2) b.hb2[i] = y;
      if (b.dest == buf_logits && i >= b.last) b.logits[i - b.last] = y;
    }
  };
  Element operator[](long i) const {
    const Element e = {this, i};
    return e;
  }
};

// The row (token stride) of the block array `dest`; the logits keep one row of `rows`.
template <class CFG>
inline int row_of(int dest, int rows) {
  return dest == buf_q ? CFG::q_row : dest == buf_k || dest == buf_v ? CFG::kv_row
       : dest == buf_xb2 ? CFG::dim_row : dest == buf_hb || dest == buf_hb2 ? CFG::hidden_row : rows;
}

// One matmul instruction over a block of `tokens` tokens (the prompt call): the tiled matrix
// unit the accelerator backend runs prefill on (CFG::matrix_unit), kernels::matmul_w8a8 on
// the int8 weights where the streaming unit reads them, or kernels::matmul_w4a8 on packed
// int4 (packed part at weight_beat, fp16 group scales at scale_beat); codes (token t at
// t x MV::padded_cols) and one scale per token in, the rows of every token out to the
// destination array.
template <class CFG>
void matmul_block(const kernels::PackedWord* const port[], const kernels::FloatWord* row_scales,
                  const kernels::FloatWord* params, const int w[kWords], const kernels::i8* codes,
                  const float* code_scales, int tokens, float* q, float* k, float* v, float* xb2, float* hb, float* hb2,
                  float* logits) {
  typedef typename CFG::matrix_vector MV;
  const int rows = w[f_rows], cols = w[f_cols];
  const FoldedRows<MV> bias = {params, (w[f_flags] & kFlagBias) != 0 ? w[f_aux] : -1};
  const int row = row_of<CFG>(w[f_out], rows);
  const BlockRows<CFG> out = {w[f_out], static_cast<long>(tokens - 1) * row, q, k, v, xb2, hb, hb2, logits};
  if (CFG::int4_weights && w[f_weight_bits] == 4) {  // a constant false branch on an int8 design
    const StripedWeights<MV, kernels::u8> packed = {port, w[f_weight_beat], 0};
    const StripedWeights<MV, std::uint16_t> scales = {port, w[f_scale_word], 0};
    kernels::matmul_w4a8<typename CFG::matrix_unit>(packed, scales, w[f_group], codes, code_scales, out, tokens, rows,
                                                    cols, row, bias, MV::padded_cols);
  } else if (CFG::max_tokens > 1) {  // int8 weights come here in blocks only: constant false in a decode-only top
    const StreamedMatrix<MV> weights = {port, w[f_weight_beat], cols, 0};
    const FoldedRows<MV> scales = {row_scales, w[f_scale_word]};
    kernels::matmul_w8a8<typename CFG::matrix_unit>(weights, scales, codes, code_scales, out,
                                                    static_cast<kernels::i32*>(0), tokens, rows, cols, row, bias,
                                                    MV::padded_cols);
  }
}

// int8 codes of the array `in` names (xb, att, hb or x; static scale when `fixed`, else
// dynamic per token); returns the scale. One max |x| loop and one codes loop serve every
// source array (the element read is a choice among the four), so the top builds each once.
template <class CFG>
float quantize(kernels::i8 codes[CFG::matrix_vector::padded_cols], int in, const float xb[CFG::dim],
               const float att[CFG::q_dim], const float hb[CFG::hidden_dim], const float x[CFG::dim], int n,
               bool fixed, float fixed_scale) {
#pragma HLS INLINE
  using V = typename CFG::vector_unit;
  auto source = [&](int i) { return in == buf_xb ? xb[i] : in == buf_att ? att[i] : in == buf_hb ? hb[i] : x[i]; };
  const float scale = fixed ? fixed_scale : kernels::max_abs_of<V>(n, source) / 127.0f;
  kernels::quantize_codes<V>(codes, n, scale, source);
  return scale;
}

// RoPE of every query and key head at one position (the cos/sin row loaded on chip).
template <class CFG>
void rope_heads(float q[CFG::q_dim], float k[CFG::kv_dim], const float cos_sin[CFG::max_width], int heads, int kv_heads,
          int head_dim) {
#pragma HLS INLINE
  using V = typename CFG::vector_unit;
  for (int h = 0; h < CFG::n_heads; ++h) {
    if (h >= heads) break;
    kernels::rope<V>(q + h * head_dim, cos_sin, head_dim);
  }
  for (int h = 0; h < CFG::n_kv_heads; ++h) {
    if (h >= kv_heads) break;
    kernels::rope<V>(k + h * head_dim, cos_sin, head_dim);
  }
}

// Per-head RMSNorm of every query and key head of `tokens` tokens (Qwen3's q_norm, k_norm;
// token t's q at t x q_row, its k at t x k_row): the q gain at FloatWord `gains` of `params`,
// the k gain at the next whole word after it, each loaded once.
template <class CFG>
void head_norms(float* q, float* k, int q_row, int k_row, const kernels::FloatWord* params, int gains, int heads,
                int kv_heads, int head_dim, float gain[CFG::max_width], int tokens) {
#pragma HLS INLINE
  using V = typename CFG::vector_unit;
  load_floats<CFG>(params, gains, head_dim, gain);
  for (int t = 0; t < CFG::max_tokens; ++t) {
    if (t >= tokens) break;
    kernels::head_rmsnorm<V, CFG::n_heads>(q + t * q_row, gain, heads, head_dim, CFG::norm_eps);
  }
  load_floats<CFG>(params, gains + (head_dim + kernels::kFloatsPerWord - 1) / kernels::kFloatsPerWord, head_dim, gain);
  for (int t = 0; t < CFG::max_tokens; ++t) {
    if (t >= tokens) break;
    kernels::head_rmsnorm<V, CFG::n_kv_heads>(k + t * k_row, gain, kv_heads, head_dim, CFG::norm_eps);
  }
}

// The KV cache of one layer: CFG::context positions of kv_heads x head_dim elements, one
// scale per (position, head).
template <class CFG>
kernels::KvCache<CFG::kv_bits> layer_cache(typename CFG::kv_elem* kv_k, typename CFG::kv_elem* kv_v, float* kv_k_scale,
                                           float* kv_v_scale, int layer, int kv_heads, int head_dim) {
  const long elems = long(CFG::context) * kv_heads * head_dim, scales = long(CFG::context) * kv_heads;
  const kernels::KvCache<CFG::kv_bits> c = {kv_k + layer * elems, kv_v + layer * elems, kv_k_scale + layer * scales,
                                            kv_v_scale + layer * scales, kv_heads * head_dim, kv_heads};
  return c;
}

// n floats of an on-chip array to the result port.
template <class CFG>
void write_result(const float src[], int n, float* result) {
  for (int c = 0; c < CFG::max_width; ++c) {
#pragma HLS PIPELINE II=1
    if (c >= n) break; else FPGALLM_TRIP("write_result");
    result[c] = src[c];
  }
}

// The words of instruction i from the program bundle, one per cycle.
inline void fetch_instruction(const int* program, int i, int w[fpgallm_isa::kWords]) {
  for (int j = 0; j < fpgallm_isa::kWords; ++j) {
#pragma HLS PIPELINE II=1
    FPGALLM_TRIP("fetch_instruction");
    w[j] = program[i * fpgallm_isa::kWords + j];
  }
}

}  // namespace overlay
