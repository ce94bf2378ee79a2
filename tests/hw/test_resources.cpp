// Resource model against counts worked out by hand from the formulas in docs/performance-model.md.
#include <gtest/gtest.h>

#include "arch/design.hpp"
#include "hw/device.hpp"
#include "hw/power.hpp"
#include "hw/resources.hpp"
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

TEST(BufferBlocks, CapacityAndPortsByHand) {
  EXPECT_EQ(hw::bram36_for_buffer(4608, 1, 72), 1);   // 512 x 72 exactly
  EXPECT_EQ(hw::bram36_for_buffer(4609, 1, 72), 2);   // one word more
  EXPECT_EQ(hw::bram36_for_buffer(36864, 1, 8), 9);   // 36864 words of 8 bits: 4K x 9 blocks, 9 of them
  EXPECT_EQ(hw::bram36_for_buffer(1024, 8, 64), 8);   // 1 KB fits one block, but 8 banks need 8 ports
  EXPECT_EQ(hw::bram36_for_buffer(1024, 1, 576), 8);  // 576 bits wide: 8 blocks of 72 side by side
  EXPECT_EQ(hw::bram36_for_buffer(0, 4, 64), 0);
  EXPECT_EQ(hw::uram_for_buffer(65536, 1, 72), 2);    // 7282 words of 72 bits: 2 x 4K deep
  EXPECT_EQ(hw::uram_for_buffer(65536, 4, 256), 16);  // 4 banks x ceil(256/72) = 4 wide x 1 deep
}

TEST(DspPacking, Int8PairsOnDsp48e2TriplesOnDsp58) {
  const hw::Device& u280 = hw::find_device("u280");
  const hw::Device& vck = hw::find_device("vck5000");
  EXPECT_EQ(hw::dsps_for_macs(1024, 8, 8, u280), 512);
  EXPECT_EQ(hw::dsps_for_macs(1024, 4, 8, u280), 512);   // int4 weights unpacked to int8 at the MAC
  EXPECT_EQ(hw::dsps_for_macs(1024, 8, 16, u280), 1024);  // 16-bit activations: one MAC per DSP
  EXPECT_EQ(hw::dsps_for_macs(1024, 8, 8, vck), 342);
}

TEST(Resources, SmallDesignOnU280ByHand) {
  const hw::Device& u280 = hw::find_device("u280");
  const hw::Utilization u = hw::estimate_resources(small_design(), u280);
  // Matrix unit 4 x 8 as the RTL builds it: ceil(4/2) x 8 = 16 DSPs. Adder tree of a row:
  // 4 x 17 + 2 x 18 + 1 x 19 = 123 bits; adder bits 4 x (123 + 32) + 2 x 8 x 16 = 876.
  // LUTRAM: 32 x 64-bit activations 8 x ceil(64/14) = 40, 32 x 128-bit sums 8 x 10 = 80.
  // LUT = 0.7425 x 876 + 466 + 120 = 1236.43; FF = 620 + 7 stages x (5 + 5) + 67 = 757.
  const hw::Part& mu = part(u, "matrix unit");
  EXPECT_EQ(mu.use.dsp, 16);
  EXPECT_DOUBLE_EQ(mu.use.lut, 0.7425 * 876 + 466 + 120);
  EXPECT_DOUBLE_EQ(mu.use.ff, 757);
  EXPECT_FALSE(mu.checked.empty());
  EXPECT_TRUE(part(u, "vector unit").checked.empty());
  // Requantizers: 2 DSP each, one per row.
  EXPECT_EQ(part(u, "requantizers").use.dsp, 8);
  // Vector unit: 16 lanes + 4 shared; exp table 256 x 16 bits = 64 LUTs per lane.
  EXPECT_EQ(part(u, "vector unit").use.dsp, 20);
  EXPECT_DOUBLE_EQ(part(u, "vector unit").use.lut, 16 * (400 + 64) + 1500);
  // Weight buffer: 2 x 4 KB halves, 4 banks x 64 bits, depth 128: LUTRAM 2 x 4 x 64 x 2 = 2048 LUTs
  // is a smaller share of the card than 8 BRAM36.
  const hw::Part& wb = part(u, "weight buffer");
  EXPECT_DOUBLE_EQ(wb.use.lut, 2048);
  EXPECT_EQ(wb.use.bram36, 0);
  // Activation buffer: 2 x 128 KB, one 64-bit bank, depth 16384: 2 x 32 BRAM36 or 2 x 4 URAM; URAM wins.
  const hw::Part& ab = part(u, "activation buffer");
  EXPECT_EQ(ab.use.uram, 8);
  EXPECT_EQ(ab.use.bram36, 0);
  // 25 HBM channels: each 256-bit x 256-deep read buffer = 4 BRAM36.
  const hw::Part& mi = part(u, "memory interfaces");
  EXPECT_EQ(mi.use.bram36, 100);
  EXPECT_DOUBLE_EQ(mi.use.lut, 25 * 1800);
  EXPECT_EQ(part(u, "HBM subsystem").use.lut, 10718);
  // Totals.
  EXPECT_EQ(u.total.dsp, 16 + 8 + 20);
  EXPECT_EQ(u.total.bram36, 100 + 4 + 8);
  EXPECT_EQ(u.total.uram, 8);
  EXPECT_DOUBLE_EQ(u.total.lut, (0.7425 * 876 + 466 + 120) + 320 + 8924 + 2048 + 45000 + 10718 + 6000);
  EXPECT_DOUBLE_EQ(u.total.ff, 757 + 224 + 6300 + 75000 + 21793 + 9000);
  EXPECT_TRUE(u.fits);
  const auto& dsp = u.line(hw::Resource::dsp);
  EXPECT_EQ(dsp.available, 8496);  // after the shell (FINN per-SLR figures)
  EXPECT_DOUBLE_EQ(dsp.ceiling, 0.8 * 8496);
  EXPECT_DOUBLE_EQ(dsp.margin(), 0.8 * 8496 - 44);
}

TEST(Resources, PartitioningMultipliesBlocks) {
  // 512 KB of on-chip KV cache on a card without URAM. By capacity alone it needs
  // ceil(512 KB x 8 / 36 Kb) = 114 BRAM36.
  arch::Design narrow = small_design(), wide = small_design();
  narrow.buffers.kv_bytes = wide.buffers.kv_bytes = 512 * 1024;
  wide.matrix_unit.rows = 32;
  wide.matrix_unit.cols = 32;
  const hw::Device& zcu102 = hw::find_device("zcu102");
  const auto un = hw::estimate_resources(narrow, zcu102), uw = hw::estimate_resources(wide, zcu102);
  // Narrow: 4 banks x 64 bits, 8192 deep per half: 16 BRAM36 per bank, 2 x 4 x 16 = 128.
  EXPECT_EQ(part(un, "KV buffer").use.bram36, 128);
  // Wide: 32 banks x 256 bits, 256 deep: 4 BRAM36 side by side per bank, 2 x 32 x 4 = 256,
  // over twice the capacity count (LUTRAM would take 131,072 LUTs, a larger share).
  EXPECT_EQ(part(uw, "KV buffer").use.bram36, 256);
  EXPECT_GT(part(uw, "KV buffer").use.bram36, 2 * 114);
}

TEST(Resources, OversizedMatrixUnitDoesNotFit) {
  arch::Design d = small_design();
  d.matrix_unit.rows = 128;
  d.matrix_unit.cols = 128;
  const hw::Utilization u = hw::estimate_resources(d, hw::find_device("u280"));
  EXPECT_EQ(part(u, "matrix unit").use.dsp, 64 * 128);
  EXPECT_FALSE(u.fits);
  EXPECT_FALSE(u.line(hw::Resource::dsp).fits());
  bool dsp_listed = false;
  for (const auto& o : u.overflows()) dsp_listed |= o.rfind("DSP", 0) == 0;
  EXPECT_TRUE(dsp_listed);
  // The same unit spans SLRs: flagged among the assumptions.
  bool flagged = false;
  for (const auto& a : u.assumptions) flagged |= a.find("spans SLRs") != std::string::npos;
  EXPECT_TRUE(flagged);
}

TEST(Resources, DevicesWithoutFabricFiguresAreRefused) {
  EXPECT_THROW(hw::estimate_resources(small_design(), hw::find_device("h100-sxm")), fpgallm::InputError);
  // Every card of data/devices.json now has its fabric figures: a copy without them.
  hw::Device bare = hw::find_device("v80");
  bare.fabric = {};
  bare.platform.available = {};
  bare.slrs.clear();
  EXPECT_THROW(hw::estimate_resources(small_design(), bare), fpgallm::InputError);
  hw::Device no_packing = hw::find_device("stratix10-nx");
  no_packing.int8_macs_per_dsp = {};
  EXPECT_THROW(hw::estimate_resources(small_design(), no_packing), fpgallm::InputError);
  // Intel fabrics are sized with their DSP packing figure.
  EXPECT_NO_THROW(hw::estimate_resources(small_design(), hw::find_device("stratix10-nx")));
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
  EXPECT_EQ(part(u, "memory interfaces").use.bram36, 4 * 8);  // 512-bit DDR ports: 8 BRAM36 each
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
