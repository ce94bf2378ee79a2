#include "deploy/deploy.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <optional>
#include <ostream>

#include "arch/program.hpp"
#include "calib/calib.hpp"
#include "dse/dse.hpp"
#include "engine/accel.hpp"
#include "engine/generate.hpp"
#include "engine/perplexity.hpp"
#include "hw/device.hpp"
#include "hw/resources.hpp"
#include "model/model.hpp"
#include "perf/perf.hpp"
#include "quant/quant.hpp"
#include "report/svg.hpp"
#include "sim/simulate.hpp"
#include "train/trainer.hpp"
#include "util/error.hpp"
#include "util/output.hpp"
#include "util/paths.hpp"
#ifdef FPGALLM_HAVE_CODEGEN
#include "codegen/codegen.hpp"
#endif

namespace deploy {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string>& step_names() {
  static const std::vector<std::string> names = {"load", "quantize", "plan", "simulate", "emit", "verify", "report"};
  return names;
}

const std::vector<SchemeChoice>& accel_schemes() {
  using quant::Method;
  using quant::Scheme;
  // The schemes the accelerator's matrix unit implements (the C simulation backend and the
  // emitted top: int4 weights on the tiled unit, int8 on the streaming one), fewest weight
  // bytes first.
  static const std::vector<SchemeChoice> schemes = {
      {Scheme::w4a8, 32, {Method::rtn, Method::awq, Method::gptq}, true}, {Scheme::w8a8, 32}, {Scheme::w8a8_smooth, 32}};
  return schemes;
}

const std::vector<SkippedScheme>& skipped_schemes() {
  // A scheme the budget admits but the accelerator cannot run is not tried, so that no budget
  // fails in emit or in the C simulation.
  static const std::vector<SkippedScheme> skipped = {
      {"w4a16", "the matrix unit multiplies int8 activations; fp16 activations run neither in the C simulation "
                "backend nor in the emitted top"},
  };
  return skipped;
}

namespace {

bool qat_trains(quant::Scheme s) {
  return s == quant::Scheme::w8a8 || s == quant::Scheme::w4a8 || s == quant::Scheme::w4a16;
}

// Quantization-aware training of `scheme` on the calibration half (train::qat_options), the
// trained weights rounded as quantize rounds them, scored on the held-out half.
calib::QuantizeResult quantize_aware(const model::Model& m, const model::Tokenizer& tok, const std::string& text,
                                     const std::string& source, quant::Scheme scheme, int group, int steps,
                                     const engine::Perplexity& fp32_held_out, const calib::ProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  calib::QuantizeResult r;
  r.split = calib::split_text(tok, text, source);
  const quant::Plan plan = quant::uniform_plan(m.config, scheme, group);
  train::TrainOptions o = train::qat_options(plan, steps);
  o.seq = std::min(o.seq, m.config.seq_len - 1);
  o.eval_every = steps;
  o.heldout_tokens = 1024;  // the curve's own held-out loss: the scoring below is the measurement
  model::Model tuned = m;
  const train::TrainResult trained =
      train::fine_tune(tuned, train::split_text(tok, text, o.seq, source), o, {}, [&](int step, int n) {
        if (progress) progress("quantization-aware training", static_cast<std::size_t>(step), static_cast<std::size_t>(n));
      });
  r.qm = trained.scales ? train::export_quantized(tuned, plan, *trained.scales) : quant::quantize_model(tuned, plan);
  r.qm.calibration_file = source;
  r.qm.calibration_fnv1a = quant::fnv1a64(text);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.qat_steps = steps;
  r.fp32_held_out = fp32_held_out;
  r.fp32_perplexity = fp32_held_out.perplexity;
  r.fp32_perplexity_err = fp32_held_out.perplexity_err;
  r.fp32_bytes = quant::linear_weight_bytes(m.config, quant::uniform_plan(m.config, quant::Scheme::fp32, group));
  const engine::Perplexity p = calib::evaluate(r.qm, r.split.held_out, progress);
  r.perplexity = p.perplexity;
  r.perplexity_err = p.perplexity_err;
  r.rel_increase = p.perplexity / fp32_held_out.perplexity - 1;
  return r;
}

}  // namespace

Quantized choose_quantization(const model::Model& m, const model::Tokenizer& tok, const std::string& text,
                              const std::string& source, double budget, const std::vector<SchemeChoice>& schemes,
                              const calib::ProgressFn& progress, std::ostream* log, int qat_steps) {
  Quantized out;
  std::optional<calib::QuantizeResult> chosen, best_loss;
  std::optional<engine::Perplexity> fp32_held_out;  // measured by the first, reused
  // Records one tried quantization; true when it meets the budget (and is then chosen).
  const auto consider = [&](calib::QuantizeResult r, const std::string& name, int group) {
    if (!fp32_held_out) fp32_held_out = r.fp32_held_out;
    const bool meets = r.rel_increase <= budget;
    out.seconds.push_back(r.seconds);
    if (log)
      *log << fmt::format("  {}: held-out perplexity {:.4f} (fp32 {:.4f}, {:+.3f}%), {} weight bytes, {:.2f} s\n", name,
                          r.perplexity, r.fp32_perplexity, 100 * r.rel_increase, r.qm.linear_weight_bytes(), r.seconds);
    out.rows.push_back({{"scheme", quant::to_string(r.qm.plan.scheme)},
                        {"group", group},
                        {"method", calib::method_name(r)},
                        {"search_scales", r.search_scales},
                        {"perplexity", r.perplexity},
                        {"perplexity_err", r.perplexity_err},
                        {"rel_increase", r.rel_increase},
                        {"weight_bytes", r.qm.linear_weight_bytes()},
                        {"calibration_passes", r.calibration_passes},
                        {"qat_steps", r.qat_steps},
                        {"meets_budget", meets},
                        {"deployed", false}});
    if (meets) {
      chosen = std::move(r);
      out.rows.back()["deployed"] = true;
      return true;
    }
    if (!best_loss || r.rel_increase < best_loss->rel_increase) best_loss = std::move(r);
    return false;
  };
  for (const auto& s : schemes) {
    const bool int4 = s.scheme == quant::Scheme::w4a8 || s.scheme == quant::Scheme::w4a16;
    const int group = int4 ? s.group : 0;
    for (quant::Method method : s.methods) {
      calib::QuantizeOptions qo;
      qo.scheme = s.scheme;
      qo.group = s.group;
      qo.method = method;
      qo.search_scales = s.search_scales && method != quant::Method::rtn;
      qo.budget = budget;
      qo.fp32_held_out = fp32_held_out;
      const std::string name = std::string(quant::to_string(s.scheme)) +
                               (int4 ? std::string(" ") + quant::to_string(method) : "") +
                               (qo.search_scales ? " (searched scales)" : "");
      calib::QuantizeResult r = calib::quantize(m, tok, text, source, qo, [&](const std::string& label, std::size_t d, std::size_t n) {
        if (progress) progress(name + ": " + label, d, n);
      });
      // Later methods cost more time, later schemes more bytes.
      if (consider(std::move(r), name, group)) break;
    }
    if (chosen) break;
    if (qat_steps > 0 && qat_trains(s.scheme) && fp32_held_out) {
      const std::string name = std::string(quant::to_string(s.scheme)) + " qat";
      if (consider(quantize_aware(m, tok, text, source, s.scheme, s.group, qat_steps, *fp32_held_out,
                                  [&](const std::string& label, std::size_t d, std::size_t n) {
                                    if (progress) progress(name + ": " + label, d, n);
                                  }),
                   name, group))
        break;
    }
  }
  out.budget_met = chosen.has_value();
  if (!chosen) {
    for (auto& row : out.rows)
      row["deployed"] = row["scheme"] == quant::to_string(best_loss->qm.plan.scheme) &&
                        row["method"] == calib::method_name(*best_loss);
  }
  out.chosen = chosen ? std::move(*chosen) : std::move(*best_loss);
  return out;
}

namespace {

arch::PrecisionFn precision_fn(const quant::Plan& plan) {
  return [plan](int layer, model::Linear which) {
    const auto& l = plan.at(layer, which);
    return arch::LinearPrecision{dse::weight_bits(l.weight), l.weight == quant::WeightFormat::int4 ? plan.group : 0,
                                 l.act == quant::ActFormat::int8_static};
  };
}

json skipped_json() {
  json j = json::array();
  for (const auto& s : skipped_schemes()) j.push_back({{"scheme", s.scheme}, {"reason", s.reason}});
  return j;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

json sim_summary(const sim::Report& r) {
  json units = json::array();
  for (const auto& u : r.units) {
    json states;
    for (int s = 0; s < sim::kStates; ++s) states[sim::to_string(static_cast<sim::State>(s))] = u.state[s];
    units.push_back({{"name", u.name}, {"kind", u.kind}, {"card", u.card}, {"utilization", u.utilization}, {"cycles", states}});
  }
  json layers = json::array();
  for (const auto& l : r.layers) layers.push_back({{"layer", l.layer}, {"cycles", l.cycles}});
  return {{"stage", arch::to_string(r.stage)}, {"tokens", r.tokens},     {"context", r.context},
          {"cycles", r.cycles},                {"seconds", r.seconds},   {"tokens_per_s", r.tokens_per_s},
          {"clock_mhz", r.clock_mhz},          {"units", units},         {"layers", layers},
          {"instructions", r.ops.size()},      {"notes", r.notes}};
}

// Writes the deployment into `dir` (a fresh temporary folder) and returns its summary.
json build(const Options& o, const std::string& dir, std::vector<StepTime>& steps,
           const std::function<void(int, int, const std::string&)>& on_step,
           const std::function<void(const std::string&, std::size_t, std::size_t)>& on_progress,
           std::ofstream& log) {
  const int n_steps = static_cast<int>(step_names().size());
  int step = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto begin = [&](const std::string& name) {
    if (step > 0) {
      steps.back().seconds = seconds_since(t0);
      log << fmt::format("step {} done in {:.2f} s\n", steps.back().name, steps.back().seconds);
    }
    ++step;
    steps.push_back({name, 0});
    t0 = std::chrono::steady_clock::now();
    log << fmt::format("step {}/{} {}\n", step, n_steps, name);
    if (on_step) on_step(step, n_steps, name);
  };
  calib::ProgressFn progress = [&](const std::string& label, std::size_t done, std::size_t total) {
    if (on_progress) on_progress(label, done, total);
  };

  // 1. load
  begin("load");
  const model::Model m = model::load(o.model);
  model::require_finite(m, o.model, model::kCannotQuantizeNonFinite);
  const model::Tokenizer tok = model::tokenizer_for(m, o.tokenizer);
  const hw::Device& dev = hw::find_device(o.device);
  if (dev.kind != hw::Kind::fpga) throw fpgallm::InputError(o.device, "is a GPU; deploy targets an FPGA card");
  const std::string text = engine::read_text_file(o.text);
  const auto& c = m.config;
  const int context = o.context > 0 ? std::min(o.context, c.seq_len) : c.seq_len;
  log << fmt::format("model {} ({} parameters), device {}, text {}\n", o.model, c.n_params(), dev.id, o.text);

  // 2. quantize: the smallest accelerator scheme that meets the budget.
  begin("quantize");
  Quantized quantized = choose_quantization(m, tok, text, o.text, o.budget, accel_schemes(), progress, &log, o.qat_steps);
  const bool budget_met = quantized.budget_met;
  calib::QuantizeResult& q = quantized.chosen;
  quant::save_gguf(q.qm, dir + "/model.q.gguf", &tok);  // with the vocabulary, so llama.cpp runs it too
  fpgallm::write_file_atomic(dir + "/plan.json", json(q.qm.plan).dump(2) + "\n");

  // 3. plan: the best design the accelerator backend can also run in C simulation.
  begin("plan");
  dse::Request req;
  req.config = c;
  req.precision = dse::precision_of(q.qm.plan);
  req.scenario.batch = 1;
  req.scenario.prompt = std::min(128, c.seq_len);
  req.scenario.context = context;
  req.max_cards = 1;
  const perf::Workloads workloads = perf::lower(c, req.precision, req.scenario);
  const dse::DeviceResult explored = dse::explore_device(dev, req, dse::Objective::decode_tps, workloads);
  if (!explored.fits())
    throw fpgallm::InputError(o.device, fmt::format("{} at {} fits no design on {} ({}); would fit with {}", c.name,
                                                    graph::to_string(req.precision), dev.id,
                                                    explored.why_not.empty() ? "no design" : explored.why_not.front(),
                                                    dse::fit_suggestion(req, dev)));
  const dse::Candidate* pick = nullptr;
  int skipped = 0;
  for (const auto& cand : explored.ranked) {
    if (engine::accel_problems(q.qm, cand.design).empty()) {
      pick = &cand;
      break;
    }
    ++skipped;
  }
  if (!pick)
    throw fpgallm::InputError(o.device, "no fitting design is among the kernel instances the C simulation has: " +
                                            engine::accel_problems(q.qm, explored.best().design).front());
  arch::Design design = pick->design;
  design.context = std::min(design.context, c.seq_len);
  json design_json = design;
  design_json["model"] = c.name;
  design_json["quant"] = graph::to_string(req.precision);
  design_json["predicted"] = perf::summary_json(pick->prediction);
  design_json["predicted"].erase("assumptions");
  design_json["assumptions"] = pick->prediction.assumptions;
  fpgallm::write_file_atomic(dir + "/design.json", design_json.dump(2) + "\n");
  const hw::Utilization use = hw::estimate_resources(design, dev, {&c});

  // 4. simulate decode at the design's context and a prefill of the scenario's prompt.
  begin("simulate");
  sim::Options so;
  so.stage = arch::Stage::decode;
  so.context = context;
  so.precision = precision_fn(q.qm.plan);
  json trace;
  const sim::Report sim_decode = sim::simulate(c, design, dev, so, sim::TraceOptions{true, false}, trace);
  fpgallm::write_file_atomic(dir + "/trace_decode.json", trace.dump() + "\n");
  // The same step with the analytical model's idealizations, to attribute the difference
  // between prediction and simulation (docs/performance-model.md).
  sim::Options si = so;
  si.idealized = true;
  const sim::Report sim_ideal = sim::simulate(c, design, dev, si);
  sim::Options sp = so;
  sp.stage = arch::Stage::prefill;
  sp.prompt = req.scenario.prompt;
  const sim::Report sim_prefill = sim::simulate(c, design, dev, sp);
  fpgallm::write_file_atomic(dir + "/simulate.json",
                             json{{"decode", sim_decode}, {"prefill", sim_prefill}}.dump(2) + "\n");

  // 5. emit the Vitis HLS project.
  begin("emit");
  json emitted = {{"dir", "hls"}};
#ifdef FPGALLM_HAVE_CODEGEN
  codegen::emit(m, q.qm, design, dir + "/hls");
#else
  emitted = {{"dir", nullptr}, {"note", "this build has no code generator (src/codegen)"}};
#endif

  // 6. verify through the accelerator backend: held-out perplexity and a greedy sample.
  begin("verify");
  engine::AccelTransformer accel(m, q.qm, design);
  const engine::Perplexity ppl_accel = engine::perplexity(accel, q.split.held_out, [&](std::size_t d, std::size_t n) {
    progress("verify: held-out tokens", d, n);
  });
  engine::Sampler greedy(c.vocab_size, 0.0f, 0.9f, 1);
  const engine::Generation sample = engine::generate(accel, tok, greedy, "", std::min(o.sample_steps, c.seq_len));
  engine::Transformer ref(m);
  engine::Sampler greedy_ref(c.vocab_size, 0.0f, 0.9f, 1);
  const engine::Generation sample_ref = engine::generate(ref, tok, greedy_ref, "", std::min(o.sample_steps, c.seq_len));
  std::size_t same = 0, common_prefix = 0;
  const std::size_t n_cmp = std::min(sample.tokens.size(), sample_ref.tokens.size());
  for (std::size_t i = 1; i < n_cmp; ++i) same += sample.tokens[i] == sample_ref.tokens[i];
  while (common_prefix + 1 < n_cmp && sample.tokens[common_prefix + 1] == sample_ref.tokens[common_prefix + 1])
    ++common_prefix;
  const double accel_vs_sim = (ppl_accel.perplexity - q.perplexity) / q.perplexity;

  // 7. report.
  begin("report");
  std::vector<const hw::Device*> gpus;
  json gpu_rows = json::array();
  for (const auto& d : hw::devices()) {
    if (d.kind != hw::Kind::gpu) continue;
    const perf::Prediction g = perf::predict_gpu(d, workloads);
    if (!g.fits_memory) continue;
    gpu_rows.push_back({{"device", d.id},
                        {"name", d.name},
                        {"decode_tokens_per_s", g.decode_tokens_per_s},
                        {"prefill_s", g.prefill_s},
                        {"watts", perf::known_or_null(g.watts)},
                        {"joules_per_token", perf::known_or_null(g.joules_per_token)},
                        {"usd_per_mtoken", g.usd_per_mtoken}});
  }
  json util_rows = json::array();
  for (const auto& l : use.lines)
    util_rows.push_back({{"resource", hw::to_string(l.resource)}, {"used", l.used}, {"available", l.available},
                         {"ceiling", l.ceiling}, {"fits", l.fits()}});
  // Every part (unit) with its counts, its terms, and whether a synthesis mapping checked it.
  const json parts_checked = json(use)["parts"];
  const perf::Prediction& pred = pick->prediction;
  json summary = {
      {"model", {{"file", fs::path(o.model).filename().string()}, {"config", c}}},
      {"device", {{"id", dev.id}, {"name", dev.name}}},
      {"text", {{"file", fs::path(o.text).filename().string()},
                {"calibration_stories", q.split.calibration_stories},
                {"held_out_stories", q.split.held_out_stories},
                {"held_out_tokens", q.split.held_out_tokens}}},
      {"quantization", {{"budget", o.budget},
                        {"budget_met", budget_met},
                        {"chosen", quant::to_string(q.qm.plan.scheme)},
                        {"chosen_method", quant::to_string(q.method)},
                        {"fp32_perplexity", q.fp32_perplexity},
                        {"fp32_weight_bytes", q.fp32_bytes},
                        {"candidates", quantized.rows},
                        {"skipped", skipped_json()}}},
      {"design", design_json},
      {"design_rank", {{"candidates_fitting", explored.ranked.size()},
                       {"skipped_not_in_c_simulation", skipped},
                       {"evaluated", explored.evaluated},
                       {"method", explored.method}}},
      {"resources", {{"fits", use.fits}, {"lines", util_rows}, {"binding", hw::to_string(use.binding())},
                     {"assumptions", use.assumptions}, {"parts", parts_checked}}},
      {"predicted", perf::summary_json(pred)},
      {"simulated", {{"decode", sim_summary(sim_decode)}, {"prefill", sim_summary(sim_prefill)},
                     {"decode_idealized", sim_summary(sim_ideal)}}},
      {"gpu_baselines", gpu_rows},
      {"emit", emitted},
      {"verify", {{"accel_perplexity", ppl_accel.perplexity},
                  {"accel_perplexity_err", ppl_accel.perplexity_err},
                  {"simulated_quant_perplexity", q.perplexity},
                  {"accel_vs_simulated_rel", accel_vs_sim},
                  {"tokens", ppl_accel.tokens},
                  {"greedy_text", sample.text},
                  {"greedy_tokens", sample.tokens.size() - 1},
                  {"greedy_same_as_fp32", same},
                  {"greedy_common_prefix_with_fp32", common_prefix}}},
      {"files", {"design.json", "model.q.gguf", "plan.json", "simulate.json", "trace_decode.json", "hls/",
                 "report.html", "summary.json", "deploy.log"}}};

  summary["predicted"]["decode_ops"] = pred.decode.ops;  // per operation: the report's per-layer chart

  std::vector<report::Point> points;
  for (const auto& cand : explored.ranked)
    points.push_back({cand.design.name, cand.prediction.decode_tokens_per_s, cand.prediction.joules_per_token, false,
                      false});
  for (const auto& cand : explored.pareto)
    points.push_back({cand.design.name, cand.prediction.decode_tokens_per_s, cand.prediction.joules_per_token, true,
                      false});
  for (const auto& d : hw::devices()) {
    if (d.kind != hw::Kind::gpu) continue;
    const perf::Prediction g = perf::predict_gpu(d, workloads);
    if (g.fits_memory && g.joules_per_token > 0) points.push_back({d.id, g.decode_tokens_per_s, g.joules_per_token, false, true});
  }
  const std::string roofline = report::roofline_svg(pred, fmt::format("{} on {}", c.name, dev.name));
  const std::string pareto = report::scatter_svg(points, "Designs on " + dev.name + " and GPU baselines",
                                                 "decode tokens/s", "joules per token");
  fpgallm::write_file_atomic(dir + "/report.html", report_html(summary, roofline, pareto));
  fpgallm::write_file_atomic(dir + "/summary.json", summary.dump(2) + "\n");
  steps.back().seconds = seconds_since(t0);
  log << fmt::format("step {} done in {:.2f} s\n", steps.back().name, steps.back().seconds);
  return summary;
}

}  // namespace

Result run(const Options& o, const std::function<void(int, int, const std::string&)>& on_step,
           const std::function<void(const std::string&, std::size_t, std::size_t)>& on_progress) {
  if (o.out_dir.empty()) throw fpgallm::InputError("-o", "an output folder is required");
  // Refused before the work: an input, a foreign file or folder, an unwritable place. The
  // folder is built beside it under a lock and swapped in only when every step succeeded.
  fpgallm::check_output(o.out_dir, fpgallm::OutputKind::folder, {o.model, o.text, o.tokenizer});
  fpgallm::OutputFolder folder(o.out_dir);
  Result result;
  {
    std::ofstream log(fs::path(folder.dir()) / "deploy.log");
    result.summary = build(o, folder.dir(), result.steps, on_step, on_progress, log);
  }
  folder.commit();
  const fs::path out(folder.path());
  result.out_dir = out.string();
  return result;
}

}  // namespace deploy
