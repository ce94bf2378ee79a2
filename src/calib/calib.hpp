#pragma once
// Calibration and precision decisions: the calibration / held-out split, activation
// statistics, per-layer sensitivity, the mixed-precision search, and the whole
// `fpgallm quantize` flow. Runs the fp32 engine (with simulated quantization).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "calib/simulated.hpp"
#include "engine/perplexity.hpp"
#include "quant/quant.hpp"

namespace calib {

// Progress callback: (stage label, done, total).
using ProgressFn = std::function<void(const std::string& stage, std::size_t done, std::size_t total)>;

// Stories split by position: the first half calibrates, the second half is held out.
// A held-out story identical to a calibration story is dropped (never the same lines).
// Throws InputError(source, ...) when either half would be empty or too short to measure.
struct Split {
  std::vector<std::vector<int>> calibration, held_out;
  std::size_t calibration_stories = 0, held_out_stories = 0, dropped_duplicates = 0;
  std::size_t calibration_tokens = 0, held_out_tokens = 0;
};
inline constexpr std::size_t kMinTokensPerHalf = 32;
Split split_text(const model::Tokenizer& tok, const std::string& text, const std::string& source);
Split split_text(const model::StoryEncoder& encode, const std::string& text, const std::string& source);

// The first stories of `seqs` up to n predicted tokens (the last one cut); n = 0: all.
std::vector<std::vector<int>> first_tokens(const std::vector<std::vector<int>>& seqs, std::size_t n);

quant::ActStats collect_stats(const model::Model& m, const std::vector<std::vector<int>>& sequences,
                              const ProgressFn& progress = {});
// x x^T sums at the input sites of block `layer` (HessianTransformer::kAllLayers: every
// site; -1: the classifier's) while `m` runs `plan` with `linears` (Plan::layers order).
quant::Hessians collect_hessians(const model::Model& m, const quant::Plan& plan,
                                 const std::vector<quant::QuantLinear>& linears,
                                 const std::vector<std::vector<int>>& sequences, int layer, const ProgressFn& progress = {});
// GPTQ of every int4 layer of `plan`, block by block: the Hessians of block l come from
// the model with blocks < l already quantized (and run as the plan runs them); the
// classifier last. The other layers are quantized as quantize_model does.
std::vector<quant::QuantLinear> quantize_gptq(const model::Model& m, const quant::Plan& plan,
                                              const std::vector<std::vector<int>>& sequences,
                                              const quant::GptqOptions& opt, const ProgressFn& progress = {});

// Sets act_scale = amax / 127 of every int8-static layer from the statistics.
void apply_static_scales(quant::Plan& plan, const quant::ActStats& stats);

// Perplexity of `base` run under `plan` with the quantized `linears` (Plan::layers order).
engine::Perplexity evaluate(const model::Model& base, const quant::Plan& plan,
                            const std::vector<quant::QuantLinear>& linears,
                            const std::vector<std::vector<int>>& sequences, const ProgressFn& progress = {},
                            FloatProducts products = FloatProducts::token_bits);
engine::Perplexity evaluate(const quant::QuantModel& qm, const std::vector<std::vector<int>>& sequences,
                            const ProgressFn& progress = {});

// One precision a layer may take in the sensitivity analysis and the mixed search:
// weight-only (activations fp16), as the mixed plan uses.
struct Candidate {
  quant::WeightFormat weight;
  int group;  // int4 only
  std::string name() const;  // "int8", "int4-g32", ...
};
struct LayerSensitivity {
  int layer;
  model::Linear which;
  Candidate candidate;
  double perplexity;
  double rel_increase;     // (ppl - ppl_fp32) / ppl_fp32
  std::uint64_t bytes;     // of this layer in this precision
};
struct SensitivityTable {
  double fp32_perplexity = 0;
  std::size_t tokens = 0;
  std::vector<Candidate> candidates;   // measured, each for every layer
  std::vector<LayerSensitivity> rows;  // sorted, most sensitive first
};
// How the sensitivity analysis and the mixed search quantize one layer to a candidate:
// int4 by `method` on the layer alone, int8 and fp16 by round to nearest. AWQ's folding is
// done on the model beforehand (its int4 codes are then round to nearest of the folded
// weights); GPTQ runs on the layer with `hessians` (the fp32 model's, every site), which
// search_scales also needs (Hessian-weighted for rtn and awq, as quantize does).
struct LayerMethod {
  quant::Method method = quant::Method::rtn;
  bool act_order = false;
  bool search_scales = false;
  const quant::Hessians* hessians = nullptr;

  quant::QuantLinear quantize(const model::Model& m, int layer, model::Linear which, const Candidate& c) const;
};
// Each (layer, candidate) quantized alone by `method`; measured on `sequences` (the
// calibration half). Each pass runs only the blocks from the layer's on (the earlier ones'
// output kept from one fp32 pass): the same bits as the whole pass.
SensitivityTable sensitivity(const model::Model& m, const std::vector<std::vector<int>>& sequences,
                             const std::vector<Candidate>& candidates, const ProgressFn& progress = {},
                             const LayerMethod& method = {});
void to_json(nlohmann::json& j, const SensitivityTable& t);
// What the mixed search at int4 `group` can choose: int8 and int4 at `group`; with
// informational_groups also int4 g32 and g128 (shown, never chosen).
std::vector<Candidate> sensitivity_candidates(int group, bool informational_groups);

struct SearchResult {
  quant::Plan plan;
  double fp32_perplexity = 0;  // held-out
  double perplexity = 0;       // held-out, the final plan
  double rel_increase = 0;
  double budget = 0;           // relative (0.01 = 1%)
  bool budget_met = false;
  int verifications = 0;
  std::uint64_t bytes = 0;
};
// Greedy by bytes saved per unit of sensitivity (from `table`), predicted loss = sum of
// sensitivities; then evaluated on `held_out` (every layer quantized by `method`) and
// backed off while over budget. fp32_perplexity: m's on held_out when measured already.
SearchResult search_mixed(const model::Model& m, const SensitivityTable& table, int group, double budget,
                          bool kv8, const std::vector<std::vector<int>>& held_out, const ProgressFn& progress = {},
                          const LayerMethod& method = {}, std::optional<double> fp32_perplexity = {});
// Every layer of `plan` quantized by `method` (fp32 layers kept): the mixed plan's weights.
std::vector<quant::QuantLinear> quantize_layers(const model::Model& m, const quant::Plan& plan, const LayerMethod& method);

struct QuantizeOptions {
  quant::Scheme scheme = quant::Scheme::w8a8;
  int group = 32;
  quant::Method method = quant::Method::rtn;  // other than rtn: w4a8 and w4a16 only
  bool act_order = false;                     // gptq
  // int4 group scales searched over clip ratios for the least Hessian-weighted error
  // (quant::search_int4_scale) instead of max |w| / 7.
  bool search_scales = false;
  float alpha = 0.5f;
  double budget = 0.01;  // relative
  bool kv8 = false;
  // mixed: the sensitivity runs on the first this many predicted tokens of the
  // calibration half (whole stories in order, the last one cut; 0 = all).
  std::size_t sensitivity_tokens = 1024;
  // mixed: also measure the int4 groups the search does not choose (g32 and g128 other than
  // `group`), for the table only: a pass per layer each.
  bool informational_groups = false;
  // The fp32 held-out perplexity when the caller has measured it already on the same text
  // and model (deploy tries several schemes); measured here otherwise.
  std::optional<engine::Perplexity> fp32_held_out;
};
struct QuantizeResult {
  quant::QuantModel qm;
  Split split;
  double fp32_perplexity = 0, fp32_perplexity_err = 0;  // held-out
  engine::Perplexity fp32_held_out;                     // the whole measurement of those two
  double perplexity = 0, perplexity_err = 0;            // held-out, quantized
  double rel_increase = 0;
  std::uint64_t fp32_bytes = 0;
  std::optional<SensitivityTable> sensitivity;  // mixed only
  std::optional<SearchResult> search;           // mixed only
  quant::Method method = quant::Method::rtn;
  bool search_scales = false;
  std::vector<quant::AwqSite> awq;              // awq: what each site chose
  double seconds = 0;                           // the quantization itself (without evaluation)
  // Forward passes over the calibration half the quantization ran (statistics, Hessians,
  // sensitivity excluded): a deterministic measure of its cost.
  int calibration_passes = 0;
  // > 0: the weights are round-to-nearest of this many steps of quantization-aware training
  // (train/qat.hpp) on the calibration half.
  int qat_steps = 0;
};
// "qat" for quantization-aware training, else quant::to_string(r.method).
std::string method_name(const QuantizeResult& r);
// The whole flow on a model: split, calibrate, (smooth), (sensitivity + search), quantize,
// evaluate fp32 and the result on the held-out half.
QuantizeResult quantize(const model::Model& m, const model::Tokenizer& tok, const std::string& calib_text,
                        const std::string& calib_source, const QuantizeOptions& opt, const ProgressFn& progress = {});
QuantizeResult quantize(const model::Model& m, const model::StoryEncoder& encode, const std::string& calib_text,
                        const std::string& calib_source, const QuantizeOptions& opt, const ProgressFn& progress = {});
// What quantize() measured, as the `quantize --json` report and the Python binding give it:
// calibration and held-out split, fp32 and quantized perplexity, bytes, seconds, and the
// sensitivity table when there is one.
nlohmann::json measurements_json(const QuantizeResult& r, const std::string& calib_file);

}  // namespace calib
