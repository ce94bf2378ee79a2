#include "hw/yosys_stat.hpp"

#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/number.hpp"

namespace hw {

namespace {

// LUTs per distributed-RAM / SRL primitive (UG574, CLB user guide: RAM32M16 and RAM64M8
// use all eight LUTs of a SLICEM, RAM32M/RAM64M four, RAMnX1D two, RAM128X1D four).
const std::map<std::string, long> kLutRamLuts = {
    {"RAM32M16", 8}, {"RAM64M8", 8}, {"RAM32M", 4},    {"RAM64M", 4},    {"RAM32X1D", 2}, {"RAM64X1D", 2},
    {"RAM128X1D", 4}, {"RAM256X1D", 8}, {"RAM32X1S", 1}, {"RAM64X1S", 1}, {"RAM128X1S", 2}, {"RAM256X1S", 4},
    {"RAM512X1S", 8}, {"SRL16E", 1},  {"SRLC32E", 1}};

}  // namespace

YosysCounts parse_yosys_stat(const std::string& text, const std::string& source) {
  // The last "Number of cells:" table: indented "NAME  COUNT" lines until a blank line.
  const auto at = text.rfind("Number of cells:");
  if (at == std::string::npos) throw fpgallm::InputError(source, "no 'Number of cells:' table (not yosys stat output)");
  std::istringstream in(text.substr(at));
  std::string line;
  std::getline(in, line);
  static const std::regex row(R"(^\s+(\S+)\s+(\d+)\s*$)");
  YosysCounts c;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) break;
    const auto n = fpgallm::parse_integer(m[2].str(), 0, std::int64_t(1) << 40);
    if (!n) throw fpgallm::InputError(source, fmt::format("cell count '{}' of {} is out of range", m[2].str(), m[1].str()));
    c.cells[m[1]] += *n;
  }
  if (c.cells.empty()) throw fpgallm::InputError(source, "the yosys cell table is empty");
  static const std::regex lut(R"(LUT[1-6])");
  for (const auto& [name, n] : c.cells) {
    if (name == "DSP48E2" || name == "DSP48E1")
      c.dsp += n;
    else if (std::regex_match(name, lut) || name == "INV")
      c.lut_logic += n;
    else if (auto it = kLutRamLuts.find(name); it != kLutRamLuts.end())
      c.lut_memory += n * it->second;
    else if (name == "FDRE" || name == "FDSE" || name == "FDCE" || name == "FDPE")
      c.ff += n;
    else if (name == "CARRY4" || name == "CARRY8")
      c.carry += n;
    else if (name == "MUXF7" || name == "MUXF8" || name == "MUXF9")
      c.muxf += n;
    else if (name == "RAMB36E2")
      c.bram36 += n;
    else if (name == "RAMB18E2")
      c.bram36 += 0.5 * n;
    else if (name == "URAM288")
      c.uram += n;
    else if (name == "GND" || name == "VCC" || name == "BUFG" || name == "IBUF" || name == "OBUF")
      continue;
    else
      throw fpgallm::InputError(source, fmt::format("unknown primitive '{}' in the yosys cell table", name));
  }
  return c;
}

std::string yosys_matrix_unit_command(const std::string& yosys, const std::string& rtl_dir,
                                      const RtlMatrixUnitParams& p, const std::string& stat_path) {
  // -flatten: one cell table for the whole unit; -noiopad/-noclkbuf: an RTL kernel inside
  // a Vitis shell has no pads or clock buffers of its own.
  return fmt::format(
      "{} -q -p 'read_verilog -DFPGALLM_XILINX_DSP {}/fpgallm_matrix_unit.v {}/fpgallm_dsp_pair.v; "
      "chparam -set PE {} -set SIMD {} -set WBITS {} -set TILE_ROWS {} -set TILE_COLS {} -set GROUP_COLS {} "
      "fpgallm_matrix_unit; synth_xilinx -family xcup -top fpgallm_matrix_unit -flatten -noiopad -noclkbuf; "
      "tee -q -o {} stat'",
      yosys, rtl_dir, rtl_dir, p.pe, p.simd, p.wbits, p.tile_rows, p.tile_cols, p.group_cols, stat_path);
}

}  // namespace hw
