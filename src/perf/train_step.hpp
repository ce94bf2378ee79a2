#pragma once
// Training-step prediction (forward, backward, AdamW) of a model on one card, and the bound
// no prediction or claim may beat: the card's peak arithmetic rate at the training
// precision. FLOPs and bytes come from graph::lower(phase train); device figures from
// data/devices.json; efficiency constants from data/perf_model.json. Roofline per
// operation: time = max(FLOPs / usable compute, bytes / usable bandwidth), summed.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "graph/workload.hpp"
#include "hw/device.hpp"
#include "perf/perf.hpp"

namespace perf {

struct TrainStepPrediction {
  std::string model, device;
  hw::Kind kind = hw::Kind::fpga;
  std::string precision;          // matrix-product operands: "int8" (FPGA), "bf16" (GPU)
  int batch = 0, seq = 0;
  double tokens = 0;

  double forward_flops = 0, backward_flops = 0, optimizer_flops = 0, total_flops = 0;

  // Memory (bytes): fp32 master weights, fp32 gradients, two fp32 AdamW moments, and the
  // forward activations kept for the backward pass (fp32, every forward op's output).
  double weight_bytes = 0, gradient_bytes = 0, optimizer_state_bytes = 0, activation_bytes = 0;
  double memory_bytes = 0, capacity_bytes = 0;
  bool fits_memory = true;

  double peak_ops_per_s = 0;      // the card's peak at `precision`
  std::string peak_formula;       // how it was obtained, with sources
  double min_step_s = 0;          // total_flops / peak: no step can be faster
  double step_s = 0;              // predicted (>= min_step_s by construction)
  double compute_s = 0, memory_s = 0;  // sums of the per-op compute and memory times
  double steps_per_s = 0, tokens_per_s = 0;
  double watts = 0;               // board power assumed while training
  double joules_per_step = 0;

  std::vector<Assumption> assumptions;
};

// FPGA card: peak = DSPs x int8 MACs per DSP x 2 x kernel clock; usable compute applies the
// DSP utilization ceiling of the platform; memory-bound ops use the off-chip bandwidth x
// memory_efficiency. Throws fpgallm::InputError when the device lacks a needed figure.
TrainStepPrediction predict_train_step_fpga(const model::Config& config, const hw::Device& device, int batch, int seq,
                                            const Constants& c = constants());
// GPU: dense bf16 tensor peak x gpu_compute_efficiency, HBM x gpu_bandwidth_efficiency.
TrainStepPrediction predict_train_step_gpu(const model::Config& config, const hw::Device& device, int batch, int seq,
                                           const Constants& c = constants());

// Whether a claimed step time is physically possible on the card: claimed >= min_step_s.
bool reachable(const TrainStepPrediction& p, double claimed_step_s);

void to_json(nlohmann::json& j, const TrainStepPrediction& p);

// The human-readable training plan: the card's prediction with its bound stated beside it,
// the GPU baseline, and the assumptions (what `fpgallm plan --phase train` prints).
std::string train_step_report(const TrainStepPrediction& card, const TrainStepPrediction& baseline);

}  // namespace perf
