#pragma once
// Design-space exploration over several processes (`mpirun -np N fpgallm explore`): the
// sweep is a list of (model, device) items numbered model-major; each rank explores the
// items `partition` gives it and ships its results (`serialize`); rank 0 puts every item
// back in order (`merge`) and `combine`s each model's devices exactly as one process does,
// so the output is the same. Pure functions: the exchange itself is in
// src/cli/cmd_explore.cpp.
#include <string>
#include <vector>

#include "dse/dse.hpp"

namespace dse {

// Relative cost of exploring one item, a rough estimate: the FPGA search predicts dozens of
// designs over the model's operations for each card count it tries (1, 2, 4, ... until the
// weights and KV cache fit), a GPU baseline one prediction, a card without memory figures
// none. The balance it gives is measured in bench/README.md (bench_mpi.sh).
double item_cost(const Request& request, const perf::Workloads& workloads, const hw::Device& device);

// The part (rank) that explores each item: longest processing time first, i.e. items by
// decreasing cost (ties: lower index first), each to the part with the least cost so far
// (ties: lower part). Deterministic; no part's total exceeds another's by more than the
// largest item's cost.
std::vector<int> partition(const std::vector<double>& costs, int parts);
// The items of `part`, in index order.
std::vector<int> items_of(const std::vector<int>& owners, int part);

struct Item {
  int index = 0;         // position in the sweep (model-major)
  DeviceResult result;
  double seconds = 0;    // wall time of its exploration on the rank that ran it
};

// A binary (CBOR) encoding of explored items that keeps every figure bit for bit. The
// per-operation lists of a prediction travel only with each device's best design and only
// when `with_ops` (the roofline of --svg reads them); the ranked list keeps its best entry
// (the output shows the best design and the Pareto front); the Pareto front's designs travel
// with their figures, without assumptions, notes or collectives.
std::string serialize(const std::vector<Item>& items, bool with_ops);
// Throws std::invalid_argument for bytes serialize did not produce.
std::vector<Item> deserialize(const std::string& bytes);
// Every part's items in index order. Throws std::invalid_argument when an index of
// 0..count-1 is missing or appears twice.
std::vector<Item> merge(const std::vector<std::vector<Item>>& parts, int count);

}  // namespace dse
