// explore: rank devices (and, with --all-presets, every decoder preset) for a model. Under
// mpirun the (model, device) items are partitioned over the ranks (dse::partition), each
// rank explores its items, and rank 0 merges them (dse/distributed.hpp) and prints what a
// single process prints; the wall time and speed-up go to stderr and to --json "timing".
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <numeric>
#include <sstream>

#include "cli/command.hpp"
#include "util/output.hpp"
#include "dse/distributed.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "mpi/dist.hpp"
#include "report/svg.hpp"
#include "util/error.hpp"
#include "util/paths.hpp"

namespace {

struct ExploreArgs {
  std::string model, devices = "all", objective = "decode-tps", scheme = "int8", svg;
  int batch = 1, context = 0, prompt = 128, max_cards = 4;
  bool json = false, all_presets = false;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU time of this process: what an item costs whether or not its rank shares a core.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

std::vector<const hw::Device*> pick_devices(const std::string& list) {
  std::vector<const hw::Device*> out;
  if (list == "all") {
    for (const auto& d : hw::devices()) out.push_back(&d);
    return out;
  }
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ','))
    if (!name.empty()) out.push_back(&hw::find_device(name, "--devices"));
  if (out.empty()) throw fpgallm::InputError("--devices", "no device named");
  return out;
}

dse::Request make_request(const ExploreArgs& a, const model::Config& config, const std::string& name) {
  dse::Request req;
  req.config = config;
  if (req.config.name.empty()) req.config.name = name;
  req.precision = graph::parse_scheme(a.scheme);
  req.scenario.batch = a.batch;
  req.scenario.prompt = a.prompt;
  req.scenario.context = a.context > 0 ? a.context : config.seq_len;
  req.max_cards = a.max_cards;
  req.operation_lists = !a.svg.empty();  // only the roofline of --svg reads them
  return req;
}

// One model's exploration, printed as the single-model command always printed it.
void print_exploration(const ExploreArgs& a, const dse::Request& req, const dse::Exploration& e, dse::Objective obj,
                       const std::vector<const hw::Device*>& devices, bool single_model, nlohmann::json* json_out) {
  bool any = false;
  for (const auto& r : e.devices) any = any || r.fits();
  if (!any && single_model) {
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
  if (json_out) {
    nlohmann::json j = e;
    j["model"] = req.config.name;
    j["scheme"] = graph::to_string(req.precision);
    j["objective"] = dse::to_string(obj);
    *json_out = std::move(j);
    return;
  }
  std::printf("%s, %s, batch %d, prompt %d, context %d, ranked by %s\n\n", req.config.name.c_str(),
              graph::to_string(req.precision).c_str(), req.scenario.batch, req.scenario.prompt, req.scenario.context, dse::to_string(obj));
  std::printf("%-13s %-4s %-5s %-26s %10s %10s %8s %10s %10s %8s %s\n", "device", "kind", "cards", "design", "decode t/s",
              "prefill ms", "W", "J/token", "USD/Mtok", "USD", "bound");
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
    // Watts, J/token, USD/Mtok and USD are those of all the design's cards.
    const std::string unknown = "unknown";
    std::printf("%-13s %-4s %5d %-26s %10.1f %10.2f %8s %10s %10s %8s %s\n", r.device.c_str(), hw::to_string(r.kind),
                p.cards, design.c_str(), p.decode_tokens_per_s, 1e3 * p.time_to_first_token_s(),
                p.watts > 0 ? fmt::format("{:.1f}", p.watts).c_str() : unknown.c_str(),
                p.joules_per_token > 0 ? fmt::format("{:.3g}", p.joules_per_token).c_str() : unknown.c_str(),
                p.usd_per_mtoken > 0 ? fmt::format("{:.3f}", p.usd_per_mtoken).c_str() : unknown.c_str(),
                c.price_usd > 0 ? fmt::format("{:.0f}", c.price_usd).c_str() : unknown.c_str(), bound);
  }
  std::printf("\nadvice:\n");
  for (const auto& s : e.advice) std::printf("  - %s\n", s.c_str());
  std::printf("\nW, J/token, USD/Mtok and USD (purchase price) count every card of a design. FPGA figures: analytical "
              "model (docs/performance-model.md), constants in data/perf_model.json; FPGA prefill: the "
              "emitted top's prompt call (prefill blocks on the tiled matrix unit), where fpgallm's kernels run the "
              "design.\n");
  if (!a.svg.empty()) std::printf("wrote %s\n", a.svg.c_str());
}


void run(const ExploreArgs& a) {
  if (!a.svg.empty()) fpgallm::check_output(a.svg, fpgallm::OutputKind::file, {a.model});
  const auto t0 = std::chrono::steady_clock::now();
  if (a.all_presets == !a.model.empty())
    throw fpgallm::InputError("explore", a.all_presets ? "name a MODEL or --all-presets, not both"
                                                       : "name a MODEL, or --all-presets for every decoder preset");
  // The sweep: models x devices, model-major.
  std::vector<dse::Request> requests;
  if (a.all_presets) {
    for (const auto& p : model::presets())
      if (p.config.causal()) requests.push_back(make_request(a, p.config, p.config.name));
  } else {
    requests.push_back(make_request(a, model::load_or_preset(a.model).config, a.model));
  }
  if (requests.size() > 1 && !a.svg.empty()) throw fpgallm::InputError("--svg", "draws one model: drop --all-presets");
  const dse::Objective obj = dse::objective_from_string(a.objective);
  const auto devices = pick_devices(a.devices);
  std::vector<perf::Workloads> workloads;
  for (const auto& r : requests) workloads.push_back(perf::lower(r.config, r.precision, r.scenario));

  // This rank's share.
  const int rank = dist::rank(), ranks = dist::size();
  const int count = int(requests.size() * devices.size());
  std::vector<double> costs;
  for (std::size_t m = 0; m < requests.size(); ++m)
    for (const auto* d : devices) costs.push_back(dse::item_cost(requests[m], workloads[m], *d));
  const std::vector<int> mine_idx = dse::items_of(dse::partition(costs, ranks), rank);
  cli::Progress progress(ranks > 1 ? fmt::format("explore (rank {} of {})", rank, ranks) : "explore", a.json || rank != 0);
  std::vector<dse::Item> mine;
  for (std::size_t n = 0; n < mine_idx.size(); ++n) {
    const int i = mine_idx[n];
    const std::size_t m = i / devices.size(), d = i % devices.size();
    const double ti = cpu_seconds();
    dse::Item it{i, dse::explore_device(*devices[d], requests[m], obj, workloads[m]), 0.0};
    it.seconds = cpu_seconds() - ti;
    // Explore shows each card's best design, and its Pareto front only in --json.
    if (it.result.ranked.size() > 1) it.result.ranked.resize(1);
    if (!a.json) it.result.pareto.clear();
    mine.push_back(std::move(it));
    if (requests.size() > 1) progress.update(n + 1, mine_idx.size());
  }
  progress.finish();
  // Every rank's items reach rank 0 (one process: its own, through the same encoding).
  const std::vector<std::string> parts_bytes = dist::allgather(dse::serialize(mine, !a.svg.empty()));
  if (rank != 0) return;
  std::vector<std::vector<dse::Item>> parts;
  std::vector<double> rank_busy;
  for (const auto& b : parts_bytes) {
    parts.push_back(dse::deserialize(b));
    double s = 0;
    for (const auto& it : parts.back()) s += it.seconds;
    rank_busy.push_back(s);
  }
  const std::vector<dse::Item> items = dse::merge(parts, count);
  std::vector<dse::Exploration> explorations;
  for (std::size_t m = 0; m < requests.size(); ++m) {
    std::vector<dse::DeviceResult> results;
    for (std::size_t d = 0; d < devices.size(); ++d) results.push_back(items[m * devices.size() + d].result);
    explorations.push_back(dse::combine(std::move(results), requests[m], obj));
  }
  // Speed-up: the CPU time of the items summed over the ranks (what one process would
  // spend exploring) over this run's wall time, which includes start-up and the exchange.
  const double wall = seconds_since(t0);
  const double summed = std::accumulate(rank_busy.begin(), rank_busy.end(), 0.0);
  const double slowest = *std::max_element(rank_busy.begin(), rank_busy.end());
  const nlohmann::json timing = {{"ranks", ranks},
                                 {"items", count},
                                 {"wall_s", wall},
                                 {"rank_explore_cpu_s", rank_busy},
                                 {"summed_explore_cpu_s", summed},
                                 {"speedup", wall > 0 ? summed / wall : 0},
                                 {"balance", slowest > 0 ? summed / ranks / slowest : 1}};

  const bool single = requests.size() == 1;
  if (a.json) {
    nlohmann::json out;
    if (single) {
      print_exploration(a, requests[0], explorations[0], obj, devices, true, &out);
    } else {
      out["models"] = nlohmann::json::array();
      for (std::size_t m = 0; m < requests.size(); ++m) {
        nlohmann::json j;
        print_exploration(a, requests[m], explorations[m], obj, devices, false, &j);
        out["models"].push_back(std::move(j));
      }
    }
    out["timing"] = timing;
    cli::print_json(out);
  } else {
    for (std::size_t m = 0; m < requests.size(); ++m) {
      if (m > 0) std::printf("\n");
      print_exploration(a, requests[m], explorations[m], obj, devices, single, nullptr);
    }
  }
  std::fflush(stdout);
  if (ranks > 1)
    std::fprintf(stderr,
                 "explore: %d item(s) on %d rank(s): wall %.2f s; exploring took %.2f CPU-s summed over ranks (busiest "
                 "rank %.2f); speed-up %.2f (summed CPU time / wall)\n",
                 count, ranks, wall, summed, slowest, wall > 0 ? summed / wall : 0.0);
}

void setup(CLI::App& root) {
  auto a = std::make_shared<ExploreArgs>();
  auto* cmd = root.add_subcommand("explore", "Rank FPGA cards and GPUs for a model, with advice in plain words");
  cmd->add_option("model", a->model, "Checkpoint or preset name (fpgallm presets)");
  cmd->add_flag("--all-presets", a->all_presets,
                "Explore every decoder preset (fpgallm presets) instead of one MODEL; under mpirun the (model, device) "
                "pairs are shared out over the ranks");
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
