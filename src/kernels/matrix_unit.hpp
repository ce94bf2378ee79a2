#pragma once
// The matrix unit: an R x C array of integer MACs (R = PE output rows in parallel, C = SIMD
// input columns per row per cycle) computing y[t][r] = sum_c W[r][c] * x[t][c] for T tokens,
// weights int8 (per-row fp32 scale) or int4 (per-group fp16 scale, unpacked to int8 at the
// load stage), activations int8, accumulators int32, and the requantization of
// docs/quantization.md section 4 at its output.
//
// The weight matrix is walked in tiles of TILE_ROWS x TILE_COLS (row tile by row tile, the
// column tiles of one row tile in order). Tile loads are double-buffered: tile i+1 is
// loaded into one buffer while tile i is multiplied out of the other; the loop below is the
// software-pipelined form that Vitis schedules as overlapped load and compute (the two
// buffers are independent, declared so with DEPENDENCE false). A tile beyond the matrix's
// edge is zero-padded, so every tile step does the same work and integer results do not
// depend on the tile shape.
#include "kernels/numerics.hpp"
#include "kernels/stream.hpp"
#include "kernels/trip_count.hpp"
namespace kernels {

// Compile-time shape of one matrix-unit instance.
//   PE          output rows computed in parallel (design matrix_unit.rows)
//   SIMD        input columns consumed per cycle per row (design matrix_unit.cols)
//   TILE_ROWS   rows of one on-chip weight tile (design tiling.tile_rows), a multiple of PE
//   TILE_COLS   columns of one weight tile (design tiling.tile_cols), a multiple of SIMD
//   MAX_TOKENS  activation vectors multiplied per weight tile (1 for decode GEMV)
//   MAX_ROWS, MAX_COLS  the largest matrix the instance accepts (loop bounds)
template <int PE, int SIMD, int TILE_ROWS, int TILE_COLS, int MAX_TOKENS, int MAX_ROWS, int MAX_COLS>
struct MatrixUnitConfig {
  static constexpr int pe = PE;
  static constexpr int simd = SIMD;
  static constexpr int tile_rows = TILE_ROWS;
  static constexpr int tile_cols = TILE_COLS;
  static constexpr int max_tokens = MAX_TOKENS;
  static constexpr int max_rows = MAX_ROWS;
  static constexpr int max_cols = MAX_COLS;
  static constexpr int max_row_tiles = (MAX_ROWS + TILE_ROWS - 1) / TILE_ROWS;
  static constexpr int max_col_tiles = (MAX_COLS + TILE_COLS - 1) / TILE_COLS;
  static constexpr int max_tiles = max_row_tiles * max_col_tiles;
  static_assert(PE >= 1 && (PE & (PE - 1)) == 0, "PE: a power of two");
  static_assert(SIMD >= 1 && (SIMD & (SIMD - 1)) == 0, "SIMD: a power of two");
  static_assert(TILE_ROWS % PE == 0, "PE must divide the tile rows");
  static_assert(TILE_COLS % SIMD == 0, "SIMD must divide the tile columns");
  static_assert(MAX_TOKENS >= 1, "at least one token");
  // |acc| <= 127 * 127 * cols must fit in int32 (docs/quantization.md section 4).
  static_assert(MAX_COLS < 133000, "int32 accumulators overflow beyond 133,000 columns");
};

// binary16 bits -> binary32 (exact, subnormals included).
inline float half_to_float(std::uint16_t h) {
  const u32 sign = static_cast<u32>(h >> 15) << 31;
  const u32 exp = (h >> 10) & 0x1fu;
  const u32 man = h & 0x3ffu;
  if (exp == 0) {
    const float mag = static_cast<float>(man) * 5.9604644775390625e-8f;  // man * 2^-24, exact
    return sign ? -mag : mag;
  }
  if (exp == 31) return bits_to_float(sign | 0x7f800000u | (man << 13));
  return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

// The bias of a linear layer (Qwen2's q/k/v projections), folded into the store stage of
// the matrix unit: one fp32 add after the requantization, the order of the reference
// engine (the product, then the bias). A layer without bias skips the add (adding 0 would
// turn -0 into +0).
inline float add_bias(float requantized, float bias) { return requantized + bias; }

namespace detail {

// Loads one activation column slab x[t][c0 .. c0+TILE_COLS) (zero beyond cols); token t's
// codes start at x + t * x_stride.
template <class CFG>
inline void load_activation_tile(i8 xbuf[CFG::max_tokens][CFG::tile_cols], const i8* x, int tokens, int cols,
                                 int c0, int x_stride) {
  const int valid_cols = cols - c0 < CFG::tile_cols ? cols - c0 : CFG::tile_cols;  // zero past it, whole SIMD words
  for (int t = 0; t < CFG::max_tokens; ++t) {
    if (t >= tokens) break;
    for (int c = 0; c < CFG::tile_cols; c += CFG::simd) {  // one SIMD word per cycle (k unrolled by the pipeline)
#pragma HLS PIPELINE II=1
      if (c >= valid_cols) break; else FPGALLM_TRIP("load_activation_tile");
      for (int k = 0; k < CFG::simd; ++k)
        xbuf[t][c + k] = c + k < valid_cols ? x[static_cast<long>(t) * x_stride + c0 + c + k] : i8(0);
    }
  }
}

// Loads the int8 weight tile at (r0, c0), zero-padded past the matrix edge. Weights: const
// i8* (row-major, the accelerator backend) or a type with the same + and [] (the emitted
// top's view of the weight channels, overlay::StreamedMatrix).
template <class CFG, class Weights>
inline void load_weight_tile_i8(i8 wbuf[CFG::tile_rows][CFG::tile_cols], const Weights& w, int rows, int cols, int r0,
                                int c0) {
  // Rows past the matrix are never read (compute stops at the last row); columns are
  // zero-padded to whole SIMD words, the width compute reads, one SIMD word per cycle.
  const int valid_cols = cols - c0 < CFG::tile_cols ? cols - c0 : CFG::tile_cols;
  for (int r = 0; r < CFG::tile_rows; ++r) {
    if (r0 + r >= rows) break;
    const Weights src = w + static_cast<long>(r0 + r) * cols + c0;
    for (int c = 0; c < CFG::tile_cols; c += CFG::simd) {  // k unrolled by the pipeline
#pragma HLS PIPELINE II=1
      if (c >= valid_cols) break; else FPGALLM_TRIP("load_weight_tile");
      for (int k = 0; k < CFG::simd; ++k)
        wbuf[r][c + k] = c + k < valid_cols ? src[c + k] : i8(0);
    }
  }
}

// Loads and unpacks the int4 weight tile at (r0, c0): chunk byte b of a 32-column chunk
// holds column b (low nibble) and b + 16 (high nibble), code = nibble - 8. Packed: const u8*
// (the accelerator backend) or a type with the same + and [] (the emitted top's view of the
// weight channels, overlay::StripedWeights).
template <class CFG, class Packed>
inline void load_weight_tile_i4(i8 wbuf[CFG::tile_rows][CFG::tile_cols], const Packed& packed, int rows, int cols,
                                int r0, int c0) {
  const int row_bytes = (cols + 31) / 32 * 16;
  for (int r = 0; r < CFG::tile_rows; ++r) {
    if (r0 + r >= rows) break;
    const Packed src = packed + static_cast<long>(r0 + r) * row_bytes;
    for (int c = 0; c < CFG::tile_cols; c += 32) {
#pragma HLS PIPELINE II=1
      const int chunk = (c0 + c) / 32;  FPGALLM_TRIP("load_weight_tile");
      for (int b = 0; b < 16; ++b) {
#pragma HLS UNROLL
        const bool in = c0 + c < cols;
        const u8 byte = in ? src[chunk * 16 + b] : u8(0x88);
        wbuf[r][c + b] = static_cast<i8>(static_cast<int>(byte & 0x0f) - 8);
        wbuf[r][c + b + 16] = static_cast<i8>(static_cast<int>(byte >> 4) - 8);
      }
    }
  }
}

// acc[t][r] += sum over the tile's columns of wbuf[r][c] * xbuf[t][c]: PE rows x SIMD
// columns per step, the row fold and column fold flattened into one II=1 pipeline.
template <class CFG>
inline void compute_tile_i8(i32 acc[CFG::max_tokens][CFG::tile_rows], const i8 wbuf[CFG::tile_rows][CFG::tile_cols],
                            const i8 xbuf[CFG::max_tokens][CFG::tile_cols], int tokens, int tile_rows_used,
                            int tile_cols_used) {
  for (int t = 0; t < CFG::max_tokens; ++t) {
    if (t >= tokens) break;
    for (int rf = 0; rf < CFG::tile_rows; rf += CFG::pe) {
      if (rf >= tile_rows_used) break;
      for (int cf = 0; cf < CFG::tile_cols; cf += CFG::simd) {
#pragma HLS PIPELINE II=1
        if (cf >= tile_cols_used) break; else FPGALLM_TRIP("compute_tile");
        for (int pe = 0; pe < CFG::pe; ++pe) {
#pragma HLS UNROLL
          if (rf + pe >= tile_rows_used) break;  // past the matrix edge: no weights loaded
          i32 s = 0;  // products of int8 codes (|q| <= 127) fit in 16 bits: one DSP each
          for (int k = 0; k < CFG::simd; ++k) {
#pragma HLS UNROLL
            s += static_cast<std::int16_t>(wbuf[rf + pe][cf + k]) * static_cast<std::int16_t>(xbuf[t][cf + k]);
          }
          acc[t][rf + pe] += s;
        }
      }
    }
  }
}

// The int4 variant: one int32 accumulator per (token, row) for the current group; at the
// end of each group (in increasing column order) sum += float(acc) * float(scale) and acc
// restarts. A group may span column tiles (gacc carries over). A SIMD word wider than 32
// columns is reduced in 32-column parts, so a group boundary (a multiple of 32) always
// falls between parts.
template <class CFG, class Scales>
inline void compute_tile_i4(float sum[CFG::max_tokens][CFG::tile_rows], i32 gacc[CFG::max_tokens][CFG::tile_rows],
                            const i8 wbuf[CFG::tile_rows][CFG::tile_cols],
                            const i8 xbuf[CFG::max_tokens][CFG::tile_cols], const Scales& scale, int groups,
                            int group, int tokens, int r0, int tile_rows_used, int c0, int cols) {
  constexpr int kPart = CFG::simd < 32 ? CFG::simd : 32;
  for (int t = 0; t < CFG::max_tokens; ++t) {
    if (t >= tokens) break;
    for (int rf = 0; rf < CFG::tile_rows; rf += CFG::pe) {
      if (rf >= tile_rows_used) break;
      for (int cf = 0; cf < CFG::tile_cols; cf += CFG::simd) {
#pragma HLS PIPELINE II=1
        if (c0 + cf >= cols) break; else FPGALLM_TRIP("compute_tile");
        for (int pe = 0; pe < CFG::pe; ++pe) {
#pragma HLS UNROLL
          const int r = rf + pe;
          if (r >= tile_rows_used) break;  // past the matrix edge: no weights loaded, no scale to read
          for (int part = 0; part < CFG::simd; part += kPart) {
#pragma HLS UNROLL
            i32 s = 0;
            for (int k = 0; k < kPart; ++k) {
#pragma HLS UNROLL
              s += static_cast<i32>(wbuf[r][cf + part + k]) * static_cast<i32>(xbuf[t][cf + part + k]);
            }
            gacc[t][r] += s;
            const int first = c0 + cf + part, next = first + kPart;
            if (first < cols && (next % group == 0 || next >= cols)) {
              const float sc = half_to_float(scale[static_cast<long>(r0 + r) * groups + first / group]);
              sum[t][r] = sum[t][r] + static_cast<float>(gacc[t][r]) * sc;
              gacc[t][r] = 0;
            }
          }
        }
      }
    }
  }
}

}  // namespace detail

// W8A8 (docs/quantization.md section 4):
//   acc[t][r] = sum_c w[r][c] * x[t][c]            (int32, exact)
//   y[t * y_stride + r] = (float(acc) * w_scale[r]) * x_scale[t]  (+ bias[r], when given)
// w: int8 [rows][cols]; x: int8 [tokens][cols] (token t at t x x_stride, cols when 0);
// acc_out (optional, may be null): the int32
// accumulators [tokens][rows] for tests and for static requantization; bias (optional):
// fp32 [rows] added in the store stage (add_bias).
// The accelerator backend passes pointers. The emitted top's prompt call passes views
// with the same [] (and + for the weights): the weights and row scales as they lie on the
// weight and scale bundles, the bias in the parameter bundle (false when absent), and the
// destination array the instruction names (overlay.hpp).
template <class CFG, class Weights = const i8*, class RowScales = const float*, class Out = float*,
          class Bias = const float*>
void matmul_w8a8(Weights w, RowScales w_scale, const i8* x, const float* x_scale, Out y, i32* acc_out, int tokens,
                 int rows, int cols, int y_stride, Bias bias = nullptr, int x_stride = 0) {
  const int xs = x_stride > 0 ? x_stride : cols;
  i8 wbuf[2][CFG::tile_rows][CFG::tile_cols];
  i8 xbuf[2][CFG::max_tokens][CFG::tile_cols];
  i32 acc[CFG::max_tokens][CFG::tile_rows];
#pragma HLS ARRAY_PARTITION variable=wbuf dim=2 cyclic factor=CFG::pe
#pragma HLS ARRAY_PARTITION variable=wbuf dim=3 cyclic factor=CFG::simd
#pragma HLS ARRAY_PARTITION variable=xbuf dim=3 cyclic factor=CFG::simd
#pragma HLS ARRAY_PARTITION variable=acc dim=2 cyclic factor=CFG::pe
#pragma HLS DEPENDENCE variable=wbuf inter false
  const int row_tiles = (rows + CFG::tile_rows - 1) / CFG::tile_rows;
  const int col_tiles = (cols + CFG::tile_cols - 1) / CFG::tile_cols;
  const int tiles = row_tiles * col_tiles;
  detail::load_weight_tile_i8<CFG>(wbuf[0], w, rows, cols, 0, 0);
  detail::load_activation_tile<CFG>(xbuf[0], x, tokens, cols, 0, xs);
  for (int i = 0; i < CFG::max_tiles; ++i) {
    if (i >= tiles) break;
    const int rt = i / col_tiles, ct = i % col_tiles;
    const int r0 = rt * CFG::tile_rows, c0 = ct * CFG::tile_cols;
    if (i + 1 < tiles) {  // load stage of the next tile, overlapped with this tile's compute
      const int nr0 = (i + 1) / col_tiles * CFG::tile_rows, nc0 = (i + 1) % col_tiles * CFG::tile_cols;
      detail::load_weight_tile_i8<CFG>(wbuf[(i + 1) & 1], w, rows, cols, nr0, nc0);
      detail::load_activation_tile<CFG>(xbuf[(i + 1) & 1], x, tokens, cols, nc0, xs);
    }
    if (ct == 0) {
      for (int t = 0; t < CFG::max_tokens; ++t) {
        if (t >= tokens) break;
        for (int r = 0; r < CFG::tile_rows; ++r) {
#pragma HLS UNROLL factor=CFG::pe
          acc[t][r] = 0;
        }
      }
    }
    const int rows_used = rows - r0 < CFG::tile_rows ? rows - r0 : CFG::tile_rows;
    const int cols_used = cols - c0 < CFG::tile_cols ? cols - c0 : CFG::tile_cols;
    detail::compute_tile_i8<CFG>(acc, wbuf[i & 1], xbuf[i & 1], tokens, rows_used, cols_used);
    if (ct == col_tiles - 1) {  // store stage: requantize the finished row tile
      for (int t = 0; t < CFG::max_tokens; ++t) {
        if (t >= tokens) break;
        for (int r = 0; r < CFG::tile_rows; ++r) {
#pragma HLS PIPELINE II=1
          if (r >= rows_used) break; else FPGALLM_TRIP("store_tile");
          const float value = (static_cast<float>(acc[t][r]) * w_scale[r0 + r]) * x_scale[t];
          y[static_cast<long>(t) * y_stride + r0 + r] = bias ? add_bias(value, bias[r0 + r]) : value;
          if (acc_out) acc_out[static_cast<long>(t) * y_stride + r0 + r] = acc[t][r];
        }
      }
    }
  }
}

// W4A8 (docs/quantization.md section 4): per row, groups in increasing order,
//   sum = sum + float(acc_group) * float(scale[r][g]);  y = sum * x_scale[t].
// group: 32, 64 or 128 columns (a multiple of 32, as the packing requires).
// packed: [rows][(cols + 31) / 32 * 16] bytes; w_scale: fp16 bits [rows][groups]. Both are
// read through + and [] only: plain pointers in the accelerator backend, the weight
// channels in the emitted top (overlay::StripedWeights); y and bias as in matmul_w8a8.
template <class CFG, class Packed = const u8*, class Scales = const std::uint16_t*, class Out = float*,
          class Bias = const float*>
void matmul_w4a8(Packed packed, Scales w_scale, int group, const i8* x, const float* x_scale,
                 Out y, int tokens, int rows, int cols, int y_stride, Bias bias = nullptr, int x_stride = 0) {
  const int xs = x_stride > 0 ? x_stride : cols;
  static_assert(CFG::tile_cols % 32 == 0, "int4 tiles hold whole 32-column chunks");
  i8 wbuf[2][CFG::tile_rows][CFG::tile_cols];
  i8 xbuf[2][CFG::max_tokens][CFG::tile_cols];
  float sum[CFG::max_tokens][CFG::tile_rows];
  i32 gacc[CFG::max_tokens][CFG::tile_rows];
#pragma HLS ARRAY_PARTITION variable=wbuf dim=2 cyclic factor=CFG::pe
#pragma HLS ARRAY_PARTITION variable=wbuf dim=3 cyclic factor=CFG::simd
#pragma HLS ARRAY_PARTITION variable=xbuf dim=3 cyclic factor=CFG::simd
#pragma HLS ARRAY_PARTITION variable=sum dim=2 cyclic factor=CFG::pe
#pragma HLS ARRAY_PARTITION variable=gacc dim=2 cyclic factor=CFG::pe
#pragma HLS DEPENDENCE variable=wbuf inter false
  const int groups = (cols + group - 1) / group;
  const int row_tiles = (rows + CFG::tile_rows - 1) / CFG::tile_rows;
  const int col_tiles = (cols + CFG::tile_cols - 1) / CFG::tile_cols;
  const int tiles = row_tiles * col_tiles;
  detail::load_weight_tile_i4<CFG>(wbuf[0], packed, rows, cols, 0, 0);
  detail::load_activation_tile<CFG>(xbuf[0], x, tokens, cols, 0, xs);
  for (int i = 0; i < CFG::max_tiles; ++i) {
    if (i >= tiles) break;
    const int rt = i / col_tiles, ct = i % col_tiles;
    const int r0 = rt * CFG::tile_rows, c0 = ct * CFG::tile_cols;
    if (i + 1 < tiles) {
      const int nr0 = (i + 1) / col_tiles * CFG::tile_rows, nc0 = (i + 1) % col_tiles * CFG::tile_cols;
      detail::load_weight_tile_i4<CFG>(wbuf[(i + 1) & 1], packed, rows, cols, nr0, nc0);
      detail::load_activation_tile<CFG>(xbuf[(i + 1) & 1], x, tokens, cols, nc0, xs);
    }
    if (ct == 0) {
      for (int t = 0; t < CFG::max_tokens; ++t) {
        if (t >= tokens) break;
        for (int r = 0; r < CFG::tile_rows; ++r) {
#pragma HLS UNROLL factor=CFG::pe
          sum[t][r] = 0.0f;
          gacc[t][r] = 0;
        }
      }
    }
    const int rows_used = rows - r0 < CFG::tile_rows ? rows - r0 : CFG::tile_rows;
    detail::compute_tile_i4<CFG>(sum, gacc, wbuf[i & 1], xbuf[i & 1], w_scale, groups, group, tokens, r0, rows_used,
                                 c0, cols);
    if (ct == col_tiles - 1) {
      for (int t = 0; t < CFG::max_tokens; ++t) {
        if (t >= tokens) break;
        for (int r = 0; r < CFG::tile_rows; ++r) {
#pragma HLS PIPELINE II=1
          if (r >= rows_used) break; else FPGALLM_TRIP("store_tile");
          const float value = sum[t][r] * x_scale[t];
          y[static_cast<long>(t) * y_stride + r0 + r] = bias ? add_bias(value, bias[r0 + r]) : value;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// The streaming matrix-vector unit (decode GEMV), finn-hlslib's MVAU structure: the
// weights stream from off-chip memory in 512-bit words, in exactly the order the unit
// consumes them, and the row fold (PE rows) and column fold (SIMD columns) are one
// flattened loop at II=1. Processes of the DATAFLOW region around it (the emitted top):
//   read_weight_channel x CHANNELS   one m_axi bundle each, bursts of consecutive words
//   gather_weight_steps               CHANNELS words per beat -> one PE x SIMD step
//   matrix_vector_w8a8                the MAC array: y_acc[r] = sum_c W[r][c] x[c]
//   (store)                           requantize_w8a8 at the unit's output rate
//
// Weight stream of a matrix (written by fpgallm emit, codegen/weight_layout): steps in
// order (row fold nf, column fold sf), a step holding W[nf*PE + pe][sf*SIMD + k] at byte
// pe*SIMD + k, zero past the matrix edge; the stream is zero-padded to a whole number of
// gather groups; word w of it lies on channel w % CHANNELS at word w / CHANNELS of that
// channel's part of the matrix.

// One 512-bit memory word of 64 int8 lanes. A struct of a byte array is a 512-bit
// aggregate, which Vitis HLS maps to a 512-bit m_axi data port.
struct PackedWord {
  i8 lane[64];
};
// 16 fp32 values in one 512-bit word (row scales, fp32 parameters).
struct FloatWord {
  float value[16];
};
constexpr int kWordBytes = 64;
constexpr int kFloatsPerWord = 16;

// lcm(a, b) for 1 <= a, b <= 4096 (compile time, bounded loop).
constexpr int lcm_small(int a, int b) {
  int m = a;
  for (int k = 1; k <= 4096; ++k) {
    if ((k * a) % b == 0) {
      m = k * a;
      break;
    }
  }
  return m;
}

// Compile-time shape of the streaming matrix-vector unit.
//   PE        output rows in parallel (design matrix_unit.rows)
//   SIMD      input columns per row per cycle (design matrix_unit.cols); PE * SIMD int8
//             weights (a multiple of 64 bytes) are consumed per cycle
//   CHANNELS  weight channels of the design (memory.weight_channels): one 512-bit m_axi
//             bundle each, one word per channel per beat
//   MAX_ROWS, MAX_COLS  the largest matrix (loop bounds)
template <int PE, int SIMD, int CHANNELS, int MAX_ROWS, int MAX_COLS>
struct MatrixVectorConfig {
  static constexpr int pe = PE;
  static constexpr int simd = SIMD;
  static constexpr int channels = CHANNELS;
  static constexpr int max_rows = MAX_ROWS;
  static constexpr int max_cols = MAX_COLS;
  static constexpr int step_words = PE * SIMD / kWordBytes;           // words per PE x SIMD step
  static constexpr int group_words = lcm_small(step_words, CHANNELS);  // words per gather group
  static constexpr int group_beats = group_words / CHANNELS;           // beats per group
  static constexpr int group_steps = group_words / step_words;         // steps per group
  // The gather reads each channel group_beats times and writes group_steps steps per group.
  static constexpr int gather_ii = group_beats > group_steps ? group_beats : group_steps;
  static constexpr int max_row_folds = (MAX_ROWS + PE - 1) / PE;
  static constexpr int max_col_folds = (MAX_COLS + SIMD - 1) / SIMD;
  static constexpr int max_steps = max_row_folds * max_col_folds;
  static constexpr int max_groups = (max_steps + group_steps - 1) / group_steps;
  static constexpr int max_beats = max_groups * group_beats;
  static constexpr int padded_cols = max_col_folds * SIMD;  // activation buffer length
  static constexpr int scale_words = (PE + kFloatsPerWord - 1) / kFloatsPerWord;  // per row fold
  static_assert(PE >= 1 && SIMD >= 1, "positive unit shape");
  static_assert((PE * SIMD) % kWordBytes == 0, "PE * SIMD must be whole 512-bit words (a multiple of 64)");
  static_assert(CHANNELS >= 1 && CHANNELS <= 64, "1 to 64 weight channels");
  static_assert(group_words % CHANNELS == 0 && group_words % step_words == 0, "gather group");
  static_assert(MAX_COLS < 133000, "int32 accumulators overflow beyond 133,000 columns");
};

// PE weights of one step: PE x SIMD int8 codes in step order.
template <int WORDS>
struct WeightStep {
  PackedWord word[WORDS];
};
// The PE accumulators of one finished row fold.
template <int PE>
struct AccWord {
  i32 acc[PE];
};

// Sizes of one matrix on the weight stream (the emitter lays the stream out with the same
// function).
struct MatrixWords {
  int steps;   // row folds x column folds
  int groups;  // gather groups (steps padded to whole groups)
  int beats;   // words per channel
};
inline MatrixWords stream_words(int pe, int simd, int channels, int rows, int cols) {
  const int step_words = pe * simd / kWordBytes;
  const int group_words = lcm_small(step_words, channels);
  const int group_steps = group_words / step_words;
  MatrixWords m;
  m.steps = ((rows + pe - 1) / pe) * ((cols + simd - 1) / simd);
  m.groups = (m.steps + group_steps - 1) / group_steps;
  m.beats = m.groups * (group_words / channels);
  return m;
}
template <class CFG>
inline MatrixWords matrix_words(int rows, int cols) {
  return stream_words(CFG::pe, CFG::simd, CFG::channels, rows, cols);
}

// Process: `beats` consecutive words of one channel from word `base` (one burst stream).
// (`out`, and the streams below: kernels::Fifo<T, DEPTH> of any depth.)
template <class CFG, class WordOut>
void read_weight_channel(const PackedWord* port, int base, int beats, WordOut& out) {
  for (int i = 0; i < CFG::max_beats; ++i) {
#pragma HLS PIPELINE II=1
    if (i >= beats) break; else FPGALLM_TRIP("read_weight_channel");
    out.write(port[base + i]);
  }
}

// Process: CHANNELS words per beat in, PE x SIMD steps out (the width converter between
// the memory beat and the MAC array); writes `steps` steps from `groups` groups.
template <class CFG, class WordIn, class StepOut>
void gather_weight_steps(WordIn in[CFG::channels], StepOut& out, int groups, int steps) {
  for (int g = 0; g < CFG::max_groups; ++g) {
#pragma HLS PIPELINE II=CFG::gather_ii
    if (g >= groups) break; else FPGALLM_TRIP("gather_weight_steps");
    PackedWord buf[CFG::group_words];
#pragma HLS ARRAY_PARTITION variable=buf complete
    for (int b = 0; b < CFG::group_beats; ++b)
      for (int c = 0; c < CFG::channels; ++c) buf[b * CFG::channels + c] = in[c].read();
    for (int s = 0; s < CFG::group_steps; ++s) {
      WeightStep<CFG::step_words> step;
      for (int k = 0; k < CFG::step_words; ++k) step.word[k] = buf[s * CFG::step_words + k];
      if (g * CFG::group_steps + s < steps) out.write(step);
    }
  }
}

// The matrix-vector entry point (the MAC array; also the reference the RTL matrix unit is
// checked against): for one int8 activation vector x (padded_cols readable codes; the
// weights past `cols` are zero, so the codes there do not matter), reads the
// ceil(rows/PE) * ceil(cols/SIMD) weight steps of the matrix and writes one AccWord of
// exact int32 sums acc[r] = sum_c W[r][c] * x[c] per row fold. One flattened loop over
// steps at II=1; the accumulators restart at the first column fold of each row fold.
// `weights` and `out` are any types with hls::stream's read()/write() (kernels::Fifo in
// the kernel; the accelerator backend reads steps straight from memory).
template <class CFG, class StepIn, class AccOut>
void matrix_vector_w8a8(StepIn& weights, const i8 x[CFG::padded_cols], AccOut& out, int rows, int cols) {
  // A row's SIMD weights lie in one word (SIMD <= 64, which divides 64) or fill SIMD/64 words.
  constexpr int kChunk = CFG::simd < kWordBytes ? CFG::simd : kWordBytes;
  constexpr int kChunks = CFG::simd / kChunk;
  static_assert(kWordBytes % kChunk == 0 && CFG::simd % kChunk == 0, "SIMD: a divisor or a multiple of 64");
  const int col_folds = (cols + CFG::simd - 1) / CFG::simd;
  const int steps = ((rows + CFG::pe - 1) / CFG::pe) * col_folds;
  i32 acc[CFG::pe];
#pragma HLS ARRAY_PARTITION variable=acc complete
  int sf = 0;
  for (int i = 0; i < CFG::max_steps; ++i) {
#pragma HLS PIPELINE II=1
    if (i >= steps) break; else FPGALLM_TRIP("matrix_vector_w8a8");
    const WeightStep<CFG::step_words>& w = weights.read();
    for (int pe = 0; pe < CFG::pe; ++pe) {
      i32 s = 0;  // products of int8 codes (|q| <= 127) fit in 16 bits: one DSP each
      // Row pe's SIMD weights: kChunks runs of kChunk consecutive lanes of one word.
      for (int c = 0; c < kChunks; ++c) {
        const PackedWord& word = w.word[(pe * CFG::simd) / kWordBytes + c];
        const int lane0 = (pe * CFG::simd) % kWordBytes;
        for (int k = 0; k < kChunk; ++k)
          s += static_cast<std::int16_t>(word.lane[lane0 + k]) *
               static_cast<std::int16_t>(x[sf * CFG::simd + c * kChunk + k]);
      }
      acc[pe] = (sf == 0 ? 0 : acc[pe]) + s;
    }
    if (sf == col_folds - 1) {
      AccWord<CFG::pe> o;
      for (int pe = 0; pe < CFG::pe; ++pe) o.acc[pe] = acc[pe];
      out.write(o);
      sf = 0;
    } else {
      ++sf;
    }
  }
}

// The W8A8 requantization of docs/quantization.md section 4, one output:
// y = (float(acc) * s_w) * s_x.
inline float requantize_w8a8(i32 acc, float w_scale, float x_scale) {
  return (static_cast<float>(acc) * w_scale) * x_scale;
}

// Static requantization of int32 accumulators straight to int8 codes for a consumer with
// a fixed input scale s_out: q = sat(rne(((float(acc) * s_w) * s_x) * (1 / s_out)), 127),
// i.e. the quantizer of section 1 applied to the W8A8 output value.
template <int MAX_N>
void requantize_i8(i8* q, const i32* acc, const float* w_scale, float x_scale, float out_scale, int n) {
  const float inv = out_scale == 0.0f ? 0.0f : 1.0f / out_scale;
  for (int i = 0; i < MAX_N; ++i) {
#pragma HLS PIPELINE II=1
    if (i >= n) break;
    const float v = (static_cast<float>(acc[i]) * w_scale[i]) * x_scale;
    q[i] = out_scale == 0.0f ? i8(0) : saturate_round_i8(v * inv);
  }
}

}  // namespace kernels
