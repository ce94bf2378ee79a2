#pragma once
// The matrix unit as RTL (rtl/fpgallm_matrix_unit.v): the schedule it keeps, stated once
// here and checked cycle by cycle in Verilator (tests/rtl). Its resources are in
// hw::matrix_unit_resources (resources.hpp), checked against Yosys's mapping.
#include <cstdint>

#include "arch/design.hpp"

namespace hw {

// Clock edges from the edge that accepts a weight word to the edge after which its
// result word is valid: the DSP48E2's four register stages (A/D/B, AD, M, P), one
// adder-tree stage per halving of the SIMD columns, the accumulator/output register.
int rtl_matrix_unit_latency(const arch::MatrixUnit& mu);

// Clock edges the requantizer (rtl/fpgallm_requant_i8.v, kernels::requantize_i8 in
// binary32) adds after an accumulator word: int -> float, three multiplications, the
// last one with the saturating rounding to int8.
int rtl_requant_latency();

// Cycle steps of one weight tile of `tile_rows` x `tile_cols` for `tokens` activation
// vectors: tokens x ceil(tile_rows / rows) x ceil(tile_cols / cols) x ii, the schedule
// the simulator and kernels/matrix_unit.hpp use. The RTL unit takes one weight word per
// step and keeps no gap between tiles, so an instruction of tiles t_i takes
// sum(steps(t_i)) + rtl_matrix_unit_latency cycles from first weight word to last result.
std::int64_t matrix_unit_tile_steps(const arch::MatrixUnit& mu, std::int64_t tile_rows, std::int64_t tile_cols,
                                    std::int64_t tokens);

}  // namespace hw
