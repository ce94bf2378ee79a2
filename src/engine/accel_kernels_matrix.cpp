// Matrix-unit instances: every (PE, SIMD) of arch::kUnitRows x arch::kUnitCols with every
// tile shape of arch::kTileShapes that fits it (the tiled GEMM of prefill blocks), and the
// streaming matrix-vector unit of every (PE, SIMD) (decode).
#include "arch/instances.hpp"
#include "engine/accel_dispatch.hpp"
#include "engine/accel_kernels.hpp"
#include "kernels/matrix_unit.hpp"

namespace engine::accel {
namespace {

static_assert(arch::kWeightWordBytes == kernels::kWordBytes, "arch's built units follow the kernels' weight word");

template <int PE, int SIMD, int TR, int TC>
MatrixKernels instance() {
  using Cfg = kernels::MatrixUnitConfig<PE, SIMD, TR, TC, kMaxTokens, kMaxRows, kMaxCols>;
  MatrixKernels k;
  // Tokens' codes at a stride of cols (the kernels' default x_stride).
  k.w8a8 = [](const kernels::i8* w, const float* w_scale, const kernels::i8* x, const float* x_scale, float* y,
              kernels::i32* acc_out, int tokens, int rows, int cols, int y_stride, const float* bias) {
    kernels::matmul_w8a8<Cfg>(w, w_scale, x, x_scale, y, acc_out, tokens, rows, cols, y_stride, bias);
  };
  k.w4a8 = [](const kernels::u8* packed, const std::uint16_t* w_scale, int group, const kernels::i8* x,
              const float* x_scale, float* y, int tokens, int rows, int cols, int y_stride, const float* bias) {
    kernels::matmul_w4a8<Cfg>(packed, w_scale, group, x, x_scale, y, tokens, rows, cols, y_stride, bias);
  };
  return k;
}

template <int PE, int SIMD>
void matrix_vector_w8a8(const kernels::i8* steps, int first_fold, const kernels::i8* x, const float* w_scale,
                        float x_scale, float* y, kernels::i32* acc_out, int rows, int cols, const float* bias) {
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
    const float* bias;
    int rows, r0;
    void write(const kernels::AccWord<PE>& a) {
      for (int pe = 0; pe < PE && r0 + pe < rows; ++pe) {
        const float value = kernels::requantize_w8a8(a.acc[pe], w_scale[r0 + pe], x_scale);
        y[r0 + pe] = bias ? kernels::add_bias(value, bias[r0 + pe]) : value;
        if (acc_out) acc_out[r0 + pe] = a.acc[pe];
      }
      r0 += PE;
    }
  };
  const std::size_t col_folds = std::size_t(cols + SIMD - 1) / SIMD;
  Reader in{reinterpret_cast<const Step*>(steps) + std::size_t(first_fold) * col_folds};
  Store out{w_scale, x_scale, y, acc_out, bias, rows, 0};
  kernels::matrix_vector_w8a8<Cfg>(in, x, out, rows, cols);
}

}  // namespace

MatrixVectorKernel matrix_vector_kernel(int pe, int simd) {
  return dispatch<arch::kUnitRows>(pe, [&]<int PE>() {
    return dispatch<arch::kUnitCols>(simd, [&]<int SIMD>() {
      MatrixVectorKernel k;
      if constexpr (arch::unit_built(PE, SIMD)) k.w8a8 = &matrix_vector_w8a8<PE, SIMD>;
      return k;
    });
  });
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
  return dispatch<arch::kUnitRows>(pe, [&]<int PE>() {
    return dispatch<arch::kUnitCols>(simd, [&]<int SIMD>() {
      MatrixKernels k;
      for_each_index<arch::kTileShapes.size()>([&]<std::size_t T>() {
        constexpr int TR = arch::kTileShapes[T][0], TC = arch::kTileShapes[T][1];
        if constexpr (arch::unit_built(PE, SIMD) && arch::tile_fits_unit(TR, TC, PE, SIMD))
          if (tile_rows == TR && tile_cols == TC) k = instance<PE, SIMD, TR, TC>();
      });
      return k;
    });
  });
}

}  // namespace engine::accel
