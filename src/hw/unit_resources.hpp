#pragma once
// What the emitted accelerator instantiates, unit by unit: the resource side of the unit
// descriptions of arch/units.hpp. Every count is read off the kernels (src/kernels), the
// emitted top (src/codegen/emit_text.cpp) and the overlay template
// (src/codegen/templates/overlay.hpp) for one Design and the model the top is sized for:
//   - multipliers as the code writes them: one int8 x int8 product per multiply in the
//     unrolled MAC loops, no packing (the code packs nothing and binds no operator);
//   - fp32 operators as the Vitis HLS cores they become at its default bindings (fadd/fsub
//     full DSP, fmul max DSP, fdiv/fsqrt/conversions/compares in fabric), one core per
//     operation of a pipelined loop's body (unrolled lanes included), one per function call
//     site (UG1399 "pragma HLS allocation": four calls of a function are four RTL instances
//     unless ALLOCATION limits them; the kernels have no ALLOCATION);
//   - memories from the real array partitions: banks x depth x width, each bank its own
//     block RAM or LUTRAM (UG573 aspect ratios), or UltraRAM where the top's BIND_STORAGE
//     asks for it (design.buffers.activations_in_uram);
//   - AXI masters as emitted: one adapter per m_axi bundle of the top's INTERFACE pragmas.
// Every term carries its formula and the file:line it comes from. Fields the kernels do not
// build (Design::kernel_gaps: vector_unit.shared and .format fp16, 16-bit matrix operands)
// are counted too, as published accelerators build them, so that validate can size those;
// their terms name the design field as their source.
#include <string>
#include <vector>

#include "arch/design.hpp"
#include "hw/resources.hpp"
#include "model/config.hpp"

namespace hw {

// The sizes the emitted top's loop bounds and on-chip arrays take from the model
// (FpgallmConfig in the generated fpgallm_config.hpp).
struct KernelSizes {
  int dim = 0, hidden_dim = 0, q_dim = 0, kv_dim = 0, vocab = 0;
  int head_dim = 0;
  std::string source;  // "model stories15M" or how the sizes were assumed
};
KernelSizes kernel_sizes(const model::Config& c);
// Without a model: the top's eleven fp32 activation arrays of equal length sharing
// design.buffers.activation_bytes, heads of 128 (stated in `source`).
KernelSizes kernel_sizes(const arch::Design& d);

// Whether the emitted top builds the tiled matrix unit (overlay::matmul_block): for prompt
// blocks of more than one token, and for int4 weights; only a design the kernels build
// (no Design::kernel_gaps) on the HLS matrix unit.
bool builds_tiled_unit(const arch::Design& d);

// One fp32 operator core at Vitis HLS's default binding.
struct FpCore {
  const char* name;  // "fadd"
  double dsp, lut, ff;
  const char* source;
};
const FpCore& fp_core(const std::string& name);  // fadd fmul fdiv fsqrt fcmp sitofp fptosi

// BRAM18 blocks of one bank `width_bits` wide and `depth` words deep: the cheapest RAMB18E2
// aspect ratio (16K x 1, 8K x 2, 4K x 4, 2K x 9, 1K x 18, 512 x 36; UG573), ceil per side.
double bram18_for_bank(int width_bits, long long depth);

// The units of the emitted accelerator (matrix unit, vector unit, attention, on-chip
// activations, memory ports, controller), each with its terms. `dsp58`: Versal fabric,
// where an fp32 add or multiply is one DSP58 (DSPFP32 mode) instead of 2 or 3 DSP48E2.
// Without `describe`, each part has its counts alone (no terms, no formula).
std::vector<Part> unit_resources(const arch::Design& d, const KernelSizes& k, bool dsp58 = false, bool describe = true);

}  // namespace hw
