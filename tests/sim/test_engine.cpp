// Hand-computable cases of the event-driven core: every expected cycle count below is
// worked out in the comment above it from the unit rates, not taken from an earlier run.
#include <gtest/gtest.h>

#include "sim/engine.hpp"

namespace {

using sim::Engine;
using sim::State;
using sim::TaskId;

// A 4-channel port at 32 bytes/cycle per channel (128 B/cycle), no latency, 4 KiB bursts.
sim::PortSpec port_128() {
  sim::PortSpec p;
  p.channels = 4;
  p.bytes_per_cycle = 32;
  p.efficiency = 1;
  p.burst_bytes = 4096;
  p.latency = 0;
  return p;
}

// Tiled weight stream through a buffer of `slots` tiles: load tile i (claims a slot),
// compute tile i (needs load i and the previous compute, gives the slot back).
struct Stream {
  TaskId last = -1;
  std::vector<TaskId> loads, computes;
};
Stream tiled(Engine& e, int op, int port, int mu, int buf, int tiles, std::int64_t tile_bytes, double tile_cycles,
             TaskId after = -1) {
  Stream s;
  for (int i = 0; i < tiles; ++i) {
    TaskId l = e.transfer(op, port, tile_bytes, {after});
    e.claim(l, buf, tile_bytes);
    TaskId c = e.compute(op, mu, tile_cycles, {l, after});
    e.release(c, buf, tile_bytes);
    s.loads.push_back(l);
    s.computes.push_back(c);
    s.last = c;
  }
  return s;
}

// GEMV, decode-style: a 1024 x 1024 int8 weight matrix (1 MiB) in 32 tiles of 128 x 256
// (32 KiB each). The port moves 128 B/cycle, so the whole stream takes exactly
// 1 MiB / 128 = 8192 cycles, 256 per tile. The matrix unit needs 40 cycles per tile, so
// with two tile buffers it hides behind the stream: total = 8192 + the last tile's 40.
TEST(SimEngine, GemvWeightStreamTakesExactlyItsBandwidthTime) {
  Engine e;
  const int mu = e.add_unit("matrix", sim::UnitKind::matrix);
  const int hbm = e.add_port("hbm", sim::UnitKind::memory, port_128());
  const int wbuf = e.add_buffer("weights", 2 * 32768);
  const int op = e.add_op("gemv", 0);
  tiled(e, op, hbm, mu, wbuf, 32, 32768, 40);
  const auto r = e.run();
  EXPECT_DOUBLE_EQ(r.cycles, 8192 + 40);
  // Each channel carried 64 of the 256 bursts: 64 * 4096 / 32 = 8192 cycles of data.
  for (double c : r.units[hbm].channel_busy) EXPECT_DOUBLE_EQ(c, 8192);
  EXPECT_EQ(r.units[hbm].bytes, 1 << 20);
  EXPECT_DOUBLE_EQ(r.units[mu].state[int(State::busy)], 32 * 40);
  // The matrix unit waits for memory the rest of the time: 256 before the first tile, then
  // 256 - 40 between tiles.
  EXPECT_DOUBLE_EQ(r.units[mu].state[int(State::memory)], 256 + 31 * (256 - 40));
  EXPECT_DOUBLE_EQ(r.units[hbm].state[int(State::busy)], 8192);
  EXPECT_DOUBLE_EQ(r.units[hbm].state[int(State::idle)], 40);
  // The operation's critical resource is the port: 8192 cycles of data against 1280 of MACs.
  EXPECT_DOUBLE_EQ(r.ops[op].unit_busy[hbm], 8192);
  EXPECT_DOUBLE_EQ(r.ops[op].unit_busy[mu], 1280);
}

// Request latency is paid once when the stream starts and hidden afterwards, because
// the port issues the next request while the previous one's data is still arriving.
TEST(SimEngine, LatencyIsExposedOnlyAtTheStartOfAStream) {
  Engine e;
  auto p = port_128();
  p.latency = 100;
  const int mu = e.add_unit("matrix", sim::UnitKind::matrix);
  const int hbm = e.add_port("hbm", sim::UnitKind::memory, p);
  const int wbuf = e.add_buffer("weights", 2 * 32768);
  tiled(e, e.add_op("gemv"), hbm, mu, wbuf, 32, 32768, 40);
  EXPECT_DOUBLE_EQ(e.run().cycles, 100 + 8192 + 40);
}

// Efficiency scales the data time: at 80% the same megabyte takes 8192 / 0.8 = 10240.
TEST(SimEngine, EfficiencyScalesDataTime) {
  Engine e;
  auto p = port_128();
  p.efficiency = 0.8;
  const int mu = e.add_unit("matrix", sim::UnitKind::matrix);
  const int hbm = e.add_port("hbm", sim::UnitKind::memory, p);
  const int wbuf = e.add_buffer("weights", 2 * 32768);
  tiled(e, e.add_op("gemv"), hbm, mu, wbuf, 32, 32768, 40);
  EXPECT_NEAR(e.run().cycles, 10240 + 40, 1e-9);
}

// A transfer's bytes are shared evenly, in whole 64-byte beats, by the channels its bursts
// reach (the data is striped word by word over the bundles): 5 x 4 KiB + 1000 bytes =
// 336 beats (the last one 40 bytes) on 4 channels, 84 beats each: 5376 bytes (168 cycles
// at 32 B/cycle) on channels 0 to 2 and 5352 (167.25) on channel 3. (Whole bursts
// round-robin put two bursts on channel 0 and took 256 cycles, a third longer than the
// channels need.)
TEST(SimEngine, TransfersAreSharedEvenlyOverChannels) {
  Engine e;
  const int hbm = e.add_port("hbm", sim::UnitKind::memory, port_128());
  e.transfer(e.add_op("x"), hbm, 5 * 4096 + 1000);
  const auto r = e.run();
  EXPECT_DOUBLE_EQ(r.cycles, 168);
  EXPECT_DOUBLE_EQ(r.units[hbm].channel_busy[0], 168);
  EXPECT_DOUBLE_EQ(r.units[hbm].channel_busy[1], 168);
  EXPECT_DOUBLE_EQ(r.units[hbm].channel_busy[2], 168);
  EXPECT_DOUBLE_EQ(r.units[hbm].channel_busy[3], 167.25);
}

// A transfer smaller than one full burst per channel is cut into shorter bursts of whole
// 64-byte beats so every channel carries a share: 13288 bytes on 4 channels -> bursts of
// ceil(13288 / 256) x 64 = 3328 bytes (104 cycles), the last one 3304 bytes (103.25).
TEST(SimEngine, ShortTransfersUseEveryChannel) {
  Engine e;
  const int hbm = e.add_port("hbm", sim::UnitKind::memory, port_128());
  e.transfer(e.add_op("x"), hbm, 13288);
  const auto r = e.run();
  EXPECT_DOUBLE_EQ(r.cycles, 104);
  EXPECT_DOUBLE_EQ(r.units[hbm].channel_busy[0], 104);
  EXPECT_DOUBLE_EQ(r.units[hbm].channel_busy[3], 103.25);
}

// Compute-bound GEMM: the same 32 tiles, each used for 256 tokens, 32 array steps per
// token (128/32 row blocks x 256/32 column blocks) at II=1 plus 8 cycles of pipeline fill:
// 256 * 32 + 8 = 8200 cycles per tile. Only the first load (256 cycles) is exposed:
// total = 256 + 32 * 8200, and the matrix unit never waits after the first tile.
TEST(SimEngine, ComputeBoundGemmHidesTheWeightStream) {
  Engine e;
  const int mu = e.add_unit("matrix", sim::UnitKind::matrix);
  const int hbm = e.add_port("hbm", sim::UnitKind::memory, port_128());
  const int wbuf = e.add_buffer("weights", 2 * 32768);
  const int op = e.add_op("gemm");
  tiled(e, op, hbm, mu, wbuf, 32, 32768, 256 * 32 + 8);
  const auto r = e.run();
  EXPECT_DOUBLE_EQ(r.cycles, 256 + 32 * 8200);
  EXPECT_DOUBLE_EQ(r.units[mu].state[int(State::memory)], 256);
  EXPECT_DOUBLE_EQ(r.units[mu].state[int(State::busy)], 32 * 8200);
  // The port is blocked by the full buffer: tile i+2 waits for compute i.
  EXPECT_GT(r.units[hbm].state[int(State::buffer)], 29 * 8000.0);
  EXPECT_GT(r.ops[op].unit_busy[mu], r.ops[op].unit_busy[hbm]);
}

// A buffer with room for one tile cannot double-buffer: load and compute alternate,
// 32 * (256 + 40) = 9472 cycles instead of 8232.
TEST(SimEngine, BufferTooSmallToDoubleBufferSerializes) {
  Engine e;
  const int mu = e.add_unit("matrix", sim::UnitKind::matrix);
  const int hbm = e.add_port("hbm", sim::UnitKind::memory, port_128());
  const int wbuf = e.add_buffer("weights", 32768 + 100);
  tiled(e, e.add_op("gemv"), hbm, mu, wbuf, 32, 32768, 40);
  const auto r = e.run();
  EXPECT_DOUBLE_EQ(r.cycles, 32 * (256 + 40));
  EXPECT_DOUBLE_EQ(r.units[hbm].state[int(State::buffer)], 31 * 40);
  // Three slots are no better than two here: the stream is the bottleneck either way.
  Engine e3;
  const int mu3 = e3.add_unit("matrix", sim::UnitKind::matrix);
  const int hbm3 = e3.add_port("hbm", sim::UnitKind::memory, port_128());
  tiled(e3, e3.add_op("gemv"), hbm3, mu3, e3.add_buffer("weights", 3 * 32768), 32, 32768, 40);
  EXPECT_DOUBLE_EQ(e3.run().cycles, 8192 + 40);
}

// Dependency chain across units: vector (100) -> matrix (50) -> vector (30) -> host link
// (64 bytes at 8 B/cycle after 20 cycles of latency = 28). Nothing overlaps: 208.
TEST(SimEngine, DependencyChainAddsUp) {
  Engine e;
  const int mu = e.add_unit("matrix", sim::UnitKind::matrix);
  const int vu = e.add_unit("vector", sim::UnitKind::vector);
  sim::PortSpec pcie;
  pcie.bytes_per_cycle = 8;
  pcie.latency = 20;
  const int host = e.add_port("pcie", sim::UnitKind::host_link, pcie);
  const int op = e.add_op("chain");
  TaskId a = e.compute(op, vu, 100);
  TaskId b = e.compute(op, mu, 50, {a});
  TaskId c = e.compute(op, vu, 30, {b});
  e.transfer(op, host, 64, {c});
  const auto r = e.run();
  EXPECT_DOUBLE_EQ(r.cycles, 208);
  EXPECT_DOUBLE_EQ(r.times[b].start, 100);
  EXPECT_DOUBLE_EQ(r.times[c].end, 180);
  EXPECT_DOUBLE_EQ(r.units[vu].state[int(State::busy)], 130);
  EXPECT_DOUBLE_EQ(r.units[vu].state[int(State::dependency)], 50);
  EXPECT_DOUBLE_EQ(r.units[vu].state[int(State::idle)], 28);
  EXPECT_DOUBLE_EQ(r.units[mu].state[int(State::dependency)], 100);
  EXPECT_DOUBLE_EQ(r.units[host].state[int(State::idle)], 180);
  EXPECT_DOUBLE_EQ(r.units[host].state[int(State::busy)], 28);
  // The four states of each unit add up to the whole run.
  for (const auto& u : r.units) {
    double sum = 0;
    for (double s : u.state) sum += s;
    EXPECT_DOUBLE_EQ(sum, 208);
  }
}

// Two independent chains on different units overlap; on one unit they serialize.
TEST(SimEngine, IndependentWorkOverlapsAcrossUnits) {
  Engine e;
  const int mu = e.add_unit("matrix", sim::UnitKind::matrix);
  const int vu = e.add_unit("vector", sim::UnitKind::vector);
  const int op = e.add_op("x");
  e.compute(op, mu, 100);
  e.compute(op, vu, 70);
  e.compute(op, vu, 70);
  EXPECT_DOUBLE_EQ(e.run().cycles, 140);
}

TEST(SimEngine, ImpossibleProgramsAreReported) {
  Engine e;
  const int hbm = e.add_port("hbm", sim::UnitKind::memory, port_128());
  const int buf = e.add_buffer("small", 100);
  TaskId t = e.transfer(e.add_op("x"), hbm, 200);
  e.claim(t, buf, 200);
  EXPECT_THROW(e.run(), std::logic_error);
  // A claim that is never given back blocks the second load forever.
  Engine d;
  const int p = d.add_port("hbm", sim::UnitKind::memory, port_128());
  const int b = d.add_buffer("one", 100);
  const int op = d.add_op("y");
  d.claim(d.transfer(op, p, 100), b, 100);
  d.claim(d.transfer(op, p, 100), b, 100);
  EXPECT_THROW(d.run(), std::logic_error);
}

}  // namespace
