// `matrix_unit.impl: rtl` in the emitted project: the RTL kernel's sources, its top with
// the design's parameters (which Verilator must accept), the packaging and link steps, and
// a README that says they were not run; `impl: hls` emits none of it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "arch/design.hpp"
#include "codegen/codegen.hpp"
#include "model/model.hpp"
#include "quant/quant.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RtlEmit, ImplRtlWritesThePackagedKernel) {
  const model::Model m = model::load(testing_support::stories260k());
  const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
  arch::Design d;
  d.name = "rtl-test";
  d.device = "u280";
  d.matrix_unit.rows = 8;
  d.matrix_unit.cols = 16;
  d.matrix_unit.impl = arch::MatrixUnitImpl::rtl;
  const std::string dir = testing_support::scratch_dir("rtl_emit");
  codegen::EmitOptions opt;
  opt.golden_steps = 1;
  codegen::emit(m, qm, d, dir, opt);
  for (const char* f : {"rtl/fpgallm_matrix_unit.v", "rtl/fpgallm_dsp_pair.v", "rtl/fpgallm_matrix_unit_axis.v",
                        "rtl/fpgallm_matrix_unit_kernel.v", "rtl/package_xo.tcl", "rtl/Makefile",
                        "rtl/connectivity_rtl.cfg", "rtl/README.md"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / f)) << f;
  const std::string top = read(fs::path(dir) / "rtl/fpgallm_matrix_unit_kernel.v");
  EXPECT_NE(top.find(".PE(8), .SIMD(16), .WBITS(8), .TILE_ROWS(128), .TILE_COLS(256)"), std::string::npos) << top;
  EXPECT_NE(read(fs::path(dir) / "rtl/package_xo.tcl").find("package_xo"), std::string::npos);
  EXPECT_NE(read(fs::path(dir) / "rtl/README.md").find("Not run here"), std::string::npos);
  EXPECT_NE(read(fs::path(dir) / "README.md").find("matrix_unit.impl is rtl"), std::string::npos);
  // The emitted Verilog as a whole: Verilator elaborates the kernel top with its parameters.
  const std::string lint = std::string(FPGALLM_VERILATOR) + " --lint-only -Wno-fatal --top-module fpgallm_matrix_unit_kernel " +
                           dir + "/rtl/*.v > " + dir + "-lint.log 2>&1";  // beside the project: emit owns its folder
  EXPECT_EQ(std::system(lint.c_str()), 0) << read(dir + "-lint.log");
  // design.json round trip of the field.
  nlohmann::json j = d;
  EXPECT_EQ(j["matrix_unit"]["impl"], "rtl");
  arch::Design back = j.get<arch::Design>();
  EXPECT_EQ(back.matrix_unit.impl, arch::MatrixUnitImpl::rtl);
  j["matrix_unit"]["impl"] = "vhdl";
  EXPECT_THROW(j.get<arch::Design>(), std::exception);

  d.matrix_unit.impl = arch::MatrixUnitImpl::hls;
  codegen::emit(m, qm, d, dir, opt);
  EXPECT_FALSE(fs::exists(fs::path(dir) / "rtl"));
  fs::remove_all(dir);
}

}  // namespace
