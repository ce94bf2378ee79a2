#pragma once
// The Chrome/Perfetto trace of a simulated run (Trace Event Format, JSON object form).
//   - one process per card: pid = card + 1 (pid 0 is reserved for the kernel's idle task
//     in Perfetto's model), named by process_name metadata;
//   - one thread per unit (tid = unit index + 1), named after the unit. Its slices ("X") are
//     exactly the unit's busy time: a compute unit's tasks, a transfer port's time with a
//     request outstanding (from its issue to its last byte). Slices of one instruction that
//     touch are merged (one per task with per_task), so per unit the slice durations add up
//     to UnitReport::state[busy]. PCIe slices are the host transfers: token ids in, logits
//     out;
//   - a "steps" thread per card: one slice per program (prefill block or decode step);
//   - counter tracks ("C"): per memory port its bandwidth in GB/s (the bytes its channels
//     moved in each interval of the engine's ByteTimeline), per buffer its occupancy in
//     bytes (claims and releases; the maximum in each interval when there are many).
// Timestamps in microseconds from the start of the run.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sim/engine.hpp"
#include "sim/simulate.hpp"

namespace sim {

// op_kind[o]: the kind of operation o ("matmul", "attention", "host", ...).
nlohmann::json trace_json(const Report& rep, const Engine& e, const Result& r, const std::vector<std::string>& op_kind,
                          bool per_task);

}  // namespace sim
