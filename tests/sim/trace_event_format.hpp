#pragma once
// A validator of Chrome's Trace Event Format (the JSON that chrome://tracing, Perfetto's
// legacy JSON importer and catapult's trace viewer read), written from the format's
// specification ("Trace Event Format", Google, the document catapult links as its
// definition):
//   - a trace is a JSON array of events, or an object whose "traceEvents" is that array;
//     "displayTimeUnit", when present, is "ms" or "ns";
//   - every event is an object with "ph", a one-character phase; "name" (a string), "pid"
//     and "tid" (integers) and "ts" (microseconds, a number) are required except where a
//     phase says otherwise; "cat" is a string; "args" an object;
//   - B/E (duration): an E closes the innermost open B of the same (pid, tid), at a time
//     not before it; events of one thread are nested, never left open;
//   - X (complete): "dur" is a non-negative number; X events of one thread nest (one
//     inside the other, or disjoint), since they stand for B/E pairs;
//   - C (counter): process-scoped (tid optional), "args" holds the series, every value a
//     number;
//   - M (metadata): name is process_name / process_labels / process_sort_index /
//     thread_name / thread_sort_index, with args.name (string), args.labels (string) or
//     args.sort_index (integer); "ts" is not required; process-level ones need no "tid";
//   - i/I (instant): "s", when present, is "g", "p" or "t".
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace trace_format {

inline constexpr double kSlackUs = 1e-6;

inline std::vector<std::string> problems(const nlohmann::json& doc) {
  using nlohmann::json;
  std::vector<std::string> out;
  auto fail = [&](std::size_t i, const std::string& what) {
    if (out.size() < 50) out.push_back("event " + std::to_string(i) + ": " + what);
  };
  const json* events = &doc;
  if (doc.is_object()) {
    if (!doc.contains("traceEvents") || !doc["traceEvents"].is_array()) return {"object without a traceEvents array"};
    events = &doc["traceEvents"];
    if (doc.contains("displayTimeUnit") && doc["displayTimeUnit"] != "ms" && doc["displayTimeUnit"] != "ns")
      out.push_back("displayTimeUnit is neither \"ms\" nor \"ns\"");
  } else if (!doc.is_array()) {
    return {"neither an array of events nor an object"};
  }
  static const std::set<std::string> phases = {"B", "E", "X", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s",
                                               "t", "f", "P", "N", "O", "D", "M", "V", "v", "R", "c", "(", ")"};
  static const std::map<std::string, std::string> metadata = {{"process_name", "name"},
                                                              {"process_labels", "labels"},
                                                              {"process_sort_index", "sort_index"},
                                                              {"thread_name", "name"},
                                                              {"thread_sort_index", "sort_index"}};
  using Thread = std::pair<long long, long long>;
  std::map<Thread, std::vector<double>> open;                               // B timestamps
  std::map<Thread, std::vector<std::pair<double, double>>> complete;        // X [start, end]
  for (std::size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    if (!e.is_object()) {
      fail(i, "not an object");
      continue;
    }
    if (!e.contains("ph") || !e["ph"].is_string() || !phases.count(e["ph"].get<std::string>())) {
      fail(i, "missing or unknown ph");
      continue;
    }
    const std::string ph = e["ph"];
    const bool meta = ph == "M";
    const bool process_scoped = ph == "C" || (meta && e.value("name", "").rfind("process_", 0) == 0);
    if (!e.contains("name") || !e["name"].is_string()) fail(i, "missing name");
    if (!e.contains("pid") || !e["pid"].is_number_integer()) fail(i, "missing integer pid");
    if (!process_scoped && (!e.contains("tid") || !e["tid"].is_number_integer())) fail(i, "missing integer tid");
    if (e.contains("tid") && !e["tid"].is_number_integer()) fail(i, "tid is not an integer");
    if (!meta && (!e.contains("ts") || !e["ts"].is_number())) fail(i, "missing numeric ts");
    if (e.contains("cat") && !e["cat"].is_string()) fail(i, "cat is not a string");
    if (e.contains("args") && !e["args"].is_object()) fail(i, "args is not an object");
    if (!out.empty() && out.size() >= 50) break;
    if (!e.contains("pid") || !e["pid"].is_number_integer() || (!meta && !e.contains("ts"))) continue;
    const Thread th{e["pid"].get<long long>(), e.value("tid", 0LL)};
    const double ts = meta ? 0.0 : e["ts"].get<double>();
    if (ph == "B") {
      open[th].push_back(ts);
    } else if (ph == "E") {
      if (open[th].empty())
        fail(i, "E without an open B on its thread");
      else if (ts < open[th].back())
        fail(i, "E before its B");
      else
        open[th].pop_back();
    } else if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0)
        fail(i, "X without a non-negative dur");
      else
        complete[th].push_back({ts, ts + e["dur"].get<double>()});
    } else if (ph == "C") {
      if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) {
        fail(i, "C without series in args");
      } else {
        for (const auto& [series, v] : e["args"].items())
          if (!v.is_number()) fail(i, "C series '" + series + "' is not a number");
      }
    } else if (meta) {
      const auto it = metadata.find(e.value("name", ""));
      if (it == metadata.end()) {
        fail(i, "unknown metadata event '" + e.value("name", "") + "'");
      } else if (!e.contains("args") || !e["args"].contains(it->second)) {
        fail(i, it->first + " without args." + it->second);
      } else {
        const json& v = e["args"][it->second];
        if (it->second == "sort_index" ? !v.is_number_integer() : !v.is_string())
          fail(i, it->first + ": args." + it->second + " has the wrong type");
      }
    } else if (ph == "i" || ph == "I") {
      if (e.contains("s") && e["s"] != "g" && e["s"] != "p" && e["s"] != "t") fail(i, "instant scope is not g, p or t");
    }
  }
  for (const auto& [th, stack] : open)
    if (!stack.empty()) out.push_back("thread " + std::to_string(th.first) + "/" + std::to_string(th.second) + ": B never ended");
  // Complete events of one thread nest: sorted by start (longer first on ties), each one
  // starts after the enclosing ones it is not inside have ended. Touching events may differ
  // by rounding: 1e-6 us (a picosecond) is allowed.
  for (auto& [th, spans] : complete) {
    std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<double> ends;  // the open enclosing events
    for (const auto& [start, end] : spans) {
      while (!ends.empty() && ends.back() <= start + kSlackUs) ends.pop_back();
      if (!ends.empty() && end > ends.back() + kSlackUs) {
        out.push_back("thread " + std::to_string(th.first) + "/" + std::to_string(th.second) +
                      ": X events overlap without nesting at ts " + std::to_string(start));
        break;
      }
      ends.push_back(end);
    }
  }
  return out;
}

}  // namespace trace_format
