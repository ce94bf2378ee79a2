#pragma once
// Yosys's `stat` report of a design mapped by `synth_xilinx` (UltraScale+ primitives),
// read into counts that sit beside hw::Resources, and the one script that maps the RTL
// matrix unit (rtl/) so that the bench table and the tests synthesize it the same way.
#include <map>
#include <string>

namespace hw {

struct YosysCounts {
  std::map<std::string, long> cells;  // every primitive and its count, as printed
  long dsp = 0;         // DSP48E2 (DSP48E1)
  long lut_logic = 0;   // LUT1..LUT6 and INV (an inverter is a LUT1 after Vivado's mapping)
  long lut_memory = 0;  // LUTs inside distributed RAM / shift-register primitives (UG574)
  long ff = 0;          // FDRE, FDSE, FDCE, FDPE
  long carry = 0;       // CARRY4 + CARRY8 cells (Yosys 0.23 maps xcup carries to CARRY4)
  long muxf = 0;        // MUXF7, MUXF8, MUXF9
  double bram36 = 0;    // RAMB36E2 + RAMB18E2 / 2
  long uram = 0;        // URAM288
  long lut() const { return lut_logic + lut_memory; }
};

// Parses the text `stat` prints for one module (the last module section when there are
// several). Throws fpgallm::InputError naming `source` when no cell table is found or a
// primitive is unknown (a count this parser cannot place would be silently lost).
YosysCounts parse_yosys_stat(const std::string& text, const std::string& source);

// Verilog parameters of one RTL matrix-unit instance (rtl/fpgallm_matrix_unit.v).
struct RtlMatrixUnitParams {
  int pe = 4, simd = 8, wbits = 8, tile_rows = 8, tile_cols = 16, group_cols = 0;
};

// The yosys command line (-p script) that maps the RTL matrix unit with these parameters
// to xcup primitives and writes `stat` to `stat_path`.
std::string yosys_matrix_unit_command(const std::string& yosys, const std::string& rtl_dir,
                                      const RtlMatrixUnitParams& p, const std::string& stat_path);

}  // namespace hw
