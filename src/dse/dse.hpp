#pragma once
// dse: design-space exploration. For one card it enumerates the accelerator designs the
// method below allows, prunes those that do not fit (hw's resource model; off-chip memory
// with the KV cache at the requested context), predicts the rest with perf, ranks them by
// an objective and keeps the Pareto front of tokens/s against joules/token.
//
// The method, in the order experienced FPGA designers apply it:
//  1. the bit widths come from the quantization scheme (or plan);
//  2. the off-chip bandwidth decides the tiling: the MACs worth building are those that
//     consume weights as fast as memory delivers them, times the reuse of each fetched
//     tile (batch, prefill block); more MACs at batch 1 only wait;
//  3. the tile decides the parallelism, matched to the memory ports that feed it (one
//     512-bit port per channel; buffer banking multiplies BRAM; a congested chip loses clock);
//  4. at batch 1, residency before compute: a model whose weights fit on chip gets a
//     dataflow design with no weight traffic; otherwise weights stream.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "arch/design.hpp"
#include "graph/workload.hpp"
#include "hw/device.hpp"
#include "perf/perf.hpp"
#include "quant/quant.hpp"

namespace dse {

enum class Objective { decode_tps, prefill_latency, tokens_per_joule, usd_per_mtoken };
const char* to_string(Objective o);
// Throws fpgallm::InputError("--objective", ...) for an unknown name.
Objective objective_from_string(const std::string& s);

struct Request {
  model::Config config;
  graph::Precision precision;
  perf::Scenario scenario;  // batch, prompt, context
  int max_cards = 4;
  // The kept designs' predictions with their per-operation lists (plan's tables, a
  // roofline); without them, the same totals.
  bool operation_lists = true;
};

struct Candidate {
  arch::Design design;
  perf::Prediction prediction;  // watts, J/token and USD/Mtok of all the design's cards
  double price_usd = 0;         // purchase price of all the design's cards; 0 when unknown
  std::string binding;         // the resource closest to its ceiling ("dsp 62% of ceiling")
  double binding_fraction = 0; // used / ceiling of that resource
};

struct DeviceResult {
  std::string device;
  hw::Kind kind = hw::Kind::fpga;
  std::vector<Candidate> ranked;  // best first (at most a few dozen kept)
  std::vector<Candidate> pareto;  // non-dominated in (decode tokens/s up, joules/token down)
  int evaluated = 0;
  int rejected_resources = 0;
  int rejected_memory = 0;
  std::vector<std::string> why_not;  // when nothing fits: the reasons, in words
  std::vector<std::string> method;   // what each step of the method decided

  bool fits() const { return !ranked.empty(); }
  const Candidate& best() const { return ranked.front(); }
};

// Higher is better for every objective (latencies and costs are negated); -infinity when
// the prediction lacks the figure the objective needs (no power or price figure).
double score(const perf::Prediction& p, Objective o);
// Whether p has the figure objective o ranks by.
bool scorable(const perf::Prediction& p, Objective o);
// Best first by the objective; candidates it cannot score (unknown power or price) after
// those it can, among themselves by decode tokens/s; equal figures: the smaller design.
bool better(const Candidate& a, const Candidate& b, Objective o);

// FPGA: the design-space search. GPU: the baseline on the fewest GPUs (up to 8) that hold
// the model, with the CUDA-graph serving stack.
DeviceResult explore_device(const hw::Device& device, const Request& request, Objective objective,
                            const perf::Workloads& workloads);

struct Exploration {
  std::vector<DeviceResult> devices;  // ranked by the objective, those that fit first
  std::vector<std::string> advice;    // plain words
};
Exploration explore(const std::vector<const hw::Device*>& devices, const Request& request, Objective objective);
// What explore does after the per-device searches: `results` (one explore_device per
// device, in the order of the device list) ranked by the objective, with the advice.
Exploration combine(std::vector<DeviceResult> results, const Request& request, Objective objective);

// The precision a quantization plan gives the workload: per-layer weight bits, activation
// and KV widths, int4 group. Throws std::invalid_argument for a plan without layers.
graph::Precision precision_of(const quant::Plan& plan);
int weight_bits(quant::WeightFormat f);

// What would make the model fit: "int4 weights (3.4 GB)", "2 cards", "a context of 1024";
// when weights and KV cache already fit the card's memory, a card with more fabric.
std::string fit_suggestion(const Request& request, const hw::Device& device);

void to_json(nlohmann::json& j, const Candidate& c);
void to_json(nlohmann::json& j, const DeviceResult& r);
void to_json(nlohmann::json& j, const Exploration& e);

}  // namespace dse

namespace dse {

// What a mixture of experts changes on FPGA cards. Every expert must be stored, but a
// decode step reads only the experts its tokens route to, so the off-chip memory that
// holds the model is mostly idle per step: the card count is set by capacity, and the
// step time by the (much smaller) bytes read. Figures come from graph::Workload.
struct MoeAnalysis {
  bool moe = false;
  double stored_bytes = 0;          // weights held (every expert)
  double read_bytes_per_step = 0;   // weights one decode step reads (active experts, attention, classifier)
  double read_fraction = 0;         // read / stored
  double experts_per_step = 0;      // distinct experts one MoE block's step reads (uniform routing)
  int cards_for_capacity = 0;       // cards whose memory holds weights + KV cache
  double step_read_s = 0;           // read_bytes_per_step at the cards' peak bandwidth
  double dense_read_s = 0;          // the same stored bytes read every step, as a dense model would
  bool capacity_bound = false;      // under half of the stored bytes are read per step
  // Expert placement over `cards` cards: experts of each MoE block split evenly, the
  // expected distinct cards a token's experts live on, and activation bytes sent per token.
  int cards = 1;
  int experts_per_card = 0;
  double cards_per_token = 0;
  double expert_parallel_bytes_per_token = 0;
  double layer_split_bytes_per_token = 0;
  std::vector<std::string> notes;
};
MoeAnalysis analyze_moe(const Request& request, const hw::Device& device, const perf::Workloads& workloads, int cards);
void to_json(nlohmann::json& j, const MoeAnalysis& m);

}  // namespace dse
