// arch::unit_work, the one description of what each unit does for one instruction, against
// counts worked out by hand from the kernels' loops (src/kernels, the emitted top). The
// simulator, the analytical model and the emitted schedule all read this function; these
// cases pin it to the kernels.
#include <gtest/gtest.h>

#include "arch/design.hpp"
#include "arch/program.hpp"
#include "arch/units.hpp"

namespace {

arch::Design design() {
  arch::Design d;
  d.clock_mhz = 300;
  d.matrix_unit.rows = 64;  // PE
  d.matrix_unit.cols = 64;  // SIMD
  d.matrix_unit.pipeline_depth = 8;
  d.vector_unit.lanes = 32;
  d.memory.weight_channels = 24;
  d.kv_bits = 8;
  return d;
}

arch::PortRates rates() {
  arch::PortRates r;
  r.weight_channel = 40;  // bytes per cycle per channel
  r.weight_channels = 24;
  r.params = 40;
  r.kv = 40;
  r.host = 50;
  r.memory_latency = 30;
  r.kv_latency = 30;
  r.host_latency = 1000;
  return r;
}

// A 768 x 768 int8 matrix, one token. PE x SIMD = 64 x 64: a step is 64 words; a gather
// group is lcm(64, 24) = 192 words = 8 beats of the 24 channels = 3 steps, so the gather
// runs at II = max(8, 3) = 8. 12 x 12 = 144 steps = 48 groups = 384 beats per channel.
//   read    384 x 64 B x 24 channels / (40 B x 24)      = 614.4 cycles
//   gather  48 x 8                                        = 384
//   mac     144 x II 1 (+ depth 8)
//   store   12 row folds x 4 scale words (PE 64 / 16), port-bound: 12 x 4 x 64 / 40 = 76.8
//   DATAFLOW: max(read, slowest compute) + depth + one request latency = 652.4
//   fetch: latency + 16 words = 46
TEST(Units, DecodeMatmulIsTheDataflowRegionsSlowestProcess) {
  arch::Instruction in;
  in.op = arch::Op::matmul;
  in.rows = in.cols = 768;
  in.weight_bits = 8;
  const arch::Work w = arch::unit_work(design(), in, rates());
  EXPECT_EQ(w.unit, arch::UnitKind::matrix);
  EXPECT_EQ(w.stream_bytes, 768 * 768);
  EXPECT_DOUBLE_EQ(w.stream_compute, 384);
  EXPECT_DOUBLE_EQ(w.stream_fill, 8);
  EXPECT_DOUBLE_EQ(w.body_cycles, 614.4 + 8 + 30);
  EXPECT_DOUBLE_EQ(w.fetch_cycles, 46);
  EXPECT_DOUBLE_EQ(w.cycles, 46 + 652.4);
  EXPECT_EQ(w.param_bytes, 12 * 4 * 64);
  ASSERT_EQ(w.loops.size(), 5u);  // fetch, read, gather, multiply, store
  EXPECT_EQ(w.loops[1].trip, 384);
  EXPECT_EQ(w.loops[1].calls, 24);
  EXPECT_EQ(w.loops[2].ii, 8);
  EXPECT_EQ(w.loops[3].depth, 8);
  EXPECT_DOUBLE_EQ(w.loops[4].cycles, 76.8);
  // Halving the channels' rate makes the region twice as memory-bound.
  arch::PortRates slow = rates();
  slow.weight_channel = 20;
  EXPECT_DOUBLE_EQ(arch::unit_work(design(), in, slow).body_cycles, 1228.8 + 8 + 30);
}

// Decode attention, 4 heads of 64 at context 300, int8 KV, 32 vector lanes
// (kernels::attention: one 512-bit beat, 64 int8 elements, per cycle in its scores and
// values loops; 32 in its clear and combine), two blocks of 256 and 44 keys. Per head the
// accumulator cleared (2 beats of 32) and the query head loaded (64 elements); per block,
// three loops over the block's keys (1 beat x 256, then 44) at II=1, each with its pipeline
// depth (adder 8 cycles, multiplier 4, divider 16, conversion 2, compare 1; exp_rom's chain
// 7 x 4 + 8 x 8 + 2 x 2 = 96). The scores loop loads the block (the only query sees it
// first): one request latency (30 cycles), then a beat of K and of V per key, port-bound at
// 64 B / 40 per key:
//   scores   30 + max(256, 409.6) + (2 + 4 + log2(64) x 8 + 8 + 16 = 78) = 517.6,
//            30 + max(44, 70.4) + 78                                    = 178.4
//   correction 7 compares + 8 + 96                                      = 111 each
//   values   256 or 44 + (2 + 8 + 96 + 4 + 8 = 118)                    = 374, 162
//   combine    2 + (2 + 3 x 8 + 4 + 8 = 38)                             =  40 each
// and the store, 64 elements.
//   4 x (2 + 64 + 517.6 + 178.4 + 222 + 536 + 80 + 64) = 6656 cycles
TEST(Units, DecodeAttentionRequestsEachBlockOnceOnTheVectorUnit) {
  arch::Instruction in;
  in.op = arch::Op::attention;
  in.heads = in.kv_heads = 4;
  in.head_dim = 64;
  in.context = 300;
  in.pos = 299;
  const arch::Work w = arch::unit_work(design(), in, rates());
  EXPECT_EQ(w.unit, arch::UnitKind::vector);
  EXPECT_NEAR(w.body_cycles, 6656, 1e-9);
  int load_loops = 0;
  for (const arch::Loop& l : w.loops)
    if (l.name.find("loading") != std::string::npos) {
      ++load_loops;
      EXPECT_EQ(l.calls, 4) << l.name;  // one call per block per head
    }
  EXPECT_EQ(load_loops, 2);  // the scores loops that load the full block and the last
  EXPECT_EQ(w.kv_read_bytes, 2 * 64 * 300 * 4);
  EXPECT_EQ(w.macs, 2 * 300 * 4 * 64);
}

// RMSNorm of 288 elements: the gain (18 beats of 16 floats, one request, port-bound at
// 18 x 64 / 40 = 28.8 cycles) + the sum of squares (9 lane steps) + the scaling (9).
TEST(Units, NormLoadsItsGainAndMakesTwoLanePasses) {
  arch::Instruction in;
  in.op = arch::Op::norm;
  in.rows = 1;
  in.cols = 288;
  in.weight_bytes = 288 * 4;
  const arch::Work w = arch::unit_work(design(), in, rates());
  EXPECT_DOUBLE_EQ(w.body_cycles, 30 + 28.8 + 9 + 9);
  EXPECT_EQ(w.param_bytes, 18 * 64);
}

// Prefill: 16 tokens through a 256 x 512 matrix in 128 x 256 tiles (2 x 2 tiles) on 64 x 64
// at II 1 with double buffering: per tile 16 x 2 x 4 + 8 = 136 cycles of MACs, the store
// 16 x 128 after each row's last column tile; a tile's load is one 64-byte SIMD word per
// cycle (kernels::detail::load_weight_tile_i8), 128 rows x 4 words = 512 cycles, slower
// than the ports' 32768 B / (40 x 24) = 34.13, then its activations, 16 tokens x 4 SIMD
// words = 64 cycles. The two tiles without a store are load-bound (576), the two with one
// compute-bound (136 + 2048). Total: latency + the first load + 2 x 576 + 2 x 2184.
TEST(Units, PrefillMatmulWalksDoubleBufferedTiles) {
  arch::Design d = design();
  d.tiling.tile_rows = 128;
  d.tiling.tile_cols = 256;
  d.buffers.weight_bytes = 2 * 128 * 256;
  arch::Instruction in;
  in.op = arch::Op::matmul;
  in.tokens = 16;
  in.rows = 256;
  in.cols = 512;
  in.weight_bits = 8;
  in.weight_bytes = 256 * 512;
  const arch::Work w = arch::unit_work(d, in, rates());
  const double load = 128.0 * 4 + 16 * 4;
  EXPECT_NEAR(w.body_cycles, 30 + load + 2 * load + 2 * (136 + 16 * 128), 1e-9);
  EXPECT_EQ(w.pieces, 4);  // one per tile (at most 256)
  EXPECT_TRUE(w.double_buffered);
  // One tile of buffer: load, compute and store in sequence.
  d.buffers.weight_bytes = 128 * 256;
  EXPECT_NEAR(arch::unit_work(d, in, rates()).body_cycles, 30 + 4 * (load + 136) + 2 * 16 * 128, 1e-9);
}

// A tensor split over 4 cards: wq (column-parallel) keeps its columns and a quarter of its
// rows, wo (row-parallel) the reverse; attention a quarter of the heads.
TEST(Units, ShardDividesAsTheExecutor) {
  arch::Instruction wq;
  wq.op = arch::Op::matmul;
  wq.linear = model::Linear::wq;
  wq.rows = wq.cols = 4096;
  wq.weight_bytes = 4096LL * 4096;
  const arch::Instruction q = arch::shard(wq, 4);
  EXPECT_EQ(q.rows, 1024);
  EXPECT_EQ(q.cols, 4096);
  EXPECT_EQ(q.weight_bytes, 1024LL * 4096);
  arch::Instruction wo = wq;
  wo.linear = model::Linear::wo;
  EXPECT_EQ(arch::shard(wo, 4).cols, 1024);
  arch::Instruction att;
  att.op = arch::Op::attention;
  att.heads = 32;
  att.kv_heads = 8;
  EXPECT_EQ(arch::shard(att, 4).heads, 8);
  EXPECT_EQ(arch::shard(att, 4).kv_heads, 2);
}

}  // namespace
