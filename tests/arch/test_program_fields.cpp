// What the performance model computes once for many designs rests on two facts checked here:
// designs equal in arch::program_fields get the same instruction list, and arch::unit_work
// without its loop list gives the same figures.
#include <gtest/gtest.h>

#include <string>

#include "arch/program.hpp"
#include "arch/units.hpp"
#include "model/presets.hpp"

namespace {

arch::Design a_design() {
  arch::Design d;
  d.matrix_unit.rows = 16;
  d.matrix_unit.cols = 64;
  d.matrix_unit.pipeline_depth = arch::hls_matrix_unit_depth(64);
  d.tiling.tile_rows = 64;
  d.tiling.tile_cols = 128;
  d.buffers.weight_bytes = 2 * 64 * 128;
  d.vector_unit.lanes = 32;
  d.memory.weight_channels = 24;
  d.memory.kv_channels = 8;
  return d;
}

TEST(ProgramFields, TheInstructionListReadsNothingElseOfTheDesign) {
  const model::Config c = *model::find_preset("qwen3-0.6b");
  const arch::Design a = a_design();
  arch::Design b = a;  // everything but the program fields changed
  b.name = "other";
  b.clock_mhz = 150;
  b.matrix_unit.rows = 4;
  b.matrix_unit.cols = 256;
  b.vector_unit.lanes = 8;
  b.buffers.activation_bytes = 1 << 16;
  b.memory = {};
  b.parallel.cards = 2;
  b.parallel.split = arch::Split::tensor;
  b.context = 1024;
  ASSERT_TRUE(arch::program_fields(a) == arch::program_fields(b));
  for (auto [stage, pos, tokens] : {std::tuple{arch::Stage::decode, 40, 1}, std::tuple{arch::Stage::prefill, 64, 64}}) {
    const arch::Program pa = arch::build_program(c, a, stage, pos, tokens);
    const arch::Program pb = arch::build_program(c, b, stage, pos, tokens);
    EXPECT_TRUE(pa.instructions == pb.instructions);
  }
  b.tiling.tile_rows = 128;  // a program field
  EXPECT_FALSE(arch::program_fields(a) == arch::program_fields(b));
  EXPECT_FALSE(arch::build_program(c, a, arch::Stage::decode, 0, 1).instructions ==
               arch::build_program(c, b, arch::Stage::decode, 0, 1).instructions);
}

TEST(UnitWork, WithoutTheLoopListTheSameFigures) {
  arch::PortRates r;
  r.weight_channel = 12.5;
  r.weight_channels = 24;
  r.kv = 9.75;
  r.params = 12.5;
  r.host = 40;
  r.memory_latency = 60;
  r.kv_latency = 70;
  r.host_latency = 900;
  int checked = 0;
  for (const char* preset : {"qwen2.5-0.5b", "qwen3-0.6b", "stories15m"})
    for (int kv_bits : {8, 16})
      for (auto [stage, pos, tokens] : {std::tuple{arch::Stage::decode, 200, 1}, std::tuple{arch::Stage::prefill, 64, 64}}) {
        const model::Config c = *model::find_preset(preset);
        arch::Design d = a_design();
        d.kv_bits = kv_bits;
        for (const auto& in : arch::build_program(c, d, stage, pos, tokens).instructions) {
          const arch::Work a = arch::unit_work(d, in, r), b = arch::unit_work(d, in, r, false);
          const std::string at = std::string(preset) + " " + in.name;
          EXPECT_FALSE(a.loops.empty()) << at;
          EXPECT_TRUE(b.loops.empty()) << at;
          EXPECT_EQ(a.unit, b.unit) << at;
          EXPECT_EQ(a.fetch_cycles, b.fetch_cycles) << at;
          EXPECT_EQ(a.host_cycles, b.host_cycles) << at;
          EXPECT_EQ(a.body_cycles, b.body_cycles) << at;
          EXPECT_EQ(a.cycles, b.cycles) << at;
          EXPECT_EQ(a.stream_bytes, b.stream_bytes) << at;
          EXPECT_EQ(a.stream_compute, b.stream_compute) << at;
          EXPECT_EQ(a.stream_fill, b.stream_fill) << at;
          EXPECT_EQ(a.after_stream, b.after_stream) << at;
          EXPECT_EQ(a.pieces, b.pieces) << at;
          EXPECT_EQ(a.piece_buffer_bytes, b.piece_buffer_bytes) << at;
          EXPECT_EQ(a.double_buffered, b.double_buffered) << at;
          EXPECT_EQ(a.streaming, b.streaming) << at;
          EXPECT_EQ(a.weight_bytes, b.weight_bytes) << at;
          EXPECT_EQ(a.param_bytes, b.param_bytes) << at;
          EXPECT_EQ(a.kv_read_bytes, b.kv_read_bytes) << at;
          EXPECT_EQ(a.kv_write_bytes, b.kv_write_bytes) << at;
          EXPECT_EQ(a.host_bytes, b.host_bytes) << at;
          EXPECT_EQ(a.macs, b.macs) << at;
          ++checked;
        }
      }
  EXPECT_GT(checked, 1000);
}

}  // namespace
