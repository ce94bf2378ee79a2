#pragma once
// perf's own (not part of perf.hpp): what the designs predicted on one Workloads share,
// computed once as they need it. The instruction lists of its phases, grouped by instruction
// shape, so that a design describes each shape once (arch::unit_work) and only sums the
// instructions; the collectives of a step over several cards; the model's weight bytes.
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "arch/program.hpp"
#include "perf/perf.hpp"

namespace perf {

// A program with its instructions grouped by shape: instructions equal but for their name
// and layer have the same unit description. Shapes are numbered in order of first appearance.
struct ShapedProgram {
  arch::Program program;
  std::vector<arch::Instruction> shapes;  // name and layer cleared
  std::vector<int> shape_of;              // per instruction
  std::vector<int> first_of;              // per shape: its first instruction
};

// The collectives of one step over several cards (card_transfers) and the matmuls they surround.
struct Step {
  std::vector<Transfer> transfers;
  std::vector<std::string> linears;  // the distinct Transfer::linear, in order of appearance
  std::vector<int> linear_of;        // per transfer: its index in linears; -1 for a pipeline hand-off
};

// One program of a phase as a design runs it: the program, its step's collectives, and per
// instruction the index in step->linears of the collectives around it (-1: none).
struct ProgramRun {
  const ShapedProgram* program = nullptr;
  const Step* step = nullptr;
  const std::vector<int>* linear_of = nullptr;
};

struct WorkloadCache {
  struct ProgramKey {
    arch::Stage stage;
    int pos, tokens;
    arch::ProgramFields fields;
    bool operator==(const ProgramKey&) const = default;
  };
  struct ProgramKeyHash {
    std::size_t operator()(const ProgramKey& k) const;
  };
  // stage, tokens, cards, split, dynamic activation scales
  using StepKey = std::tuple<int, int, int, int, bool>;
  struct Program {
    std::optional<ShapedProgram> shaped;  // empty: the instruction list cannot express the model
    std::map<const Step*, std::vector<int>> linear_of;
  };

  std::mutex mutex;
  std::unordered_map<ProgramKey, Program, ProgramKeyHash> programs;
  std::map<StepKey, Step> steps;
  std::optional<double> decode_weight_bytes;
};

// The runs of one phase of `wl` for design `d`, as the simulator runs them: prefill in blocks
// of tiling.prefill_block tokens, decode one token at position context - 1 (`context` stands
// for the decode phase's). Empty when the instruction list cannot express the model. The
// workload's phases have one config and precision per stage.
std::vector<ProgramRun> phase_runs(WorkloadCache& cache, const graph::Workload& wl, int context, const arch::Design& d,
                                   bool dynamic_scale);

// decode.model_weight_bytes(), computed once.
double model_weight_bytes(WorkloadCache& cache, const graph::Workload& decode);

}  // namespace perf
