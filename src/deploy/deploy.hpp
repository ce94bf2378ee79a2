#pragma once
// `fpgallm deploy`: the whole flow as a named list of steps (FINN-style): quantize under
// an accuracy budget, plan for the card, simulate the chosen design, emit the HLS project,
// verify the quantized model through the accelerator backend, write the report. Every
// artifact goes to a temporary folder that is renamed to the output folder only when all
// steps succeeded, so a failure never leaves a half-written deployment.
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/calib.hpp"

namespace deploy {

struct Options {
  std::string model;        // checkpoint
  std::string tokenizer;    // "" = the model's own / beside it
  std::string device;       // hw device id
  std::string text;         // calibration + held-out text, one story per line
  std::string out_dir;
  double budget = 0.01;     // relative held-out perplexity increase allowed over fp32
  int sample_steps = 200;   // greedy sample length (positions)
  int context = 0;          // design context; 0 = the model's
  // > 0: where a scheme's post-training methods all miss the budget, this many steps of
  // quantization-aware training (train::qat_options) are tried next, for the schemes QAT
  // trains (w8a8, w4a8, w4a16).
  int qat_steps = 0;
};

struct StepTime {
  std::string name;
  double seconds = 0;
};

struct Result {
  std::string out_dir;
  nlohmann::json summary;   // also written as summary.json
  std::vector<StepTime> steps;
};

// A scheme deploy may take: int4 ones are tried with each method in `methods`, in order;
// search_scales (calib::QuantizeOptions) for every method but rtn.
struct SchemeChoice {
  quant::Scheme scheme;
  int group;
  std::vector<quant::Method> methods = {quant::Method::rtn};
  bool search_scales = false;
};
// The schemes this build's deploy tries, fewest weight bytes first; 4-bit by RTN, then AWQ
// and GPTQ with searched scales (in order of cost). With the code generator built, 4-bit
// weights are not among them (emit writes int8 weights only); `skipped` says so.
const std::vector<SchemeChoice>& accel_schemes();
struct SkippedScheme {
  std::string scheme, reason;
};
const std::vector<SkippedScheme>& skipped_schemes();

struct Quantized {
  calib::QuantizeResult chosen;  // the first within budget, else the one of least loss
  bool budget_met = false;
  // Every (scheme, method) tried, in order: scheme, group, method, search_scales, perplexity, its
  // uncertainty, rel_increase, weight_bytes, calibration_passes (the quantization's cost),
  // meets_budget, deployed. Deterministic, as the deployment's files are.
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> seconds;  // wall time of each row's quantization (deploy.log)
};
// The quantize step: each (scheme, method) in order, then QAT when qat_steps > 0, scored on
// the held-out half of `text`, until one meets `budget`.
Quantized choose_quantization(const model::Model& m, const model::Tokenizer& tok, const std::string& text,
                              const std::string& source, double budget, const std::vector<SchemeChoice>& schemes,
                              const calib::ProgressFn& progress = {}, std::ostream* log = nullptr, int qat_steps = 0);

// The step names in order, for progress displays.
const std::vector<std::string>& step_names();

// on_step(i, n, name) before each step (1-based i); on_progress(label, done, total) inside.
Result run(const Options& options, const std::function<void(int, int, const std::string&)>& on_step = {},
           const std::function<void(const std::string&, std::size_t, std::size_t)>& on_progress = {});

// The self-contained HTML report of a deployment summary (plots inline as SVG).
std::string report_html(const nlohmann::json& summary, const std::string& roofline_svg,
                        const std::string& pareto_svg);

}  // namespace deploy
