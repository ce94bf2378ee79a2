#pragma once
// The unit shapes fpgallm builds. The HLS kernels are templates sized at compile time; the
// C simulation (engine/accel_kernels_*.cpp) instantiates exactly these, the design search
// proposes only these, and emit computes a project's golden vectors on the design's own
// instance. This is the one list: everything else reads it.
#include <array>
#include <string>
#include <vector>

#include "arch/design.hpp"

namespace arch {

// matrix_unit.rows (PE: output rows in parallel) and matrix_unit.cols (SIMD: input
// columns per cycle per row).
inline constexpr std::array<int, 6> kUnitRows = {4, 8, 16, 32, 64, 128};
inline constexpr std::array<int, 6> kUnitCols = {8, 16, 32, 64, 128, 256};
// (tiling.tile_rows, tiling.tile_cols) of the tiled GEMM that runs prefill blocks; a design
// uses one whose sides are multiples of its unit's rows and cols.
inline constexpr std::array<std::array<int, 2>, 3> kTileShapes = {{{64, 128}, {128, 256}, {256, 512}}};
inline constexpr std::array<int, 4> kVectorLanes = {8, 16, 32, 64};
inline constexpr std::array<int, 3> kExpTableBits = {6, 8, 10};

// The weight stream moves whole 512-bit words, so a unit's PE x SIMD int8 block is a
// multiple of 64 bytes (the kernels assert the same; accel_kernels_matrix.cpp checks the two agree).
inline constexpr int kWeightWordBytes = 64;
constexpr bool unit_built(int rows, int cols) { return rows * cols % kWeightWordBytes == 0; }

constexpr bool tile_fits_unit(int tile_rows, int tile_cols, int rows, int cols) {
  return tile_rows % rows == 0 && tile_cols % cols == 0;
}

// Why `d` is not one of the built instances, one line per field ("matrix_unit.cols: 512 is
// not built ..."); empty when it is.
std::vector<std::string> instance_problems(const Design& d);

}  // namespace arch
