// fpgallm emit: the emitted testbench, compiled with g++ and run, matches the golden vectors
// of the accelerator backend bit for bit (one layer and full decode steps); editing one byte
// of a golden file makes it fail; emitting twice gives identical bytes; the kernel sources
// pass scripts/check_synthesizable.py; the XRT host compiles where XRT is installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "arch/design.hpp"
#include "codegen/codegen.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "model/synth.hpp"
#include "quant/quant.hpp"
#include "testing.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;
using namespace testing_support;

namespace {

struct Shell {
  int status;
  std::string out;
};

Shell shell(const std::string& cmd) {
  Shell r{-1, ""};
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

arch::Design u280_design() {
  arch::Design d;
  d.name = "test-u280";
  d.device = "u280";
  return d;
}

// Compiles DIR's testbench with g++ (no vendor tools) into DIR/build/testbench.
void compile_testbench(const std::string& dir) {
  const Shell c = shell("g++ -std=c++20 -O1 -I" + dir + "/src -o " + dir + "/build_tb " + dir + "/tb/testbench.cpp " +
                        dir + "/src/fpgallm_overlay.cpp");
  ASSERT_EQ(c.status, 0) << c.out;
}

Shell run_testbench(const std::string& dir) { return shell(dir + "/build_tb " + dir); }

void flip_byte(const std::string& path, std::size_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f);
  f.seekg(std::streamoff(at));
  char c;
  f.read(&c, 1);
  c = char(c ^ 0x01);
  f.seekp(std::streamoff(at));
  f.write(&c, 1);
}

const model::Model& stories() {
  static const model::Model m = model::load(stories260k());
  return m;
}

}  // namespace

TEST(Codegen, Stories260kTestbenchBitExactAndCanFail) {
  const model::Model& m = stories();
  const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
  const std::string dir = scratch_dir("codegen_260k") + "/proj";
  const codegen::EmitResult r = codegen::emit(m, qm, u280_design(), dir, codegen::EmitOptions{4});
  EXPECT_EQ(r.golden_steps, 4);
  for (const char* f : {"Makefile", "connectivity.cfg", "hls/fpgallm_overlay.tcl", "host/host.cpp", "README.md",
                        "src/fpgallm_config.hpp", "src/fpgallm_overlay.cpp", "src/kernels/matrix_unit.hpp"})
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  // The emitted Makefile's csim target builds and runs the testbench.
  const Shell ok = shell("make -s -C " + dir + " csim CXXFLAGS='-std=c++20 -O1'");
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("one layer (block 0): 64 values bit-exact"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("decode step 3 logits: 512 values bit-exact"), std::string::npos) << ok.out;

  // Verification that can fail: one byte of the golden logits of step 2, then of the layer output.
  flip_byte(dir + "/golden/decode_logits.bin", 2 * 512 * 4 + 17);
  const Shell bad = shell(dir + "/build/testbench " + dir);
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("decode step 2 logits: FAIL, 1 of 512 values differ; first at 4"), std::string::npos)
      << bad.out;
  flip_byte(dir + "/golden/decode_logits.bin", 2 * 512 * 4 + 17);
  flip_byte(dir + "/golden/layer_out.bin", 0);
  const Shell bad_layer = shell(dir + "/build/testbench " + dir);
  EXPECT_EQ(bad_layer.status, 1) << bad_layer.out;
  EXPECT_NE(bad_layer.out.find("one layer (block 0): FAIL"), std::string::npos) << bad_layer.out;
}

TEST(Codegen, Int4PlanOnA4BitDesignBitExact) {
  const model::Model& m = stories();
  const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w4a8, 32));
  arch::Design d = u280_design();
  d.matrix_unit.weight_bits = 4;
  d.matrix_unit.rows = 16;
  d.vector_unit.lanes = 8;
  d.kv_bits = 16;
  const std::string dir = scratch_dir("codegen_int4") + "/proj";
  codegen::emit(m, qm, d, dir, codegen::EmitOptions{3});
  compile_testbench(dir);
  const Shell ok = run_testbench(dir);
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("PASS"), std::string::npos) << ok.out;
}

TEST(Codegen, Stories15mSynthesizedBitExact) {
  const auto cfg = model::find_preset("stories15m");
  ASSERT_TRUE(cfg.has_value());
  const model::Model m = model::synthesize(*cfg, 7);
  const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
  const std::string dir = scratch_dir("codegen_15m") + "/proj";
  arch::Design d = u280_design();
  d.kv_bits = 32;
  d.tiling.tile_rows = 64;
  d.tiling.tile_cols = 128;
  codegen::emit(m, qm, d, dir, codegen::EmitOptions{2});
  compile_testbench(dir);
  const Shell ok = run_testbench(dir);
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("one layer (block 0): 288 values bit-exact"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("decode step 1 logits: 32000 values bit-exact"), std::string::npos) << ok.out;
}

TEST(Codegen, DeterministicAndSynthesizable) {
  const model::Model& m = stories();
  const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
  const std::string root = scratch_dir("codegen_det");
  const auto a = codegen::emit(m, qm, u280_design(), root + "/a", codegen::EmitOptions{2});
  const auto b = codegen::emit(m, qm, u280_design(), root + "/b", codegen::EmitOptions{2});
  ASSERT_EQ(a.files, b.files);
  for (const auto& f : a.files) EXPECT_EQ(read_bytes(root + "/a/" + f), read_bytes(root + "/b/" + f)) << f;

  const std::string script = source_path("scripts/check_synthesizable.py");
  const Shell check = shell("/usr/bin/python3 " + script + " " + root + "/a/src");
  EXPECT_EQ(check.status, 0) << check.out;

  // Connectivity: the design's 16 weight channels, 8 KV channels, then the host channel (U280 HBM).
  const std::string cfg = read_bytes(root + "/a/connectivity.cfg");
  EXPECT_NE(cfg.find("sp=fpgallm_overlay_1.weights:HBM[0:15]"), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("sp=fpgallm_overlay_1.kv_k:HBM[16:23]"), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("sp=fpgallm_overlay_1.program:HBM[24:24]"), std::string::npos) << cfg;
  const std::string tcl = read_bytes(root + "/a/hls/fpgallm_overlay.tcl");
  for (const char* cmd : {"open_project", "set_top fpgallm_overlay", "add_files", "csim_design", "csynth_design"})
    EXPECT_NE(tcl.find(cmd), std::string::npos) << cmd;
}

TEST(Codegen, HostCompilesWithXrt) {
  const std::string xrt = "/opt/xilinx/xrt/include";
  if (!fs::exists(xrt + "/xrt/xrt_kernel.h"))
    GTEST_SKIP() << "XRT headers not installed (" << xrt << "/xrt/xrt_kernel.h missing): host code not compiled";
  const model::Model& m = stories();
  const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
  const std::string dir = scratch_dir("codegen_host") + "/proj";
  codegen::emit(m, qm, u280_design(), dir, codegen::EmitOptions{1});
  const Shell c = shell("g++ -std=c++20 -fsyntax-only -I" + dir + "/src -I" + xrt + " " + dir + "/host/host.cpp");
  EXPECT_EQ(c.status, 0) << c.out;
}

TEST(Codegen, BadDesignLeavesNoFolder) {
  const model::Model& m = stories();
  const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w4a8, 32));
  const std::string root = scratch_dir("codegen_bad");
  // int4 weights on an 8-bit matrix unit: the overlay cannot run it.
  EXPECT_THROW(codegen::emit(m, qm, u280_design(), root + "/proj"), fpgallm::InputError);
  EXPECT_TRUE(fs::is_empty(root));
  // An existing folder that is not an emitted project is never replaced.
  const quant::QuantModel q8 = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
  fs::create_directories(root + "/other");
  write_bytes(root + "/other/keep.txt", "user data");
  EXPECT_THROW(codegen::emit(m, q8, u280_design(), root + "/other"), fpgallm::InputError);
  EXPECT_EQ(read_bytes(root + "/other/keep.txt"), "user data");
}

TEST(CodegenCli, EmitFromPlanAndBadInput) {
  const std::string root = scratch_dir("codegen_cli");
  const auto plan = run_fpgallm("plan " + stories260k() + " --device u280 -o " + root + "/design.json");
  ASSERT_EQ(plan.status, 0) << plan.err;
  const auto emit = run_fpgallm("emit " + stories260k() + " --design " + root + "/design.json -o " + root +
                                "/proj --golden-steps 2 --json");
  ASSERT_EQ(emit.status, 0) << emit.err;
  const auto j = nlohmann::json::parse(emit.out);
  EXPECT_EQ(j.at("golden_steps"), 2);
  // The planner's design for this model is a dataflow design with a 32x128 matrix unit,
  // a shape the accelerator backend does not compile in: the project still matches its
  // golden vectors bit for bit, and README lists the departures.
  compile_testbench(root + "/proj");
  const Shell ok = run_testbench(root + "/proj");
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(read_bytes(root + "/proj/README.md").find("## Departures from the design"), std::string::npos);

  // A design the overlay cannot run: exit 2, one line on stderr, no folder left behind.
  write_bytes(root + "/bad.json", R"({"matrix_unit": {"rows": 48}})");
  const auto bad = run_fpgallm("emit " + stories260k() + " --design " + root + "/bad.json -o " + root + "/badproj");
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_FALSE(fs::exists(root + "/badproj"));
  for (const auto& e : fs::directory_iterator(root))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(Codegen, BackendDesignSubstitutesOnlyUncompiledShapes) {
  arch::Design d = u280_design();
  std::vector<std::string> notes;
  const arch::Design same = codegen::backend_design(d, &notes);
  EXPECT_EQ(same.matrix_unit.cols, 32);
  EXPECT_TRUE(notes.empty());
  d.matrix_unit.cols = 128;
  d.vector_unit.lanes = 64;
  const arch::Design sub = codegen::backend_design(d, &notes);
  EXPECT_EQ(sub.matrix_unit.rows, 32);
  EXPECT_EQ(sub.matrix_unit.cols, 32);
  EXPECT_EQ(sub.vector_unit.lanes, 64);  // lane count changes vector sums: never substituted
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("32x128"), std::string::npos) << notes[0];
}

TEST(Codegen, StaticActivationScalesAndInt8KvBitExact) {
  const model::Model& m = stories();
  quant::Plan plan = quant::uniform_plan(m.config, quant::Scheme::w8a8_static, 32);
  plan.kv8 = true;
  // Fixed scales stand in for calibrated ones (the kernel reads them from the program words).
  for (auto& lp : plan.layers) lp.act_scale = 0.02f + 0.001f * float(lp.layer + 1);
  const quant::QuantModel qm = quant::quantize_model(m, plan);
  ASSERT_EQ(qm.plan.layers[0].act, quant::ActFormat::int8_static);
  const std::string dir = scratch_dir("codegen_static") + "/proj";
  codegen::emit(m, qm, u280_design(), dir, codegen::EmitOptions{2});
  compile_testbench(dir);
  const Shell ok = run_testbench(dir);
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("decode step 1 logits: 512 values bit-exact"), std::string::npos) << ok.out;
}
