#include "perf/train_step.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace perf {

namespace {

double need(const hw::Figure& f, const hw::Device& d, const char* what) {
  if (!f.has()) throw fpgallm::InputError("--device", d.id + " has no " + what + " figure in data/devices.json");
  return *f;
}

// FLOPs, memory and the per-op roofline sum shared by both kinds of card.
TrainStepPrediction common(const model::Config& config, const hw::Device& device, int batch, int seq,
                           const graph::Precision& precision, double usable_ops, double usable_bytes_per_s) {
  graph::Shape shape;
  shape.phase = graph::Phase::train;
  shape.batch = batch;
  shape.seq = seq;
  const graph::Workload w = graph::lower(config, shape, precision);
  TrainStepPrediction p;
  p.model = config.name;
  p.device = device.id;
  p.kind = device.kind;
  p.batch = batch;
  p.seq = seq;
  p.tokens = static_cast<double>(w.tokens());
  for (const auto& op : w.ops) {
    (op.pass == graph::Pass::forward ? p.forward_flops : op.pass == graph::Pass::backward ? p.backward_flops
                                                                                           : p.optimizer_flops) += op.flops;
    if (op.pass == graph::Pass::forward) p.activation_bytes += 4.0 * double(op.m) * double(op.n) * double(op.batch);
    const double compute = op.flops / usable_ops;
    const double memory = op.bytes() / usable_bytes_per_s;
    p.compute_s += compute;
    p.memory_s += memory;
    p.step_s += std::max(compute, memory);
  }
  p.total_flops = p.forward_flops + p.backward_flops + p.optimizer_flops;
  const double params = static_cast<double>(config.n_params());
  p.weight_bytes = 4.0 * params;
  p.gradient_bytes = 4.0 * params;
  p.optimizer_state_bytes = 8.0 * params;
  p.memory_bytes = p.weight_bytes + p.gradient_bytes + p.optimizer_state_bytes + p.activation_bytes;
  p.capacity_bytes = device.memory_capacity_gb() * 1e9;
  p.fits_memory = p.capacity_bytes <= 0 || p.memory_bytes <= p.capacity_bytes;
  return p;
}

void finish(TrainStepPrediction& p, const hw::Device& device) {
  p.min_step_s = p.total_flops / p.peak_ops_per_s;
  p.step_s = std::max(p.step_s, p.min_step_s);  // already true: usable <= peak
  p.steps_per_s = 1.0 / p.step_s;
  p.tokens_per_s = p.tokens / p.step_s;
  p.watts = need(device.tdp_w, device, "tdp_w");
  p.joules_per_step = p.watts * p.step_s;
  p.assumptions.push_back({"board power", p.watts, "W", "TDP (upper bound while busy): " + device.tdp_w.source});
  p.assumptions.push_back({"activations kept for backward", 4, "bytes per element",
                           "fp32, every forward op's output [m x n x batch] (graph::lower, phase train)"});
  p.assumptions.push_back({"master weights + gradients + AdamW moments", 16, "bytes per parameter", "fp32 each"});
}

}  // namespace

TrainStepPrediction predict_train_step_fpga(const model::Config& config, const hw::Device& device, int batch, int seq,
                                            const Constants& c) {
  if (device.kind != hw::Kind::fpga) throw fpgallm::InputError("--device", device.id + " is not an FPGA card");
  const double dsp = need(device.fabric.dsp, device, "DSP count");
  const double macs_per_dsp = need(device.int8_macs_per_dsp, device, "int8 MACs per DSP");
  const hw::Figure& clock_fig = device.kernel_clock_mhz.has() ? device.kernel_clock_mhz : device.max_clock_mhz;
  const double clock_hz = need(clock_fig, device, "kernel clock") * 1e6;
  const double peak = 2.0 * dsp * macs_per_dsp * clock_hz;
  const double ceiling = device.platform.dsp_ceiling;
  const double bw = device.memory_bandwidth_gbps() * 1e9;
  if (!(bw > 0)) throw fpgallm::InputError("--device", device.id + " has no off-chip bandwidth figure");
  const double usable_bw = bw * c.memory_efficiency.value;
  TrainStepPrediction p = common(config, device, batch, seq, graph::parse_scheme("int8"), peak * ceiling, usable_bw);
  p.precision = "int8";
  p.peak_ops_per_s = peak;
  p.peak_formula = fmt::format("2 x {:.0f} DSPs x {:g} int8 MACs/DSP x {:g} MHz = {:.2f} TOPS (every DSP of the card, "
                               "no shell, at the platform kernel clock)",
                               dsp, macs_per_dsp, clock_hz / 1e6, peak / 1e12);
  p.assumptions.push_back({"DSPs", dsp, "", device.fabric.dsp.source});
  p.assumptions.push_back({"int8 MACs per DSP", macs_per_dsp, "", device.int8_macs_per_dsp.source});
  p.assumptions.push_back({"kernel clock", clock_hz / 1e6, "MHz", clock_fig.source});
  p.assumptions.push_back({"usable share of DSPs", ceiling, "fraction", device.platform.ceiling_source});
  p.assumptions.push_back({"off-chip bandwidth", bw / 1e9, "GB/s", "sum of the card's memory pools (data/devices.json)"});
  p.assumptions.push_back({"memory efficiency", c.memory_efficiency.value, "fraction", c.memory_efficiency.source});
  p.assumptions.push_back({"matrix products", 8, "bits", "int8 operands, int32 accumulation, fp32 master weights (docs/training.md)"});
  finish(p, device);
  return p;
}

TrainStepPrediction predict_train_step_gpu(const model::Config& config, const hw::Device& device, int batch, int seq,
                                           const Constants& c) {
  if (device.kind != hw::Kind::gpu) throw fpgallm::InputError("--device", device.id + " is not a GPU");
  const double peak = need(device.peak_bf16_tflops, device, "bf16 tensor peak") * 1e12;
  const double bw = device.memory_bandwidth_gbps() * 1e9;
  const double eff = c.gpu_compute_efficiency.value, beff = c.gpu_eager.bandwidth_efficiency.value;
  TrainStepPrediction p = common(config, device, batch, seq, graph::parse_scheme("bf16"), peak * eff, bw * beff);
  p.precision = "bf16";
  p.peak_ops_per_s = peak;
  p.peak_formula = fmt::format("{:.1f} TFLOPS dense bf16 tensor peak ({})", peak / 1e12, device.peak_bf16_tflops.source);
  p.assumptions.push_back({"compute efficiency", eff, "fraction", c.gpu_compute_efficiency.source});
  p.assumptions.push_back({"bandwidth efficiency", beff, "fraction", "eager PyTorch training step: " + c.gpu_eager.bandwidth_efficiency.source});
  finish(p, device);
  return p;
}

std::string train_step_report(const TrainStepPrediction& f, const TrainStepPrediction& g) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  line(fmt::format("training step of {} (batch {} x seq {} = {:.0f} tokens): forward + backward + AdamW", f.model, f.batch,
                   f.seq, f.tokens));
  line(fmt::format("  FLOPs: forward {:.3g}, backward {:.3g}, optimizer {:.3g}, total {:.3g}", f.forward_flops,
                   f.backward_flops, f.optimizer_flops, f.total_flops));
  line(fmt::format("  memory: fp32 weights {:.3g} GB + gradients {:.3g} GB + AdamW moments {:.3g} GB + activations "
                   "{:.3g} GB = {:.3g} GB",
                   f.weight_bytes / 1e9, f.gradient_bytes / 1e9, f.optimizer_state_bytes / 1e9, f.activation_bytes / 1e9,
                   f.memory_bytes / 1e9));
  for (const auto* p : {&f, &g}) {
    line("");
    line(fmt::format("{} ({} matrix products):", p->device, p->precision));
    line(fmt::format("  peak: {}", p->peak_formula));
    line(fmt::format("  predicted step time {:.1f} ms  (bound: no step can be faster than {:.1f} ms = total FLOPs / peak)",
                     p->step_s * 1e3, p->min_step_s * 1e3));
    line(fmt::format("  compute {:.1f} ms, memory {:.1f} ms summed over ops; {:.2f} steps/s, {:.0f} tokens/s",
                     p->compute_s * 1e3, p->memory_s * 1e3, p->steps_per_s, p->tokens_per_s));
    line(fmt::format("  memory needed {:.2f} GB of {:.0f} GB{}", p->memory_bytes / 1e9, p->capacity_bytes / 1e9,
                     p->fits_memory ? "" : "  (DOES NOT FIT)"));
    line(fmt::format("  power {:.0f} W (TDP), energy {:.2f} J per step", p->watts, p->joules_per_step));
  }
  line("");
  line(fmt::format("{} vs {}: {:.2f}x the step time, {:.2f}x the energy per step", f.device, g.device, f.step_s / g.step_s,
                   f.joules_per_step / g.joules_per_step));
  line(fmt::format("a claim of T ms per step on {} is physically reachable only if T >= {:.1f} ms", f.device,
                   f.min_step_s * 1e3));
  line("assumptions:");
  for (const auto* p : {&f, &g})
    for (const auto& a : p->assumptions)
      line(fmt::format("  [{}] {} = {:g} {}: {}", p->device, a.name, a.value, a.unit, a.source));
  return out;
}

bool reachable(const TrainStepPrediction& p, double claimed_step_s) { return claimed_step_s >= p.min_step_s; }

void to_json(nlohmann::json& j, const TrainStepPrediction& p) {
  j = {{"model", p.model},
       {"device", p.device},
       {"kind", hw::to_string(p.kind)},
       {"precision", p.precision},
       {"batch", p.batch},
       {"seq", p.seq},
       {"tokens", p.tokens},
       {"flops", {{"forward", p.forward_flops}, {"backward", p.backward_flops}, {"optimizer", p.optimizer_flops}, {"total", p.total_flops}}},
       {"memory_bytes",
        {{"weights_fp32", p.weight_bytes},
         {"gradients_fp32", p.gradient_bytes},
         {"adamw_state_fp32", p.optimizer_state_bytes},
         {"activations", p.activation_bytes},
         {"total", p.memory_bytes},
         {"capacity", p.capacity_bytes}}},
       {"fits_memory", p.fits_memory},
       {"peak_ops_per_s", p.peak_ops_per_s},
       {"peak_formula", p.peak_formula},
       {"min_step_s", p.min_step_s},
       {"step_s", p.step_s},
       {"compute_s", p.compute_s},
       {"memory_s", p.memory_s},
       {"steps_per_s", p.steps_per_s},
       {"tokens_per_s", p.tokens_per_s},
       {"watts", p.watts},
       {"joules_per_step", p.joules_per_step},
       {"assumptions", p.assumptions}};
}

}  // namespace perf
