#pragma once
// The arithmetic of the accelerator's int8 matrix unit as the Python bindings use it, exactly
// docs/quantization.md sections 1, 3.1 and 4 (W8A8), generalised from matrix x vector to
// matrix x matrix with both operands quantized per row along the contraction dimension:
//
//   scale     s = amax / 127.0f over the row (fp32; 0 for an all-zero row)
//   quantize  q = sat(rne(v * (1.0f / s)), 127)   (q = 0 when s = 0; codes -127..127)
//   product   acc[m][n] = sum_k qa[m][k] * qb[n][k]          (int32, exact)
//   output    y[m][n] = (float(acc[m][n]) * sb[n]) * sa[m]   (fp32, in this order)
//
// With a = activations (one row per token) and b = weights (one row per output channel)
// this is W8A8 with dynamic per-token activations, bit for bit. One routine serves the
// forward product (X W^T) and both backward products of a linear layer (dY W and dY^T X).
//
// linear_int8 runs on the accelerator's own kernels (kernels::quantize_dynamic and
// kernels::matmul_w8a8 of src/kernels, the HLS C++ in C simulation) when they are built;
// the *_reference functions are a plain C++ statement of the same contract, kept as the
// second implementation the tests compare against (besides an independent numpy one).
#include <cstdint>
#include <vector>

namespace fpgallm_python {

constexpr int kInt8Max = 127;

// Throws std::invalid_argument (a ValueError in Python) unless 0 <= threads <= 1024.
void check_threads(int threads);

// Quantizes `rows` rows of `cols` floats; q[rows*cols], scales[rows].
void quantize_rows(const float* x, int rows, int cols, std::int8_t* q, float* scales);

// acc[m][n] = sum_k a[m][k] * b[n][k], a [m_rows][k], b [n_rows][k], exact int32.
// threads <= 0: OpenMP's default.
void matmul_int8_int32(const std::int8_t* a, const std::int8_t* b, std::int32_t* acc, int m_rows, int n_rows,
                       int k, int threads = 0);

// y[m][n] = float(sum_k qa[m][k] qb[n][k]) * (sa[m] * sb[n]).
void matmul_int8_dequant(const std::int8_t* qa, const float* sa, const std::int8_t* qb, const float* sb, float* y,
                         int m_rows, int n_rows, int k, int threads = 0);

// The whole product of a linear layer on the matrix unit: quantize both operands per row,
// multiply, dequantize. y [m_rows][n_rows] ~= a [m_rows][k] * b [n_rows][k]^T.
// Throws std::invalid_argument when k exceeds kKernelMaxCols.
void linear_int8(const float* a, const float* b, float* y, int m_rows, int n_rows, int k, int threads = 0);
// The same with quantize_rows and matmul_int8_dequant above (no kernels).
void linear_int8_reference(const float* a, const float* b, float* y, int m_rows, int n_rows, int k,
                           int threads = 0);
// Which implementation linear_int8 runs, for reports.
const char* matrix_unit_source();

constexpr int kKernelTokens = 64;       // activation rows per matrix-unit invocation
constexpr int kKernelMaxCols = 131072;  // longest contraction of the instance (int32 bound: 133,000)

// The same product in fp32 with the reference engine's dot-product order (engine::matvec),
// for modules run without quantization.
void linear_fp32(const float* a, const float* b, float* y, int m_rows, int n_rows, int k);

}  // namespace fpgallm_python
