// Resource model against counts worked out by hand from the kernel source (file:line in the
// comments): what the emitted kernels instantiate, unit by unit.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "arch/design.hpp"
#include "arch/program.hpp"
#include "arch/units.hpp"
#include "codegen/emit_text.hpp"
#include "hw/device.hpp"
#include "hw/power.hpp"
#include "hw/resources.hpp"
#include "hw/unit_resources.hpp"
#include "kernels/attention.hpp"
#include "kernels/vector_unit.hpp"
#include "model/presets.hpp"
#include "util/error.hpp"

namespace {

const hw::Part& part(const hw::Utilization& u, const std::string& prefix) {
  for (const auto& p : u.parts)
    if (p.name.rfind(prefix, 0) == 0) return p;
  throw std::runtime_error("no part " + prefix);
}

arch::Design small_design() {
  arch::Design d;
  d.device = "u280";
  d.matrix_unit.rows = 4;
  d.matrix_unit.cols = 8;
  d.tiling.tile_rows = 128;
  d.tiling.tile_cols = 256;
  d.buffers.weight_bytes = 8192;
  d.buffers.activation_bytes = 256 * 1024;
  d.buffers.kv_bytes = 0;
  d.memory.weight_channels = 16;
  d.memory.kv_channels = 8;
  d.memory.activation_channels = 1;
  d.memory.port_bits = 256;  // the U280's HBM pseudo-channel AXI width (UG1393)
  d.vector_unit.lanes = 16;
  d.vector_unit.exp_table_bits = 8;
  return d;
}

// The model the two small configurations are sized for: stories260K (dim 64, hidden 172,
// 8 heads of 8, 4 KV heads, vocab 512, so q_dim 64, kv_dim 32; the hand counts below use
// these, checked in ConfigurationAByHand).
model::Config small_model() { return model::find_preset("stories260k").value(); }

// Configuration A: an 8 x 8 matrix unit, 8 lanes, one weight channel, 64-entry exp tables.
arch::Design config_a() {
  arch::Design d = small_design();
  d.matrix_unit.rows = 8;
  d.matrix_unit.cols = 8;
  d.vector_unit.lanes = 8;
  d.vector_unit.exp_table_bits = 6;
  d.memory.weight_channels = 1;
  d.memory.burst_bytes = 4096;
  d.kv_bits = 8;
  return d;
}

// Configuration B: 16 x 16, 16 lanes, two weight channels, 256-entry exp tables.
arch::Design config_b() {
  arch::Design d = config_a();
  d.matrix_unit.rows = 16;
  d.matrix_unit.cols = 16;
  d.vector_unit.lanes = 16;
  d.vector_unit.exp_table_bits = 8;
  d.memory.weight_channels = 2;
  return d;
}

std::vector<hw::Part> units_of(const arch::Design& d) {
  return hw::unit_resources(d, hw::kernel_sizes(small_model()));
}
const hw::Part& unit(const std::vector<hw::Part>& u, const std::string& name) {
  for (const auto& p : u)
    if (p.name == name) return p;
  throw std::runtime_error("no unit " + name);
}
const hw::Term& term(const hw::Part& p, const std::string& what) {
  for (const auto& t : p.terms)
    if (t.what == what) return t;
  throw std::runtime_error("no term " + what + " in " + p.name);
}

TEST(UnitResources, BlockRamBanksByUg573AspectRatios) {
  EXPECT_EQ(hw::bram18_for_bank(36, 512), 1);    // 512 x 36 exactly
  EXPECT_EQ(hw::bram18_for_bank(36, 513), 2);    // one word more
  EXPECT_EQ(hw::bram18_for_bank(32, 2048), 4);   // 2K x 9, four side by side
  EXPECT_EQ(hw::bram18_for_bank(512, 64), 15);   // ceil(512 / 36) blocks of 512 x 36
  EXPECT_EQ(hw::bram18_for_bank(512, 1024), 29); // ceil(512 / 18) blocks of 1K x 18
  EXPECT_EQ(hw::bram18_for_bank(1, 16384), 1);
  EXPECT_EQ(hw::bram18_for_bank(0, 10), 0);
}

TEST(UnitResources, FpCoresAtVitisDefaultBindings) {
  EXPECT_EQ(hw::fp_core("fadd").dsp, 2);  // fulldsp (PG060 full usage)
  EXPECT_EQ(hw::fp_core("fmul").dsp, 3);  // maxdsp (PG060 max usage)
  EXPECT_EQ(hw::fp_core("fdiv").dsp, 0);  // fabric
  EXPECT_EQ(hw::fp_core("fcmp").dsp, 0);
}

// Configuration A counted by hand from the kernel source.
TEST(UnitResources, ConfigurationAByHand) {
  const model::Config sm = small_model();
  ASSERT_EQ(std::make_tuple(sm.dim, sm.hidden_dim, sm.n_heads, sm.n_kv_heads, sm.vocab_size), std::make_tuple(64, 172, 8, 4, 512));
  const auto u = units_of(config_a());
  const double fadd = hw::fp_core("fadd").dsp, fmul = hw::fp_core("fmul").dsp;  // 2, 3
  // Matrix unit (the emitted matmul_region).
  const hw::Part& mu = unit(u, "matrix unit");
  // matrix_unit.hpp:476: one int8 x int8 multiply per (pe, k) of the II=1 step loop
  // (:466), both loops unrolled: 8 x 8 = 64 products, one DSP each, no packing.
  EXPECT_EQ(term(mu, "int8 x int8 products").total().dsp, 64);
  // overlay.hpp:46-56: store_rows at II = scale_words = ceil(8/16) = 1 requantizes 8 rows
  // per cycle: 8 x (float(acc), x s_w, x s_x) = 8 sitofp + 16 fmul = 48 DSP.
  EXPECT_EQ(term(mu, "requantize: fmul").count, 16);
  EXPECT_EQ(term(mu, "requantize: sitofp").count, 8);
  EXPECT_EQ(mu.use.dsp, 64 + 16 * fmul);
  // Adder tree of a row (matrix_unit.hpp:475-479): 4 adders of 17 bits, 2 of 18, 1 of 19,
  // plus the 32-bit accumulator = 155 bits; x 8 rows.
  EXPECT_EQ(term(mu, "adder tree and accumulator of one row").total().lut, 8 * 155);
  // emit_text.cpp:253: one channel FIFO of 64 x 512 bits: ceil(512/36) = 15 BRAM18 of 512 x 36.
  EXPECT_EQ(term(mu, "weight channel FIFOs").total().bram36, 7.5);
  // emit_text.cpp:254-255: depth-4 FIFOs of one 512-bit step and 8 x 32-bit accumulators: SRLs.
  EXPECT_EQ(term(mu, "weight step FIFO").total().lut, 512);
  EXPECT_EQ(term(mu, "accumulator FIFO").total().lut, 256);
  // emit_text.cpp:293: codes[176] (max(hidden 172, dim 64) rounded to 8) cyclic by 8:
  // 8 banks of 22 x 8 bits, RAM32M16 (8 LUTs).
  EXPECT_EQ(term(mu, "activation codes").total().lut, 8 * 8);
  EXPECT_EQ(mu.use.bram36, 7.5);

  // Vector unit, attention's lane work and the KV store share the top's binary32 cores
  // (ALLOCATION, emit_text.cpp, kernels::SharedCores): the most any one loop takes. The
  // attention takes one 512-bit KV beat per cycle, 64 int8 elements (A = 64 > 8 lanes).
  // Multipliers: its values loop, 64 x 2 (the code x its scale, p x v) + exp_rom's 10 (within
  // kLaneFmul = 12): 140, more than swiglu's 8 x 12. Adders: the values loop's 64 slot sums,
  // exp_rom's 5 sums and 4 differences, s - m_new and the denominator's slot (75), within
  // max(8 x 8 sums, 64 + 8) + 8 x 4 differences = 104. 140 x 3 + 104 x 2 DSP = 628.
  const hw::Part& vu = unit(u, "vector unit");
  EXPECT_EQ(term(vu, "shared multipliers: fmul").count, 140);
  EXPECT_EQ(term(vu, "shared adders: fadd").count, 104);
  EXPECT_EQ(vu.use.dsp, 140 * fmul + 104 * fadd);  // 628
  // Operand multiplexers: each core takes one input per call site of a loop that uses it
  // (inputs beyond the first cost LUTs); a loop of w elements per cycle taking k cores of a
  // kind per element uses cores 0..wk-1. Multipliers by core: #0 14 inputs (rmsnorm's 2
  // sums of squares and 2 scales, quantize codes, swiglu, the 2 ropes, scores, values,
  // combine, attention's scalar part, the KV store's 2 codes loops): 13 extra; #1-7 the same
  // but the scalar part: 12 each; #8-15 the 2 scales, swiglu, the 2 ropes, scores, values:
  // 6 each; #16-95 swiglu, scores, values: 2 each; #96-127 scores, values: 1 each; #128-139
  // values alone or none. 13 + 84 + 48 + 160 + 32 = 337. Adders: #0 15 inputs (the 2 sums
  // of squares, the 2 rmsnorm scalar parts, quantize codes, the residual add, swiglu, the
  // 2 ropes, scores, values, combine, attention's scalar part, the 2 KV codes loops): 14
  // extra; #1-7 without the 3 scalar parts: 11 each; #8-15 quantize codes, swiglu, scores,
  // values, combine, the 2 KV codes loops: 6 each; #16-63 swiglu, scores, values, combine:
  // 3 each; #64 swiglu, scores, values: 2; #65-74 swiglu, values: 1 each; the rest one
  // user or none. 14 + 77 + 48 + 144 + 2 + 10 = 295. 632 inputs x 64 operand bits / 3 LUT.
  EXPECT_NEAR(term(vu, "operand multiplexers of the shared cores").total().lut, 632 * 64 / 3.0, 1e-6);
  // The exp ROMs (kernels::swiglu): 8 lanes x 64 x 32 bits, LUTRAM (RAM64M8: 8 LUTs
  // per 7 bits): 8 x 40 LUTs; no block RAM in the vector unit.
  EXPECT_EQ(term(vu, "exp ROMs").total().lut, 8 * 40);
  EXPECT_EQ(vu.use.bram36, 0);
  // What stays in fabric, one core per operation of each loop: quantize's one codes loop
  // (3 compares per lane: NaN, > 127, < -127) and the KV store's two.
  EXPECT_EQ(term(vu, "quantize codes: fcmp").count, 8 * 3);
  EXPECT_EQ(term(vu, "kv_store codes: fcmp").count, 2 * 8 * 3);

  // Attention: its block memories; its lane work is on the shared cores above.
  const hw::Part& at = unit(u, "attention");
  EXPECT_EQ(at.use.dsp, 0);
  // kblk, vblk [256][64] int8 codes (head 8 in one group of A = 64) reshaped by 64
  // (kernels::attention): 2 arrays of 256 words of 512 bits, ceil(512 / 36) = 15 BRAM18
  // (512 x 36) each; s, kscale, vscale [256] of 32 bits: one BRAM18 each.
  EXPECT_EQ(term(at, "K and V blocks").count, 2);
  EXPECT_EQ(at.use.bram36, (2 * 15 + 3) / 2.0);

  // On-chip activations (emit_text.cpp:278-292): partition max(8, 8, 16) = 16; every bank
  // is at most 32 words deep (logits 512 / 16), so all LUTRAM: 11 arrays x 16 banks x
  // RAM32M16 of 32 bits (3 x 8 LUTs).
  const hw::Part& act = unit(u, "on-chip activations");
  EXPECT_EQ(act.use.lut, 11 * 16 * 24);
  EXPECT_EQ(act.use.bram36, 0);

  // Memory ports: 1 weight bundle + 7 (emit_text.cpp:268-275) = 8 m_axi adapters. Data
  // buffers of outstanding x burst words: weight 512 bits x 16 x 64 = 29 BRAM18 (1K x 18),
  // scales and params the same (58), KV data 4 x 512 x 256 = 4 x 15, KV scales 4 x 1,
  // host 2 x 1: 153 BRAM18.
  const hw::Part& mp = unit(u, "memory ports");
  EXPECT_EQ(term(mp, "m_axi adapters").count, 8);
  EXPECT_EQ(mp.use.bram36, 153 / 2.0);
  EXPECT_EQ(mp.use.dsp, 0);

  // Controller: 16 instruction words in registers (emit_text.cpp:297-298), no
  // instruction memory.
  const hw::Part& ct = unit(u, "controller");
  EXPECT_EQ(ct.use.bram36, 0);
  EXPECT_EQ(term(ct, "instruction words").total().ff, 16 * 32);

  // Totals: the estimate sums the units (plus the platform's HBM subsystem on the U280).
  const model::Config m = small_model();
  const hw::Utilization est = hw::estimate_resources(config_a(), hw::find_device("u280"), {&m});
  EXPECT_EQ(est.total.dsp, 64 + 48 + 628);
  EXPECT_EQ(est.total.bram36, 7.5 + 16.5 + 76.5 + 4);  // + FINN's HBM subsystem, 4 BRAM36
  EXPECT_EQ(est.total.uram, 0);
}

// Configuration B: the same kernels at 16 x 16, 16 lanes, two weight channels.
TEST(UnitResources, ConfigurationBByHand) {
  const auto u = units_of(config_b());
  const double fadd = hw::fp_core("fadd").dsp, fmul = hw::fp_core("fmul").dsp;
  const hw::Part& mu = unit(u, "matrix unit");
  // 16 x 16 = 256 products; requantize 16 rows per cycle (scale_words = 1): 32 fmul.
  EXPECT_EQ(mu.use.dsp, 256 + 32 * fmul);
  // Row adder tree over 16 products: 8 x 17 + 4 x 18 + 2 x 19 + 1 x 20 + 32 = 298 bits.
  EXPECT_EQ(term(mu, "adder tree and accumulator of one row").total().lut, 16 * 298);
  // Two channel FIFOs (2 x 15 BRAM18); a step is 16 x 16 / 64 = 4 words: a 2048-bit SRL
  // FIFO; gather groups of lcm(4, 2) = 4 words in registers.
  EXPECT_EQ(term(mu, "weight channel FIFOs").total().bram36, 15);
  EXPECT_EQ(term(mu, "weight step FIFO").total().lut, 2048);
  EXPECT_EQ(term(mu, "gather buffer").total().ff, 4 * 512);
  EXPECT_EQ(unit(u, "vector unit").use.dsp, 16 * (12 * fmul + 12 * fadd));  // 960
  // 256-entry exp ROMs: 256 x 32 bits > 64 words: 1 BRAM18 (512 x 36) per lane.
  EXPECT_EQ(term(unit(u, "vector unit"), "exp ROMs").total().bram36, 16 * 0.5);
  EXPECT_EQ(unit(u, "attention").use.dsp, 0);
  // Activations: partition max(16, 16, 16) = 16 as in A.
  EXPECT_EQ(unit(u, "on-chip activations").use.lut, 11 * 16 * 24);
  // 9 bundles; one more 29-BRAM18 weight read buffer than A.
  EXPECT_EQ(term(unit(u, "memory ports"), "m_axi adapters").count, 9);
  EXPECT_EQ(unit(u, "memory ports").use.bram36, (153 + 29) / 2.0);
}

// Changing one kernel parameter changes the counts the way the code changes.
TEST(UnitResources, ParametersChangeCountsAsTheCodeDoes) {
  const double fadd = hw::fp_core("fadd").dsp, fmul = hw::fp_core("fmul").dsp;
  const auto a = units_of(config_a());
  auto dsp = [](const std::vector<hw::Part>& u, const std::string& n) { return unit(u, n).use.dsp; };
  // rows 8 -> 16: twice the products (64 more) and 8 more requantized rows (16 fmul).
  arch::Design rows = config_a();
  rows.matrix_unit.rows = 16;
  EXPECT_EQ(dsp(units_of(rows), "matrix unit") - dsp(a, "matrix unit"), 64 + 16 * fmul);
  // rows 16 -> 32: scale_words 1 -> 2, store_rows' II doubles: requantize cores stay at 16.
  arch::Design rows32 = rows;
  rows32.matrix_unit.rows = 32;
  EXPECT_EQ(term(unit(units_of(rows32), "matrix unit"), "requantize: sitofp").count, 16);
  // ... and the activation arrays' partition becomes max(32, 8, 16) = 32 banks each.
  EXPECT_EQ(term(unit(units_of(rows32), "on-chip activations"), "logits [vocab]").count, 32);
  // cols 8 -> 16: twice the products; requantization unchanged.
  arch::Design cols = config_a();
  cols.matrix_unit.cols = 16;
  EXPECT_EQ(dsp(units_of(cols), "matrix unit") - dsp(a, "matrix unit"), 64);
  // lanes 8 -> 16: the shared multipliers become 16 x 12 = 192 (more than the attention's
  // 140), the adders 16 x 8 + 16 x 4 = 192 (104 before), all on the shared cores.
  arch::Design lanes = config_a();
  lanes.vector_unit.lanes = 16;
  const auto l = units_of(lanes);
  EXPECT_EQ(dsp(l, "vector unit") - dsp(a, "vector unit"), (192 - 140) * fmul + (192 - 104) * fadd);
  EXPECT_EQ(dsp(l, "attention"), 0);
  EXPECT_EQ(dsp(l, "matrix unit"), dsp(a, "matrix unit"));
  // exp table 6 -> 10 bits: each lane's ROM becomes 1024 x 32 bits, 2 BRAM18.
  arch::Design rom = config_a();
  rom.vector_unit.exp_table_bits = 10;
  EXPECT_EQ(unit(units_of(rom), "vector unit").use.bram36, 8 * 1.0);
  // One more weight channel: one more 64-deep channel FIFO (15 BRAM18), one more bundle
  // with its 29-BRAM18 read buffer.
  arch::Design ch = config_a();
  ch.memory.weight_channels = 2;
  const auto c = units_of(ch);
  EXPECT_EQ(unit(c, "matrix unit").use.bram36 - unit(a, "matrix unit").use.bram36, 7.5);
  EXPECT_EQ(unit(c, "memory ports").use.bram36 - unit(a, "memory ports").use.bram36, 14.5);
  // An fp16 KV cache: a beat holds 32 elements, so the attention takes 32 per cycle and its
  // values loop 32 x 2 + 10 multipliers: swiglu's 96 and the vector unit's 96 adders set
  // the shared cores.
  // kv_store has no quantizer (kernels::kv_write converts in fabric): its compares and
  // conversions go. Operand multiplexers: 434 inputs (the same count as for config A, with
  // A = 32 and without the KV store's two codes loops).
  arch::Design kv16 = config_a();
  kv16.kv_bits = 16;
  const auto k16 = units_of(kv16);
  EXPECT_EQ(dsp(k16, "vector unit"), 96 * fmul + 96 * fadd);
  EXPECT_THROW(term(unit(k16, "vector unit"), "kv_store codes: fcmp"), std::exception);
  EXPECT_NEAR(term(unit(k16, "vector unit"), "operand multiplexers of the shared cores").total().lut, 434 * 64 / 3.0,
              1e-6);
}

// matrix_unit.impl = rtl: the RTL unit packs two int8 products per DSP48E2 explicitly
// (rtl/fpgallm_matrix_unit.v, checked against Yosys), the only place anything packs.
TEST(UnitResources, RtlMatrixUnitPacksAndIsChecked) {
  arch::Design d = config_a();
  d.matrix_unit.impl = arch::MatrixUnitImpl::rtl;
  const model::Config m = small_model();
  const hw::Utilization u = hw::estimate_resources(d, hw::find_device("u280"), {&m});
  const hw::Part& mu = part(u, "matrix unit");
  EXPECT_EQ(mu.checked, hw::kMatrixUnitChecked);
  EXPECT_EQ(term(mu, "RTL matrix unit").total().dsp, 4 * 8);  // ceil(8/2) x 8
  EXPECT_EQ(mu.use.dsp, 4 * 8 + 16 * hw::fp_core("fmul").dsp);  // + the HLS store stage's requantizers
  const hw::Utilization h = hw::estimate_resources(config_a(), hw::find_device("u280"), {&m});
  EXPECT_EQ(part(h, "matrix unit").checked, "");
}

// vector_unit.shared (published overlays' special-function units, not the kernels): one
// multiply, one add, one compare and one to-integer core per lane, one divider, square
// root and int -> float for the unit; attention's lane work runs on it, so attention keeps
// only its block memories.
TEST(UnitResources, SharedVectorUnitIsOneDatapathPerLane) {
  const double fadd = hw::fp_core("fadd").dsp, fmul = hw::fp_core("fmul").dsp;  // 2, 3
  arch::Design d = config_a();
  d.vector_unit.shared = true;
  const auto u = units_of(d);
  EXPECT_EQ(unit(u, "vector unit").use.dsp, 8 * (fmul + fadd));  // 40
  EXPECT_EQ(term(unit(u, "vector unit"), "lane datapath: fcmp").count, 8);
  EXPECT_EQ(term(unit(u, "vector unit"), "scalar part: fdiv").count, 1);
  EXPECT_EQ(unit(u, "attention").use.dsp, 0);
  EXPECT_EQ(unit(u, "attention").use.bram36, unit(units_of(config_a()), "attention").use.bram36);
  // The matrix unit is untouched by the vector unit's sharing.
  EXPECT_EQ(unit(u, "matrix unit").use.dsp, unit(units_of(config_a()), "matrix unit").use.dsp);
  // Twice the lanes: twice the lane cores, the scalar part unchanged.
  arch::Design wide = d;
  wide.vector_unit.lanes = 16;
  EXPECT_EQ(unit(units_of(wide), "vector unit").use.dsp, 16 * (fmul + fadd));
}

// vector_unit.format fp16: the half-precision cores (two DSP48E2 for hadd, one for hmul, as
// DFX's paper counts its FP16 operators) and 16-bit exp tables and attention blocks; a
// matrix unit of 16-bit operands is read as fp16 multipliers and adders (DFX).
TEST(UnitResources, HalfPrecisionCoresAndMatrixUnit) {
  EXPECT_EQ(hw::fp_core("hadd").dsp, 2);
  EXPECT_EQ(hw::fp_core("hmul").dsp, 1);
  EXPECT_EQ(hw::fp_core("hdiv").dsp, 0);
  arch::Design d = config_a();
  d.vector_unit.shared = true;
  d.vector_unit.format = arch::VectorFormat::fp16;
  d.vector_unit.exp_table_bits = 10;  // 1024 entries: fp32 2 BRAM18 per lane, fp16 1 (1K x 18)
  const auto u = units_of(d);
  EXPECT_EQ(unit(u, "vector unit").use.dsp, 8 * (2 + 1));
  EXPECT_EQ(term(unit(u, "vector unit"), "exp tables").total().bram36, 8 * 0.5);
  EXPECT_EQ(term(unit(u, "vector unit"), "lane datapath: hcmp").count, 8);
  d.matrix_unit.weight_bits = d.matrix_unit.act_bits = 16;
  const auto fp16_units = units_of(d);
  const hw::Part& mu = unit(fp16_units, "matrix unit");
  EXPECT_EQ(term(mu, "fp16 products: hmul").count, 8 * 8);
  EXPECT_EQ(term(mu, "fp16 adder tree and accumulator: hadd").count, 8 * 8);  // 7 tree adders + 1 accumulator per row
  EXPECT_EQ(mu.use.dsp, 3 * 64);  // DFX's 3 x d x l: d x l multipliers, 2 x d x l adders
  // The kernels run neither: both are kernel gaps.
  auto has = [](const std::vector<std::string>& gaps, const std::string& field) {
    return std::any_of(gaps.begin(), gaps.end(), [&](const std::string& g) { return g.rfind(field, 0) == 0; });
  };
  EXPECT_TRUE(has(d.kernel_gaps(), "vector_unit.format"));
  EXPECT_TRUE(has(d.kernel_gaps(), "vector_unit.shared"));
  EXPECT_FALSE(has(config_a().kernel_gaps(), "vector_unit"));
}

// Compute units (one per SLR) each stream over their share of the weight channels: the
// channel FIFOs and m_axi bundles are not multiplied by the compute units.
TEST(Resources, ComputeUnitsShareTheWeightChannels) {
  const model::Config m = small_model();
  arch::Design one = config_a();
  one.memory.weight_channels = 8;
  arch::Design two = one;
  two.compute_units = 2;
  const hw::Utilization a = hw::estimate_resources(one, hw::find_device("u280"), {&m});
  const hw::Utilization b = hw::estimate_resources(two, hw::find_device("u280"), {&m});
  // One unit: 8 weight bundles + 7 others; two units: 2 x (4 + 7).
  EXPECT_EQ(term(part(a, "memory ports"), "m_axi adapters").count, 8 + 7);
  EXPECT_EQ(part(b, "memory ports").use.lut, 2 * (4 + 7) * term(part(a, "memory ports"), "m_axi adapters").each.lut);
  // The MAC arrays double; each unit has 4 channel FIFOs (15 BRAM18 each) where one unit had 8.
  EXPECT_EQ(part(b, "matrix unit").use.dsp, 2 * part(a, "matrix unit").use.dsp);
  EXPECT_EQ(term(part(b, "matrix unit"), "weight channel FIFOs").count, 4);
  // 32 channels over 3 units: whole channels, 10 each (30 of 32), never more than exist.
  arch::Design three = one;
  three.memory.weight_channels = 32;
  three.compute_units = 3;
  const hw::Utilization c = hw::estimate_resources(three, hw::find_device("u280"), {&m});
  EXPECT_EQ(term(part(c, "matrix unit"), "weight channel FIFOs").count, 10);
  EXPECT_EQ(term(part(c, "memory ports"), "m_axi adapters").count, 10 + 7);
}

// The memory ports and the activation arrays against the emitted top itself: the distinct
// m_axi bundles of its INTERFACE pragmas, and the arrays partitioned by CFG::partition.
TEST(UnitResources, PortsAndArraysAsTheEmittedTopDeclaresThem) {
  for (const arch::Design& d : {config_a(), config_b()}) {
    codegen::ProjectInfo p;
    p.config = p.golden = small_model();
    p.design = d;
    p.weight_channels = d.memory.weight_channels;
    const std::string top = codegen::top_source(p);
    std::set<std::string> bundles;
    const std::regex bundle("INTERFACE m_axi [^\n]*bundle=(\\w+)");
    for (auto it = std::sregex_iterator(top.begin(), top.end(), bundle); it != std::sregex_iterator(); ++it)
      bundles.insert((*it)[1].str());
    const auto u = units_of(d);
    EXPECT_EQ(term(unit(u, "memory ports"), "m_axi adapters").count, double(bundles.size()));
    const std::regex partitioned("ARRAY_PARTITION variable=\\w+ cyclic factor=CFG::partition");
    const auto arrays = std::distance(std::sregex_iterator(top.begin(), top.end(), partitioned), std::sregex_iterator());
    const int partition = std::max({d.matrix_unit.rows, d.vector_unit.lanes, 16});
    double banks = 0;
    for (const auto& t : unit(u, "on-chip activations").terms) banks += t.count;
    EXPECT_EQ(banks, double(arrays) * partition);
    const std::regex fifo("kernels::Fifo<");
    EXPECT_EQ(std::distance(std::sregex_iterator(top.begin(), top.end(), fifo), std::sregex_iterator()), 3);  // channel[], steps, acc
  }
}

// The on-chip activation arrays against the emitted top itself: every `static float` array it
// declares, sized from the emitted config's constants, banked by its ARRAY_PARTITION factor,
// in UltraRAM where a BIND_STORAGE asks for it (one 4K x 72 block per 4,096 words of a bank,
// UG573), in block RAM otherwise. Their block RAM and UltraRAM are the "on-chip activations"
// part's, for a decode-only top, stories260K tops with 64-token prompt blocks, and
// llama2-7b-sized tops, in block RAM and in UltraRAM.
TEST(UnitResources, ActivationArraysAsTheEmittedTopDeclaresThem) {
  struct Case {
    model::Config model;
    int pe, simd, lanes, block;
    bool uram;
  };
  const model::Config llama = model::find_preset("llama2-7b").value();
  for (const Case& c : {Case{small_model(), 8, 8, 8, 1, false}, Case{small_model(), 16, 16, 16, 64, false},
                        Case{small_model(), 16, 16, 16, 64, true}, Case{llama, 32, 64, 16, 64, true},
                        Case{llama, 32, 64, 16, 16, true}, Case{llama, 16, 64, 32, 8, false}}) {
    arch::Design d = config_a();
    d.memory.port_bits = 512;
    d.matrix_unit.rows = c.pe;
    d.matrix_unit.cols = c.simd;
    d.vector_unit.lanes = c.lanes;
    d.tiling.prefill_block = c.block;
    d.buffers.activations_in_uram = c.uram;
    ASSERT_TRUE(d.kernel_gaps().empty());
    SCOPED_TRACE(c.model.name + ", block " + std::to_string(c.block));
    codegen::ProjectInfo p;
    p.config = p.golden = c.model;
    p.design = d;
    p.weight_channels = d.memory.weight_channels;
    p.block_tokens = arch::block_tokens(d);
    std::map<std::string, long long> constant;
    const std::string h = codegen::config_header(p);
    const std::regex def(R"(static constexpr int (\w+) = (\d+);)");
    for (auto it = std::sregex_iterator(h.begin(), h.end(), def); it != std::sregex_iterator(); ++it)
      constant[(*it)[1].str()] = std::stoll((*it)[2].str());
    const std::string top = codegen::top_source(p);
    const std::regex decl(R"(static float ([^;]+);)"), array(R"((\w+)\[CFG::(\w+)(?: \* CFG::(\w+))?\])");
    double bram36 = 0, uram = 0;
    int arrays = 0, in_uram = 0;
    for (auto it = std::sregex_iterator(top.begin(), top.end(), decl); it != std::sregex_iterator(); ++it) {
      const std::string list = (*it)[1].str();
      for (auto a = std::sregex_iterator(list.begin(), list.end(), array); a != std::sregex_iterator(); ++a) {
        const std::string name = (*a)[1].str();
        const long long words = constant.at((*a)[2].str()) * ((*a)[3].matched ? constant.at((*a)[3].str()) : 1);
        // code_scale (one float per token) is not partitioned: the matrix unit's registers.
        if (top.find("ARRAY_PARTITION variable=" + name + " cyclic factor=CFG::partition") == std::string::npos) continue;
        const long long banks = constant.at("partition"), depth = (words + banks - 1) / banks;
        ++arrays;
        if (top.find("BIND_STORAGE variable=" + name + " type=ram_2p impl=uram") != std::string::npos) {
          ++in_uram;
          uram += double(banks) * double((depth + 4095) / 4096);
        } else if (depth > 64) {
          bram36 += double(banks) * hw::bram18_for_bank(32, depth) / 2;
        }
      }
    }
    EXPECT_EQ(arrays, 11);  // x xb xb2 q k v att hb hb2 logits param
    const std::vector<hw::Part> parts = hw::unit_resources(d, hw::kernel_sizes(c.model));
    const hw::Part& acts = unit(parts, "on-chip activations");
    EXPECT_DOUBLE_EQ(acts.use.bram36, bram36);
    EXPECT_DOUBLE_EQ(acts.use.uram, uram);
    EXPECT_EQ(in_uram, c.uram ? 9 : 0);  // the block arrays; logits and param stay in block RAM
    if (c.uram) {
      EXPECT_GT(uram, 0);
    }
  }
}

// The prompt call's tiled matrix unit: a w8a8 tile when blocks hold more than one token, a
// w4a8 tile for int4 weights (one call site, overlay::matmul_block, for decode and prompt),
// none in a decode-only int8 top; its accumulators hold the block's tokens
// (kernels::matmul_w8a8: acc[max_tokens][tile_rows], dim 2 cyclic by PE).
TEST(UnitResources, TiledMatrixUnitIsThePromptCallsAndTheInt4Path) {
  arch::Design d = config_b();
  d.memory.port_bits = 512;
  d.tiling.tile_rows = 64;
  d.tiling.tile_cols = 64;
  auto tiled = [&](int block, int weight_bits) -> std::vector<hw::Part> {
    arch::Design x = d;
    x.tiling.prefill_block = block;
    x.matrix_unit.weight_bits = weight_bits;
    return units_of(x);
  };
  auto has = [](const std::vector<hw::Part>& u, const std::string& name) {
    return std::any_of(u.begin(), u.end(), [&](const hw::Part& p) { return p.name == name; });
  };
  EXPECT_FALSE(has(tiled(1, 8), "tiled matrix unit"));
  const auto b64 = tiled(64, 8);
  const hw::Part& t = unit(b64, "tiled matrix unit");
  EXPECT_EQ(term(t, "w8a8 tile: int8 x int8 products").count, 16 * 16);
  // The products, and the store stage's two fmul (3 DSP48E2 each, PG060) and bias fadd (2).
  EXPECT_EQ(t.use.dsp, 16 * 16 + 2 * 3 + 2);
  // acc: 16 banks (PE) of 64 tokens x 64 rows / 16 = 256 words of 32 bits: one BRAM18 each.
  EXPECT_EQ(term(t, "w8a8 tile: accumulators").count, 16);
  EXPECT_DOUBLE_EQ(term(t, "w8a8 tile: accumulators").each.bram36, 0.5);
  // xbuf: 2 x 16 banks (SIMD) of 64 tokens x 64 columns / 16 = 256 words of 8 bits.
  EXPECT_EQ(term(t, "w8a8 tile: activation tile buffers").count, 32);
  EXPECT_DOUBLE_EQ(term(t, "w8a8 tile: activation tile buffers").each.bram36, 0.5);
  EXPECT_THROW(term(t, "w4a8 tile: int8 x int8 products"), std::runtime_error);
  const auto int4_decode = tiled(1, 4);
  EXPECT_THROW(term(unit(int4_decode, "tiled matrix unit"), "w8a8 tile: int8 x int8 products"), std::runtime_error);
  EXPECT_EQ(term(unit(int4_decode, "tiled matrix unit"), "w4a8 tile: int8 x int8 products").count, 16 * 16);
  const auto int4_prompt = tiled(64, 4);
  EXPECT_EQ(term(unit(int4_prompt, "tiled matrix unit"), "w8a8 tile: int8 x int8 products").count, 16 * 16);
  EXPECT_EQ(term(unit(int4_prompt, "tiled matrix unit"), "w4a8 tile: int8 x int8 products").count, 16 * 16);
  // The streaming unit is the same in all of them.
  EXPECT_EQ(unit(b64, "matrix unit").use.dsp, unit(tiled(1, 8), "matrix unit").use.dsp);
}

TEST(Resources, OversizedMatrixUnitDoesNotFit) {
  arch::Design d = small_design();
  d.matrix_unit.rows = 128;
  d.matrix_unit.cols = 128;
  const hw::Utilization u = hw::estimate_resources(d, hw::find_device("u280"));
  // 128 x 128 products, one DSP each (matrix_unit.hpp:476): more than the U280's 9024.
  EXPECT_EQ(term(part(u, "matrix unit"), "int8 x int8 products").total().dsp, 128 * 128);
  EXPECT_FALSE(u.fits);
  EXPECT_FALSE(u.line(hw::Resource::dsp).fits());
  bool dsp_listed = false;
  for (const auto& o : u.overflows()) dsp_listed |= o.rfind("DSP", 0) == 0;
  EXPECT_TRUE(dsp_listed);
  // The same unit spans SLRs: flagged among the assumptions.
  bool flagged = false;
  for (const auto& a : u.assumptions) flagged |= a.find("spans SLRs") != std::string::npos;
  EXPECT_TRUE(flagged);
  // ... and its SLRs cannot hold it: the placement's problems are among the overflows.
  bool slr_listed = false;
  for (const auto& o : u.overflows()) slr_listed |= o.rfind("SLR", 0) == 0;
  EXPECT_TRUE(slr_listed);
  EXPECT_FALSE(u.slr_problems.empty());
}

TEST(Resources, DevicesWithoutFabricFiguresAreRefused) {
  EXPECT_THROW(hw::estimate_resources(small_design(), hw::find_device("h100-sxm")), fpgallm::InputError);
  // Every card of data/devices.json now has its fabric figures: a copy without them.
  hw::Device bare = hw::find_device("v80");
  bare.fabric = {};
  bare.platform.available = {};
  bare.slrs.clear();
  EXPECT_THROW(hw::estimate_resources(small_design(), bare), fpgallm::InputError);
  // Intel fabrics are counted as the Vitis build of the same kernels, and say so.
  const hw::Utilization intel = hw::estimate_resources(small_design(), hw::find_device("stratix10-nx"));
  bool said = false;
  for (const auto& a : intel.assumptions) said |= a.find("is not AMD fabric") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Resources, DdrCardsCountTheirControllers) {
  arch::Design d = small_design();
  d.memory.weight_channels = 3;
  d.memory.kv_channels = 1;
  d.memory.activation_channels = 0;
  d.memory.port_bits = 512;
  const hw::Utilization u = hw::estimate_resources(d, hw::find_device("u250"));
  const hw::Part& ddr = part(u, "DDR controllers");
  EXPECT_DOUBLE_EQ(ddr.use.lut, 4 * 33256);  // FINN DDR_RESOURCE_REQUIREMENTS x 4 banks
  // 3 weight bundles + 7 others (emit_text.cpp:220-224, 266-273).
  EXPECT_EQ(term(part(u, "memory ports"), "m_axi adapters").count, 10);
}

TEST(Power, FlightLlmLikeUtilizationOnU280IsNearItsMeasured45W) {
  // FlightLLM (FPGA'24) on a U280 at 225 MHz: 574k LUT, 6345 DSP, 1252 BRAM, 792 URAM, measured 45 W
  // (xbutil) while decoding LLaMA2-7B at 55 tokens/s with 3.5-bit weights. A check of the coefficients
  // against one measurement, not a fit: the constants come from data/devices.json unchanged.
  hw::Utilization u;
  u.total = {574000, 943000, 6345, 1252, 792};
  arch::Design d;
  d.clock_mhz = 225;
  hw::Activity a;
  const double weight_bytes_per_token = 6.74e9 * 3.5 / 8;
  a.offchip_bytes_per_s = 55 * weight_bytes_per_token;
  a.mac_busy = 55 * 13.2e9 / (6144 * 2 * 2 * 225e6);  // achieved / peak MAC rate
  a.bram_busy = 1.0;
  const hw::Power p = hw::estimate_power(d, hw::find_device("u280"), u, a);
  EXPECT_NEAR(p.static_w, 21.5, 1e-9);  // 0.10 x 215 W
  EXPECT_NEAR(p.total_w / 45.0, 1.0, 0.35) << p.total_w;
  EXPECT_NEAR(p.memory_w, a.offchip_bytes_per_s * 8 * 3.9e-12, 1e-9);
}

TEST(Power, BoardPowerOfAGpuSpansStaticToTdp) {
  const hw::Device& h100 = hw::find_device("h100-sxm");
  EXPECT_DOUBLE_EQ(hw::estimate_board_power(h100, 1.0).total_w, 700);
  EXPECT_DOUBLE_EQ(hw::estimate_board_power(h100, 0.0).total_w, 70);
  EXPECT_THROW(hw::estimate_power(arch::Design{}, h100, hw::Utilization{}, hw::Activity{}), fpgallm::InputError);
  hw::Device no_tdp = hw::find_device("v80");
  no_tdp.tdp_w = {};
  EXPECT_THROW(hw::estimate_board_power(no_tdp, 0.5), fpgallm::InputError);  // no TDP figure
}

}  // namespace

namespace {

int int_after(const std::string& text, const std::string& pattern, int group) {
  std::smatch s;
  if (!std::regex_search(text, s, std::regex(pattern))) throw std::runtime_error("not in the header: " + pattern);
  return std::stoi(s[group].str());
}

}  // namespace

// One description of each unit: the kernels' template parameters (the emitted config
// header), the schedule (arch::unit_work) and the resource model (hw::unit_resources) all
// read the same Design fields. Changing one field moves all three together.
TEST(OneDescription, TemplateParametersScheduleAndResourcesReadTheSameDesign) {
  const model::Config m = small_model();
  std::vector<arch::Design> designs = {config_a(), config_b()};
  for (auto field : {0, 1, 2, 3}) {
    arch::Design d = config_a();
    if (field == 0) d.matrix_unit.rows = 16;
    if (field == 1) d.matrix_unit.cols = 32;
    if (field == 2) d.vector_unit.lanes = 32;
    if (field == 3) d.memory.weight_channels = 3;
    designs.push_back(d);
  }
  for (arch::Design d : designs) {
    d.memory.port_bits = 512;
    const auto& mu = d.matrix_unit;
    SCOPED_TRACE(std::to_string(mu.rows) + "x" + std::to_string(mu.cols) + ", " + std::to_string(d.vector_unit.lanes) +
                 " lanes, " + std::to_string(d.memory.weight_channels) + " weight channels");
    codegen::ProjectInfo p;
    p.config = p.golden = m;
    p.design = d;
    p.weight_channels = d.memory.weight_channels;
    const std::string h = codegen::config_header(p);
    const std::string mv = R"(MatrixVectorConfig<(\d+), (\d+), (\d+),)";
    const int pe = int_after(h, mv, 1), simd = int_after(h, mv, 2), channels = int_after(h, mv, 3);
    const int lanes = int_after(h, R"(VectorUnitConfig<(\d+), (\d+),)", 1);
    const int exp_bits = int_after(h, R"(VectorUnitConfig<(\d+), (\d+),)", 2);
    const int kv_block = int_after(h, R"(AttentionConfig<vector_unit, \d+, (\d+),)", 1);
    EXPECT_EQ(pe, mu.rows);
    EXPECT_EQ(simd, mu.cols);
    EXPECT_EQ(channels, d.memory.weight_channels);
    EXPECT_EQ(lanes, d.vector_unit.lanes);
    EXPECT_EQ(exp_bits, d.vector_unit.exp_table_bits);
    EXPECT_EQ(kv_block, arch::kKvBlock);

    // The schedule of a decode matmul: ceil(rows / PE) x ceil(cols / SIMD) steps of the
    // multiplier, its depth once.
    const arch::Program prog = arch::build_program(m, d, arch::Stage::decode, 0, 1);
    const auto wq = std::find_if(prog.instructions.begin(), prog.instructions.end(),
                                 [](const arch::Instruction& i) { return i.op == arch::Op::matmul; });
    ASSERT_NE(wq, prog.instructions.end());
    const arch::Work w = arch::unit_work(d, *wq, arch::PortRates{});
    const auto mac = std::find_if(w.loops.begin(), w.loops.end(), [](const arch::Loop& l) {
      return l.name.find(": matrix_vector_w8a8") != std::string::npos;
    });
    ASSERT_NE(mac, w.loops.end());
    EXPECT_EQ(mac->trip, ((wq->rows + pe - 1) / pe) * ((wq->cols + simd - 1) / simd));
    EXPECT_EQ(mac->depth, mu.pipeline_depth);

    // The resources: PE x SIMD products, one m_axi adapter per weight channel beside the
    // fixed bundles, and the lanes in the vector unit's fp32 cores.
    const auto u = units_of(d);
    EXPECT_EQ(term(unit(u, "matrix unit"), "int8 x int8 products").count, double(pe * simd));
    EXPECT_EQ(term(unit(u, "memory ports"), "m_axi adapters").count - channels,
              term(unit(units_of(config_a()), "memory ports"), "m_axi adapters").count - 1);
    // The vector unit's DSPs are its shared cores, the top's ALLOCATION limits for these
    // lanes and this KV format (kernels::shared_*_cores, as the emitted top's SharedCores).
    EXPECT_EQ(unit(u, "vector unit").use.dsp,
              kernels::shared_fmul_cores(lanes, d.kv_bits) * hw::fp_core("fmul").dsp +
                  (kernels::shared_fadd_cores(lanes, d.kv_bits) + kernels::shared_fsub_cores(lanes)) *
                      hw::fp_core("fadd").dsp);
  }
}

// The shared binary32 cores are the emitted top's ALLOCATION limits: the pragma names the
// kernel's constants (kernels::SharedCores), they are what the widest loop takes (counted
// by hand below), and the resource model counts exactly those cores.
TEST(OneDescription, SharedVectorCoresAreTheTopsAllocationLimits) {
  const model::Config m = small_model();
  for (int lanes : {8, 16, 32}) {
    arch::Design d = config_a();
    d.vector_unit.lanes = lanes;
    codegen::ProjectInfo p;
    p.config = p.golden = m;
    p.design = d;
    p.weight_channels = d.memory.weight_channels;
    const std::string top = codegen::top_source(p);
    for (const char* op : {"fmul", "fadd", "fsub"})
      EXPECT_NE(top.find(std::string("#pragma HLS ALLOCATION operation instances=") + op + " limit=CORES::" + op),
                std::string::npos)
          << op;
    EXPECT_NE(top.find("typedef kernels::SharedCores<V, CFG::kv_bits> CORES;"), std::string::npos);
    const auto u = units_of(d);
    EXPECT_EQ(term(unit(u, "vector unit"), "shared multipliers: fmul").count, kernels::shared_fmul_cores(lanes, 8));
    EXPECT_EQ(term(unit(u, "vector unit"), "shared adders: fadd").count,
              kernels::shared_fadd_cores(lanes, 8) + kernels::shared_fsub_cores(lanes));
  }
  // By hand, int8 KV (64 elements per beat): 8 lanes: the attention's values loop, 64 x 2 +
  // 12 multipliers (more than 8 x 12) and 64 + 8 adders (more than 8 x 8), + 8 x 4
  // subtracters; 16 lanes: 16 x 12, 16 x 8 and 16 x 4, the vector unit's own.
  using C8 = kernels::SharedCores<kernels::VectorUnitConfig<8, 6, 64>, 8>;
  using C16 = kernels::SharedCores<kernels::VectorUnitConfig<16, 6, 64>, 8>;
  static_assert(C8::fmul == 140 && C8::fadd == 72 && C8::fsub == 32, "8 lanes: the attention's widest loops");
  static_assert(C16::fmul == 192 && C16::fadd == 128 && C16::fsub == 64, "16 lanes: the vector unit's own");
}
