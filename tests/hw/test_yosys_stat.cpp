// hw::parse_yosys_stat on the text Yosys 0.23 prints for `stat` after synth_xilinx, with
// the counts worked out by hand from the table below.
#include <gtest/gtest.h>

#include "hw/yosys_stat.hpp"
#include "util/error.hpp"

namespace {

// Two module sections (the parser takes the last) as `stat` prints them.
const char* kStat = R"(
=== helper ===

   Number of wires:                  3
   Number of cells:                  2
     FDRE                            2

=== fpgallm_matrix_unit ===

   Number of wires:                977
   Number of wire bits:          21501
   Number of public wires:         311
   Number of public wire bits:   14020
   Number of memories:               0
   Number of memory bits:            0
   Number of processes:              0
   Number of cells:               2176
     CARRY4                        286
     CARRY8                          3
     DSP48E2                        16
     FDRE                          729
     FDSE                            2
     INV                            49
     LUT2                          768
     LUT3                            7
     LUT4                          143
     LUT5                           18
     LUT6                          121
     MUXF7                          16
     MUXF8                           8
     RAM32M16                       15
     RAM64M8                         2
     RAMB18E2                        3
     RAMB36E2                        1

)";

TEST(YosysStat, CountsByResource) {
  const hw::YosysCounts c = hw::parse_yosys_stat(kStat, "stat.txt");
  EXPECT_EQ(c.dsp, 16);
  EXPECT_EQ(c.lut_logic, 49 + 768 + 7 + 143 + 18 + 121);
  EXPECT_EQ(c.lut_memory, 15 * 8 + 2 * 8);
  EXPECT_EQ(c.lut(), 1106 + 136);
  EXPECT_EQ(c.ff, 731);
  EXPECT_EQ(c.carry, 289);
  EXPECT_EQ(c.muxf, 24);
  EXPECT_DOUBLE_EQ(c.bram36, 2.5);
  EXPECT_EQ(c.cells.at("FDRE"), 729);  // the helper module's FDRE are not added
}

TEST(YosysStat, RejectsWhatItCannotPlace) {
  EXPECT_THROW(hw::parse_yosys_stat("no table here", "x.txt"), fpgallm::InputError);
  EXPECT_THROW(hw::parse_yosys_stat("   Number of cells: 1\n     SOME_NEW_CELL 1\n", "x.txt"), fpgallm::InputError);
  try {
    hw::parse_yosys_stat("   Number of cells: 1\n     GTYE4_CHANNEL 1\n", "run/stat.txt");
    FAIL();
  } catch (const fpgallm::InputError& e) {
    EXPECT_EQ(e.source(), "run/stat.txt");
    EXPECT_NE(e.problem().find("GTYE4_CHANNEL"), std::string::npos);
  }
}

TEST(YosysStat, CommandMapsTheUnitWithItsParameters) {
  const std::string cmd = hw::yosys_matrix_unit_command("yosys", "/src/rtl", {16, 64, 4, 32, 128, 64}, "/tmp/s.txt");
  EXPECT_NE(cmd.find("chparam -set PE 16 -set SIMD 64 -set WBITS 4 -set TILE_ROWS 32 -set TILE_COLS 128 -set GROUP_COLS 64"),
            std::string::npos);
  EXPECT_NE(cmd.find("synth_xilinx -family xcup"), std::string::npos);
  EXPECT_NE(cmd.find("-DFPGALLM_XILINX_DSP"), std::string::npos);
}

}  // namespace
