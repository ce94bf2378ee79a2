// The lowering of arch::Program onto the simulator, checked against counts worked out
// independently from the model's shapes (bytes moved, MAC-array cycles, link volume), the
// effect of double buffering, and the command line with its Perfetto trace.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "arch/design.hpp"
#include "arch/program.hpp"
#include "hw/device.hpp"
#include "model/presets.hpp"
#include "perf/perf.hpp"
#include "sim/simulate.hpp"
#include "util/paths.hpp"
#include "testing.hpp"

namespace {

using nlohmann::json;

// A fixed 64x64 overlay on the U280 (written out, so it does not depend on the planner).
arch::Design u280_design() { return arch::load(fpgallm::data_dir() + "/designs/u280-overlay-64x64.json"); }
// That design file's matrix_unit.pipeline_depth (arch::hls_matrix_unit_depth(64)).
constexpr int kDepth = 12;
static_assert(kDepth == arch::hls_matrix_unit_depth(64), "1 read + 3 multiply + 6 adder levels + 1 accumulate + 1 write");

model::Config preset(const std::string& name) { return model::find_preset(name).value(); }

const sim::UnitReport& unit(const sim::Report& r, const std::string& prefix) {
  for (const auto& u : r.units)
    if (u.name.rfind(prefix, 0) == 0) return u;
  throw std::runtime_error("no unit " + prefix);
}

double op_busy(const sim::OpReport& o, const std::string& prefix) {
  for (const auto& [name, c] : o.busy)
    if (name.rfind(prefix, 0) == 0) return c;
  return 0;
}

// Decode of stories110m (dim 768, hidden 2048, 12 layers, 12 heads of 64, vocab 32000) on
// a 64 x 64 matrix unit with 24 weight channels, counted by hand from the kernels:
//  - the weight stream of a matrix is its PE x SIMD steps (64 x 64 int8 = 64 words each)
//    in gather groups of lcm(64, 24) = 192 words; every matrix here has a multiple of 3
//    steps, so the stream is exactly rows x cols bytes on the weight channels;
//  - the row scales (4 words per 64-row fold = rows x 4 bytes), norm gains (768 x 4 bytes),
//    the embedding row (768 x 4) and the RoPE row (64 x 4) come through the parameter
//    bundle;
//  - the KV cache: K and V of 300 positions x 12 heads x 64 read, one position written,
//    per layer;
//  - a decode matmul keeps the matrix unit busy for its slowest compute process, the
//    gather: groups x max(8 beats, 3 steps) cycles, plus the pipeline depth once.
// Memory latency and finite buffers only ever add time: the full simulation is never
// faster than the idealized one (no latency, unbounded buffers), in decode and prefill.
TEST(SimLowering, LatencyAndBuffersNeverSpeedUpAStep) {
  const auto cfg = preset("stories110m");
  const auto d = u280_design();
  for (arch::Stage stage : {arch::Stage::decode, arch::Stage::prefill}) {
    sim::Options o;
    o.stage = stage;
    o.context = 300;
    o.prompt = 64;
    const auto full = sim::simulate(cfg, d, hw::find_device("u280"), o);
    o.idealized = true;
    const auto ideal = sim::simulate(cfg, d, hw::find_device("u280"), o);
    EXPECT_GE(full.seconds, ideal.seconds * (1 - 1e-9)) << int(stage);
    EXPECT_GT(full.seconds, ideal.seconds) << int(stage) << ": the latency of the requests shows";
  }
}

TEST(SimLowering, DecodeMovesEveryByteOnceAndCountsMacCycles) {
  const auto cfg = preset("stories110m");
  const auto d = u280_design();
  ASSERT_EQ(d.matrix_unit.pipeline_depth, kDepth);
  sim::Options o;
  o.context = 300;
  const auto r = sim::simulate(cfg, d, hw::find_device("u280"), o);
  const std::int64_t per_layer = 4 * 768 * 768 + 3 * 2048 * 768;
  EXPECT_EQ(unit(r, "HBM2 weights").bytes, 12 * per_layer + 32000LL * 768);
  // Rows per layer: wq, wk, wv, wo, w2 768 each; w1, w3 2048 each.
  const std::int64_t scales = 12 * (5 * 768 + 2 * 2048) * 4 + 32000LL * 4;
  EXPECT_EQ(unit(r, "HBM2 params").bytes, scales + (2 * 12 + 1) * 768 * 4 + 768 * 4 + 12 * 64 * 4);
  EXPECT_EQ(unit(r, "HBM2 kv").bytes, 12 * (2 * 300 * 768 + 2 * 768));
  // blk.0.w1: 2048 x 768 = 32 x 12 = 384 steps = 128 groups of 3.
  for (const auto& op : r.ops)
    if (op.name == "blk.0.w1") {
      EXPECT_DOUBLE_EQ(op_busy(op, "matrix_unit"), 128 * 8 + kDepth);
    }
  EXPECT_EQ(r.tokens, 1);
  // The critical resource of a matmul is whichever of the weight stream, the fetch and
  // the matrix unit has the most cycles in it. Weight port: 24 channels x 14.375 GB/s /
  // 300 MHz x memory_efficiency bytes per cycle. The classifier's unit also writes the
  // 32000 logits to the result bundle, one per cycle.
  const double rate = 24 * 14.375e9 / 300e6 * perf::constants().memory_efficiency.value;
  const double fetch = perf::constants().hbm_first_access_ns.value * 0.3 + 16;  // 300 MHz: 0.3 cycles per ns
  for (const auto& op : r.ops) {
    if (op.name != "blk.0.wq" && op.name != "cls") continue;
    const std::int64_t rows = op.name == "cls" ? 32000 : 768;
    const double stream = double(rows * 768) / rate;
    const double mac = double(rows / 64 * 12 / 3) * 8 + kDepth + (op.name == "cls" ? 32000 : 0);
    EXPECT_NEAR(op_busy(op, "HBM2 weights"), stream, 1e-6 * stream) << op.name;
    EXPECT_DOUBLE_EQ(op_busy(op, "matrix_unit"), mac) << op.name;
    EXPECT_NEAR(op_busy(op, "controller"), fetch, 1e-6) << op.name;
    EXPECT_EQ(op.critical, stream > std::max(fetch, mac) ? "HBM2 weights (24 ch)" : "matrix_unit") << op.name;
  }
  // Each unit's states add up to the run.
  for (const auto& u : r.units) {
    double s = 0;
    for (double c : u.state) s += c;
    EXPECT_NEAR(s, r.cycles, 1e-6 * r.cycles) << u.name;
  }
}

// Prefill splits the prompt into programs of prefill_block tokens; weights are fetched
// once per program and the MAC array does tokens x steps per tile (kernels::matmul_w8a8).
TEST(SimLowering, PrefillRunsOneProgramPerBlock) {
  const auto cfg = preset("stories15m");
  const auto d = u280_design();
  sim::Options o;
  o.stage = arch::Stage::prefill;
  o.prompt = 100;  // 64 + 36
  const auto r = sim::simulate(cfg, d, hw::find_device("u280"), o);
  EXPECT_EQ(r.programs, 2);
  EXPECT_EQ(r.tokens, 100);
  std::int64_t weights = 0;
  for (int pos : {0, 64})
    for (const auto& i : arch::build_program(cfg, d, arch::Stage::prefill, pos, pos == 0 ? 64 : 36).instructions)
      if (i.op == arch::Op::matmul) weights += i.weight_bytes;
  EXPECT_EQ(unit(r, "HBM2 weights").bytes, weights);
  // blk.0.wq of stories15m: 288 x 288 -> 3 x 2 tiles (128,128,32 rows x 256,32 cols) on the
  // 64 x 64 unit, double-buffered: per tile the longer of its load loops (one 64-column word
  // of each weight row, then of each token's codes: (rows + tokens) x ceil(c/64); the loop,
  // not the 16 channels, bounds the weights) and its compute (tokens x ceil(r/64) x
  // ceil(c/64) + depth) with, after the last column tile, the store (tokens x rows).
  auto busy_of = [](int tokens) {
    double cycles = 0;
    for (int rows : {128, 128, 32})
      for (int cols : {256, 32}) {
        const double words = (cols + 63) / 64;
        const double load = (rows + tokens) * words;
        const double compute = tokens * ((rows + 63) / 64) * words + kDepth + (cols == 32 ? tokens * rows : 0);
        cycles += std::max(load, compute);
      }
    return cycles;
  };
  std::map<int, double> busy;
  for (const auto& op : r.ops)
    if (op.name == "blk.0.wq") busy[op.program] = op_busy(op, "matrix_unit");
  EXPECT_NEAR(busy[0], busy_of(64), 1e-6 * busy[0]);
  EXPECT_NEAR(busy[1], busy_of(36), 1e-6 * busy[1]);
  // In the 64-token block the full tiles' loads (128 + 64 words of 4) outlast their compute.
  EXPECT_GT(busy_of(64), 64 * 25 + kDepth * 6 + 64 * 288);
}

// In prefill a weight buffer with room for one tile cannot overlap the next load with the
// current tile's compute: the step gets slower and the weight channels wait on the buffer.
// (Decode streams through the channel FIFOs and does not use the tile buffer.)
TEST(SimLowering, SingleTileWeightBufferSerializesLoadAndCompute) {
  const auto cfg = preset("stories110m");
  auto d = u280_design();
  sim::Options o;
  o.stage = arch::Stage::prefill;
  o.prompt = 8;
  const auto& dev = hw::find_device("u280");
  d.buffers.weight_bytes = 2 * 128 * 256;
  const auto two = sim::simulate(cfg, d, dev, o);
  d.buffers.weight_bytes = 128 * 256;
  const auto one = sim::simulate(cfg, d, dev, o);
  EXPECT_GT(one.cycles, two.cycles * 1.05);
  EXPECT_GT(unit(one, "HBM2 weights").state[int(sim::State::buffer)],
            unit(two, "HBM2 weights").state[int(sim::State::buffer)]);
  // Deeper buffers hide the request latency better, never worse.
  d.buffers.weight_bytes = 16 * 128 * 256;
  const auto sixteen = sim::simulate(cfg, d, dev, o);
  EXPECT_LE(sixteen.cycles, two.cycles);
}

// The executor's communication (issue 10, contract B), worked out by hand for stories110m
// (dim 768, 12 layers, vocab 32000), decode of one token, per card (ring algorithms):
// tensor split over N cards: per layer a max all-reduce of one 4-byte scale before wo and
// before w2 (2 (N-1) steps of 4/N bytes) and a sum all-reduce of 768 int32 partial sums
// after each (2 (N-1) steps of 3072/N bytes); then an all-gather of the 32000 fp32 logits
// (N-1 steps of 128000/N bytes).
//   N = 2: 12 x 2 x (4 + 3072) + 64000 = 137824;  N = 4: 12 x 2 x (6 + 4608) + 96000 = 206736.
// Pipeline split: x in fp32 (3072 bytes) from each stage to the next; the last card sends
// the 128000 bytes of logits back to card 0.
TEST(SimLowering, SplitsMoveTheExecutorsCommunication) {
  const auto cfg = preset("stories110m");
  auto d = u280_design();
  sim::Options o;
  o.context = 64;
  const auto& dev = hw::find_device("u280");
  for (auto [cards, per_card] : {std::pair{2, 137824.0}, std::pair{4, 206736.0}}) {
    d.parallel = {cards, arch::Split::tensor};
    const auto t = sim::simulate(cfg, d, dev, o);
    EXPECT_EQ(t.cards, cards);
    for (int k = 0; k < cards; ++k) EXPECT_EQ(unit(t, fmt::format("card{}.card_link", k)).bytes, per_card) << cards;
    EXPECT_EQ(t.link_bytes_per_token, std::vector<double>(cards, per_card));
    // The analytical model counts the same bytes.
    const auto w = perf::lower(cfg, graph::parse_scheme("int8"), perf::Scenario{1, 16, 64});
    EXPECT_EQ(perf::predict(d, dev, w).link_bytes_per_token, t.link_bytes_per_token);
  }
  // Each card streams half of every block matmul.
  d.parallel = {2, arch::Split::tensor};
  const auto t = sim::simulate(cfg, d, dev, o);
  const auto one = sim::simulate(cfg, u280_design(), dev, o);
  EXPECT_LT(unit(t, "card0.HBM2 weights").bytes, unit(one, "HBM2 weights").bytes * 0.6);
  d.parallel = {2, arch::Split::pipeline};
  const auto p = sim::simulate(cfg, d, dev, o);
  EXPECT_EQ(unit(p, "card0.card_link").bytes, 3072);
  EXPECT_EQ(unit(p, "card1.card_link").bytes, 128000);
  d.parallel = {4, arch::Split::pipeline};
  const auto p4 = sim::simulate(cfg, d, dev, o);
  EXPECT_EQ(p4.link_bytes_per_token, (std::vector<double>{3072, 3072, 3072, 128000}));
  // Stages hold layers [floor(k L / N), floor((k+1) L / N)), as the executor splits them:
  // stories260K's 5 layers over 2 cards are 0-1 and 2-4.
  {
    auto small = u280_design();
    small.parallel = {2, arch::Split::pipeline};
    const auto r = sim::simulate(preset("stories260k"), small, dev, o);
    int sends = 0;
    for (const auto& op : r.ops)
      if (op.kind == "send") {
        ++sends;
      } else if (op.layer >= 0) {
        EXPECT_EQ(op.card, op.layer < 2 ? 0 : 1) << op.name;
      }
    EXPECT_EQ(sends, 2);  // x from card 0 to 1 before layer 2, the logits back to card 0
  }
  // Prefill of 16 tokens (one program): sixteen times the per-token volume.
  o.stage = arch::Stage::prefill;
  o.prompt = 16;
  d.parallel = {2, arch::Split::tensor};
  EXPECT_EQ(sim::simulate(cfg, d, dev, o).link_bytes_per_token, (std::vector<double>{137824, 137824}));
}

// The command line: tables, --json, the trace in the Trace Event Format, and bad input.
TEST(SimCli, TraceIsValidTraceEventFormat) {
  const auto dir = testing_support::scratch_dir("sim-cli");
  arch::save(u280_design(), dir + "/d.json");
  auto res = testing_support::run_fpgallm("simulate stories15m --design " + dir + "/d.json --context 40 --trace " + dir +
                                          "/t.json --json");
  ASSERT_EQ(res.status, 0) << res.err;
  const json report = json::parse(res.out);
  EXPECT_EQ(report.at("stage"), "decode");
  EXPECT_GT(report.at("cycles").get<double>(), 0);
  EXPECT_FALSE(report.at("units").empty());
  const json trace = json::parse(testing_support::read_bytes(dir + "/t.json"));
  ASSERT_TRUE(trace.at("traceEvents").is_array());
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e.at("ph");
    ASSERT_TRUE(ph == "X" || ph == "M" || ph == "C") << e.dump();
    const int pid = e.at("pid");
    if (ph == "C") continue;  // counters: tests/sim/test_trace.cpp
    if (ph == "M") {
      if (e.at("name") == "thread_name") thread_names[{pid, e.at("tid").get<int>()}] = e.at("args").at("name");
      if (e.at("name") == "process_name") process_names[pid] = e.at("args").at("name");
      continue;
    }
    const int tid = e.at("tid");
    ASSERT_TRUE(e.at("name").is_string());
    const double ts = e.at("ts"), dur = e.at("dur");
    EXPECT_GE(ts, 0);
    EXPECT_GT(dur, 0);
    tracks[{pid, tid}].push_back({ts, ts + dur});
  }
  EXPECT_TRUE(process_names.count(1));  // card 0
  EXPECT_GE(tracks.size(), 4u);  // controller, matrix, vector, weight channels at least
  for (auto& [track, spans] : tracks) {
    EXPECT_TRUE(thread_names.count(track)) << "track without thread_name: " << track.first << "/" << track.second;
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i)
      EXPECT_LE(spans[i - 1].second, spans[i].first + 1e-6) << "overlapping events on " << thread_names[track];
  }
  // The last event ends when the run ends.
  double end = 0;
  for (auto& [track, spans] : tracks) end = std::max(end, spans.back().second);
  EXPECT_NEAR(end, report["seconds"].get<double>() * 1e6, 1e-3);

  // Human-readable output names the stall table's columns.
  res = testing_support::run_fpgallm("simulate stories15m --design " + dir + "/d.json --phase prefill --prompt 16");
  ASSERT_EQ(res.status, 0) << res.err;
  EXPECT_NE(res.out.find("busy"), std::string::npos);
  EXPECT_NE(res.out.find("critical resource"), std::string::npos);
}

TEST(SimCli, BadInputIsOneLineAndExitStatus2) {
  const auto dir = testing_support::scratch_dir("sim-bad");
  arch::save(u280_design(), dir + "/d.json");
  auto res = testing_support::run_fpgallm("simulate stories15m --design " + dir + "/d.json --context 100000");
  EXPECT_EQ(res.status, 2);
  EXPECT_NE(res.err.find("--context"), std::string::npos);
  auto d = u280_design();
  d.device = "no-such-card";
  arch::save(d, dir + "/e.json");
  res = testing_support::run_fpgallm("simulate stories15m --design " + dir + "/e.json --trace " + dir + "/t.json");
  EXPECT_EQ(res.status, 2);
  EXPECT_NE(res.err.find("no-such-card"), std::string::npos);
  EXPECT_FALSE(std::ifstream(dir + "/t.json").good());  // no partial output
  res = testing_support::run_fpgallm("simulate stories15m --design " + dir + "/missing.json");
  EXPECT_EQ(res.status, 2);
}

}  // namespace
