// The simulator's Perfetto trace: valid Trace Event Format (tests/sim/trace_event_format.hpp,
// written from the format's specification), one process per card with pid >= 1, named
// threads, slices that add up to each unit's busy cycles in the report, host transfers as
// slices, counter tracks whose bandwidth integrates to the bytes each port moved and whose
// buffer occupancy stays within the buffer, and `--tokens N` (a prefill and N decode steps).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "arch/design.hpp"
#include "hw/device.hpp"
#include "model/presets.hpp"
#include "sim/simulate.hpp"
#include "trace_event_format.hpp"
#include "util/paths.hpp"
#include "testing.hpp"

namespace {

using nlohmann::json;

arch::Design u280_design() { return arch::load(fpgallm::data_dir() + "/designs/u280-overlay-64x64.json"); }

// The validator must reject what the specification forbids, or it proves nothing.
TEST(TraceEventFormat, ValidatorRejectsBrokenTraces) {
  const json good = json::parse(R"({"traceEvents": [
      {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "card"}},
      {"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "unit"}},
      {"name": "a", "ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 2},
      {"name": "b", "ph": "X", "ts": 2, "dur": 3, "pid": 1, "tid": 2},
      {"name": "c", "ph": "B", "ts": 20, "pid": 1, "tid": 2}, {"name": "c", "ph": "E", "ts": 25, "pid": 1, "tid": 2},
      {"name": "bw", "ph": "C", "ts": 0, "pid": 1, "args": {"GB/s": 1.5}}], "displayTimeUnit": "ns"})");
  EXPECT_TRUE(trace_format::problems(good).empty()) << trace_format::problems(good).front();
  auto broken = [&](const std::string& patch) {
    json j = good;
    j.merge_patch(json::parse(patch));
    return !trace_format::problems(j).empty();
  };
  auto with_event = [&](const std::string& event) {
    json j = good;
    j["traceEvents"].push_back(json::parse(event));
    return !trace_format::problems(j).empty();
  };
  EXPECT_TRUE(broken(R"({"displayTimeUnit": "s"})"));
  EXPECT_TRUE(broken(R"({"traceEvents": 3})"));
  EXPECT_TRUE(with_event(R"({"name": "x", "ph": "X", "ts": 1, "pid": 1, "tid": 2})"));             // no dur
  EXPECT_TRUE(with_event(R"({"name": "x", "ph": "X", "ts": 8, "dur": 5, "pid": 1, "tid": 2})"));   // overlaps a
  EXPECT_TRUE(with_event(R"({"name": "x", "ph": "E", "ts": 30, "pid": 1, "tid": 2})"));            // E without B
  EXPECT_TRUE(with_event(R"({"name": "x", "ph": "B", "ts": 30, "pid": 1, "tid": 2})"));            // never ended
  EXPECT_TRUE(with_event(R"({"name": "x", "ph": "C", "ts": 0, "pid": 1, "args": {"v": "high"}})"));
  EXPECT_TRUE(with_event(R"({"name": "x", "ph": "C", "ts": 0, "pid": 1})"));
  EXPECT_TRUE(with_event(R"({"name": "thread_name", "ph": "M", "pid": 1, "tid": 3, "args": {}})"));
  EXPECT_TRUE(with_event(R"({"name": "colour", "ph": "M", "pid": 1, "tid": 3, "args": {"name": "x"}})"));
  EXPECT_TRUE(with_event(R"({"name": "x", "ph": "Q", "ts": 0, "pid": 1, "tid": 2})"));
  EXPECT_TRUE(with_event(R"({"name": "x", "ph": "X", "ts": 0, "dur": 1, "tid": 2})"));             // no pid
  EXPECT_TRUE(with_event(R"({"name": "x", "ph": "X", "ts": 0, "dur": 1, "pid": 1})"));             // no tid
  EXPECT_TRUE(with_event(R"({"name": "x", "ph": "i", "ts": 0, "pid": 1, "tid": 2, "s": "q"})"));
}

struct Tracks {
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  std::map<std::string, double> busy_us;  // thread name (card-qualified) -> sum of slice durations
  std::map<std::string, std::vector<json>> slices;
  std::map<std::pair<int, std::string>, std::vector<std::pair<double, double>>> counters;  // (pid, name) -> (ts, value)
};

Tracks read_tracks(const json& trace) {
  Tracks t;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name") t.processes[e["pid"]] = e["args"]["name"];
    if (ph == "M" && e["name"] == "thread_name") t.threads[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      const std::string thread = t.threads.at({e["pid"], e["tid"]});
      t.busy_us[thread] += e["dur"].get<double>();
      t.slices[thread].push_back(e);
    } else if (ph == "C") {
      const auto& args = e["args"];
      t.counters[{e["pid"], e["name"]}].push_back({e["ts"].get<double>(), args.begin()->get<double>()});
    }
  }
  return t;
}

TEST(SimTrace, ValidAndSlicesAddUpToTheReport) {
  const auto cfg = model::find_preset("stories15m").value();
  const auto d = u280_design();
  const auto& dev = hw::find_device(d.device);
  sim::Options o;
  o.context = 40;
  sim::TraceOptions to;
  to.enabled = true;
  json trace;
  const sim::Report r = sim::simulate(cfg, d, dev, o, to, trace);
  const auto problems = trace_format::problems(trace);
  EXPECT_TRUE(problems.empty()) << problems.front();

  const Tracks t = read_tracks(trace);
  ASSERT_EQ(t.processes.size(), 1u);
  EXPECT_EQ(t.processes.begin()->first, 1) << "pid 0 is reserved; card 0 is pid 1";
  for (const auto& [pid_tid, name] : t.threads) {
    EXPECT_GE(pid_tid.first, 1);
    EXPECT_GE(pid_tid.second, 1);
  }
  const double us_per_cycle = 1.0 / r.clock_mhz;
  std::set<std::string> names;
  for (const auto& [key, name] : t.threads) names.insert(name);
  for (const auto& u : r.units) {
    ASSERT_TRUE(names.count(u.name)) << "no thread for unit " << u.name;
    const double busy = u.state[int(sim::State::busy)] * us_per_cycle;
    const double traced = t.busy_us.count(u.name) ? t.busy_us.at(u.name) : 0.0;
    EXPECT_NEAR(traced, busy, 1e-9 * std::max(1.0, busy)) << u.name;
  }
  // Host transfers are slices on the PCIe thread: the token id in and the logits out.
  ASSERT_TRUE(t.slices.count("pcie"));
  int in = 0, out = 0;
  for (const auto& s : t.slices.at("pcie")) {
    const std::string name = s["name"];
    in += name.rfind("token ids in", 0) == 0;
    out += name.rfind("logits out", 0) == 0;
    EXPECT_EQ(s["cat"], "host");
  }
  EXPECT_EQ(in, 1);
  EXPECT_EQ(out, 1);

  // Counter tracks: each memory port's bandwidth integrates to the bytes it moved and never
  // passes the card's off-chip bandwidth; occupancy stays within each buffer.
  double peak_gbps = 0;
  for (const auto& m : dev.memory)
    if (m.bandwidth_gbps.has()) peak_gbps = std::max(peak_gbps, *m.bandwidth_gbps);
  int bandwidth_tracks = 0;
  for (const auto& u : r.units) {
    if (u.kind != "memory") continue;
    const auto it = t.counters.find({1, u.name + " bandwidth"});
    ASSERT_NE(it, t.counters.end()) << u.name;
    ++bandwidth_tracks;
    const auto& pts = it->second;
    double bytes = 0;
    for (std::size_t i = 0; i + 1 < pts.size(); ++i) {
      EXPECT_GE(pts[i].second, 0);
      EXPECT_LE(pts[i].second, peak_gbps);
      bytes += pts[i].second * 1e9 * (pts[i + 1].first - pts[i].first) * 1e-6;
    }
    EXPECT_EQ(pts.back().second, 0);
    EXPECT_NEAR(bytes, double(u.bytes), 1e-6 * double(u.bytes)) << u.name;
  }
  EXPECT_GE(bandwidth_tracks, 1);
  int occupancy_tracks = 0;
  for (const auto& b : trace["otherData"]["buffers"]) {
    const auto it = t.counters.find({b["card"].get<int>() + 1, b["name"].get<std::string>() + " occupancy"});
    if (it == t.counters.end()) continue;
    ++occupancy_tracks;
    double max_held = 0;
    for (const auto& [ts, bytes] : it->second) {
      EXPECT_GE(bytes, 0);
      EXPECT_LE(bytes, b["capacity_bytes"].get<double>()) << b["name"];
      max_held = std::max(max_held, bytes);
    }
    EXPECT_GT(max_held, 0) << b["name"];
    EXPECT_EQ(it->second.back().second, 0) << b["name"] << ": everything claimed is released";
  }
  EXPECT_GE(occupancy_tracks, 1);

  // One slice per task: the same busy totals, at least as many slices.
  to.tasks = true;
  json per_task;
  sim::simulate(cfg, d, dev, o, to, per_task);
  EXPECT_TRUE(trace_format::problems(per_task).empty());
  const Tracks tt = read_tracks(per_task);
  for (const auto& u : r.units) {
    EXPECT_NEAR(tt.busy_us.count(u.name) ? tt.busy_us.at(u.name) : 0.0, t.busy_us.count(u.name) ? t.busy_us.at(u.name) : 0.0,
                1e-9 * std::max(1.0, t.busy_us.count(u.name) ? t.busy_us.at(u.name) : 0.0))
        << u.name;
    EXPECT_GE(tt.slices.count(u.name) ? tt.slices.at(u.name).size() : 0, t.slices.count(u.name) ? t.slices.at(u.name).size() : 0);
  }
}

TEST(SimTrace, TwoCardsAreTwoProcesses) {
  const auto cfg = model::find_preset("stories15m").value();
  auto d = u280_design();
  d.parallel = {2, arch::Split::tensor};
  sim::Options o;
  o.context = 24;
  json trace;
  const sim::Report r = sim::simulate(cfg, d, hw::find_device(d.device), o, sim::TraceOptions{true, false}, trace);
  EXPECT_TRUE(trace_format::problems(trace).empty());
  const Tracks t = read_tracks(trace);
  EXPECT_EQ(t.processes.size(), 2u);
  EXPECT_TRUE(t.processes.count(1) && t.processes.count(2));
  for (const auto& u : r.units) {
    bool found = false;
    for (const auto& [key, name] : t.threads) found |= name == u.name && key.first == u.card + 1;
    EXPECT_TRUE(found) << u.name << " on card " << u.card;
    const double busy = u.state[int(sim::State::busy)] / r.clock_mhz;
    EXPECT_NEAR(t.busy_us.count(u.name) ? t.busy_us.at(u.name) : 0.0, busy, 1e-9 * std::max(1.0, busy)) << u.name;
  }
}

// `simulate --tokens 3`: a prefill and three decode steps on one timeline, each a slice of
// the steps thread, in order, each decode step with its own token in and logits out.
TEST(SimTrace, TokensTracesAPrefillAndDecodeSteps) {
  const auto dir = testing_support::scratch_dir("sim-tokens");
  arch::save(u280_design(), dir + "/d.json");
  auto res = testing_support::run_fpgallm("simulate stories15m --design " + dir + "/d.json --prompt 8 --tokens 3 --trace " +
                                          dir + "/t.json --json");
  ASSERT_EQ(res.status, 0) << res.err;
  const json report = json::parse(res.out);
  EXPECT_EQ(report["decode_steps"], 3);
  EXPECT_EQ(report["tokens"], 11);
  const auto& steps = report["steps"];
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[0]["stage"], "prefill");
  EXPECT_EQ(steps[0]["tokens"], 8);
  double end = 0;
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(steps[i]["stage"], "decode");
    EXPECT_EQ(steps[i]["position"], 7 + i);
  }
  for (const auto& s : steps) {
    EXPECT_GE(s["start_cycles"].get<double>(), end - 1e-9);
    end = s["start_cycles"].get<double>() + s["cycles"].get<double>();
    EXPECT_GT(s["cycles"].get<double>(), 0);
  }
  EXPECT_NEAR(end, report["cycles"].get<double>(), 1e-9 * end);

  const json trace = json::parse(testing_support::read_bytes(dir + "/t.json"));
  const auto problems = trace_format::problems(trace);
  EXPECT_TRUE(problems.empty()) << problems.front();
  const Tracks t = read_tracks(trace);
  ASSERT_TRUE(t.slices.count("steps"));
  const auto& step_slices = t.slices.at("steps");
  ASSERT_EQ(step_slices.size(), 4u);
  EXPECT_EQ(step_slices[0]["name"], "prefill positions 0..7 (8 tokens)");
  EXPECT_EQ(step_slices[3]["name"], "decode position 10");
  int logits = 0;
  for (const auto& s : t.slices.at("pcie")) logits += s["name"].get<std::string>().rfind("logits out", 0) == 0;
  EXPECT_EQ(logits, 4) << "one logits transfer per program";

  // Past the model's context: one line, status 2, no trace.
  res = testing_support::run_fpgallm("simulate stories15m --design " + dir + "/d.json --prompt 250 --tokens 10 --trace " +
                                     dir + "/u.json");
  EXPECT_EQ(res.status, 2);
  EXPECT_NE(res.err.find("--tokens"), std::string::npos) << res.err;
  EXPECT_FALSE(std::ifstream(dir + "/u.json").good());
}

}  // namespace
