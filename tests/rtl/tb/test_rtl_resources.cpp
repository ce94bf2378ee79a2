// Yosys's mapping of the RTL matrix unit to UltraScale+ primitives against
// hw::matrix_unit_resources, on shapes held out of the fit (docs/rtl.md states the fit
// set): DSP48E2 exact, LUT and FF within 15%.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hw/resources.hpp"
#include "hw/yosys_stat.hpp"

namespace {

hw::YosysCounts synthesize(const hw::RtlMatrixUnitParams& p) {
  const auto dir = std::filesystem::temp_directory_path() / ("fpgallm_rtl_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string stat = (dir / "stat.txt").string();
  const std::string cmd =
      hw::yosys_matrix_unit_command(FPGALLM_YOSYS, FPGALLM_RTL_DIR, p, stat) + " > " + (dir / "yosys.log").string() + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "yosys failed: " << cmd;
    return {};
  }
  std::ifstream in(stat);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove_all(dir);
  return hw::parse_yosys_stat(text.str(), stat);
}

void check_held_out(const hw::RtlMatrixUnitParams& p) {
  if (std::string(FPGALLM_YOSYS).empty()) GTEST_SKIP() << "yosys not installed";
  const hw::YosysCounts y = synthesize(p);
  arch::MatrixUnit mu;
  mu.rows = p.pe;
  mu.cols = p.simd;
  mu.weight_bits = p.wbits;
  arch::Tiling tiling;
  tiling.tile_rows = p.tile_rows;
  tiling.tile_cols = p.tile_cols;
  const hw::Resources est = hw::matrix_unit_resources(mu, tiling);
  EXPECT_EQ(est.dsp, double(y.dsp));
  EXPECT_NEAR(est.lut, double(y.lut()), 0.15 * double(y.lut())) << "LUT";
  EXPECT_NEAR(est.ff, double(y.ff), 0.15 * double(y.ff)) << "FF";
  EXPECT_EQ(est.bram36, y.bram36);
}

// Held out of the fit (the fit set is in resources.cpp and docs/rtl.md).
TEST(RtlResources, HeldOut_i8_8x8) { check_held_out({8, 8, 8, 64, 64, 0}); }
TEST(RtlResources, HeldOut_i4_4x16) { check_held_out({4, 16, 4, 128, 256, 64}); }

}  // namespace
