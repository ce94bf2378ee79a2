#include <cstdio>
#include <optional>
#include <fmt/format.h>
#include <map>
#include <memory>

#include "calib/calib.hpp"
#include "calib/simulated.hpp"
#include "cli/quant_eval.hpp"
#include "cli/command.hpp"
#include "util/output.hpp"
#include "engine/perplexity.hpp"
#include "model/model.hpp"
#include "util/error.hpp"
#include "util/paths.hpp"

namespace {

struct QuantizeArgs {
  std::string model, tokenizer, calib, out, plan_json, sensitivity_json, scheme = "w8a8", budget = "1",
              method = "rtn";
  int group = 32;
  std::size_t sensitivity_tokens = 1024;
  float alpha = 0.5f;
  bool kv8 = false, json = false, act_order = false, search_scales = false, informational_groups = false;
};

class StageProgress {
 public:
  explicit StageProgress(bool quiet) : quiet_(quiet) {}
  void operator()(const std::string& stage, std::size_t done, std::size_t total) {
    if (quiet_) return;
    if (stage != stage_) {
      if (bar_) bar_->finish();
      stage_ = stage;
      bar_ = std::make_unique<cli::Progress>("quantize: " + stage);
    }
    if (total == 0) {
      if (cli::progress_enabled()) std::fprintf(stderr, "quantize: %s %zu\n", stage.c_str(), done);
    } else {
      bar_->update(done, total);
    }
  }
  void finish() {
    if (bar_) bar_->finish();
  }

 private:
  bool quiet_;
  std::string stage_;
  std::unique_ptr<cli::Progress> bar_;
};

std::string pct(double rel) { return fmt::format("{:+.3f}%", 100.0 * rel); }

void quantize(const QuantizeArgs& a) {
  calib::QuantizeOptions opt;
  opt.scheme = quant::scheme_from_string(a.scheme);
  opt.group = a.group;
  opt.method = quant::method_from_string(a.method);
  opt.act_order = a.act_order;
  opt.search_scales = a.search_scales;
  if (a.act_order && opt.method != quant::Method::gptq && opt.method != quant::Method::awq_gptq)
    throw fpgallm::InputError("--act-order", "orders GPTQ's columns: use it with --method gptq or awq+gptq");
  opt.alpha = a.alpha;
  opt.budget = cli::parse_budget(a.budget);
  opt.kv8 = a.kv8;
  opt.sensitivity_tokens = a.sensitivity_tokens;
  opt.informational_groups = a.informational_groups;
  if (opt.scheme == quant::Scheme::fp32) throw fpgallm::InputError("--scheme", "fp32 is the reference, not a quantization");
  // Every output is checked before the work (minutes of it).
  const std::vector<std::string> inputs = {a.model, a.calib, a.tokenizer};
  fpgallm::check_output(a.out, fpgallm::OutputKind::file, inputs);
  for (const std::string* extra : {&a.plan_json, &a.sensitivity_json})
    if (!extra->empty()) fpgallm::check_output(*extra, fpgallm::OutputKind::file, inputs);
  model::Model m = model::load(a.model);
  model::require_finite(m, a.model, model::kCannotQuantizeNonFinite);
  // The quantized file holds at most 8-bit weights with their scales: under 2 bytes a parameter.
  fpgallm::check_output(a.out, fpgallm::OutputKind::file, inputs, static_cast<std::uint64_t>(m.config.n_params()) * 2);
  // The model's own byte-level BPE vocabulary unless -z names a llama2.c tokenizer.
  const bool bpe = m.bpe_tokenizer && a.tokenizer.empty();
  const std::optional<model::Tokenizer> tok = bpe ? std::nullopt : std::optional(model::tokenizer_for(m, a.tokenizer));
  const std::string text = engine::read_text_file(a.calib);
  StageProgress progress(a.json);
  calib::QuantizeResult r = calib::quantize(m, bpe ? model::story_encoder(m, "") : model::story_encoder(*tok), text, a.calib, opt,
                                            [&](const std::string& s, std::size_t d, std::size_t n) { progress(s, d, n); });
  progress.finish();

  const bool met = !r.search || r.search->budget_met;
  nlohmann::json plan_j = r.qm.plan;
  if (!a.plan_json.empty()) fpgallm::write_file_atomic(a.plan_json, plan_j.dump(2) + "\n");
  if (r.sensitivity && !a.sensitivity_json.empty()) {
    nlohmann::json sj = *r.sensitivity;
    fpgallm::write_file_atomic(a.sensitivity_json, sj.dump(2) + "\n");
  }
  if (met) quant::save_gguf(r.qm, a.out, tok ? &*tok : nullptr, bpe ? m.bpe_tokenizer.get() : nullptr);

  const auto bytes = r.qm.linear_weight_bytes();
  if (a.json) {
    nlohmann::json j = {{"model", a.model}, {"scheme", a.scheme}, {"output", met ? a.out : ""}};
    j.update(calib::measurements_json(r, a.calib));
    j["act_order"] = a.act_order;
    j["linear_weight_bytes"] = bytes;
    j["plan"] = plan_j;
    if (r.search)
      j["search"] = {{"budget", r.search->budget},
                     {"budget_met", r.search->budget_met},
                     {"verifications", r.search->verifications}};
    cli::print_json(j);
  } else {
    if (r.sensitivity) {
      std::string measured;
      for (const auto& c : r.sensitivity->candidates) measured += (measured.empty() ? "" : ", ") + c.name();
      std::printf("sensitivity (one layer quantized alone, weight-only, calibration half, fp32 ppl %.4f; measured %s%s):\n",
                  r.sensitivity->fp32_perplexity, measured.c_str(),
                  a.informational_groups ? "" : "; other int4 groups not measured, --sensitivity-all-groups");
      std::printf("  %-12s %-10s %10s %10s %8s\n", "layer", "precision", "perplexity", "change", "bytes");
      for (const auto& row : r.sensitivity->rows)
        std::printf("  %-12s %-10s %10.4f %10s %8llu\n", model::linear_name(row.layer, row.which).c_str(),
                    row.candidate.name().c_str(), row.perplexity, pct(row.rel_increase).c_str(),
                    static_cast<unsigned long long>(row.bytes));
      std::printf("plan:");
      for (const auto& l : r.qm.plan.layers)
        std::printf(" %s=%s", model::linear_name(l.layer, l.which).c_str(), quant::to_string(l.weight));
      std::printf("\n");
    }
    std::printf("calibrated on %zu stories (%zu tokens); evaluated on the held-out %zu stories (%zu tokens)\n",
                r.split.calibration_stories, r.split.calibration_tokens, r.split.held_out_stories,
                r.split.held_out_tokens);
    const std::string name = a.scheme + (r.method == quant::Method::rtn ? "" : std::string(" ") + quant::to_string(r.method)) +
                             (a.act_order ? " act-order" : "") + (a.search_scales ? " search-scales" : "");
    std::printf("fp32 perplexity %.4f +/- %.4f, %s perplexity %.4f +/- %.4f (%s)\n", r.fp32_perplexity,
                r.fp32_perplexity_err, name.c_str(), r.perplexity, r.perplexity_err, pct(r.rel_increase).c_str());
    std::printf("linear weights %llu bytes (fp32 %llu, %.2fx smaller), quantized in %.2f s\n",
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(r.fp32_bytes),
                static_cast<double>(r.fp32_bytes) / static_cast<double>(bytes), r.seconds);
    if (met) std::printf("wrote %s\n", a.out.c_str());
  }
  if (!met)
    throw fpgallm::InputError("--budget", fmt::format("{}% cannot be met: the best plan found measures {} on the held-out "
                                                      "text ({} bytes); no model written{}",
                                                      100.0 * r.search->budget, pct(r.search->rel_increase), bytes,
                                                      a.plan_json.empty() ? "" : ", plan in " + a.plan_json));
}

void setup(CLI::App& root) {
  auto a = std::make_shared<QuantizeArgs>();
  auto* cmd = root.add_subcommand("quantize", "Quantize a model with calibration and measured accuracy (docs/quantization.md)");
  cmd->add_option("model", a->model, "Checkpoint")->required();
  cmd->add_option("--calib", a->calib, "Text, one story per line: first half calibrates, second half is held out")->required();
  cmd->add_option("--scheme", a->scheme, "w8a8 | w8a8-static | w8a8-smooth | w4a16 | w4a8 | mixed");
  cmd->add_option("--group", a->group, "int4 group size")->check(CLI::IsMember({32, 64, 128}));
  cmd->add_option("--method", a->method,
                  "int4 codes (w4a8, w4a16, and mixed's int4 layers and sensitivities): rtn (round to nearest) | awq | gptq | "
                  "awq+gptq (docs/quantization.md section 11)");
  cmd->add_flag("--act-order", a->act_order, "gptq: columns in order of decreasing Hessian diagonal");
  cmd->add_flag("--search-scales", a->search_scales,
                "int4: each group's scale from clip ratios 1 to 0.525 of max |w|, the least round-trip error "
                "(Hessian-weighted with rtn and awq; docs/quantization.md section 11)");
  cmd->add_option("--alpha", a->alpha, "SmoothQuant migration strength")->check(cli::between(0.0, 1.0));
  cmd->add_option("--budget", a->budget, std::string("mixed: ") + cli::kBudgetHelp);
  cmd->add_option("--sensitivity-tokens", a->sensitivity_tokens,
                  "mixed: calibration tokens the per-layer sensitivity runs on (0 = all)");
  cmd->add_flag("--sensitivity-all-groups", a->informational_groups,
                "mixed: also measure int4 g32 and g128 where --group is another (shown in the table, never chosen; "
                "a pass per layer each)");
  cmd->add_flag("--kv8", a->kv8, "int8 KV cache");
  cmd->add_option("-z,--tokenizer", a->tokenizer, cli::kTokenizerHelp);
  cmd->add_option("-o,--output", a->out, "Quantized model (.gguf)")->required();
  cmd->add_option("--plan-json", a->plan_json, "Write the plan as JSON");
  cmd->add_option("--sensitivity-json", a->sensitivity_json, "mixed: write the sensitivity table as JSON");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { quantize(*a); });
}

}  // namespace

FPGALLM_COMMAND("quantize", setup);

// ---- eval --quant / --schemes (declared in quant_eval.hpp) ----

namespace cli {

std::unique_ptr<LoadedQuant> load_quant(const model::Model& m, const std::string& qfile) {
  auto q = std::make_unique<LoadedQuant>();
  q->qm = quant::load_gguf(qfile);
  const auto &a = q->qm.config, &b = m.config;
  if (a.dim != b.dim || a.hidden_dim != b.hidden_dim || a.n_layers != b.n_layers || a.n_heads != b.n_heads ||
      a.n_kv_heads != b.n_kv_heads || a.vocab_size != b.vocab_size || a.seq_len != b.seq_len)
    throw fpgallm::InputError(qfile, "quantized model does not have the shape of " + m.source_path);
  q->base = q->qm.dequantized_model();
  q->transformer = std::make_unique<calib::SimulatedTransformer>(q->base, q->qm.plan, q->qm.linears);
  return q;
}

void eval_quantized(const model::Model& m, const model::StoryEncoder& tok, const std::string& text_file,
                    const std::string& qfile, bool json, bool batched) {
  auto q = load_quant(m, qfile);
  const std::string text = engine::read_text_file(text_file);
  const bool calibration_text = q->qm.calibration_fnv1a != 0 && quant::fnv1a64(text) == q->qm.calibration_fnv1a;
  std::vector<std::vector<int>> seqs;
  std::string part = "whole file";
  if (calibration_text) {
    seqs = calib::split_text(tok, text, text_file).held_out;
    part = "held-out half (the file is this model's calibration text)";
  } else {
    seqs = engine::tokenize_stories(tok, engine::split_stories(text));
  }
  engine::Transformer ref(m);
  ref.set_batched(batched);
  q->transformer->set_batched(batched);
  cli::Progress p32("eval: fp32 tokens", json);
  const auto f = engine::perplexity(ref, seqs, [&](std::size_t d, std::size_t n) { p32.update(d, n); });
  p32.finish();
  cli::Progress pq("eval: quantized tokens", json);
  const auto p = engine::perplexity(*q->transformer, seqs, [&](std::size_t d, std::size_t n) { pq.update(d, n); });
  pq.finish();
  const double rel = (p.perplexity - f.perplexity) / f.perplexity;
  if (json) {
    cli::print_json({{"model", m.source_path},
                     {"quant", qfile},
                     {"scheme", quant::to_string(q->qm.plan.scheme)},
                     {"text", text_file},
                     {"part", calibration_text ? "held-out" : "all"},
                     {"backend", "ref (simulated quantization)"},
                     {"perplexity", p.perplexity},
                     {"perplexity_err", p.perplexity_err},
                     {"fp32_perplexity", f.perplexity},
                     {"rel_increase", rel},
                     {"tokens", p.tokens},
                     {"sequences", p.sequences},
                     {"linear_weight_bytes", q->qm.linear_weight_bytes()}});
  } else {
    std::printf("%s (%s) on the %s: perplexity %.4f +/- %.4f over %zu tokens (%zu stories); fp32 %.4f (%s)\n",
                qfile.c_str(), quant::to_string(q->qm.plan.scheme), part.c_str(), p.perplexity, p.perplexity_err,
                p.tokens, p.sequences, f.perplexity, pct(rel).c_str());
  }
}

void eval_schemes(const model::Model& m, const model::StoryEncoder& tok, const std::string& text_file,
                  const std::string& schemes, int group, bool json) {
  std::vector<quant::Scheme> list;
  std::size_t start = 0;
  while (start <= schemes.size()) {
    const std::size_t comma = std::min(schemes.find(',', start), schemes.size());
    const std::string name = schemes.substr(start, comma - start);
    if (!name.empty()) list.push_back(quant::scheme_from_string(name));
    start = comma + 1;
  }
  if (list.empty()) throw fpgallm::InputError("--schemes", "no scheme given");
  const std::string text = engine::read_text_file(text_file);
  nlohmann::json rows = nlohmann::json::array();
  calib::Split split;
  for (quant::Scheme s : list) {
    StageProgress progress(json);
    nlohmann::json row;
    if (s == quant::Scheme::fp32) {
      split = calib::split_text(tok, text, text_file);
      engine::Transformer ref(m);
      const auto p = engine::perplexity(ref, split.held_out);
      row = {{"scheme", "fp32"}, {"perplexity", p.perplexity}, {"perplexity_err", p.perplexity_err},
             {"rel_increase", 0.0}, {"seconds", 0.0},
             {"linear_weight_bytes", quant::linear_weight_bytes(m.config, quant::uniform_plan(m.config, s, group))}};
    } else {
      calib::QuantizeOptions opt;
      opt.scheme = s;
      opt.group = group;
      auto r = calib::quantize(m, tok, text, text_file, opt,
                               [&](const std::string& st, std::size_t d, std::size_t n) { progress(st, d, n); });
      progress.finish();
      split = r.split;
      row = {{"scheme", quant::to_string(s)}, {"perplexity", r.perplexity}, {"perplexity_err", r.perplexity_err},
             {"rel_increase", r.rel_increase}, {"seconds", r.seconds},
             {"linear_weight_bytes", r.qm.linear_weight_bytes()}};
    }
    rows.push_back(row);
  }
  if (json) {
    cli::print_json({{"model", m.source_path}, {"text", text_file}, {"part", "held-out half"},
                     {"held_out_stories", split.held_out_stories}, {"held_out_tokens", split.held_out_tokens},
                     {"calibration_stories", split.calibration_stories}, {"group", group}, {"schemes", rows}});
    return;
  }
  std::printf("held-out half of %s (%zu stories, %zu tokens); calibrated on the first %zu stories\n",
              text_file.c_str(), split.held_out_stories, split.held_out_tokens, split.calibration_stories);
  std::printf("%-12s %10s %8s %9s %14s %9s\n", "scheme", "perplexity", "+/-", "change", "weight bytes", "time s");
  for (const auto& r : rows)
    std::printf("%-12s %10.4f %8.4f %9s %14llu %9.2f\n", r["scheme"].get<std::string>().c_str(),
                r["perplexity"].get<double>(), r["perplexity_err"].get<double>(),
                pct(r["rel_increase"].get<double>()).c_str(),
                static_cast<unsigned long long>(r["linear_weight_bytes"].get<std::uint64_t>()), r["seconds"].get<double>());
}

}  // namespace cli
