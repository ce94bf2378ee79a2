#pragma once
// One design, two descriptions (issue 29, item 7). perf::predict costs a design two ways:
// Hardware::fpgallm_kernels (the instruction list with the units' description,
// arch::unit_work: what plan and simulate use) and Hardware::published_accelerator (the
// per-operation overlay model that validate uses for published designs). The
// per-operation path is the kernel path's limit with ideal units; compare_paths costs a
// design both ways, then the kernel path again with each ideal-unit assumption applied in
// turn, and says how much of the difference each assumption accounts for.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "perf/perf.hpp"

namespace arch {

// The assumptions under which fpgallm's kernels cost what the per-operation model costs.
// Each one replaces a property of the kernels (left) by the per-operation model's (right);
// compare_paths applies the ones set, in this order.
struct IdealUnits {
  // Attention's QK and PV products on the matrix unit (rows x cols / ii MACs per cycle, each
  // head's product tiled on its own), the KV stream overlapping them, then softmax's three
  // passes over the scores on the vector unit's lanes; not the attention loops of the
  // vector unit (one KV beat per cycle, scores, values and combine one after another).
  bool attention_on_matrix_unit = true;
  // The prefill's classifier for the prompt's last token only, once (what generation needs);
  // not the logits of every token of every prefill block, as the kernels compute them.
  bool classifier_last_token_only = true;
  // A matmul's weight loads, activation loads and requantizing store overlap its MACs: the
  // larger of the weights at the weight channels' rate and the MACs at rows x cols / ii; not
  // the tiled unit's stages (a tile's weight rows and the tokens' activation columns one
  // word per cycle, the store one output per cycle after each row of tiles, the logits one
  // float per cycle).
  bool matmul_stages_overlapped = true;
  // Vector work as operators: a norm two passes, RoPE, residual adds and activations one
  // pass over their elements at the vector unit's lanes per cycle, and the quantize and
  // KV-store instructions inside their producers' store stages; not the kernels' own loops
  // (the parameters loaded per instruction, RoPE a head vector at a time, quantize and
  // KV-store instructions of their own).
  bool vector_work_as_operators = true;
  // The KV cache in the first memory with room after the weights (where the per-operation
  // model puts it); not where the kernels' bank map (connectivity.cfg) puts it.
  bool kv_in_first_free_memory = true;
  // KV read over design.memory.kv_channels ports (0: the weight channels) of that memory;
  // not over the kernels' two bundles kv_k and kv_v at one channel's rate each.
  bool kv_over_all_kv_channels = true;
  // Fixed costs per instruction from data/perf_model.json (issue_cycles, dma_setup_cycles per
  // channel streamed from, cu_barrier_cycles, one first access of the memory); not the
  // controller's fetch (a request and 16 words) and each loop's own request latency.
  bool fixed_costs_per_operation = true;
};

}  // namespace arch

namespace perf {

// What one assumption accounts for: (kernel path before it - after it) / (kernel - per-op).
struct PathDifference {
  std::string assumption;  // the IdealUnits field, or "rest"
  std::string what;        // in words, with this design's figures
  double fraction = 0;     // signed share of the difference; all parts of a phase sum to 1
};

struct PhasePaths {
  double kernel_s = 0;         // Hardware::fpgallm_kernels
  double per_operation_s = 0;  // Hardware::published_accelerator
  double ideal_kernel_s = 0;   // the kernel path with every IdealUnits assumption set
  std::vector<PathDifference> parts;  // empty where both paths cost the design the same way
  // |kernel - per-operation| / per-operation.
  double relative_difference() const;
};

struct TwoPaths {
  arch::IdealUnits ideal;
  bool on_instruction_list = false;  // false: the kernel path fell back to the per-operation model
  PhasePaths decode;                 // one decode step
  PhasePaths prefill;                // prefill_s of both predictions (the tiled prefill)
};

TwoPaths compare_paths(const arch::Design& design, const hw::Device& device, const Workloads& w,
                       const arch::IdealUnits& ideal = {}, const Constants& c = constants());

// The block `fpgallm plan` prints when a phase's paths differ by more than `threshold`
// (relative); empty otherwise.
std::string two_paths_text(const TwoPaths& t, double threshold = 0.10);

void to_json(nlohmann::json& j, const PathDifference& d);
void to_json(nlohmann::json& j, const PhasePaths& p);
void to_json(nlohmann::json& j, const TwoPaths& t);

}  // namespace perf
