#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "arch/design.hpp"
#include "cli/command.hpp"
#include "util/output.hpp"
#include "hw/device.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "perf/perf.hpp"
#include "sim/simulate.hpp"
#include "util/error.hpp"
#include "util/paths.hpp"

namespace {

struct SimulateArgs {
  std::string model, design, phase = "decode", trace;
  int prompt = 128;
  int context = 0;
  int tokens = 0;  // decode steps after the prefill
  int top = 12;
  bool trace_tasks = false;
  bool json = false;
};

void print_report(const sim::Report& r, int top) {
  const double f = r.clock_mhz * 1e6;
  std::printf("%s on %s (%s, %d card%s, %.0f MHz): %s of %d token%s%s\n", r.model.c_str(), r.device.c_str(),
              r.design.c_str(), r.cards, r.cards > 1 ? "s" : "", r.clock_mhz, arch::to_string(r.stage), r.tokens - r.decode_steps,
              r.tokens - r.decode_steps > 1 ? "s" : "",
              r.stage == arch::Stage::decode ? (" at context " + std::to_string(r.context)).c_str() : "");
  std::printf("  %.0f cycles = %.3f ms", r.cycles, r.seconds * 1e3);
  if (r.stage == arch::Stage::decode) {
    std::printf(" per token, %.2f tokens/s\n", r.tokens_per_s);
  } else if (r.decode_steps == 0) {
    std::printf(" to first token, %.1f tokens/s (%d prefill program%s: the emitted top's prompt call)\n",
                r.tokens_per_s, r.programs, r.programs > 1 ? "s" : "");
  } else {
    double prefill = 0, decode = 0;
    for (const auto& st : r.steps) (st.stage == arch::Stage::decode ? decode : prefill) += st.cycles;
    std::printf(" in all: a prefill of %d tokens in %.3f ms, then %d decode steps in %.3f ms (%.2f tokens/s)\n",
                r.tokens - r.decode_steps, prefill / f * 1e3, r.decode_steps, decode / f * 1e3,
                decode > 0 ? r.decode_steps / (decode / f) : 0.0);
  }
  for (const auto& n : r.notes) std::printf("  %s\n", n.c_str());
  if (!r.link_bytes_per_token.empty()) {
    std::printf("  card links carried per token:");
    for (std::size_t k = 0; k < r.link_bytes_per_token.size(); ++k)
      std::printf("%s card %zu %.0f bytes", k ? "," : "", k, r.link_bytes_per_token[k]);
    std::printf("\n");
  }

  std::printf("\nper unit (cycles; share of the run)\n");
  std::printf("  %-30s %7s %7s %7s %7s %7s %7s\n", "unit", "busy", "memory", "depend", "buffer", "idle", "util");
  for (const auto& u : r.units) {
    std::printf("  %-30s", u.name.c_str());
    for (int i = 0; i < sim::kStates; ++i) std::printf(" %6.1f%%", r.cycles > 0 ? 100 * u.state[i] / r.cycles : 0);
    std::printf(" %6.1f%%\n", 100 * u.utilization);
  }

  std::printf("\nper layer (summed over programs)\n  %-10s %5s %12s %10s\n", "layer", "card", "cycles", "ms");
  for (const auto& l : r.layers)
    std::printf("  %-10s %5d %12.0f %10.4f\n", l.layer >= 0 ? std::to_string(l.layer).c_str() : "(outside)", l.card,
                l.cycles, l.cycles / f * 1e3);

  // Per operation, summed over layers and programs by kind of instruction.
  struct Sum {
    double cycles = 0;
    std::map<std::string, double> critical;
    int count = 0;
  };
  std::map<std::string, Sum> by_kind;
  for (const auto& o : r.ops) {
    auto& s = by_kind[o.kind];
    s.cycles += o.cycles;
    s.critical[o.critical] += o.cycles;
    ++s.count;
  }
  std::printf("\nper kind of operation\n  %-12s %6s %12s %7s  %s\n", "kind", "count", "cycles", "share", "critical resource (by time)");
  for (const auto& [kind, s] : by_kind) {
    auto crit = std::max_element(s.critical.begin(), s.critical.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    std::printf("  %-12s %6d %12.0f %6.1f%%  %s\n", kind.c_str(), s.count, s.cycles, r.cycles > 0 ? 100 * s.cycles / r.cycles : 0,
                crit == s.critical.end() ? "-" : crit->first.c_str());
  }
  std::vector<const sim::OpReport*> ops;
  for (const auto& o : r.ops) ops.push_back(&o);
  std::sort(ops.begin(), ops.end(), [](auto* a, auto* b) { return a->cycles > b->cycles; });
  if (top > 0) {
    std::printf("\nlongest operations\n  %-24s %-10s %4s %12s %9s  %s\n", "name", "kind", "card", "cycles", "us", "critical resource");
    for (int i = 0; i < std::min<int>(top, int(ops.size())); ++i)
      std::printf("  %-24s %-10s %4d %12.0f %9.2f  %s (%.0f%% of the op)\n", ops[i]->name.c_str(), ops[i]->kind.c_str(),
                  ops[i]->card, ops[i]->cycles, ops[i]->cycles / f * 1e6, ops[i]->critical.c_str(),
                  ops[i]->cycles > 0 ? 100 * ops[i]->critical_cycles / ops[i]->cycles : 0);
  }
  std::printf("\nassumptions\n");
  for (const auto& a : r.assumptions) std::printf("  %-26s %-10g %s\n", a.name.c_str(), a.value, a.unit.c_str());
}

void simulate(const SimulateArgs& a) {
  if (!a.trace.empty()) fpgallm::check_output(a.trace, fpgallm::OutputKind::file, {a.model, a.design});
  const model::Model m = model::load_or_preset(a.model);
  const arch::Design d = arch::load(a.design);
  if (d.device.empty()) throw fpgallm::InputError(a.design, "design has no device");
  // The device is the design file's field, not an option: an unknown one names the file.
  const hw::Device* known = hw::lookup_device(d.device);
  if (!known) {
    try {
      (void)hw::find_device(d.device);
    } catch (const fpgallm::InputError& e) {
      throw fpgallm::InputError(a.design, "device: " + e.problem());
    }
  }
  const hw::Device& dev = *known;
  sim::Options o;
  if (a.phase == "decode")
    o.stage = arch::Stage::decode;
  else if (a.phase == "prefill")
    o.stage = arch::Stage::prefill;
  else
    throw fpgallm::InputError("--phase", "'" + a.phase + "' is not prefill or decode");
  o.prompt = a.prompt;
  if (a.tokens > 0) {
    o.stage = arch::Stage::prefill;
    o.decode_steps = a.tokens;
  }
  o.context = a.context > 0 ? a.context : std::min(d.context, m.config.seq_len);
  sim::TraceOptions t;
  t.enabled = !a.trace.empty();
  t.tasks = a.trace_tasks;
  nlohmann::json trace;
  const auto t0 = std::chrono::steady_clock::now();
  const sim::Report r = [&] {
    try {
      return sim::simulate(m.config, d, dev, o, t, trace);
    } catch (const fpgallm::InputError& e) {
      // The simulator names a design by its name field; the user knows it by its file.
      if (e.source() == d.name) throw fpgallm::InputError(a.design, e.problem());
      throw;
    }
  }();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (cli::progress_enabled()) std::fprintf(stderr, "simulated %lld tasks in %.2f s\n", static_cast<long long>(r.tasks), wall);
  if (t.enabled) fpgallm::write_file_atomic(a.trace, trace.dump() + "\n");
  if (a.json) {
    nlohmann::json j = r;
    if (t.enabled) j["trace"] = a.trace;
    if (d.parallel.cards > 1) {
      // The analytical model's figure for the same design and step, beside the simulated one.
      const perf::Prediction p = perf::predict(
          d, dev, perf::lower(m.config, perf::design_precision(d), perf::Scenario{1, o.prompt, o.context}));
      j["predicted_link_bytes_per_token"] = p.link_bytes_per_token;
    }
    cli::print_json(j);
    return;
  }
  print_report(r, a.top);
  if (t.enabled) std::printf("\ntrace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n", a.trace.c_str());
}

void setup(CLI::App& root) {
  auto a = std::make_shared<SimulateArgs>();
  auto* cmd = root.add_subcommand("simulate", "Cycle-level simulation of a design running a model, with a Perfetto trace");
  cmd->add_option("model", a->model, "Checkpoint or preset name")->required();
  cmd->add_option("--design", a->design, "design.json (from fpgallm plan)")->required();
  cmd->add_option("--phase", a->phase, "prefill or decode")->check(CLI::IsMember({"prefill", "decode"}));
  cmd->add_option("--prompt", a->prompt, "Prefill: prompt tokens")->check(cli::kPositive);
  cmd->add_option("--context", a->context, "Decode: positions attended by the new token (default: the design's context)")
      ->check(cli::kPositive);
  cmd->add_option("--tokens", a->tokens, "Prefill of --prompt tokens followed by N decode steps, on one timeline")
      ->check(cli::kPositive);
  cmd->add_option("--trace", a->trace, "Write a Chrome/Perfetto trace (Trace Event Format JSON)");
  cmd->add_flag("--trace-tasks", a->trace_tasks, "One trace event per tile task instead of per operation and unit");
  cmd->add_option("--top", a->top, "Longest operations to list")->check(cli::kNonNegative);
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { simulate(*a); });
}

}  // namespace

FPGALLM_COMMAND("simulate", setup);
