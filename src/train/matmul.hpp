#pragma once
// The one matrix-product interface every product of the training forward and backward pass
// goes through, with two implementations:
//   RefMatmul<T>  - plain products in T (fp32, or fp64 for gradient checks);
//   Int8Matmul    - the accelerator's matrix-unit numerics: each row of op(A) and each
//                   column of op(B) is cut into blocks along the reduction dimension and
//                   each block is quantized to int8 with its own symmetric scale
//                   (docs/quantization.md section 1: s = amax / 127, round to nearest even,
//                   saturate to -127..127); products are summed exactly in int32 per
//                   block, and the blocks are combined in fp32 as
//                   sum += (float(acc) * s_col) * s_row (section 4's grouped form). With
//                   one block per row this is exactly W8A8 inference. See docs/training.md.
#include <cstdint>
#include <memory>
#include <string>

namespace train {

// C[m][n] = alpha * op(A)[m][k] op(B)[k][n]  (+ C when accumulate), row-major with leading
// dimensions. op(A)[i][p] = trans_a ? a[p*lda + i] : a[i*lda + p];
// op(B)[p][j] = trans_b ? b[j*ldb + p] : b[p*ldb + j].
template <typename T>
struct Gemm {
  int m = 0, n = 0, k = 0;
  const T* a = nullptr;
  int lda = 0;
  bool trans_a = false;
  const T* b = nullptr;
  int ldb = 0;
  bool trans_b = false;
  T* c = nullptr;
  int ldc = 0;
  T alpha = 1;
  bool accumulate = false;
};

enum class Backend { ref, accel };
const char* to_string(Backend b);
Backend backend_from_string(const std::string& s);  // "ref" | "accel"; throws std::invalid_argument

template <typename T>
class Matmul {
 public:
  virtual ~Matmul() = default;
  // Safe to call from several threads at once on disjoint outputs.
  virtual void gemm(const Gemm<T>& g) = 0;
  // Multiply-accumulates performed so far (m x n x k summed over calls).
  std::uint64_t macs() const { return macs_; }

 protected:
  void count(const Gemm<T>& g);

 private:
  std::uint64_t macs_ = 0;
};

template <typename T>
class RefMatmul final : public Matmul<T> {
 public:
  void gemm(const Gemm<T>& g) override;
};

class Int8Matmul final : public Matmul<float> {
 public:
  // Scales per block of this many elements along the reduction dimension: what training
  // uses (gradients vary too much across tokens for one scale per row; see
  // docs/training.md for the measured difference).
  static constexpr int kTrainingBlock = 32;
  // block 0: one scale per whole row of op(A) / column of op(B) (exactly W8A8 inference).
  explicit Int8Matmul(int block = 0) : group_(block) {}
  void gemm(const Gemm<float>& g) override;
  int block() const { return group_; }

 private:
  int group_;
};

// The implementation of `b` for fp32 training.
std::unique_ptr<Matmul<float>> make_matmul(Backend b);

// The matrix unit's integer core: acc[i][j] = sum_p a[i][p] * bt[j][p] in int32, with
// a [m][k] and bt [n][k] row-major int8 (bt holds op(B) transposed), computed by the
// accelerator's kernel kernels::matmul_w8a8 (src/kernels/matrix_unit.hpp).
void int8_gemm_i32(const std::int8_t* a, const std::int8_t* bt, std::int32_t* acc, int m, int n, int k);

// Symmetric per-row int8 quantization of x [rows][cols] (docs/quantization.md section 1):
// scale[r] = max|x[r][:]| / 127, q = sat(rne(x * (1 / scale)), 127); a zero row has
// scale 0 and codes 0.
void quantize_rows_int8(const float* x, int rows, int cols, std::int8_t* q, float* scale);

}  // namespace train
