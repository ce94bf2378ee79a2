#pragma once
// sim::simulate: a Design on its Device executing the per-layer instruction list
// (arch::Program, the same list the accelerator backend runs and the emitted kernel
// decodes) on sim::Engine. What each instruction costs on its unit comes from the units'
// description, arch::unit_work (loops, trip counts, II, depth, bytes per port: the
// schedule table of the emitted project and the analytical model read the same); what the
// simulator adds is the execution of those pieces in time:
//   - the controller fetches each instruction and issues it after the previous one
//     finished (the kernel's instruction loop is sequential);
//   - a matmul streams its weights over the weight channels in pieces (decode: the
//     DATAFLOW stream through the 64-word channel FIFOs; prefill: weight tiles, double-
//     buffered in buffers.weight_bytes when two fit), each piece feeding the matrix unit;
//     request latency is exposed when a stream starts or stalls;
//   - every other instruction occupies its unit for the description's cycles while its
//     bytes move on the parameter and KV bundles;
//   - host transfers over PCIe; over several cards the executor's collectives
//     (perf::card_transfers: max and sum all-reduces around wo and w2 and the logits
//     all-gather for a tensor split, stage hand-offs and the logits back to card 0 for a
//     pipeline split) as ring steps on each card's link, with the analytical model's
//     volumes and link figures.
// Port rates and latencies come from perf::port_rates (hw::Device, perf::constants(),
// data/sim_model.json): one copy of every number.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "arch/design.hpp"
#include "arch/program.hpp"
#include "hw/device.hpp"
#include "model/config.hpp"
#include "perf/perf.hpp"
#include "sim/engine.hpp"

namespace sim {

struct Options {
  arch::Stage stage = arch::Stage::decode;
  int prompt = 128;   // prefill: prompt tokens (split into programs of tiling.prefill_block)
  int context = 512;  // decode: positions the new token attends (itself included)
  // prefill: decode steps that follow it on the same timeline (positions prompt,
  // prompt + 1, ...), as `simulate --tokens N` traces them; 0 = the prefill alone.
  int decode_steps = 0;
  arch::PrecisionFn precision;  // per-linear weight bits; default: the design's weight_bits
  // No memory request latency and buffers deep enough for any number of pieces in flight,
  // to attribute a difference to latency and buffering. Everything else stays as simulated.
  bool idealized = false;
};

struct Assumption {
  std::string name;
  double value = 0;
  std::string unit;
  std::string source;
};

struct OpReport {
  std::string name;     // instruction name ("blk.3.wq")
  std::string kind;     // arch::Op ("matmul", "attention", ...)
  int layer = -1;
  int card = 0;
  int program = 0;      // prefill block index (0 for decode)
  Cycles start = 0;
  Cycles cycles = 0;    // first task start to last task end
  std::string critical; // unit with the most busy cycles in this operation
  Cycles critical_cycles = 0;
  std::vector<std::pair<std::string, Cycles>> busy;  // per unit with work in this op
  std::int64_t tasks = 0;
};

struct UnitReport {
  std::string name;
  std::string kind;
  int card = 0;
  Cycles state[kStates] = {};
  double utilization = 0;         // busy / total (compute), data time / total (ports)
  std::int64_t bytes = 0;
  std::vector<double> channel_utilization;  // ports: per channel data time / total
};

struct LayerReport {
  int layer = -1;
  int card = 0;
  Cycles start = 0;
  Cycles cycles = 0;  // summed over programs (prefill blocks)
};

// One program of the run: a prefill block or a decode step, from its first task's start to
// its last task's end (all cards).
struct StepReport {
  arch::Stage stage = arch::Stage::decode;
  int position = 0;  // first position
  int tokens = 1;
  Cycles start = 0;
  Cycles cycles = 0;
};

struct Report {
  std::string model, design, device;
  arch::Stage stage = arch::Stage::decode;
  int tokens = 0;       // tokens processed (prompt + decode steps, or 1)
  int context = 0;      // decode context / prefill prompt
  int programs = 0;
  int decode_steps = 0; // decode steps after the prefill (Options::decode_steps)
  int cards = 1;
  double clock_mhz = 0;
  Cycles cycles = 0;
  double seconds = 0;
  double tokens_per_s = 0;
  std::int64_t tasks = 0;
  std::vector<OpReport> ops;
  std::vector<LayerReport> layers;
  std::vector<StepReport> steps;
  std::vector<UnitReport> units;
  std::vector<Assumption> assumptions;
  std::vector<std::string> notes;  // placement and modelling choices of this run
  // Card-to-card communication: the collectives simulated (all programs), and the bytes
  // each card's link carried per token (index = card; empty on one card).
  std::vector<perf::Transfer> transfers;
  std::vector<double> link_bytes_per_token;
};

struct TraceOptions {
  bool enabled = false;
  bool tasks = false;  // one event per task (tile) instead of one per operation and unit
};

// Throws fpgallm::InputError when the design is invalid, its device lacks a figure the
// simulator needs, or the phase does not fit the model (context past seq_len).
Report simulate(const model::Config& config, const arch::Design& design, const hw::Device& device,
                const Options& options);
// The same, also collecting a Chrome/Perfetto trace (Trace Event Format JSON object:
// {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}): one process per
// card (pid = card + 1), one named thread per unit whose slices are exactly its busy time
// (they add up to UnitReport::state[busy]), a "steps" thread with one slice per program,
// and counter tracks of each memory port's bandwidth and each buffer's occupancy.
Report simulate(const model::Config& config, const arch::Design& design, const hw::Device& device,
                const Options& options, const TraceOptions& trace, nlohmann::json& trace_out);

void to_json(nlohmann::json& j, const Report& r);

}  // namespace sim
