#pragma once
// perf: the analytical performance model. Per operation of a graph::Workload,
//   time = max(compute, off-chip traffic)            (double-buffered tiles)
//        + fixed latencies                            (issue, DMA set-up, pipeline fill)
// summed over the phase, plus host transfers over PCIe and, over several cards, the
// card-to-card collectives of the executed scheme (card_transfers below). FPGA designs (arch::Design on an hw::Device) and GPU baselines
// (same workload, documented efficiency factors) use the same Prediction. Every
// Prediction carries the assumptions it rests on and never exceeds the peak arithmetic or
// memory bandwidth of its hardware. Equations and sources: docs/performance-model.md.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "arch/design.hpp"
#include "arch/units.hpp"
#include "graph/workload.hpp"
#include "hw/device.hpp"
#include "hw/memory_map.hpp"
#include "hw/power.hpp"

namespace perf {

// How a fitted constant is fitted (data/perf_model.json "fit"): the grid `fpgallm validate`
// searches for the value with the least median |error| over the timing rows of the CSV it
// is given (ties: least mean |error|, then nearest the derivation), and the value the
// design's structure gives without a fit, with where it comes from.
struct ConstantFit {
  double min = 0, max = 0, step = 0;
  double derivation = 0;
  std::string derivation_source;
};

// One constant of the model, as read from data/perf_model.json.
struct Constant {
  double value = 0;
  std::string unit;
  std::string source;
  std::optional<ConstantFit> fit;  // set for the constants fitted over published rows
};

// The GPU software stacks a baseline can name, each with its own per-layer host overhead
// and achieved bandwidth (docs/performance-model.md, "GPU baselines"):
//  eager:    PyTorch eager / HF generate / Megatron-LM, one launch per operator;
//  graphs:   vLLM, TensorRT-LLM, MLC, SGLang: fused kernels replayed from CUDA graphs;
//  compiled: gpt-fast / torch.compile (reduce-overhead): Inductor kernels in CUDA graphs;
//  llamacpp: llama.cpp / ggml quantized kernels.
enum class GpuStack { eager, graphs, compiled, llamacpp };
const char* to_string(GpuStack s);
std::vector<GpuStack> gpu_stacks();

struct GpuStackConstants {
  Constant layer_overhead_s;       // host-side time per transformer layer per step
  Constant bandwidth_efficiency;   // achieved / peak memory bandwidth of its decode kernels
};

// The model's constants: one set for every design and every GPU (never fitted per row).
struct Constants {
  // FPGA: what one instruction of an overlay costs beyond its data movement and MACs.
  Constant memory_efficiency;       // achieved / peak off-chip bandwidth for long bursts
  Constant issue_cycles;            // instruction fetch, decode, dispatch and the dependency barrier at its end
  Constant dma_setup_cycles;        // DMA descriptor set-up per memory channel an instruction streams from
  Constant cu_barrier_cycles;       // compute units of one card meeting after each instruction (SLR crossing)
  Constant vector_pipeline_cycles;  // fill of the vector unit's pipeline (norm, softmax, exp, RoPE)
  Constant host_transfer_s;         // latency of one PCIe DMA transfer (token in, logits out)
  Constant kernel_launch_s;         // one host-side kernel start and completion (design.host_launch_per_layer)
  Constant link_hop_s;              // latency of one card-to-card hop
  Constant link_gbps_default;       // card-to-card bandwidth when the device has no figure
  Constant pcie_gbps_default;       // PCIe bandwidth when the device has no figure
  Constant onchip_usable_fraction;  // share of on-chip SRAM a design can give to resident weights
  // Operators left on a CPU (design.host_ops).
  Constant host_cpu_efficiency;     // achieved / peak fp32 throughput of a CPU on these operators
  Constant server_cpu_gflops;       // host of a PCIe card: peak fp32
  Constant server_memory_gbps;      // host of a PCIe card: memory bandwidth
  // First access of a burst, by memory type: data/sim_model.json memory_latency_ns (shared
  // with the simulator).
  Constant hbm_first_access_ns;
  Constant ddr_first_access_ns;
  // GPU
  Constant gpu_compute_efficiency;  // achieved / peak dense tensor throughput in prefill
  GpuStackConstants gpu_eager, gpu_graphs, gpu_compiled, gpu_llamacpp;
  // Money
  Constant electricity_usd_per_kwh;
  Constant amortization_years;

  const GpuStackConstants& stack(GpuStack s) const;
  std::vector<std::pair<std::string, const Constant*>> named() const;
};

// data/perf_model.json (and the memory latencies of data/sim_model.json), read once.
const Constants& constants();
Constants load_constants(const std::string& path);

// Controller cycles of one instruction pass of `design` before and after its data moves:
// issue and dependency barrier, DMA set-up of each of the `channels` memory channels it
// streams from, and the barrier of the compute units. The simulator charges the same.
double instruction_overhead_cycles(const arch::Design& design, int channels, const Constants& c = constants());

// The software stack named in free text ("V100S (vLLM+SmoothQuant)", "gpt-fast"); eager
// when none is named. `named` is set to whether one was.
GpuStack gpu_stack_from_text(const std::string& text, bool* named = nullptr);

// A number a prediction rests on, with its source.
struct Assumption {
  std::string name;
  double value = 0;
  std::string unit;
  std::string source;
};

// The traffic and the request the prediction is for.
struct Scenario {
  int batch = 1;     // sequences decoded together
  int prompt = 128;  // prefill tokens per sequence
  int context = 512; // decode: positions the new token attends
};

// What the designs predicted on a Workloads share, computed once as they need it: its
// phases' instruction lists (per stage, position and arch::ProgramFields) and the model's
// weight bytes (perf/workload_cache.hpp).
struct WorkloadCache;

// The two phases of a scenario, lowered once and reused for many designs.
struct Workloads {
  Scenario scenario;
  graph::Workload prefill;
  graph::Workload decode;
  // Set by lower() and shared by its copies; reset it when a phase is changed afterwards.
  std::shared_ptr<WorkloadCache> cache;
};
Workloads lower(const model::Config& config, const graph::Precision& precision, const Scenario& scenario);

// Card-to-card communication over design.parallel.cards cards, exactly as the multi-card
// executor runs it (issue 10, contract B; docs/performance-model.md "Several cards"):
//  tensor split, per layer: a max all-reduce of one fp32 scale per token before wo and
//    before w2 (int8 activations with per-token dynamic scales only), and a sum all-reduce
//    of the int32 (fp32 for float activations) partial accumulators, dim x 4 bytes per
//    token, after wo and after w2; per step an all-gather of the fp32 logits
//    (vocab x 4 bytes per token whose logits are computed) after the classifier;
//  pipeline split: x in fp32 (dim x 4 bytes per token) from card k to k+1 at each stage
//    boundary, and the fp32 logits from the last card back to card 0 (the host samples).
// Ring algorithms: an all-reduce of B bytes is a reduce-scatter and an all-gather,
// 2 (N-1) steps of B/N bytes per card; an all-gather of a B-byte whole is N-1 steps of
// B/N; a send is one hop of B bytes.
enum class Collective { all_reduce_sum, all_reduce_max, all_gather, send };
const char* to_string(Collective c);

struct Transfer {
  std::string name;         // "blk.3.wo partial sums", "blk.3.wo input scale", "logits", "x 0->1"
  Collective kind = Collective::send;
  int layer = -1;           // block it belongs to (-1: after the last block)
  std::string linear;       // matmul it surrounds ("blk.3.wo", "cls"); empty for pipeline sends
  bool before = false;      // runs before that matmul (the scale of its input) instead of after
  double bytes = 0;         // all-reduce: the reduced vector; all-gather: the gathered whole; send: the message
  int from = -1, to = -1;   // send: source and destination card

  int steps(int cards) const;                 // ring steps (hops in sequence)
  double chunk_bytes(int cards) const;        // bytes one card sends in one step
  double bytes_sent(int cards, int card) const;  // bytes card `card` sends in all
  // steps x (hop latency + chunk / link bandwidth)
  double seconds(int cards, double link_bytes_per_s, double hop_s) const;
};

// The transfers of one step of `tokens` tokens, `logits_tokens` of which reach the
// classifier, in execution order. Empty on one card.
std::vector<Transfer> card_transfers(const model::Config& config, const arch::Parallelism& parallel, int tokens,
                                     int logits_tokens, bool dynamic_act_scale);
// Layers of pipeline stage `card`: [first, last).
std::pair<int, int> pipeline_layers(int n_layers, int cards, int card);
// Bytes each card sends over the card link for these transfers (index = card).
std::vector<double> bytes_sent_per_card(const std::vector<Transfer>& transfers, int cards);
// Card-to-card link of a device: bandwidth per direction (bytes/s) and hop latency (s),
// with their sources (data/devices.json card_link_gbps, or the documented default).
struct Link {
  double bytes_per_s = 0;
  double hop_s = 0;
  std::string bandwidth_source, hop_source;
};
Link card_link(const hw::Device& device, const Constants& c = constants());

enum class Bound { compute, memory, latency, link };
const char* to_string(Bound b);

struct OpTime {
  std::string name;
  graph::OpKind kind = graph::OpKind::matmul;
  int layer = -1;
  double flops = 0;          // this card's share
  double offchip_bytes = 0;  // bytes that cross the off-chip interface (this card)
  double compute_s = 0;
  double memory_s = 0;
  double fixed_s = 0;
  double link_s = 0;
  double time_s = 0;
  Bound bound = Bound::compute;
  bool on_host = false;      // run by the host or embedded CPU (design.host_ops)
};

struct PhaseTime {
  double seconds = 0;
  double flops = 0;          // all cards
  double offchip_bytes = 0;  // all cards
  double compute_s = 0, memory_s = 0, fixed_s = 0, link_s = 0, host_s = 0;  // sums over ops
  std::vector<OpTime> ops;   // one card's operations
};

struct Prediction {
  std::string target;              // design name or GPU id
  std::string device;              // device id
  hw::Kind kind = hw::Kind::fpga;
  int cards = 1;
  std::string split = "none";
  Scenario scenario;
  std::string precision;

  // Memory placement.
  double weight_bytes = 0;         // whole model at this precision
  double kv_bytes = 0;             // KV cache of the batch at the scenario's context
  double capacity_bytes = 0;       // off-chip memory of all cards
  bool fits_memory = true;
  std::string placement;           // "weights in HBM2, KV in HBM2" / "weights on chip"

  // Bounds (all cards together).
  double peak_ops_per_s = 0;       // 2 x MACs x clock (FPGA) or dense tensor peak (GPU)
  double peak_bytes_per_s = 0;     // off-chip bandwidth the design can use

  // Figures.
  double prefill_s = 0;            // time to first token for `prompt` tokens of `batch` sequences
  double decode_step_s = 0;        // one decode step (batch tokens) at `context`
  double decode_tokens_per_s = 0;  // batch / decode_step_s
  double prefill_tokens_per_s = 0;
  // How the prompt runs, where prefill_s costs the path of fpgallm's kernels: the emitted
  // top's prompt call (one call, prefill blocks of arch::block_tokens tokens on the tiled
  // matrix unit), which the C-simulation backend and the simulator run too. Empty otherwise.
  std::string prefill_path;
  // Time to first token: the prompt (prefill_s), on fpgallm's kernels the emitted top's prompt call.
  double time_to_first_token_s() const { return prefill_s; }
  double watts = 0;                // board power while decoding, all cards
  hw::Power power;                 // FPGA: watts by component while decoding, one card
  double joules_per_token = 0;     // decode
  double usd_per_mtoken = 0;       // decode, 0 when no price is known
  PhaseTime prefill, decode;

  // Card-to-card communication of a decode step (card_transfers), per generated token:
  // bytes each card sends (index = card; empty on one card) and the collectives.
  std::vector<double> link_bytes_per_token;
  std::vector<Transfer> decode_transfers;

  std::vector<Assumption> assumptions;
  std::vector<std::string> notes;
};

// What runs the design: fpgallm's kernels (the instruction list costed with the units'
// description, arch::unit_work, as the simulator executes it and the emitted project runs
// it), or a published accelerator described by a Design (its own hardware: the
// per-operation overlay model with the constants fitted over data/published_results.csv).
enum class Hardware { fpgallm_kernels, published_accelerator };

// An FPGA design. Throws fpgallm::InputError when the design is invalid or its device is
// a GPU or lacks the figures the model needs. On fpgallm's kernels, designs the instruction
// list cannot express (several compute units, host operators, weights.bits / N:M sparsity,
// batch > 1, mixture of experts) fall back to the per-operation model, with a note.
Prediction predict(const arch::Design& design, const hw::Device& device, const Workloads& w,
                   const Constants& c = constants(), Hardware hardware = Hardware::fpgallm_kernels);
// Whether a prediction lists its operations (PhaseTime::ops) or gives the phases' totals alone.
enum class Detail { ops, totals };
// The same with the design's resource counts given (hw::estimate_resources(design, device,
// {&w.decode.config}), as the design search has them) and the detail asked for; every
// figure is the same.
Prediction predict(const arch::Design& design, const hw::Device& device, const Workloads& w,
                   const hw::Utilization& resources, Detail detail, const Constants& c = constants(),
                   Hardware hardware = Hardware::fpgallm_kernels);
// Where `design` keeps its weights and KV cache on `device`: predict()'s fits_memory and
// placement, without the rest of the prediction.
// `hardware` as in predict(): fpgallm's kernels keep the KV cache where the bank map puts it,
// a published accelerator in the first memory with room.
struct MemoryFit {
  bool fits = true;
  std::string placement;
  int weights_pool = -1, kv_pool = -1;  // index in device.memory; -1: on chip or nowhere
};
MemoryFit memory_fit(const arch::Design& design, const hw::Device& device, const Workloads& w,
                     const Constants& c = constants(), Hardware hardware = Hardware::fpgallm_kernels);
// The emitted kernel's buffers on `device`'s banks (hw/memory_map.hpp: connectivity.cfg's sp=
// lines and their check) at the design's port rates, for the designs `fpgallm emit` writes
// (one card, a dense llama-family model streamed from off-chip memory); nullopt otherwise.
// memory_fit, predict and port_rates place the KV cache where this map does.
std::optional<hw::MemoryMap> bank_map(const arch::Design& design, const hw::Device& device, const model::Config& config,
                                      const Constants& c = constants());
// A GPU baseline running the same workload on `cards` GPUs (tensor parallel when > 1).
Prediction predict_gpu(const hw::Device& device, const Workloads& w, int cards = 1,
                       GpuStack stack = GpuStack::graphs, const Constants& c = constants());

// Decode step time at each context (the KV traffic grows with it).
std::vector<double> decode_curve(const arch::Design& design, const hw::Device& device, const model::Config& config,
                                 const graph::Precision& precision, const Scenario& s, const std::vector<int>& contexts);

// The bit widths a design computes with: its matrix unit's weights and activations, its KV
// cache; 4-bit weights carry fp16 scales per group of 32 inputs (the kernels' int4 layout).
graph::Precision design_precision(const arch::Design& design);

// Peak MAC-array throughput of a design (2 x rows x cols / ii x clock), ops/s per card.
double peak_ops_per_s(const arch::Design& design);
// Off-chip bandwidth one card of the design can use through the ports it has (memory
// efficiency applied), bytes/s.
double usable_bandwidth(const arch::Design& design, const hw::Device& device, const Constants& c = constants());
// What those ports carry at most (no efficiency): channels x port_bits / 8 x clock, capped
// by the memory's share. No prediction moves more bytes per second.
double port_limit(const arch::Design& design, const hw::Device& device);

// What the design's ports deliver on `device` (arch::PortRates, the units' description
// reads it): one channel of the weights' pool (device bandwidth over its channels, capped
// by a port_bits-wide port at the design clock, x memory_efficiency) for each weight
// channel, the parameter bundle and each KV bundle (of the KV pool); PCIe; first-access latencies of the pools (data/sim_model.json) and of a
// host transfer. The simulator, the analytical model and the emitted schedule use it.
arch::PortRates port_rates(const arch::Design& design, const hw::Device& device, const hw::MemoryPool& weights,
                           const hw::MemoryPool& kv, const Constants& c = constants());
// The same with the pools the memory placement picks for the weights and the KV cache (the
// first pool with room; the kernels keep neither on chip).
arch::PortRates port_rates(const arch::Design& design, const hw::Device& device, const model::Config& config,
                           const Constants& c = constants());

void to_json(nlohmann::json& j, const Assumption& a);
void to_json(nlohmann::json& j, const OpTime& o);
void to_json(nlohmann::json& j, const Transfer& t);
// {"per_card_bytes_per_token": [...], "total_bytes_per_token", "collectives_per_token":
//  [{"kind", "bytes", "count", "bytes_sent_per_card"}]} for a prediction's decode step.
nlohmann::json communication_json(const std::vector<Transfer>& transfers, int cards, int tokens);
void to_json(nlohmann::json& j, const Prediction& p);
// The same without the per-operation lists.
nlohmann::json summary_json(const Prediction& p);
// A power or energy figure for JSON: null where it is unknown (<= 0), never 0.
nlohmann::json known_or_null(double v);

}  // namespace perf
