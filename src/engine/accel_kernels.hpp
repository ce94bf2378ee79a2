#pragma once
// The kernel instances the accelerator backend can run: the templates of src/kernels are
// sized at compile time, design.json is read at run time, so the shapes of arch/instances.hpp
// are instantiated (accel_kernels_*.cpp) and looked up here. A design outside the set is
// reported by accel_design_problems() (engine/accel.hpp).
#include <cstdint>
#include <vector>

#include "arch/units.hpp"
#include "kernels/attention.hpp"

namespace engine::accel {

// Compile-time limits shared by every instance (loop bounds of the kernels).
inline constexpr int kMaxTokens = arch::kMaxBlockTokens;  // tokens per matrix-unit call / queries per attention call
inline constexpr int kMaxRows = 1 << 18;    // output features (vocabularies up to 262,144)
inline constexpr int kMaxCols = 1 << 16;    // input features
inline constexpr int kMaxDim = 1 << 16;     // vector-unit vector length
inline constexpr int kMaxHeadDim = 256;
inline constexpr int kMaxContext = 1 << 20;
inline constexpr int kMaxHeads = 256;

// The streaming matrix unit (kernels::matrix_vector_w8a8) on one token: the weights of a
// matrix as PE x SIMD steps in read order (pack_steps), the row folds [first_fold,
// first_fold + ceil(rows/PE)) of it; y[r] = (float(acc[r]) * w_scale[r]) * x_scale for
// r < rows (+ bias[r] when bias is not null), and acc_out[r] = acc[r] when acc_out is not
// null. x holds ceil(cols/SIMD)*SIMD readable codes.
struct MatrixVectorKernel {
  void (*w8a8)(const kernels::i8* steps, int first_fold, const kernels::i8* x, const float* w_scale, float x_scale,
               float* y, kernels::i32* acc_out, int rows, int cols, const float* bias) = nullptr;
};

// kernels::matmul_w8a8 / matmul_w4a8 (bias: null or fp32 [rows]).
struct MatrixKernels {
  void (*w8a8)(const kernels::i8* w, const float* w_scale, const kernels::i8* x, const float* x_scale, float* y,
               kernels::i32* acc_out, int tokens, int rows, int cols, int y_stride, const float* bias) = nullptr;
  void (*w4a8)(const kernels::u8* packed, const std::uint16_t* w_scale, int group, const kernels::i8* x,
               const float* x_scale, float* y, int tokens, int rows, int cols, int y_stride,
               const float* bias) = nullptr;
};

template <int BITS>
struct AttentionKernels {
  void (*store)(kernels::KvCache<BITS> cache, const float* k, const float* v, int tokens, int pos0,
                int head_dim) = nullptr;
  void (*attend)(float* out, const float* q, kernels::KvCache<BITS> cache, int tokens, int pos0, int n_heads,
                 int head_dim, int head_begin, int head_end) = nullptr;
};

struct VectorKernels {
  void (*rmsnorm)(float* out, const float* x, const float* gain, int n, float eps) = nullptr;
  void (*head_rmsnorm)(float* x, const float* gain, int heads, int head_dim, float eps) = nullptr;
  float (*quantize_dynamic)(kernels::i8* q, const float* x, int n) = nullptr;
  void (*quantize_static)(kernels::i8* q, const float* x, float scale, int n) = nullptr;
  void (*residual_add)(float* x, const float* y, int n) = nullptr;
  void (*swiglu)(float* gate, const float* up, int n) = nullptr;
  void (*rope)(float* vec, const float* cos_sin, int n) = nullptr;
  int (*argmax)(const float* x, int n) = nullptr;
  AttentionKernels<8> kv8;
  AttentionKernels<16> kv16;
  AttentionKernels<32> kv32;
};

// Null members when the shape is not instantiated.
MatrixKernels matrix_kernels(int pe, int simd, int tile_rows, int tile_cols);
MatrixVectorKernel matrix_vector_kernel(int pe, int simd);
// An int8 matrix [rows][cols] as the streaming matrix unit reads it: for each row fold, for
// each column fold, the PE x SIMD block row by row, zero past the edge (the layout fpgallm
// emit writes to the weight channels, without the channel striping).
std::vector<kernels::i8> pack_steps(const kernels::i8* w, int rows, int cols, int pe, int simd);
VectorKernels vector_kernels(int lanes, int exp_table_bits);

}  // namespace engine::accel
