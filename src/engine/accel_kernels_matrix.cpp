// Matrix-unit instances: every (PE, SIMD) in kUnitSizes x kUnitSizes with every tile shape
// of kTileShapes (the tiled GEMM of prefill blocks), and the streaming matrix-vector unit
// of every (PE, SIMD) (decode).
#include "engine/accel_kernels.hpp"
#include "kernels/matrix_unit.hpp"

namespace engine::accel {
namespace {

template <int PE, int SIMD, int TR, int TC>
MatrixKernels instance() {
  using Cfg = kernels::MatrixUnitConfig<PE, SIMD, TR, TC, kMaxTokens, kMaxRows, kMaxCols>;
  MatrixKernels k;
  k.w8a8 = &kernels::matmul_w8a8<Cfg>;
  k.w4a8 = &kernels::matmul_w4a8<Cfg>;
  return k;
}

template <int PE, int SIMD>
MatrixKernels by_tile(int tile_rows, int tile_cols) {
  if (tile_rows == 64 && tile_cols == 128) return instance<PE, SIMD, 64, 128>();
  if (tile_rows == 128 && tile_cols == 256) return instance<PE, SIMD, 128, 256>();
  if (tile_rows == 256 && tile_cols == 512) return instance<PE, SIMD, 256, 512>();
  return {};
}

template <int PE>
MatrixKernels by_simd(int simd, int tile_rows, int tile_cols) {
  switch (simd) {
    case 8: return by_tile<PE, 8>(tile_rows, tile_cols);
    case 16: return by_tile<PE, 16>(tile_rows, tile_cols);
    case 32: return by_tile<PE, 32>(tile_rows, tile_cols);
    case 64: return by_tile<PE, 64>(tile_rows, tile_cols);
    default: return {};
  }
}

template <int PE, int SIMD>
void matrix_vector_w8a8(const kernels::i8* steps, int first_fold, const kernels::i8* x, const float* w_scale,
                        float x_scale, float* y, kernels::i32* acc_out, int rows, int cols) {
  using Cfg = kernels::MatrixVectorConfig<PE, SIMD, 1, kMaxRows, kMaxCols>;
  using Step = kernels::WeightStep<Cfg::step_words>;
  // The weight stream read straight from memory (no FIFO: nothing runs beside it here).
  struct Reader {
    const Step* next;
    const Step& read() { return *next++; }
  };
  struct Store {
    const float* w_scale;
    float x_scale;
    float* y;
    kernels::i32* acc_out;
    int rows, r0;
    void write(const kernels::AccWord<PE>& a) {
      for (int pe = 0; pe < PE && r0 + pe < rows; ++pe) {
        y[r0 + pe] = kernels::requantize_w8a8(a.acc[pe], w_scale[r0 + pe], x_scale);
        if (acc_out) acc_out[r0 + pe] = a.acc[pe];
      }
      r0 += PE;
    }
  };
  const std::size_t col_folds = std::size_t(cols + SIMD - 1) / SIMD;
  Reader in{reinterpret_cast<const Step*>(steps) + std::size_t(first_fold) * col_folds};
  Store out{w_scale, x_scale, y, acc_out, rows, 0};
  kernels::matrix_vector_w8a8<Cfg>(in, x, out, rows, cols);
}

template <int PE>
MatrixVectorKernel mv_by_simd(int simd) {
  MatrixVectorKernel k;
  switch (simd) {
    case 8: k.w8a8 = &matrix_vector_w8a8<PE, 8>; break;
    case 16: k.w8a8 = &matrix_vector_w8a8<PE, 16>; break;
    case 32: k.w8a8 = &matrix_vector_w8a8<PE, 32>; break;
    case 64: k.w8a8 = &matrix_vector_w8a8<PE, 64>; break;
    default: break;
  }
  return k;
}

}  // namespace

MatrixVectorKernel matrix_vector_kernel(int pe, int simd) {
  switch (pe) {
    case 8: return mv_by_simd<8>(simd);
    case 16: return mv_by_simd<16>(simd);
    case 32: return mv_by_simd<32>(simd);
    case 64: return mv_by_simd<64>(simd);
    default: return {};
  }
}

std::vector<kernels::i8> pack_steps(const kernels::i8* w, int rows, int cols, int pe, int simd) {
  const int row_folds = (rows + pe - 1) / pe, col_folds = (cols + simd - 1) / simd;
  std::vector<kernels::i8> out(std::size_t(row_folds) * col_folds * pe * simd, 0);
  for (int nf = 0; nf < row_folds; ++nf)
    for (int sf = 0; sf < col_folds; ++sf)
      for (int p = 0; p < pe && nf * pe + p < rows; ++p) {
        const kernels::i8* src = w + std::size_t(nf * pe + p) * cols + std::size_t(sf) * simd;
        kernels::i8* dst = out.data() + ((std::size_t(nf) * col_folds + sf) * pe + p) * simd;
        for (int k = 0; k < simd && sf * simd + k < cols; ++k) dst[k] = src[k];
      }
  return out;
}

MatrixKernels matrix_kernels(int pe, int simd, int tile_rows, int tile_cols) {
  switch (pe) {
    case 8: return by_simd<8>(simd, tile_rows, tile_cols);
    case 16: return by_simd<16>(simd, tile_rows, tile_cols);
    case 32: return by_simd<32>(simd, tile_rows, tile_cols);
    case 64: return by_simd<64>(simd, tile_rows, tile_cols);
    default: return {};
  }
}

}  // namespace engine::accel
