#include <fmt/format.h>

#include <cstdio>
#include <sstream>

#include "cli/command.hpp"
#include "dse/dse.hpp"
#include "model/model.hpp"
#include "report/svg.hpp"
#include "util/error.hpp"
#include "util/paths.hpp"

namespace {

struct ExploreArgs {
  std::string model, devices = "all", objective = "decode-tps", scheme = "int8", svg;
  int batch = 1, context = 0, prompt = 128, max_cards = 4;
  bool json = false;
};

std::vector<const hw::Device*> pick_devices(const std::string& list) {
  std::vector<const hw::Device*> out;
  if (list == "all") {
    for (const auto& d : hw::devices()) out.push_back(&d);
    return out;
  }
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ','))
    if (!name.empty()) out.push_back(&hw::find_device(name));
  if (out.empty()) throw fpgallm::InputError("--devices", "no device named");
  return out;
}

void run(const ExploreArgs& a) {
  const model::Model m = model::load_or_preset(a.model);
  dse::Request req;
  req.config = m.config;
  if (req.config.name.empty()) req.config.name = a.model;
  req.precision = graph::parse_scheme(a.scheme);
  req.scenario.batch = a.batch;
  req.scenario.prompt = a.prompt;
  req.scenario.context = a.context > 0 ? a.context : m.config.seq_len;
  req.max_cards = a.max_cards;
  const dse::Objective obj = dse::objective_from_string(a.objective);
  const auto devices = pick_devices(a.devices);
  cli::Progress progress("explore", a.json);
  const dse::Exploration e = dse::explore(devices, req, obj);
  progress.finish();
  bool any = false;
  for (const auto& r : e.devices) any = any || r.fits();
  if (!any) {
    const hw::Device* largest = devices.front();
    for (const auto* d : devices)
      if (d->memory_capacity_gb() > largest->memory_capacity_gb()) largest = d;
    throw fpgallm::InputError(a.model, fmt::format("{} at {} with context {} fits none of the {} device(s); on {} it would fit "
                                                   "with {}",
                                                   req.config.name, a.scheme, req.scenario.context, devices.size(),
                                                   largest->id, dse::fit_suggestion(req, *largest)));
  }
  if (!a.svg.empty()) {
    std::vector<report::Point> pts;
    std::vector<const dse::DeviceResult*> fit;
    for (const auto& r : e.devices)
      if (r.fits()) fit.push_back(&r);
    for (const auto* r : fit) {
      const auto& p = r->best().prediction;
      bool dominated = false;
      for (const auto* o : fit) {
        const auto& q = o->best().prediction;
        if (q.decode_tokens_per_s >= p.decode_tokens_per_s && q.joules_per_token <= p.joules_per_token &&
            (q.decode_tokens_per_s > p.decode_tokens_per_s || q.joules_per_token < p.joules_per_token))
          dominated = true;
      }
      pts.push_back({fmt::format("{}{}", r->device, p.cards > 1 ? fmt::format(" x{}", p.cards) : ""),
                     p.decode_tokens_per_s, p.joules_per_token, !dominated, r->kind == hw::Kind::gpu});
    }
    // The roofline of the best FPGA design (GPUs when no FPGA card fits).
    const dse::DeviceResult* top = fit.front();
    for (const auto* r : fit)
      if (r->kind == hw::Kind::fpga) {
        top = r;
        break;
      }
    const std::string svg = report::side_by_side(
        report::scatter_svg(pts, fmt::format("{} ({}): best design per card, squares = GPUs", req.config.name, a.scheme),
                            "decode tokens/s (batch " + std::to_string(a.batch) + ")", "joules per token"),
        report::roofline_svg(top->best().prediction, fmt::format("roofline of the best FPGA design: {} on {}",
                                                                 top->best().design.name, top->device)));
    fpgallm::write_file_atomic(a.svg, svg);
  }
  if (a.json) {
    nlohmann::json j = e;
    j["model"] = req.config.name;
    j["scheme"] = graph::to_string(req.precision);
    j["objective"] = dse::to_string(obj);
    cli::print_json(j);
    return;
  }
  std::printf("%s, %s, batch %d, prompt %d, context %d, ranked by %s\n\n", req.config.name.c_str(),
              graph::to_string(req.precision).c_str(), a.batch, a.prompt, req.scenario.context, dse::to_string(obj));
  std::printf("%-13s %-4s %-5s %-26s %10s %10s %8s %10s %10s %s\n", "device", "kind", "cards", "design", "decode t/s",
              "prefill ms", "W", "J/token", "USD/Mtok", "bound");
  for (const auto& r : e.devices) {
    if (!r.fits()) {
      std::printf("%-13s %-4s  does not fit: %s\n", r.device.c_str(), hw::to_string(r.kind),
                  r.why_not.empty() ? "" : r.why_not.front().c_str());
      continue;
    }
    const auto& c = r.best();
    const auto& p = c.prediction;
    const std::string design = r.kind == hw::Kind::gpu
                                   ? "GPU (CUDA graphs)"
                                   : fmt::format("{} {}x{} @{:.0f}MHz", arch::to_string(c.design.style),
                                                 c.design.matrix_unit.rows, c.design.matrix_unit.cols, c.design.clock_mhz);
    const char* bound = p.decode.memory_s >= 0.5 * p.decode.seconds ? "memory" : (p.decode.fixed_s >= 0.5 * p.decode.seconds ? "latency" : "compute");
    std::printf("%-13s %-4s %5d %-26s %10.1f %10.2f %8.1f %10.3g %10s %s\n", r.device.c_str(), hw::to_string(r.kind),
                p.cards, design.c_str(), p.decode_tokens_per_s, 1e3 * p.prefill_s, p.watts, p.joules_per_token,
                p.usd_per_mtoken > 0 ? fmt::format("{:.3f}", p.usd_per_mtoken).c_str() : "-", bound);
  }
  std::printf("\nadvice:\n");
  for (const auto& s : e.advice) std::printf("  - %s\n", s.c_str());
  std::printf("\nFPGA figures: analytical model (docs/performance-model.md), constants in data/perf_model.json.\n");
  if (!a.svg.empty()) std::printf("wrote %s\n", a.svg.c_str());
}

void setup(CLI::App& root) {
  auto a = std::make_shared<ExploreArgs>();
  auto* cmd = root.add_subcommand("explore", "Rank FPGA cards and GPUs for a model, with advice in plain words");
  cmd->add_option("model", a->model, "Checkpoint or preset name (fpgallm presets)")->required();
  cmd->add_option("--devices", a->devices, "Comma-separated device ids, or 'all'");
  cmd->add_option("--objective", a->objective, "decode-tps | prefill-latency | tokens-per-joule | usd-per-mtoken");
  cmd->add_option("--scheme", a->scheme, "Quantization scheme: int8, int4, w4a8-g128, ... (default int8)");
  cmd->add_option("--batch", a->batch, "Sequences decoded together")->check(CLI::Range(1, 4096));
  cmd->add_option("--context", a->context, "Context the KV cache is sized for (default: the model's)")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--prompt", a->prompt, "Prompt tokens for the prefill figure")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-cards", a->max_cards, "Largest number of cards to split the model over")->check(CLI::Range(1, 64));
  cmd->add_option("--svg", a->svg, "Write the Pareto front of the cards and the top card's roofline");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { run(*a); });
}

}  // namespace

FPGALLM_COMMAND("explore", setup);
