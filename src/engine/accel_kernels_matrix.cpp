// Matrix-unit instances: every (PE, SIMD) in kUnitSizes x kUnitSizes with every tile shape
// of kTileShapes.
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

}  // namespace

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
