#include "arch/instances.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace arch {

namespace {

template <std::size_t N>
bool contains(const std::array<int, N>& set, int v) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

template <std::size_t N>
std::string list(const std::array<int, N>& set) {
  std::string s;
  for (int v : set) s += (s.empty() ? "" : ", ") + std::to_string(v);
  return s;
}

}  // namespace

std::vector<std::string> instance_problems(const Design& d) {
  std::vector<std::string> p;
  const auto& mu = d.matrix_unit;
  if (!contains(kUnitRows, mu.rows))
    p.push_back(fmt::format("matrix_unit.rows: {} is not a built matrix unit (one of {})", mu.rows, list(kUnitRows)));
  if (!contains(kUnitCols, mu.cols))
    p.push_back(fmt::format("matrix_unit.cols: {} is not a built matrix unit (one of {})", mu.cols, list(kUnitCols)));
  if (p.empty() && !unit_built(mu.rows, mu.cols))
    p.push_back(fmt::format("matrix_unit: {}x{} is not a built matrix unit (rows x cols a multiple of {}: whole "
                            "512-bit weight words)",
                            mu.rows, mu.cols, kWeightWordBytes));
  const bool tile_built = std::any_of(kTileShapes.begin(), kTileShapes.end(), [&](const auto& t) {
    return t[0] == d.tiling.tile_rows && t[1] == d.tiling.tile_cols;
  });
  if (!tile_built) {
    std::string tiles;
    for (const auto& t : kTileShapes) tiles += fmt::format("{}{}x{}", tiles.empty() ? "" : ", ", t[0], t[1]);
    p.push_back(fmt::format("tiling: tile_rows x tile_cols {}x{} is not a built tile (one of {})", d.tiling.tile_rows,
                            d.tiling.tile_cols, tiles));
  }
  if (!contains(kVectorLanes, d.vector_unit.lanes))
    p.push_back(fmt::format("vector_unit.lanes: {} is not a built vector unit (one of {})", d.vector_unit.lanes,
                            list(kVectorLanes)));
  if (!contains(kExpTableBits, d.vector_unit.exp_table_bits))
    p.push_back(fmt::format("vector_unit.exp_table_bits: {} is not a built vector unit (one of {})",
                            d.vector_unit.exp_table_bits, list(kExpTableBits)));
  return p;
}

}  // namespace arch
