#include "calib/calib.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "calib/simulated.hpp"
#include "util/error.hpp"

namespace calib {

using quant::ActFormat;
using quant::WeightFormat;

namespace {

std::size_t predicted_tokens(const std::vector<std::vector<int>>& seqs) {
  std::size_t n = 0;
  for (const auto& s : seqs) n += s.size() > 1 ? s.size() - 1 : 0;
  return n;
}

engine::Perplexity run_perplexity(engine::Transformer& t, const std::vector<std::vector<int>>& seqs,
                                  const std::string& stage, const ProgressFn& progress) {
  return engine::perplexity(t, seqs, [&](std::size_t d, std::size_t n) {
    if (progress) progress(stage, d, n);
  });
}

}  // namespace

std::string method_name(const QuantizeResult& r) { return r.qat_steps > 0 ? "qat" : quant::to_string(r.method); }

Split split_text(const model::Tokenizer& tok, const std::string& text, const std::string& source) {
  return split_text(model::story_encoder(tok), text, source);
}

Split split_text(const model::StoryEncoder& encode, const std::string& text, const std::string& source) {
  const auto stories = engine::split_stories(text);
  if (stories.size() < 2)
    throw fpgallm::InputError(source, "calibration text has " + std::to_string(stories.size()) +
                                          " stories (non-empty lines); need at least 2, half to calibrate and half held out");
  const std::size_t half = engine::held_out_begin(stories.size());
  const std::vector<std::string> calib_part(stories.begin(), stories.begin() + static_cast<std::ptrdiff_t>(half));
  const std::set<std::string> seen(calib_part.begin(), calib_part.end());
  std::vector<std::string> held_part;
  Split s;
  for (std::size_t i = half; i < stories.size(); ++i) {
    if (seen.count(stories[i])) {
      ++s.dropped_duplicates;
      continue;
    }
    held_part.push_back(stories[i]);
  }
  s.calibration = engine::tokenize_stories(encode, calib_part);
  s.held_out = engine::tokenize_stories(encode, held_part);
  s.calibration_stories = calib_part.size();
  s.held_out_stories = held_part.size();
  s.calibration_tokens = predicted_tokens(s.calibration);
  s.held_out_tokens = predicted_tokens(s.held_out);
  if (s.calibration_tokens < kMinTokensPerHalf || s.held_out_tokens < kMinTokensPerHalf)
    throw fpgallm::InputError(source, "calibration text too short: " + std::to_string(s.calibration_tokens) + " + " +
                                          std::to_string(s.held_out_tokens) +
                                          " tokens in the calibration and held-out halves; need at least " +
                                          std::to_string(kMinTokensPerHalf) + " in each");
  return s;
}

std::vector<std::vector<int>> first_tokens(const std::vector<std::vector<int>>& seqs, std::size_t n) {
  if (n == 0) return seqs;
  std::vector<std::vector<int>> out;
  std::size_t have = 0;
  for (const auto& s : seqs) {
    if (have >= n) break;
    if (s.size() < 2) continue;
    const std::size_t take = std::min(s.size() - 1, n - have);
    out.emplace_back(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(take + 1));
    have += take;
  }
  return out;
}

quant::ActStats collect_stats(const model::Model& m, const std::vector<std::vector<int>>& sequences,
                              const ProgressFn& progress) {
  StatsTransformer t(m);
  const auto p = run_perplexity(t, sequences, "calibrate", progress);
  quant::ActStats s = t.stats();
  s.tokens = p.tokens;
  return s;
}

quant::Hessians collect_hessians(const model::Model& m, const quant::Plan& plan,
                                 const std::vector<quant::QuantLinear>& linears,
                                 const std::vector<std::vector<int>>& sequences, int layer, const ProgressFn& progress) {
  HessianTransformer t(m, plan, linears, layer);
  run_perplexity(t, sequences, layer == HessianTransformer::kAllLayers ? std::string("hessians")
                                                                        : "hessians " + model::linear_name(layer, layer < 0 ? model::Linear::cls : model::Linear::wq),
                 progress);
  return t.hessians();
}

std::vector<quant::QuantLinear> quantize_gptq(const model::Model& m, const quant::Plan& plan,
                                              const std::vector<std::vector<int>>& sequences,
                                              const quant::GptqOptions& opt, const ProgressFn& progress) {
  const auto& c = m.config;
  std::vector<quant::QuantLinear> linears = quant::quantize_model(m, plan).linears;
  for (int l = 0; l <= c.n_layers; ++l) {
    const int layer = l == c.n_layers ? -1 : l;
    // Blocks before `layer` as the plan runs them, the rest fp32.
    quant::Plan p = plan;
    for (auto& lp : p.layers)
      if (lp.layer < 0 || lp.layer >= l) lp.weight = WeightFormat::f32, lp.act = ActFormat::f32;
    bool any = false;
    for (const auto& lp : plan.layers) any = any || (lp.layer == layer && lp.weight == WeightFormat::int4);
    if (!any) continue;
    const quant::Hessians h = collect_hessians(m, p, linears, sequences, layer, progress);
    for (std::size_t i = 0; i < plan.layers.size(); ++i) {
      const auto& lp = plan.layers[i];
      if (lp.layer != layer || lp.weight != WeightFormat::int4) continue;
      const auto s = model::linear_shape(c, lp.which);
      const auto& w = lp.which == model::Linear::cls ? m.weights.classifier_or_embedding()
                                                     : m.weights.layers[static_cast<std::size_t>(lp.layer)].linear(lp.which);
      linears[i].int4 = quant::gptq_int4(w, s.rows, s.cols, plan.group, h.of(lp.layer, lp.which), opt);
    }
  }
  return linears;
}

void apply_static_scales(quant::Plan& plan, const quant::ActStats& stats) {
  for (auto& l : plan.layers)
    if (l.act == ActFormat::int8_static) l.act_scale = quant::int8_scale(stats.amax(l.layer, l.which));
}

engine::Perplexity evaluate(const model::Model& base, const quant::Plan& plan,
                            const std::vector<quant::QuantLinear>& linears,
                            const std::vector<std::vector<int>>& sequences, const ProgressFn& progress,
                            FloatProducts products) {
  SimulatedTransformer t(base, plan, linears, products);
  return run_perplexity(t, sequences, "evaluate", progress);
}

engine::Perplexity evaluate(const quant::QuantModel& qm, const std::vector<std::vector<int>>& sequences,
                            const ProgressFn& progress) {
  const model::Model base = qm.dequantized_model();
  return evaluate(base, qm.plan, qm.linears, sequences, progress);
}

std::string Candidate::name() const {
  if (weight == WeightFormat::int4) return "int4-g" + std::to_string(group);
  return quant::to_string(weight);
}

namespace {

const std::vector<float>& weights_of(const model::Model& m, int layer, model::Linear which) {
  if (which == model::Linear::cls) return m.weights.classifier_or_embedding();
  return m.weights.layers[static_cast<std::size_t>(layer)].linear(which);
}

// The plan and layer set with only layer i in candidate precision (weight-only, fp16 input).
void set_layer(const model::Model& m, quant::Plan& plan, std::vector<quant::QuantLinear>& linears, std::size_t i,
               const Candidate& cand, const LayerMethod& method) {
  auto& lp = plan.layers[i];
  lp.weight = cand.weight;
  lp.act = cand.weight == WeightFormat::f32 ? ActFormat::f32 : ActFormat::f16;
  linears[i] = method.quantize(m, lp.layer, lp.which, cand);
}

}  // namespace

quant::QuantLinear LayerMethod::quantize(const model::Model& m, int layer, model::Linear which, const Candidate& c) const {
  const auto s = model::linear_shape(m.config, which);
  const auto& w = weights_of(m, layer, which);
  const bool gptq = method == quant::Method::gptq || method == quant::Method::awq_gptq;
  if (c.weight != WeightFormat::int4 || (!gptq && !search_scales))
    return quant::quantize_linear(w, s.rows, s.cols, c.weight, c.group);
  if (!hessians) throw std::invalid_argument("gptq and searched scales need the layers' Hessians");
  const auto& h = hessians->of(layer, which);
  quant::QuantLinear q;
  q.format = WeightFormat::int4;
  q.rows = s.rows;
  q.cols = s.cols;
  if (gptq) {
    quant::GptqOptions go;
    go.act_order = act_order;
    go.search_scales = search_scales;
    q.int4 = quant::gptq_int4(w, s.rows, s.cols, c.group, h, go);
  } else {
    q.int4 = quant::quantize_int4_searched(w, s.rows, s.cols, c.group, h);
  }
  return q;
}

std::vector<quant::QuantLinear> quantize_layers(const model::Model& m, const quant::Plan& plan, const LayerMethod& method) {
  std::vector<quant::QuantLinear> out(plan.layers.size());
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const auto& lp = plan.layers[i];
    out[i] = method.quantize(m, lp.layer, lp.which, {lp.weight, plan.group});
  }
  return out;
}

namespace {

// Where a pass of a plan that differs from the fp32 model only in `layer` must start: the
// blocks before it are the fp32 model's (the classifier's input is the final norm's).
int first_block_of(const model::Config& c, int layer) { return layer < 0 ? c.n_layers : layer; }

}  // namespace

SensitivityTable sensitivity(const model::Model& m, const std::vector<std::vector<int>>& sequences,
                             const std::vector<Candidate>& candidates, const ProgressFn& progress,
                             const LayerMethod& method) {
  SensitivityTable table;
  table.candidates = candidates;
  // The fp32 pass once, keeping the residual stream entering each block: a candidate's pass
  // starts at its layer's block (the blocks before are the fp32 model's, which the float
  // products of FloatProducts::gemm reproduce bit for bit), so it equals the whole pass.
  engine::BlockInputs fp32_inputs;
  {
    engine::Transformer ref(m);
    const auto p = engine::perplexity_from(ref, sequences, 0, nullptr, &fp32_inputs);
    table.fp32_perplexity = p.perplexity;
    table.tokens = p.tokens;
  }
  const quant::Plan fp32 = quant::uniform_plan(m.config, quant::Scheme::fp32, 32);
  const std::size_t n = fp32.layers.size() * candidates.size();
  std::size_t done = 0;
  for (std::size_t i = 0; i < fp32.layers.size(); ++i)
    for (const auto& cand : candidates) {
      quant::Plan plan = fp32;
      plan.group = cand.group;
      std::vector<quant::QuantLinear> linears(plan.layers.size());
      set_layer(m, plan, linears, i, cand, method);
      const auto& lp = plan.layers[i];
      SimulatedTransformer t(m, plan, linears, FloatProducts::gemm);
      const auto p = engine::perplexity_from(t, sequences, first_block_of(m.config, lp.layer), &fp32_inputs, nullptr);
      table.rows.push_back({lp.layer, lp.which, cand, p.perplexity,
                            (p.perplexity - table.fp32_perplexity) / table.fp32_perplexity,
                            quant::weight_bytes(m.config, lp.which, cand.weight, cand.group)});
      if (progress) progress("sensitivity", ++done, n);
    }
  std::stable_sort(table.rows.begin(), table.rows.end(),
                   [](const auto& a, const auto& b) { return a.rel_increase > b.rel_increase; });
  return table;
}

std::vector<Candidate> sensitivity_candidates(int group, bool informational_groups) {
  std::vector<Candidate> out{{WeightFormat::int8, group}, {WeightFormat::int4, group}};
  if (informational_groups)
    for (int g : {32, 128})
      if (g != group) out.push_back({WeightFormat::int4, g});
  return out;
}

nlohmann::json measurements_json(const QuantizeResult& r, const std::string& calib_file) {
  nlohmann::json j = {{"calibration", {{"file", calib_file},
                                       {"stories", r.split.calibration_stories},
                                       {"tokens", r.split.calibration_tokens}}},
                      {"held_out", {{"stories", r.split.held_out_stories},
                                    {"tokens", r.split.held_out_tokens},
                                    {"dropped_duplicates", r.split.dropped_duplicates}}},
                      {"fp32_perplexity", r.fp32_perplexity},
                      {"fp32_perplexity_err", r.fp32_perplexity_err},
                      {"perplexity", r.perplexity},
                      {"perplexity_err", r.perplexity_err},
                      {"rel_increase", r.rel_increase},
                      {"fp32_linear_weight_bytes", r.fp32_bytes},
                      {"seconds", r.seconds},
                      {"calibration_passes", r.calibration_passes},
                      {"method", method_name(r)},
                      {"search_scales", r.search_scales}};
  if (!r.awq.empty()) {
    nlohmann::json sites = nlohmann::json::array();
    for (const auto& s : r.awq)
      sites.push_back({{"layer", s.layer}, {"site", s.site}, {"ratio", s.ratio}, {"error_rtn", s.error_rtn},
                       {"error_awq", s.error_awq}});
    j["awq"] = sites;
  }
  if (r.sensitivity) j["sensitivity"] = *r.sensitivity;
  return j;
}

void to_json(nlohmann::json& j, const SensitivityTable& t) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : t.rows)
    rows.push_back({{"name", model::linear_name(r.layer, r.which)},
                    {"layer", r.layer},
                    {"linear", model::to_string(r.which)},
                    {"precision", r.candidate.name()},
                    {"perplexity", r.perplexity},
                    {"rel_increase", r.rel_increase},
                    {"bytes", r.bytes}});
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& c : t.candidates) candidates.push_back(c.name());
  j = {{"fp32_perplexity", t.fp32_perplexity},
       {"tokens", t.tokens},
       {"candidates", std::move(candidates)},
       {"measured_on", "calibration half"},
       {"activations", "fp16 (weight-only candidates)"},
       {"rows", std::move(rows)}};
}

SearchResult search_mixed(const model::Model& m, const SensitivityTable& table, int group, double budget, bool kv8,
                          const std::vector<std::vector<int>>& held_out, const ProgressFn& progress,
                          const LayerMethod& method, std::optional<double> fp32_perplexity) {
  const auto& c = m.config;
  quant::Plan start = quant::uniform_plan(c, quant::Scheme::mixed, group);
  start.kv8 = kv8;
  const std::size_t L = start.layers.size();
  const Candidate c8{WeightFormat::int8, group}, c4{WeightFormat::int4, group};
  auto sens = [&](std::size_t i, const Candidate& cand) {
    const auto& lp = start.layers[i];
    for (const auto& r : table.rows)
      if (r.layer == lp.layer && r.which == lp.which && r.candidate.weight == cand.weight &&
          (cand.weight != WeightFormat::int4 || r.candidate.group == cand.group))
        return std::max(0.0, r.rel_increase);
    throw std::invalid_argument("sensitivity table lacks " + model::linear_name(lp.layer, lp.which) + " " + cand.name());
  };

  // Greedy move list: each move lowers one layer one step (f16 -> int8 -> int4); the next
  // move is the one saving most bytes per unit of predicted loss.
  struct Move {
    std::size_t layer;
    Candidate to;
    double cost;
  };
  std::vector<int> level(L, 0);  // 0 f16, 1 int8, 2 int4
  std::vector<Move> moves;
  std::vector<double> predicted;  // cumulative
  double total = 0;
  constexpr double kEps = 1e-7;
  for (;;) {
    double best_ratio = -1;
    Move best{};
    for (std::size_t i = 0; i < L; ++i) {
      if (level[i] == 2) continue;
      const auto& lp = start.layers[i];
      const Candidate to = level[i] == 0 ? c8 : c4;
      const double cost_before = level[i] == 0 ? 0.0 : sens(i, c8);
      const double cost = std::max(0.0, sens(i, to) - cost_before);
      const auto from_bytes = quant::weight_bytes(c, lp.which, level[i] == 0 ? WeightFormat::f16 : WeightFormat::int8, group);
      const double saved = static_cast<double>(from_bytes - quant::weight_bytes(c, lp.which, to.weight, group));
      const double ratio = saved / (cost + kEps);
      if (ratio > best_ratio) best_ratio = ratio, best = {i, to, cost};
    }
    if (best_ratio < 0) break;
    level[best.layer] += 1;
    total += best.cost;
    moves.push_back(best);
    predicted.push_back(total);
  }

  // A plan is a set of applied moves (a layer's int8->int4 move only with its f16->int8).
  auto plan_of = [&](const std::vector<bool>& applied) {
    quant::Plan p = start;
    for (std::size_t i = 0; i < moves.size(); ++i)
      if (applied[i] && static_cast<int>(p.layers[moves[i].layer].weight) < static_cast<int>(moves[i].to.weight))
        p.layers[moves[i].layer].weight = moves[i].to.weight;
    return p;
  };
  auto prefix = [&](std::size_t k) {
    std::vector<bool> a(moves.size(), false);
    for (std::size_t i = 0; i < k; ++i) a[i] = true;
    return a;
  };
  SearchResult r;
  r.budget = budget;
  if (fp32_perplexity) {
    r.fp32_perplexity = *fp32_perplexity;
  } else {
    engine::Transformer ref(m);
    r.fp32_perplexity = engine::perplexity(ref, held_out).perplexity;
  }
  struct Verified {
    std::vector<bool> applied;
    double ppl, rel;
    std::uint64_t bytes;
  };
  std::vector<Verified> verified;
  // The residual streams of the last plan that passed and the last that failed: a plan is
  // run from the first block where it differs from the nearer of the two (the blocks
  // before compute the same, so the perplexity is the whole pass's, bit for bit).
  struct Ran {
    quant::Plan plan;
    engine::BlockInputs inputs;
  };
  std::optional<Ran> last_passed, last_failed;
  auto first_difference = [&](const quant::Plan& a, const quant::Plan& b) {
    int block = c.n_layers + 1;  // none
    for (std::size_t i = 0; i < a.layers.size(); ++i)
      if (a.layers[i].weight != b.layers[i].weight || a.layers[i].act != b.layers[i].act)
        block = std::min(block, first_block_of(c, a.layers[i].layer));
    return block;
  };
  // Each layer quantized by `method` and dequantized once per precision, for every plan.
  std::map<std::pair<std::size_t, WeightFormat>, std::shared_ptr<const std::vector<float>>> dequantized;
  const std::vector<quant::QuantLinear> unread(start.layers.size());  // weight-only layers read `dequantized`
  auto verify = [&](const std::vector<bool>& applied) {
    const quant::Plan p = plan_of(applied);
    DequantizedWeights weights(p.layers.size());
    for (std::size_t i = 0; i < p.layers.size(); ++i) {
      const auto& lp = p.layers[i];
      if (lp.weight == WeightFormat::f32) continue;
      auto& w = dequantized[{i, lp.weight}];
      if (!w) w = std::make_shared<const std::vector<float>>(method.quantize(m, lp.layer, lp.which, {lp.weight, p.group}).dequantized());
      weights[i] = w;
    }
    const Ran* from = nullptr;
    int first = 0;
    for (const auto* ran : {&last_passed, &last_failed})
      if (*ran)
        if (const int b = std::min(first_difference(p, (*ran)->plan), c.n_layers); b > first) first = b, from = &**ran;
    SimulatedTransformer t(m, p, unread, FloatProducts::gemm, std::move(weights));
    Ran now{p, {}};
    const double ppl =
        engine::perplexity_from(t, held_out, first, from ? &from->inputs : nullptr, &now.inputs).perplexity;
    ++r.verifications;
    if (progress) progress("verify", static_cast<std::size_t>(r.verifications), 0);
    verified.push_back({applied, ppl, (ppl - r.fp32_perplexity) / r.fp32_perplexity, quant::linear_weight_bytes(m.config, p)});
    const bool passed = verified.back().rel <= budget;
    (passed ? last_passed : last_failed) = std::move(now);
    return passed;
  };
  // Longest prefix whose predicted loss fits; binary search below it while the measured
  // loss is over budget (assumes loss grows with the prefix, as it does on average).
  std::size_t k = 0;
  while (k < moves.size() && predicted[k] <= budget) ++k;
  // The empty prefix (every layer fp16) is verified last, only when no longer one passes.
  std::optional<std::size_t> ok;
  if (verify(prefix(k))) {
    ok = k;
  } else if (k > 0) {
    std::size_t lo = 0, hi = k;  // lo taken to pass, hi fails
    while (hi > lo + 1) {
      const std::size_t mid = (lo + hi) / 2;
      if (verify(prefix(mid))) lo = mid, ok = mid;
      else hi = mid;
    }
    if (!ok && verify(prefix(0))) ok = 0;
  }
  std::vector<bool> best;
  if (ok) {
    // Then each later move on its own, kept when the whole plan still verifies
    // (sensitivities are noisy and do not add exactly); a bounded number of tries.
    best = prefix(*ok);
    constexpr int kExtraTries = 12;
    int tries = 0;
    for (std::size_t i = *ok; i < moves.size() && tries < kExtraTries; ++i) {
      if (moves[i].to.weight == WeightFormat::int4) {
        bool has_int8 = false;  // the layer's f16 -> int8 move must be in
        for (std::size_t j = 0; j < moves.size(); ++j)
          if (best[j] && moves[j].layer == moves[i].layer) has_int8 = true;
        if (!has_int8) continue;
      }
      auto trial = best;
      trial[i] = true;
      ++tries;
      if (verify(trial)) best = trial;
    }
  }
  const Verified* chosen = nullptr;
  for (const auto& v : verified) {
    if (ok) {
      if (v.rel <= budget && (!chosen || v.bytes < chosen->bytes)) chosen = &v;
    } else if (!chosen || v.rel < chosen->rel) {
      chosen = &v;
    }
  }
  r.plan = plan_of(chosen->applied);
  r.perplexity = chosen->ppl;
  r.rel_increase = chosen->rel;
  r.budget_met = ok.has_value();
  r.bytes = quant::linear_weight_bytes(c, r.plan);
  return r;
}

QuantizeResult quantize(const model::Model& m, const model::Tokenizer& tok, const std::string& calib_text,
                        const std::string& calib_source, const QuantizeOptions& opt, const ProgressFn& progress) {
  return quantize(m, model::story_encoder(tok), calib_text, calib_source, opt, progress);
}

QuantizeResult quantize(const model::Model& m, const model::StoryEncoder& encode, const std::string& calib_text,
                        const std::string& calib_source, const QuantizeOptions& opt, const ProgressFn& progress) {
  using clock = std::chrono::steady_clock;
  QuantizeResult res;
  res.split = split_text(encode, calib_text, calib_source);
  const auto t0 = clock::now();
  model::Model work = m;
  quant::ActStats stats = collect_stats(work, res.split.calibration, progress);
  res.calibration_passes = 1;
  quant::Plan plan = quant::uniform_plan(m.config, opt.scheme, opt.group);
  plan.kv8 = opt.kv8;
  if (opt.scheme == quant::Scheme::w8a8_smooth) {
    quant::smooth(work, stats, opt.alpha);
    plan.smooth_alpha = opt.alpha;
  }
  apply_static_scales(plan, stats);
  std::optional<engine::Perplexity> p32_measured = opt.fp32_held_out;
  auto fp32_held_out = [&]() -> const engine::Perplexity& {
    if (!p32_measured) {
      engine::Transformer ref(m);
      p32_measured = run_perplexity(ref, res.split.held_out, "evaluate fp32", progress);
    }
    return *p32_measured;
  };
  using quant::Method;
  res.method = opt.method;
  res.search_scales = opt.search_scales;
  const bool mixed = opt.scheme == quant::Scheme::mixed;
  const bool int4 = opt.scheme == quant::Scheme::w4a8 || opt.scheme == quant::Scheme::w4a16 || mixed;
  if (opt.method != Method::rtn && !int4)
    throw fpgallm::InputError("--method", std::string(quant::to_string(opt.method)) +
                                              " chooses int4 codes: use it with --scheme w4a8, w4a16 or mixed");
  if (opt.search_scales && !int4)
    throw fpgallm::InputError("--search-scales", "searches int4 group scales: use it with --scheme w4a8, w4a16 or mixed");
  if (opt.method == Method::awq || opt.method == Method::awq_gptq) {
    const quant::Plan fp32 = quant::uniform_plan(m.config, quant::Scheme::fp32, opt.group);
    const std::vector<quant::QuantLinear> none(fp32.layers.size());
    const quant::Hessians h =
        collect_hessians(work, fp32, none, res.split.calibration, HessianTransformer::kAllLayers, progress);
    ++res.calibration_passes;
    res.awq = quant::awq(work, h, opt.group);
  }
  if (mixed) {
    // Each layer's int4 error, in the sensitivities and the verified plans, is the method's
    // on that layer alone (GPTQ with the fp32 model's Hessians).
    LayerMethod lm{opt.method, opt.act_order, opt.search_scales, nullptr};
    quant::Hessians h;
    if (opt.method == Method::gptq || opt.method == Method::awq_gptq || opt.search_scales) {
      const quant::Plan fp32 = quant::uniform_plan(m.config, quant::Scheme::fp32, opt.group);
      h = collect_hessians(work, fp32, std::vector<quant::QuantLinear>(fp32.layers.size()), res.split.calibration,
                           HessianTransformer::kAllLayers, progress);
      ++res.calibration_passes;
      lm.hessians = &h;
    }
    res.sensitivity = sensitivity(work, first_tokens(res.split.calibration, opt.sensitivity_tokens),
                                  sensitivity_candidates(opt.group, opt.informational_groups), progress, lm);
    // The search's fp32 reference is the model it quantizes: m's, measured once for both,
    // unless AWQ has folded its scales into `work`.
    const bool folded = opt.method == Method::awq || opt.method == Method::awq_gptq;
    std::optional<double> fp32_ppl;
    if (!folded) fp32_ppl = fp32_held_out().perplexity;
    res.search = search_mixed(work, *res.sensitivity, opt.group, opt.budget, opt.kv8, res.split.held_out, progress, lm,
                              fp32_ppl);
    plan = res.search->plan;
    res.qm = quant::quantize_model(work, plan);
    res.qm.linears = quantize_layers(work, plan, lm);
  } else {
    res.qm = quant::quantize_model(work, plan);
  }
  if (!mixed && (opt.method == Method::gptq || opt.method == Method::awq_gptq)) {
    quant::GptqOptions go;
    go.act_order = opt.act_order;
    go.search_scales = opt.search_scales;
    res.qm.linears = quantize_gptq(work, plan, res.split.calibration, go, progress);
    res.calibration_passes += m.config.n_layers + 1;  // one per block and the classifier
  } else if (!mixed && opt.search_scales) {
    // The Hessians of the (smoothed) fp32 model weight each group's error.
    const quant::Plan fp32 = quant::uniform_plan(m.config, quant::Scheme::fp32, opt.group);
    const std::vector<quant::QuantLinear> none(fp32.layers.size());
    const quant::Hessians h =
        collect_hessians(work, fp32, none, res.split.calibration, HessianTransformer::kAllLayers, progress);
    ++res.calibration_passes;
    for (std::size_t i = 0; i < plan.layers.size(); ++i) {
      const auto& lp = plan.layers[i];
      if (lp.weight != WeightFormat::int4) continue;
      const auto s = model::linear_shape(m.config, lp.which);
      res.qm.linears[i].int4 = quant::quantize_int4_searched(weights_of(work, lp.layer, lp.which), s.rows, s.cols,
                                                             plan.group, h.of(lp.layer, lp.which));
    }
  }
  res.qm.calibration_file = calib_source;
  res.qm.calibration_fnv1a = quant::fnv1a64(calib_text);
  res.seconds = std::chrono::duration<double>(clock::now() - t0).count();

  const engine::Perplexity p32 = fp32_held_out();
  res.fp32_held_out = p32;
  res.fp32_perplexity = p32.perplexity;
  res.fp32_perplexity_err = p32.perplexity_err;
  const auto pq = evaluate(res.qm, res.split.held_out, progress);
  res.perplexity = pq.perplexity;
  res.perplexity_err = pq.perplexity_err;
  res.rel_increase = (pq.perplexity - p32.perplexity) / p32.perplexity;
  // The search verified its plans with FloatProducts::gemm; the figure reported is this one
  // (forward()'s bits), and it alone decides whether the budget is met.
  if (res.search) res.search->budget_met = res.search->budget_met && res.rel_increase <= res.search->budget;
  res.fp32_bytes = quant::linear_weight_bytes(m.config, quant::uniform_plan(m.config, quant::Scheme::fp32, opt.group));
  return res;
}

}  // namespace calib
