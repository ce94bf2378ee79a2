// fpgallm emit: the emitted testbench, compiled with g++ -std=c++14 and run, matches the
// golden vectors of the accelerator backend bit for bit (one layer and full decode steps);
// editing one byte of a golden file makes it fail; emitting twice gives identical bytes;
// every emitted project passes the C++14 front-end gate (g++ and clang++, with and without
// __SYNTHESIS__) and scripts/check_synthesizable.py; its top function, read from the
// emitted source, has one 512-bit bundle per weight channel of the design and separate KV
// data and KV scale bundles; the XRT host compiles where XRT is installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "arch/design.hpp"
#include "arch/program.hpp"
#include "arch/units.hpp"
#include "codegen/codegen.hpp"
#include "hw/device.hpp"
#include "hw/resources.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "model/synth.hpp"
#include "quant/quant.hpp"
#include "small_qwen.hpp"
#include "testing.hpp"
#include "util/error.hpp"
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

// The U280 design with an fp32 KV cache and 64 x 128 tiles: the synthesized models' testbenches.
arch::Design u280_fp32_kv_design() {
  arch::Design d = u280_design();
  d.kv_bits = 32;
  d.tiling.tile_rows = 64;
  d.tiling.tile_cols = 128;
  return d;
}

// Compiles DIR's testbench with g++ (no vendor tools) into DIR/build/testbench.
void compile_testbench(const std::string& dir) {
  const Shell c = shell("g++ -std=c++14 -O1 -I" + dir + "/src -o " + dir + "/build_tb " + dir + "/tb/testbench.cpp " +
                        dir + "/src/fpgallm_overlay.cpp");
  ASSERT_EQ(c.status, 0) << c.out;
}

Shell run_testbench(const std::string& dir) { return shell(dir + "/build_tb " + dir); }

// The front-end gate and the synthesizability checker on an emitted project.
void expect_gate_and_checker(const std::string& dir, int unroll_budget) {
  const Shell gate = shell(source_path("scripts/frontend_gate.sh") + " " + dir + "/src " + dir +
                           "/src/fpgallm_overlay.cpp " + dir + "/tb/testbench.cpp " + dir + "/host/host.cpp");
  EXPECT_EQ(gate.status, 0) << gate.out;
  EXPECT_NE(gate.out.find("ok: clang++ synthesis " + dir + "/src/fpgallm_overlay.cpp"), std::string::npos) << gate.out;
  EXPECT_NE(gate.out.find("ok: g++ host " + dir + "/host/host.cpp"), std::string::npos) << gate.out;
  const Shell check = shell("/usr/bin/python3 " + source_path("scripts/check_synthesizable.py") +
                            " --top fpgallm_overlay --unroll-budget " + std::to_string(unroll_budget) + " " + dir + "/src");
  EXPECT_EQ(check.status, 0) << check.out;
}

// The m_axi bundles of the top function as the emitted source declares them: port -> bundle.
std::map<std::string, std::string> bundles(const std::string& top_source) {
  std::map<std::string, std::string> out;
  const std::regex pragma(R"(#pragma HLS INTERFACE m_axi port=(\w+) [^\n]*bundle=(\w+))");
  for (std::sregex_iterator it(top_source.begin(), top_source.end(), pragma), end; it != end; ++it)
    out[(*it)[1]] = (*it)[2];
  return out;
}

long long file_bytes(const std::string& path) { return static_cast<long long>(fs::file_size(path)); }

long long constant(const std::string& text, const std::string& pattern) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(text, m, std::regex(pattern))) << pattern;
  return m.empty() ? 0 : std::stoll(m[1]);
}

// Co-simulation ready: every m_axi port states depth= as a number covering the buffer the
// testbench allocates for it (the data files' sizes; the KV cache and the result vector from
// the config header's shapes), and the Makefile's cosim target runs cosim_design.
void expect_cosim_ready(const std::string& dir, int channels) {
  const std::string top = read_bytes(dir + "/src/fpgallm_overlay.cpp");
  const std::string config = read_bytes(dir + "/src/fpgallm_config.hpp");
  std::map<std::string, long long> need;
  for (int c = 0; c < channels; ++c)
    need[fmt::format("w{:02d}", c)] = file_bytes(fmt::format("{}/data/weights_ch{:02d}.bin", dir, c)) / 64;
  need["row_scales"] = file_bytes(dir + "/data/row_scales.bin") / 64;
  need["params"] = file_bytes(dir + "/data/params.bin") / 64;
  need["program"] = file_bytes(dir + "/data/program.bin") / 4;
  need["result"] = constant(config, R"(static constexpr int max_width = (\d+);)");
  const long long context = constant(config, R"(static constexpr int context = (\d+);)");
  need["prompt"] = context;  // the prompt call's token ids: at most the KV cache's positions
  need["kv_k"] = need["kv_v"] = constant(config, R"(kKvElements = (\d+)L \* FpgallmConfig::context)") * context *
                                constant(config, R"(kKvElements = \d+L \* FpgallmConfig::context \* (\d+);)");
  need["kv_k_scale"] = need["kv_v_scale"] =
      constant(config, R"(kKvScales = (\d+)L \* FpgallmConfig::context)") * context *
          constant(config, R"(kKvScales = \d+L \* FpgallmConfig::context \* (\d+);)") + 1;
  const std::regex pragma(R"(#pragma HLS INTERFACE m_axi port=(\w+)([^\n]*))");
  std::set<std::string> seen;
  for (std::sregex_iterator it(top.begin(), top.end(), pragma), end; it != end; ++it) {
    const std::string port = (*it)[1], rest = (*it)[2];
    seen.insert(port);
    std::smatch d;
    ASSERT_TRUE(std::regex_search(rest, d, std::regex(R"( depth=(\d+)(\s|$))"))) << port << " has no numeric depth=";
    ASSERT_TRUE(need.count(port)) << "unexpected m_axi port " << port;
    EXPECT_GE(std::stoll(d[1]), need[port]) << port << ": depth below its buffer";
    EXPECT_GT(need[port], 0) << port;
  }
  for (const auto& [port, n] : need) EXPECT_TRUE(seen.count(port)) << port << " has no m_axi pragma";
  const std::string makefile = read_bytes(dir + "/Makefile");
  EXPECT_NE(makefile.find("\ncosim:\n\tvitis_hls -f hls/fpgallm_overlay_cosim.tcl\n"), std::string::npos);
  const std::string tcl = read_bytes(dir + "/hls/fpgallm_overlay_cosim.tcl");
  EXPECT_NE(tcl.find("\ncsynth_design\ncosim_design -argv [pwd]"), std::string::npos) << tcl;
  EXPECT_NE(read_bytes(dir + "/README.md").find("What `make cosim` checks that C simulation does not"), std::string::npos);
}

// Checks, on the emitted text alone, that the top function has `channels` weight ports of
// a 64 x int8 (512-bit) word type, each in its own bundle, and KV data and KV scales in
// four bundles of their own.
void expect_memory_interface(const std::string& dir, int channels) {
  const std::string top = read_bytes(dir + "/src/fpgallm_overlay.cpp");
  const std::string mu = read_bytes(dir + "/src/kernels/matrix_unit.hpp");
  EXPECT_NE(mu.find("struct PackedWord {\n  i8 lane[64];\n};"), std::string::npos);
  const std::size_t sig = top.find("extern \"C\" void fpgallm_overlay(");
  ASSERT_NE(sig, std::string::npos);
  const std::string params = top.substr(sig, top.find('{', sig) - sig);
  const std::regex weight_param(R"(const kernels::PackedWord\* (w\d\d))");
  std::set<std::string> weight_ports;
  for (std::sregex_iterator it(params.begin(), params.end(), weight_param), end; it != end; ++it)
    weight_ports.insert((*it)[1]);
  EXPECT_EQ(int(weight_ports.size()), channels);
  const auto b = bundles(top);
  std::set<std::string> weight_bundles;
  for (const auto& p : weight_ports) {
    ASSERT_TRUE(b.count(p)) << p << " has no m_axi pragma";
    weight_bundles.insert(b.at(p));
  }
  EXPECT_EQ(int(weight_bundles.size()), channels) << "a bundle per weight channel";
  std::set<std::string> kv;
  for (const char* p : {"kv_k", "kv_v", "kv_k_scale", "kv_v_scale"}) {
    ASSERT_TRUE(b.count(p)) << p;
    kv.insert(b.at(p));
    EXPECT_EQ(weight_bundles.count(b.at(p)), 0u) << p;
  }
  EXPECT_EQ(kv.size(), 4u) << "KV data and KV scales in separate bundles";
  // INTERFACE pragmas appear in the top function only.
  EXPECT_EQ(read_bytes(dir + "/src/overlay.hpp").find("INTERFACE"), std::string::npos);
  expect_cosim_ready(dir, channels);
}

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
  const Shell ok = shell("make -s -C " + dir + " csim CXXFLAGS='-std=c++14 -O1'");
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("one layer (block 0): 64 values bit-exact"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("decode step 3 logits: 512 values bit-exact"), std::string::npos) << ok.out;
  // The prompt call (one call per prompt, blocks of prefill_block = 64 tokens) against the
  // backend's prefill: the last token's logits and the KV cache it leaves, every layer's
  // positions [0, n) as stored: per layer n x (keys and values of kv_dim elements, plus for
  // int8 a key and a value scale per KV head).
  const auto& c = m.config;
  const arch::Design d = u280_design();
  for (int n : {1, 17, 64}) {
    const long long kv = static_cast<long long>(c.n_layers) * n *
                         (2LL * c.kv_dim() * d.kv_bits / 8 + (d.kv_bits == 8 ? 2LL * c.n_kv_heads * 4 : 0));
    EXPECT_NE(ok.out.find(fmt::format("prompt of {} tokens: last token's logits: 512 values bit-exact", n)),
              std::string::npos)
        << ok.out;
    EXPECT_NE(ok.out.find(fmt::format("prompt of {} tokens: KV cache: {} bytes bit-exact", n, kv)), std::string::npos)
        << ok.out;
  }

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
  flip_byte(dir + "/golden/layer_out.bin", 0);
  // The prompt call's checks fail too: a byte of the 17-token prompt's logits (the second
  // prompt's, value 5), then one of its KV cache (past the first prompt's bytes).
  flip_byte(dir + "/golden/prompt_logits.bin", 512 * 4 + 5 * 4 + 1);
  const Shell bad_prompt = shell(dir + "/build/testbench " + dir);
  EXPECT_EQ(bad_prompt.status, 1) << bad_prompt.out;
  EXPECT_NE(bad_prompt.out.find("prompt of 17 tokens: last token's logits: FAIL, 1 of 512 values differ; first at 5"),
            std::string::npos)
      << bad_prompt.out;
  flip_byte(dir + "/golden/prompt_logits.bin", 512 * 4 + 5 * 4 + 1);
  const long long kv1 =
      static_cast<long long>(c.n_layers) * (2LL * c.kv_dim() * d.kv_bits / 8 + (d.kv_bits == 8 ? 2LL * c.n_kv_heads * 4 : 0));
  flip_byte(dir + "/golden/prompt_kv.bin", kv1 + 3);
  const Shell bad_kv = shell(dir + "/build/testbench " + dir);
  EXPECT_EQ(bad_kv.status, 1) << bad_kv.out;
  EXPECT_NE(bad_kv.out.find("prompt of 17 tokens: KV cache: FAIL, 1 of"), std::string::npos) << bad_kv.out;
  EXPECT_NE(bad_kv.out.find("first at 3 "), std::string::npos) << bad_kv.out;
}

// int4 weights (w4a8: packed int4, fp16 group scales on the weight channels) run on the
// emitted top's tiled matrix unit (kernels::matmul_w4a8, as the accelerator backend runs
// them); a mixed plan (some matrices int8 on the streaming unit, some int4, one with a
// group of 64) too. Bit-exact, and the testbench fails when one packed weight byte changes.
TEST(Codegen, Stories260kW4a8TestbenchBitExactMixedAndCanFail) {
  const model::Model& m = stories();
  arch::Design d = u280_design();
  d.matrix_unit.weight_bits = 4;
  const std::string root = scratch_dir("codegen_int4");
  {
    const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w4a8, 32));
    const std::string dir = root + "/w4a8";
    codegen::emit(m, qm, d, dir, codegen::EmitOptions{3});
    compile_testbench(dir);
    const Shell ok = run_testbench(dir);
    EXPECT_EQ(ok.status, 0) << ok.out;
    EXPECT_NE(ok.out.find("one layer (block 0): 64 values bit-exact"), std::string::npos) << ok.out;
    EXPECT_NE(ok.out.find("decode step 2 logits: 512 values bit-exact"), std::string::npos) << ok.out;
    // The top dispatches on the instruction's weight bits: int4 to the tiled unit.
    const std::string top = read_bytes(dir + "/src/fpgallm_overlay.cpp");
    EXPECT_NE(top.find("CFG::int4_weights && w[overlay::f_weight_bits] == 4"), std::string::npos);
    EXPECT_NE(read_bytes(dir + "/src/fpgallm_config.hpp").find("matrix_unit;"), std::string::npos);
    // The first matrix (layer 0's wq: 64 x 64, 32 packed bytes a row) starts at beat 0 of
    // channel 0: one of its weight bytes changed, the testbench must fail.
    flip_byte(dir + "/data/weights_ch00.bin", 5);
    const Shell bad = run_testbench(dir);
    EXPECT_EQ(bad.status, 1) << bad.out;
    EXPECT_NE(bad.out.find("FAIL"), std::string::npos) << bad.out;
    expect_gate_and_checker(dir, std::max({d.matrix_unit.rows, d.matrix_unit.cols, d.vector_unit.lanes, 64,
                                           d.memory.weight_channels}));
  }
  {
    quant::Plan plan = quant::uniform_plan(m.config, quant::Scheme::w4a8, 64);
    plan.scheme = quant::Scheme::mixed;
    for (auto& lp : plan.layers)
      if (lp.which == model::Linear::w2 || lp.which == model::Linear::cls || (lp.layer == 1 && lp.which == model::Linear::wq))
        lp.weight = quant::WeightFormat::int8;
    const quant::QuantModel qm = quant::quantize_model(m, plan);
    const std::string dir = root + "/mixed";
    codegen::emit(m, qm, d, dir, codegen::EmitOptions{2});
    compile_testbench(dir);
    const Shell ok = run_testbench(dir);
    EXPECT_EQ(ok.status, 0) << ok.out;
    EXPECT_NE(ok.out.find("decode step 1 logits: 512 values bit-exact"), std::string::npos) << ok.out;
  }
}

TEST(Codegen, Int4OnAnInt8DesignAndW4a16Refused) {
  // int4 weights need a design whose matrix unit takes them (weight_bits 4); fp16
  // activations (w4a16) are not what the matrix unit multiplies. emit says so and leaves no folder.
  const model::Model& m = stories();
  const std::string root = scratch_dir("codegen_int4_refused");
  const quant::QuantModel q4 = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w4a8, 32));
  try {
    codegen::emit(m, q4, u280_design(), root + "/proj", codegen::EmitOptions{3});
    ADD_FAILURE() << "int4 weights were emitted on an 8-bit matrix unit";
  } catch (const fpgallm::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("weight_bits"), std::string::npos) << e.what();
  }
  arch::Design d = u280_design();
  d.matrix_unit.weight_bits = 4;
  const quant::QuantModel q16 = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w4a16, 32));
  try {
    codegen::emit(m, q16, d, root + "/proj", codegen::EmitOptions{3});
    ADD_FAILURE() << "fp16 activations were emitted";
  } catch (const fpgallm::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("activations"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(root));
}

// Prompt calls in blocks of 16 tokens (tiling.prefill_block 16) with an fp32 KV cache: 17
// tokens are a block of 16 and a block of one (the streaming unit), 64 are four blocks.
TEST(Codegen, Stories15mSynthesizedBitExact) {
  const auto cfg = model::find_preset("stories15m");
  ASSERT_TRUE(cfg.has_value());
  const model::Model m = model::synthesize(*cfg, 7);
  const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
  const std::string dir = scratch_dir("codegen_15m") + "/proj";
  arch::Design d = u280_fp32_kv_design();
  d.tiling.prefill_block = 16;
  codegen::emit(m, qm, d, dir, codegen::EmitOptions{2});
  EXPECT_NE(read_bytes(dir + "/src/fpgallm_config.hpp").find("static constexpr int max_tokens = 16;"), std::string::npos);
  compile_testbench(dir);
  const Shell ok = run_testbench(dir);
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("one layer (block 0): 288 values bit-exact"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("decode step 1 logits: 32000 values bit-exact"), std::string::npos) << ok.out;
  // KV cache per prompt: 6 layers x n positions x keys and values of kv_dim 288 fp32.
  for (int n : {1, 17, 64}) {
    EXPECT_NE(ok.out.find(fmt::format("prompt of {} tokens: last token's logits: 32000 values bit-exact", n)),
              std::string::npos)
        << ok.out;
    EXPECT_NE(ok.out.find(fmt::format("prompt of {} tokens: KV cache: {} bytes bit-exact", n, 6 * n * 2 * 288 * 4)),
              std::string::npos)
        << ok.out;
  }
  flip_byte(dir + "/golden/decode_logits.bin", 32000 * 4 + 4 * 1000 + 2);
  const Shell bad = run_testbench(dir);
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("decode step 1 logits: FAIL, 1 of 32000 values differ; first at 1000"), std::string::npos)
      << bad.out;
}

TEST(Codegen, DeterministicAndSynthesizable) {
  const model::Model& m = stories();
  const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
  const std::string root = scratch_dir("codegen_det");
  const auto a = codegen::emit(m, qm, u280_design(), root + "/a", codegen::EmitOptions{2});
  const auto b = codegen::emit(m, qm, u280_design(), root + "/b", codegen::EmitOptions{2});
  ASSERT_EQ(a.files, b.files);
  for (const auto& f : a.files) EXPECT_EQ(read_bytes(root + "/a/" + f), read_bytes(root + "/b/" + f)) << f;

  expect_gate_and_checker(root + "/a", 64);
  expect_memory_interface(root + "/a", 16);

  // Connectivity (hw/memory_map.hpp, hw/placement.hpp): the design's 16 weight channels on
  // pseudo-channels 0-15, one each; KV keys and values on the first pseudo-channels after them,
  // one each (a port each, not the bank of the other); the program and the result, one bundle,
  // on one bank. The default design's decode datapath fits SLR0, where the HBM attaches; with
  // its 64-token prompt blocks the tiled matrix unit (1,024 more DSPs) goes on to SLR1, and
  // nothing to SLR2 (hw::estimate_resources says the same). Designs that span SLRs are
  // linked in tests/codegen/test_link.cpp.
  const std::string cfg = read_bytes(root + "/a/connectivity.cfg");
  for (int c = 0; c < 16; ++c)
    EXPECT_NE(cfg.find(fmt::format("sp=fpgallm_overlay_1.w{:02d}:HBM[{}]\n", c, c)), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("sp=fpgallm_overlay_1.kv_k:HBM[16]\n"), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("sp=fpgallm_overlay_1.kv_v:HBM[17]\n"), std::string::npos) << cfg;
  std::smatch program, result;
  ASSERT_TRUE(std::regex_search(cfg, program, std::regex(R"(sp=fpgallm_overlay_1\.program:(HBM\[\d+\]))")));
  ASSERT_TRUE(std::regex_search(cfg, result, std::regex(R"(sp=fpgallm_overlay_1\.result:(HBM\[\d+\]))")));
  EXPECT_EQ(program[1], result[1]);
  EXPECT_EQ(hw::estimate_resources(u280_design(), hw::find_device("u280"), {&m.config}).slrs_spanned, 2);
  EXPECT_NE(cfg.find("\n# place SLR1"), std::string::npos) << cfg;
  EXPECT_EQ(cfg.find("\n# place SLR2"), std::string::npos) << cfg;
  const std::string mk = read_bytes(root + "/a/Makefile");
  EXPECT_NE(mk.find("emconfigutil --platform $(PLATFORM)"), std::string::npos);
  EXPECT_NE(mk.find("CLOCK_HZ := 300000000\n"), std::string::npos);
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
  const Shell c = shell("g++ -std=c++17 -fsyntax-only -I" + dir + "/src -I" + xrt + " " + dir + "/host/host.cpp");
  EXPECT_EQ(c.status, 0) << c.out;
}

// The host program passes the front-end gate against the XRT stand-in, and its buffers and
// scalars are checked against the top function's declared parameters when it compiles: a
// parameter whose type or place changes, or one more or fewer, fails it.
TEST(Codegen, HostArgumentsCheckedAgainstTheTopAtCompileTime) {
  const model::Model& m = stories();
  const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
  const std::string dir = scratch_dir("codegen_host_args") + "/proj";
  codegen::emit(m, qm, u280_design(), dir, codegen::EmitOptions{1});
  const std::string header = dir + "/src/fpgallm_overlay.hpp";
  const std::string original = read_bytes(header);
  auto compiles = [&] {
    return shell("g++ -std=c++17 -pedantic -Werror -Wall -Wextra -Wno-unknown-pragmas -fsyntax-only -I" + dir + "/src -I" +
                 source_path("tests/kernels/vendor_stub") + " " + dir + "/host/host.cpp");
  };
  const Shell ok = compiles();
  EXPECT_EQ(ok.status, 0) << ok.out;
  const std::vector<std::tuple<std::string, std::string, std::string>> changes = {
      {"float* kv_k_scale", "int* kv_k_scale", "a buffer's elements differ"},
      {"int result_buf, float* result", "float* result, int result_buf", "fpgallm_overlay"},
      {"int token, int pos", "int token, float pos", "a scalar of another type"},
      {"int token, int pos", "int token", "differ in number"},
  };
  for (const auto& [from, to, message] : changes) {
    std::string changed = original;
    const auto at = changed.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    changed.replace(at, from.size(), to);
    write_bytes(header, changed);
    const Shell bad = compiles();
    EXPECT_NE(bad.status, 0) << to;
    EXPECT_NE(bad.out.find(message), std::string::npos) << to << "\n" << bad.out;
  }
  write_bytes(header, original);
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
  // The planner's design for this model: the project matches its golden vectors bit for
  // bit, and README lists what the project cannot show (no departures from the design).
  compile_testbench(root + "/proj");
  const Shell ok = run_testbench(root + "/proj");
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(read_bytes(root + "/proj/README.md").find("## Departures from the design"), std::string::npos);
  const auto design = nlohmann::json::parse(read_bytes(root + "/design.json"));
  const int channels = design.at("memory").at("weight_channels").get<int>();
  expect_memory_interface(root + "/proj", channels);
  expect_gate_and_checker(root + "/proj",
                          std::max({design.at("matrix_unit").at("rows").get<int>(),
                                    design.at("matrix_unit").at("cols").get<int>(),
                                    design.at("vector_unit").at("lanes").get<int>(), 64, channels}));

  // A design the overlay cannot run: exit 2, one line on stderr, no folder left behind.
  write_bytes(root + "/bad.json", R"({"matrix_unit": {"rows": 48}})");
  const auto bad = run_fpgallm("emit " + stories260k() + " --design " + root + "/bad.json -o " + root + "/badproj");
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_FALSE(fs::exists(root + "/badproj"));
  for (const auto& e : fs::directory_iterator(root))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

// A planned stories15m: `plan stories15m --device u280`'s design, emitted for a synthesized
// stories15m (`synth --preset stories15m`). Its testbench's prompt calls (1, 17 and 64 tokens,
// one call each, blocks of the plan's prefill_block) match the backend bit for bit.
TEST(CodegenCli, PlannedStories15mPromptCallBitExact) {
  const std::string root = scratch_dir("codegen_15m_planned");
  ASSERT_EQ(run_fpgallm("plan stories15m --device u280 -o " + root + "/design.json").status, 0);
  ASSERT_EQ(run_fpgallm("synth --preset stories15m --seed 7 -o " + root + "/m.bin").status, 0);
  const auto emit = run_fpgallm("emit " + root + "/m.bin --design " + root + "/design.json -o " + root + "/proj");
  ASSERT_EQ(emit.status, 0) << emit.err;
  const std::string dir = root + "/proj";
  const arch::Design d = arch::load(root + "/design.json");
  EXPECT_NE(read_bytes(dir + "/src/fpgallm_config.hpp")
                .find(fmt::format("static constexpr int max_tokens = {};", arch::block_tokens(d))),
            std::string::npos);
  compile_testbench(dir);
  const Shell ok = run_testbench(dir);
  EXPECT_EQ(ok.status, 0) << ok.out;
  // KV cache per prompt: 6 layers x n positions x (keys and values of kv_dim 288 elements of
  // kv_bits, plus for int8 a key and a value scale per each of the 6 KV heads).
  const long long per_position = 2LL * 288 * d.kv_bits / 8 + (d.kv_bits == 8 ? 2 * 6 * 4 : 0);
  for (int n : {1, 17, 64}) {
    EXPECT_NE(ok.out.find(fmt::format("prompt of {} tokens: last token's logits: 32000 values bit-exact", n)),
              std::string::npos)
        << ok.out;
    EXPECT_NE(ok.out.find(fmt::format("prompt of {} tokens: KV cache: {} bytes bit-exact", n, 6 * n * per_position)),
              std::string::npos)
        << ok.out;
  }
}

// The design `plan llama2-7b --device u280` writes, emitted for the preset: the kernel, its
// interfaces and schedule are llama2-7b's; the golden vectors come from a small synthesized
// model run on the same kernel (a preset has no weights).
TEST(CodegenCli, Llama2_7bPlannedDesignPassesTheGate) {
  const std::string root = scratch_dir("codegen_7b");
  const auto plan = run_fpgallm("plan llama2-7b --device u280 -o " + root + "/design.json");
  ASSERT_EQ(plan.status, 0) << plan.err;
  const auto design = nlohmann::json::parse(read_bytes(root + "/design.json"));
  const int channels = design.at("memory").at("weight_channels").get<int>();
  const int widest = std::max({design.at("matrix_unit").at("rows").get<int>(), design.at("matrix_unit").at("cols").get<int>(),
                               design.at("vector_unit").at("lanes").get<int>(), 64, channels});
  const auto emit = run_fpgallm("emit llama2-7b --design " + root + "/design.json -o " + root +
                                "/proj --golden-steps 2 --json");
  ASSERT_EQ(emit.status, 0) << emit.err;
  const std::string dir = root + "/proj";
  expect_gate_and_checker(dir, widest);
  expect_memory_interface(dir, channels);
  const std::string config = read_bytes(dir + "/src/fpgallm_config.hpp");
  EXPECT_NE(config.find("static constexpr int dim = 4096;"), std::string::npos);
  EXPECT_NE(config.find("static constexpr int vocab_size = 32000;"), std::string::npos);
  compile_testbench(dir);
  const Shell ok = run_testbench(dir);
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("decode step 1 logits: 512 values bit-exact"), std::string::npos) << ok.out;
}

TEST(Codegen, GoldenVectorsComeFromTheDesignsOwnShapes) {
  const model::Model& m = stories();
  const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
  arch::Design d = u280_design();
  d.matrix_unit.cols = 128;
  d.vector_unit.lanes = 64;
  const arch::Design same = codegen::backend_design(d);
  EXPECT_EQ(same.matrix_unit.rows, d.matrix_unit.rows);
  EXPECT_EQ(same.matrix_unit.cols, 128);
  EXPECT_EQ(same.vector_unit.lanes, 64);
  EXPECT_EQ(same.style, arch::Style::overlay);
  // A shape fpgallm does not build (arch/instances.hpp) is refused, never replaced.
  d.matrix_unit.rows = 256;
  d.tiling.tile_rows = 256;
  d.tiling.tile_cols = 512;
  d.buffers.weight_bytes = 1 << 20;
  ASSERT_TRUE(d.problems().empty()) << d.problems().front();
  try {
    codegen::emit(m, qm, d, scratch_dir("codegen_unbuilt") + "/proj", codegen::EmitOptions{1});
    ADD_FAILURE() << "emitted a design whose golden vectors cannot be computed on its own shape";
  } catch (const fpgallm::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("matrix_unit.rows: 256"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(scratch_dir("codegen_unbuilt") + "/proj"));
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

namespace {

// small_qwen.hpp's small Qwen2 and Qwen3, synthesized, with per-head gains that differ by element.
model::Model synthesized_qwen(model::Arch arch) {
  model::Config c = small_qwen_config(arch);
  c.seq_len = 32;
  model::Model m = model::synthesize(c, 21);
  for (auto& lw : m.weights.layers)
    for (std::size_t i = 0; i < lw.q_norm.size(); ++i) {
      lw.q_norm[i] = 0.6f + 0.02f * float(i);
      lw.k_norm[i] = 1.4f - 0.02f * float(i);
    }
  return m;
}

// The first instruction of the emitted program with opcode `op` (and, when `flag`, that
// flag bit set): its 16 words' index in data/program.bin.
long find_instruction(const std::string& dir, int op, int flag) {
  const std::string p = read_bytes(dir + "/data/program.bin");
  for (std::size_t i = 0; i + 64 <= p.size(); i += 64) {
    std::int32_t w[16];
    std::memcpy(w, p.data() + i, 64);
    if (w[0] == op && (flag == 0 || (w[15] & flag))) return long(i / 64);
  }
  return -1;
}

}  // namespace

// The emitted project of a Qwen2 and a Qwen3 model: its testbench (g++ -std=c++14) matches
// the accelerator backend's golden vectors bit for bit, the project passes the C++14
// front-end gate and the synthesizability checker, and the testbench fails when the
// project's bias (Qwen2) or per-head gain (Qwen3) is changed.
TEST(Codegen, QwenProjectsBitExactGatedAndCanFail) {
  for (auto arch : {model::Arch::qwen2, model::Arch::qwen3}) {
    const model::Model m = synthesized_qwen(arch);
    const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
    const std::string dir = scratch_dir(std::string("codegen_") + model::to_string(arch)) + "/proj";
    codegen::emit(m, qm, u280_fp32_kv_design(), dir, codegen::EmitOptions{3});
    compile_testbench(dir);
    const Shell ok = run_testbench(dir);
    EXPECT_EQ(ok.status, 0) << ok.out;
    EXPECT_NE(ok.out.find("one layer (block 0): 64 values bit-exact"), std::string::npos) << ok.out;
    EXPECT_NE(ok.out.find("decode step 2 logits: 256 values bit-exact"), std::string::npos) << ok.out;
    expect_gate_and_checker(dir, 64);
    const std::string config = read_bytes(dir + "/src/fpgallm_config.hpp");
    EXPECT_NE(config.find(arch == model::Arch::qwen3 ? "static constexpr int q_dim = 128;" : "static constexpr int q_dim = 64;"),
              std::string::npos);

    // One float of the bias of the first biased matmul (blk.0.wq, Qwen2), or of the first
    // head_norm's q gain (Qwen3), changed in data/params.bin: the testbench must fail.
    const int op = arch == model::Arch::qwen2 ? int(arch::Op::matmul) : int(arch::Op::head_norm);
    const long at = find_instruction(dir, op, arch == model::Arch::qwen2 ? 2 : 0);
    ASSERT_GE(at, 0) << model::to_string(arch);
    std::int32_t aux = 0;
    std::memcpy(&aux, read_bytes(dir + "/data/program.bin").data() + at * 64 + 13 * 4, 4);
    // (Exponent bit 1: the value is 4 times smaller or larger.) Position 0 attends to one
    // key, whatever q is: the logits differ from step 1.
    flip_byte(dir + "/data/params.bin", std::size_t(aux) * 64 + 3 * 4 + 3);
    const Shell bad = run_testbench(dir);
    EXPECT_EQ(bad.status, 1) << bad.out;
    EXPECT_NE(bad.out.find("decode step 0 logits: 256 values bit-exact"), std::string::npos) << bad.out;
    EXPECT_NE(bad.out.find("decode step 1 logits: FAIL"), std::string::npos) << bad.out;
  }
}

// `plan` then `emit` of the Qwen2.5-0.5B and Qwen3-0.6B presets on the U280: the kernel is
// the preset's (Qwen3's 128-wide heads: q is 2048 wide on a width of 1024), the golden
// vectors a small synthesized model of the same block; the project passes the front-end
// gate and its testbench bit for bit.
TEST(CodegenCli, QwenPlannedDesignsPassTheGate) {
  for (const char* preset : {"qwen2.5-0.5b", "qwen3-0.6b"}) {
    const std::string root = scratch_dir(std::string("codegen_plan_") + preset);
    const auto plan = run_fpgallm(std::string("plan ") + preset + " --device u280 -o " + root + "/design.json", 300);
    ASSERT_EQ(plan.status, 0) << plan.err;
    const auto design = nlohmann::json::parse(read_bytes(root + "/design.json"));
    const int channels = design.at("memory").at("weight_channels").get<int>();
    const int widest = std::max({design.at("matrix_unit").at("rows").get<int>(),
                                 design.at("matrix_unit").at("cols").get<int>(),
                                 design.at("vector_unit").at("lanes").get<int>(), 64, channels});
    const auto emit = run_fpgallm(std::string("emit ") + preset + " --design " + root + "/design.json -o " + root +
                                      "/proj --golden-steps 2 --json",
                                  300);
    ASSERT_EQ(emit.status, 0) << emit.err;
    const std::string dir = root + "/proj";
    expect_gate_and_checker(dir, widest);
    expect_memory_interface(dir, channels);
    const std::string config = read_bytes(dir + "/src/fpgallm_config.hpp");
    EXPECT_NE(config.find(std::string(preset) == "qwen3-0.6b" ? "static constexpr int q_dim = 2048;"
                                                               : "static constexpr int q_dim = 896;"),
              std::string::npos)
        << config;
    EXPECT_NE(read_bytes(dir + "/README.md").find(std::string(preset) == "qwen3-0.6b" ? "qwen3 block (4 KV heads, heads of 16)"
                                                                                        : "qwen2 block (2 KV heads)"),
              std::string::npos);
    compile_testbench(dir);
    const Shell ok = run_testbench(dir);
    EXPECT_EQ(ok.status, 0) << ok.out;
    EXPECT_NE(ok.out.find("decode step 1 logits: 512 values bit-exact"), std::string::npos) << ok.out;
  }
}
