#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "arch/units.hpp"
#include "cli/command.hpp"
#include "util/output.hpp"
#include "dse/dse.hpp"
#include "hw/placement.hpp"
#include "hw/resources.hpp"

#include "model/model.hpp"
#include "quant/quant.hpp"
#include "perf/train_step.hpp"
#include "perf/two_paths.hpp"
#include "report/svg.hpp"
#include "util/error.hpp"
#include "util/json_file.hpp"
#include "util/paths.hpp"

namespace {

struct PlanArgs {
  std::string model, device, objective = "decode-tps", scheme = "int8", quant, output, svg;
  std::string phase = "inference";
  int batch = 1, context = 0, prompt = 128, max_cards = 4, seq = 128;
  bool json = false;
};

// The precision of a quantization plan (quant::Plan JSON, or an object with a "plan" key):
// per-layer weight bits, the activation and KV widths.
graph::Precision precision_of_plan(const std::string& path, const model::Config& c) {
  const nlohmann::json j = fpgallm::read_json_file(path, "the quantization plan");
  quant::Plan plan;
  try {
    plan = quant::plan_from_json(j.contains("plan") ? j["plan"] : j, c);
  } catch (const std::exception& e) {
    throw fpgallm::InputError(path, e.what());
  }
  try {
    return dse::precision_of(plan);
  } catch (const std::invalid_argument& e) {
    throw fpgallm::InputError(path, e.what());
  }
}

// --phase train: one training step on the card beside an A100, with the bound no step can
// beat (the card's peak arithmetic at the training precision) stated beside it.
void run_train(const PlanArgs& a, const model::Model& m, const hw::Device& dev) {
  model::Config c = m.config;
  if (c.name.empty()) c.name = a.model;
  const perf::TrainStepPrediction card = dev.kind == hw::Kind::gpu
                                             ? perf::predict_train_step_gpu(c, dev, a.batch, a.seq)
                                             : perf::predict_train_step_fpga(c, dev, a.batch, a.seq);
  const perf::TrainStepPrediction gpu = perf::predict_train_step_gpu(c, hw::find_device("a100-80gb"), a.batch, a.seq);
  if (a.json) {
    cli::print_json({{"phase", "train"}, {"card", card}, {"baseline", gpu}});
    return;
  }
  std::fputs(perf::train_step_report(card, gpu).c_str(), stdout);
}

void run(const PlanArgs& a) {
  // Both outputs are checked before the work, so that one cannot fail after the other is written.
  if (!a.output.empty()) fpgallm::check_output(a.output, fpgallm::OutputKind::file, {a.model, a.quant});
  if (!a.svg.empty()) fpgallm::check_output(a.svg, fpgallm::OutputKind::file, {a.model, a.quant});
  if (!a.output.empty() && a.output == a.svg) throw fpgallm::InputError("--svg", "names the same file as -o");
  const model::Model m = model::load_or_preset(a.model);
  const hw::Device& dev = hw::find_device(a.device);
  if (a.phase == "train") return run_train(a, m, dev);
  dse::Request req;
  req.config = m.config;
  if (req.config.name.empty()) req.config.name = a.model;
  req.precision = a.quant.empty() ? graph::parse_scheme(a.scheme) : precision_of_plan(a.quant, m.config);
  req.scenario.batch = a.batch;
  req.scenario.prompt = a.prompt;
  req.scenario.context = a.context > 0 ? a.context : m.config.seq_len;
  req.max_cards = a.max_cards;
  const dse::Objective obj = dse::objective_from_string(a.objective);
  const perf::Workloads w = perf::lower(req.config, req.precision, req.scenario);
  const dse::DeviceResult r = dse::explore_device(dev, req, obj, w);
  if (!r.fits()) {
    std::string why = r.why_not.empty() ? "no design fits" : r.why_not.front();
    throw fpgallm::InputError(a.device, fmt::format("{} at {} with context {} fits no design on {} cards or fewer ({}); "
                                                    "would fit with {}",
                                                    req.config.name, graph::to_string(req.precision), req.scenario.context, a.max_cards, why,
                                                    dse::fit_suggestion(req, dev)));
  }
  const dse::Candidate& best = r.best();
  // The batch trade-off of the chosen design: each step takes longer, tokens/s grows.
  nlohmann::json batches = nlohmann::json::array();
  for (int b : {1, 2, 4, 8, 16, 32, 64}) {
    dse::Request rb = req;
    rb.scenario.batch = b;
    arch::Design db = best.design;
    db.batch = b;
    const perf::Prediction pb = perf::predict(db, dev, perf::lower(rb.config, rb.precision, rb.scenario));
    if (!pb.fits_memory) break;
    batches.push_back({{"batch", b}, {"decode_step_ms", 1e3 * pb.decode_step_s}, {"decode_tokens_per_s", pb.decode_tokens_per_s},
                       {"joules_per_token", perf::known_or_null(pb.joules_per_token)}, {"placement", pb.placement}});
  }
  nlohmann::json out = best.design;
  out["model"] = req.config.name;
  out["quant"] = graph::to_string(req.precision);
  out["predicted"] = perf::summary_json(best.prediction);
  out["predicted"].erase("assumptions");
  out["assumptions"] = best.prediction.assumptions;
  out["objective"] = dse::to_string(obj);
  const dse::MoeAnalysis moe = dse::analyze_moe(req, dev, w, best.design.parallel.cards);
  if (!a.output.empty()) {
    out.erase("objective");  // design.json holds the design, its figures and assumptions only
    fpgallm::write_file_atomic(a.output, out.dump(2) + "\n");
    out["objective"] = dse::to_string(obj);
  }
  if (!a.svg.empty()) {
    std::vector<report::Point> pts;
    for (const auto& c : r.ranked)
      pts.push_back({c.design.name, c.prediction.decode_tokens_per_s, c.prediction.joules_per_token, false, false});
    for (const auto& c : r.pareto)
      pts.push_back({fmt::format("{} {}", arch::to_string(c.design.style), c.design.name),
                     c.prediction.decode_tokens_per_s, c.prediction.joules_per_token, true, false});
    const std::string svg = report::side_by_side(
        report::roofline_svg(best.prediction, fmt::format("{} on {}: roofline ({})", req.config.name, dev.id, best.design.name)),
        report::scatter_svg(pts, fmt::format("designs explored on {} ({} fit)", dev.id, r.ranked.size()),
                            "decode tokens/s", "joules per token"));
    fpgallm::write_file_atomic(a.svg, svg);
  }
  // Resources by part, each marked checked against a synthesis mapping or model-only.
  const hw::Utilization use = hw::estimate_resources(best.design, dev, {&req.config});
  const std::vector<std::string> slr_lines = hw::placement_lines(hw::place_units(use.parts, dev, best.design));
  const auto banks = perf::bank_map(best.design, dev, req.config);
  const std::vector<std::string> bank_lines =
      banks ? hw::map_lines(*banks, dev, best.design, perf::constants().memory_efficiency.value) : std::vector<std::string>{};
  const perf::TwoPaths two_paths = perf::compare_paths(best.design, dev, w);
  if (a.json) {
    out["two_paths"] = two_paths;
    out["resources"] = use;
    out["slr_placement"] = slr_lines;
    out["banks"] = bank_lines;
    out["batch_tradeoff"] = batches;
    out["method"] = r.method;
    out["evaluated"] = r.evaluated;
    out["rejected_resources"] = r.rejected_resources;
    out["rejected_memory"] = r.rejected_memory;
    if (moe.moe) out["moe"] = moe;
    cli::print_json(out);
    return;
  }
  const auto& p = best.prediction;
  const auto& d = best.design;
  std::printf("plan for %s on %s (%s), objective %s\n", req.config.name.c_str(), dev.name.c_str(), dev.id.c_str(),
              dse::to_string(obj));
  for (const auto& s : r.method) std::printf("  %s\n", s.c_str());
  std::printf("\ndesign %s: %s, %d x %d MACs (%d-bit weights) at %.0f MHz, tiles %d x %d, %d card(s), %s\n",
              d.name.c_str(), arch::to_string(d.style), d.matrix_unit.rows, d.matrix_unit.cols, d.matrix_unit.weight_bits,
              d.clock_mhz, d.tiling.tile_rows, d.tiling.tile_cols, d.parallel.cards, best.binding.c_str());
  std::printf("memory: %s\n", p.placement.c_str());
  std::printf("resources by part:\n");
  for (const auto& part : use.parts)
    std::printf("  %-24s %9.0f LUT %9.0f FF %6.0f DSP %6.0f BRAM36 %5.0f URAM  %s\n", part.name.c_str(), part.use.lut,
                part.use.ff, part.use.dsp, part.use.bram36, part.use.uram,
                part.checked.empty() ? "model only" : ("checked: " + part.checked).c_str());
  if (arch::block_tokens(d) > 1)
    std::printf("  (with the prompt call's blocks of %d tokens: its tiled matrix unit and the activation arrays' rows, in "
                "%s)\n",
                arch::block_tokens(d), d.buffers.activations_in_uram ? "UltraRAM" : "block RAM");
  else
    std::printf("  (the prompt call runs one token per block: no larger block fits beside the decode datapath)\n");
  if (!slr_lines.empty()) std::printf("placement on the SLRs (connectivity.cfg of fpgallm emit):\n");
  for (const auto& l : slr_lines) std::printf("  %s\n", l.c_str());
  if (!bank_lines.empty()) std::printf("buffers in banks (connectivity.cfg of fpgallm emit):\n");
  for (const auto& l : bank_lines) std::printf("  %s\n", l.c_str());
  std::printf("batch %d, prompt %d, context %d\n", p.scenario.batch, p.scenario.prompt, p.scenario.context);
  std::printf("  prefill          %10.2f ms   (%.0f tokens/s)%s%s\n", 1e3 * p.prefill_s, p.prefill_tokens_per_s,
              p.prefill_path.empty() ? "" : ", ", p.prefill_path.c_str());
  std::printf("  decode step      %10.3f ms   (%.1f tokens/s)\n", 1e3 * p.decode_step_s, p.decode_tokens_per_s);
  std::printf("  power            %10.1f W    %.3g J/token\n", p.watts, p.joules_per_token);
  if (p.usd_per_mtoken > 0) std::printf("  cost             %10.3f USD per million tokens\n", p.usd_per_mtoken);
  std::printf("  decode time: compute %.3f ms, memory %.3f ms, fixed latencies %.3f ms, host %.3f ms\n",
              1e3 * p.decode.compute_s, 1e3 * p.decode.memory_s, 1e3 * p.decode.fixed_s, 1e3 * p.decode.host_s);
  std::fputs(perf::two_paths_text(two_paths).c_str(), stdout);
  if (!p.link_bytes_per_token.empty()) {
    std::printf("  card-to-card: %.3f ms of the decode step; bytes sent per token by card", 1e3 * p.decode.link_s);
    for (std::size_t k = 0; k < p.link_bytes_per_token.size(); ++k)
      std::printf("%s %zu: %.0f", k ? "," : "", k, p.link_bytes_per_token[k]);
    std::printf("\n");
  }
  std::printf("\nbatch trade-off of this design (same context):\n  %6s %14s %14s %12s  %s\n", "batch", "step ms",
              "tokens/s", "J/token", "memory");
  for (const auto& b : batches)
    std::printf("  %6d %14.3f %14.1f %12s  %s\n", b["batch"].get<int>(), b["decode_step_ms"].get<double>(),
                b["decode_tokens_per_s"].get<double>(),
                b["joules_per_token"].is_number() ? fmt::format("{:.3g}", b["joules_per_token"].get<double>()).c_str() : "unknown",
                b["placement"].get<std::string>().c_str());
  if (moe.moe) {
    std::printf("\n");
    for (const auto& n : moe.notes) std::printf("%s\n", n.c_str());
  }
  std::printf("\nassumptions:\n");
  for (const auto& as : p.assumptions) std::printf("  %-24s %-10.4g %-10s %s\n", as.name.c_str(), as.value, as.unit.c_str(), as.source.c_str());
  std::printf("\n%d designs evaluated, %d over a resource ceiling, %d without memory for weights + KV cache\n", r.evaluated,
              r.rejected_resources, r.rejected_memory);
  if (!a.output.empty()) std::printf("wrote %s\n", a.output.c_str());
  if (!a.svg.empty()) std::printf("wrote %s\n", a.svg.c_str());
}

void setup(CLI::App& root) {
  auto a = std::make_shared<PlanArgs>();
  auto* cmd = root.add_subcommand("plan", "Choose the best accelerator design for a model on one card and predict it");
  cmd->add_option("model", a->model, "Checkpoint or preset name (fpgallm presets)")->required();
  cmd->add_option("--device", a->device, "Device id (fpgallm devices)")->required();
  cmd->add_option("--objective", a->objective, "decode-tps | prefill-latency | tokens-per-joule | usd-per-mtoken");
  cmd->add_option("--scheme", a->scheme, "Quantization scheme: int8, int4, w4a8-g128, ... (default int8)");
  cmd->add_option("--quant", a->quant, "Quantization plan (JSON written by fpgallm quantize) instead of --scheme")
      ->excludes(cmd->get_option("--scheme"));
  cmd->add_option("--phase", a->phase, "inference (prefill + decode) or train (one training step)")
      ->check(CLI::IsMember({"inference", "train"}));
  cmd->add_option("--seq", a->seq, "--phase train: tokens per sequence")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--batch", a->batch, "Sequences decoded together (train: sequences per step)")->check(CLI::Range(1, 4096));
  cmd->add_option("--context", a->context, "Context the KV cache is sized for (default: the model's)")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--prompt", a->prompt, "Prompt tokens for the prefill figure")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-cards", a->max_cards, "Largest number of cards to split the model over")->check(CLI::Range(1, 64));
  cmd->add_option("-o,--output", a->output, "Write the design (with predicted figures and assumptions) to this design.json");
  cmd->add_option("--svg", a->svg, "Write the roofline and the Pareto front of the explored designs");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { run(*a); });
}

}  // namespace

FPGALLM_COMMAND("plan", setup);
