#include "sim/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

namespace sim {

namespace {

using nlohmann::json;

// Counter points beyond which a buffer's occupancy is shown as the maximum per interval.
constexpr std::size_t kMaxExactCounterPoints = 4096;
constexpr int kCounterIntervals = 1024;

int pid_of(int card) { return card + 1; }
int tid_of(std::size_t unit) { return int(unit) + 1; }

// A stretch of one unit's busy time spent on one operation.
struct Piece {
  double start = 0, end = 0;
  int op = -1;
  int tasks = 0;
  std::int64_t bytes = 0;
};

// The unit's busy time as disjoint pieces in time order. A compute unit is busy while a task
// runs; a transfer port while a request is outstanding, from its issue to its last byte
// (the union of those intervals, each piece given to the request that extends it).
std::vector<Piece> busy_pieces(const Engine& e, const Result& r, int unit, bool per_task) {
  const bool transfer = is_transfer(e.units()[std::size_t(unit)].kind);
  const auto& tasks = e.tasks();
  std::vector<Piece> out;
  double cursor = 0;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const Task& k = tasks[t];
    if (k.unit != unit) continue;
    const TaskTime& tt = r.times[t];
    const double a = std::max(transfer ? tt.issue : tt.start, cursor), b = tt.end;
    if (b <= a) {  // no time of its own: inside the previous piece (or zero cycles)
      if (!out.empty() && out.back().op == k.op) {
        out.back().bytes += k.bytes;
        ++out.back().tasks;
      }
      continue;
    }
    cursor = b;
    if (!per_task && !out.empty() && out.back().op == k.op && out.back().end >= a) {
      out.back().end = b;
    } else {
      out.push_back({a, b, k.op, 0, 0});
    }
    out.back().bytes += k.bytes;
    ++out.back().tasks;
  }
  return out;
}

std::string slice_name(const Engine& e, int unit, int op, const std::string& kind) {
  const std::string& name = e.ops()[std::size_t(op)].name;
  if (e.units()[std::size_t(unit)].kind != UnitKind::host_link) return name;
  return (kind == "embed" ? "token ids in: " : "logits out: ") + name;
}

std::string step_name(const StepReport& s) {
  if (s.stage == arch::Stage::prefill)
    return fmt::format("prefill positions {}..{} ({} tokens)", s.position, s.position + s.tokens - 1, s.tokens);
  return fmt::format("decode position {}", s.position);
}

}  // namespace

json trace_json(const Report& rep, const Engine& e, const Result& r, const std::vector<std::string>& op_kind,
                bool per_task) {
  const double f = rep.clock_mhz * 1e6;
  const double us = 1e6 / f;
  const auto& units = e.units();
  const int steps_tid = tid_of(units.size());
  json events = json::array();

  for (int card = 0; card < rep.cards; ++card) {
    const int pid = pid_of(card);
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid},
                      {"args", {{"name", fmt::format("card {} ({} on {})", card, rep.design, rep.device)}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"args", {{"sort_index", card}}}});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", steps_tid}, {"args", {{"name", "steps"}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", steps_tid}, {"args", {{"sort_index", 0}}}});
  }
  for (std::size_t u = 0; u < units.size(); ++u) {
    const int pid = pid_of(units[u].card), tid = tid_of(u);
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", units[u].name}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
  }

  // The steps: per card, each program from its first to its last operation on that card.
  std::map<std::pair<int, int>, std::pair<double, double>> spans;  // (card, program) -> [start, end)
  for (const auto& op : rep.ops) {
    auto [it, fresh] = spans.try_emplace({op.card, op.program}, op.start, op.start + op.cycles);
    if (!fresh) {
      it->second.first = std::min(it->second.first, op.start);
      it->second.second = std::max(it->second.second, op.start + op.cycles);
    }
  }
  std::map<int, double> card_cursor;
  for (const auto& [key, span] : spans) {
    const auto [card, program] = key;
    const double start = std::max(span.first, card_cursor[card]);
    if (span.second <= start) continue;
    card_cursor[card] = span.second;
    const StepReport& s = rep.steps[std::size_t(program)];
    events.push_back({{"name", step_name(s)}, {"cat", arch::to_string(s.stage)}, {"ph", "X"}, {"ts", start * us},
                      {"dur", (span.second - start) * us}, {"pid", pid_of(card)}, {"tid", steps_tid},
                      {"args", {{"program", program}, {"tokens", s.tokens}, {"position", s.position},
                                {"cycles", span.second - start}}}});
  }

  // The units' busy time.
  for (std::size_t u = 0; u < units.size(); ++u) {
    for (const Piece& p : busy_pieces(e, r, int(u), per_task)) {
      const Op& op = e.ops()[std::size_t(p.op)];
      const std::string& kind = op_kind[std::size_t(p.op)];
      json args = {{"cycles", p.end - p.start}, {"tasks", p.tasks}};
      if (p.bytes) args["bytes"] = p.bytes;
      if (op.layer >= 0) args["layer"] = op.layer;
      events.push_back({{"name", slice_name(e, int(u), p.op, kind)},
                        {"cat", units[u].kind == UnitKind::host_link ? std::string("host") : kind},
                        {"ph", "X"}, {"ts", p.start * us}, {"dur", (p.end - p.start) * us},
                        {"pid", pid_of(units[u].card)}, {"tid", tid_of(u)}, {"args", args}});
    }
  }

  // Off-chip bandwidth per memory port.
  for (std::size_t u = 0; u < units.size(); ++u) {
    if (units[u].kind != UnitKind::memory) continue;
    const ByteTimeline& tl = r.units[u].timeline;
    const std::string name = units[u].name + " bandwidth";
    double shown = -1;
    for (std::size_t i = 0; i < tl.bytes.size(); ++i) {
      const double gbps = tl.bytes[i] / tl.width * f / 1e9;
      if (gbps == shown) continue;
      shown = gbps;
      events.push_back({{"name", name}, {"ph", "C"}, {"ts", double(i) * tl.width * us}, {"pid", pid_of(units[u].card)},
                        {"args", {{"GB/s", gbps}}}});
    }
    events.push_back({{"name", name}, {"ph", "C"}, {"ts", double(tl.bytes.size()) * tl.width * us},
                      {"pid", pid_of(units[u].card)}, {"args", {{"GB/s", 0.0}}}});
  }

  // Buffer occupancy: space claimed when a task is issued, given back when its consumer ends.
  const auto& buffers = e.buffers();
  const auto& tasks = e.tasks();
  for (std::size_t b = 0; b < buffers.size(); ++b) {
    std::vector<std::pair<double, std::int64_t>> changes;  // (time, delta)
    for (std::size_t t = 0; t < tasks.size(); ++t) {
      if (tasks[t].claim_buffer == int(b)) changes.emplace_back(r.times[t].issue, tasks[t].claim_bytes);
      if (tasks[t].release_buffer == int(b)) changes.emplace_back(r.times[t].end, -tasks[t].release_bytes);
    }
    if (changes.empty()) continue;
    std::sort(changes.begin(), changes.end());  // releases before claims at the same time, as the engine runs them
    std::vector<std::pair<double, std::int64_t>> points{{0.0, 0}};
    std::int64_t held = 0;
    for (const auto& [time, delta] : changes) {
      held += delta;
      if (points.back().first == time)
        points.back().second = held;
      else
        points.emplace_back(time, held);
    }
    if (points.size() > kMaxExactCounterPoints) {
      // The maximum held in each of kCounterIntervals intervals of the run.
      const double width = std::max(r.cycles, points.back().first) / kCounterIntervals;
      std::vector<std::pair<double, std::int64_t>> peaks;
      std::int64_t carried = 0;
      std::size_t i = 0;
      for (int k = 0; k < kCounterIntervals; ++k) {
        const double end = (k + 1) * width;
        std::int64_t peak = carried;
        for (; i < points.size() && (points[i].first < end || k == kCounterIntervals - 1); ++i) {
          peak = std::max(peak, points[i].second);
          carried = points[i].second;
        }
        peaks.emplace_back(k * width, peak);
      }
      points = std::move(peaks);
    }
    const std::string name = buffers[b].name + " occupancy";
    std::int64_t shown = -1;
    for (const auto& [time, bytes] : points) {
      if (bytes == shown) continue;
      shown = bytes;
      events.push_back({{"name", name}, {"ph", "C"}, {"ts", time * us}, {"pid", pid_of(buffers[b].card)},
                        {"args", {{"bytes", bytes}}}});
    }
  }

  json buffer_info = json::array();
  for (const auto& b : buffers) buffer_info.push_back({{"name", b.name}, {"card", b.card}, {"capacity_bytes", b.capacity}});
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ns"},
          {"otherData", {{"model", rep.model}, {"design", rep.design}, {"device", rep.device},
                         {"stage", arch::to_string(rep.stage)}, {"decode_steps", rep.decode_steps},
                         {"clock_mhz", rep.clock_mhz}, {"cycles", rep.cycles}, {"buffers", buffer_info}}}};
}

}  // namespace sim
