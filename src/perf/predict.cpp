#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "arch/units.hpp"
#include "hw/memory_map.hpp"
#include "hw/power.hpp"
#include "hw/resources.hpp"
#include "perf/perf.hpp"
#include "perf/workload_cache.hpp"
#include "util/error.hpp"

namespace perf {

const char* to_string(Bound b) {
  switch (b) {
    case Bound::compute: return "compute";
    case Bound::memory: return "memory";
    case Bound::latency: return "latency";
    case Bound::link: return "link";
  }
  return "?";
}

Workloads lower(const model::Config& config, const graph::Precision& precision, const Scenario& s) {
  Workloads w;
  w.scenario = s;
  graph::Shape prefill;
  prefill.phase = graph::Phase::prefill;
  prefill.batch = s.batch;
  prefill.prompt = s.prompt;
  graph::Shape decode;
  decode.phase = graph::Phase::decode;
  decode.batch = s.batch;
  decode.context = s.context;
  w.prefill = graph::lower(config, prefill, precision);
  w.decode = graph::lower(config, decode, precision);
  w.cache = std::make_shared<WorkloadCache>();
  return w;
}

namespace {

constexpr double kGB = 1e9;

bool is_matrix(graph::OpKind k) {
  return k == graph::OpKind::matmul || k == graph::OpKind::classifier || k == graph::OpKind::attention_score ||
         k == graph::OpKind::attention_value;
}
bool has_weights(graph::OpKind k) { return k == graph::OpKind::matmul || k == graph::OpKind::classifier; }
bool ends_with(const std::string& s, const char* suffix) {
  const std::string t(suffix);
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}
// Row-parallel linear layers (input features split over cards) end a tensor-parallel block
// and are followed by an all-gather of the layer's output.
bool row_parallel(const graph::Op& op) { return ends_with(op.name, ".wo") || ends_with(op.name, ".w2"); }

// Passes of the vector unit over the data: a norm reads once for the statistics and once
// to scale; softmax reads for the maximum, for the exponent sum, and to normalize.
int vector_passes(graph::OpKind k) {
  switch (k) {
    case graph::OpKind::norm: return 2;
    case graph::OpKind::softmax: return 3;
    default: return 1;
  }
}

double pool_bytes(const hw::MemoryPool& p) { return p.capacity_gb.has() ? *p.capacity_gb * kGB : 0; }
int pool_channels(const hw::MemoryPool& p) { return p.channels.has() ? std::max(1, int(*p.channels)) : 1; }

// Off-chip bandwidth usable through `channels` ports of `pool` at `clock_hz`, before the
// memory efficiency: the pool's share, capped by what `port_bits`-wide ports carry at the
// kernel clock (one AXI port per channel).
double port_bandwidth(const hw::MemoryPool& pool, int channels, double clock_hz, int port_bits) {
  const int total = pool_channels(pool);
  const int n = std::clamp(channels, 1, total);
  const double share = *pool.bandwidth_gbps * kGB * n / total;
  return std::min(share, n * port_bits / 8.0 * clock_hz);
}

double first_access_s(const hw::MemoryPool& p, const Constants& c) {
  return (p.is_hbm() ? c.hbm_first_access_ns.value : c.ddr_first_access_ns.value) * 1e-9;
}

bool on_host(const arch::Design& d, graph::OpKind k) {
  const std::string name = graph::to_string(k);
  return std::find(d.host_ops.begin(), d.host_ops.end(), name) != d.host_ops.end();
}

// Bytes of the weights of one op as the design stores them: its own width and N:M
// sparsity when it states them (weights.bits, weights.sparse_n), else the workload's.
double stored_weight_bytes(const arch::Design& d, const graph::Op& op) {
  const bool own = d.weights.bits > 0 || d.weights.sparse_n > 0;
  if (!own || !has_weights(op.kind)) return op.weight_bytes;
  const double weights = double(op.n) * op.k * op.batch;
  const double bits = d.weights.bits_per_weight(d.matrix_unit.weight_bits);
  const double scales = d.weights.group_size > 0 ? weights / d.weights.group_size * 2 : double(op.n) * op.batch * 4;
  return weights * bits / 8 + scales;
}

struct Placement {
  const hw::MemoryPool* weights = nullptr;
  const hw::MemoryPool* kv = nullptr;
  bool weights_on_chip = false;
  bool kv_on_chip = false;
  bool fits = true;
  std::string text;
};

Placement place(const arch::Design& d, const hw::Device& dev, double weight_bytes, double kv_bytes, int cards,
                const Constants& c) {
  Placement p;
  const double w_card = weight_bytes / cards, kv_card = kv_bytes / cards;
  std::vector<std::string> parts;
  if (d.style == arch::Style::dataflow) {
    p.weights_on_chip = true;
    const double onchip = dev.onchip_mb.has() ? *dev.onchip_mb * 1e6 * c.onchip_usable_fraction.value : 0;
    if (w_card > double(d.buffers.weight_bytes) || w_card > onchip) {
      p.fits = false;
      parts.push_back(fmt::format("weights ({:.1f} MB per card) do not fit on chip (buffers {:.1f} MB, usable {:.1f} MB)",
                                  w_card / 1e6, d.buffers.weight_bytes / 1e6, onchip / 1e6));
    } else {
      parts.push_back("weights resident on chip");
    }
  }
  if (d.buffers.kv_bytes > 0 && kv_card <= double(d.buffers.kv_bytes)) p.kv_on_chip = true;
  std::vector<double> free;
  for (const auto& m : dev.memory) free.push_back(pool_bytes(m));
  if (!p.weights_on_chip) {
    for (std::size_t i = 0; i < dev.memory.size(); ++i)
      if (dev.memory[i].bandwidth_gbps.has() && free[i] >= w_card) {
        p.weights = &dev.memory[i];
        free[i] -= w_card;
        parts.push_back("weights in " + dev.memory[i].kind);
        break;
      }
    if (!p.weights) {
      p.fits = false;
      parts.push_back(fmt::format("weights ({:.2f} GB per card) fit no memory of {}", w_card / kGB, dev.id));
    }
  }
  if (p.kv_on_chip) {
    parts.push_back("KV cache on chip");
  } else if (kv_card > 0) {
    for (std::size_t i = 0; i < dev.memory.size(); ++i)
      if (dev.memory[i].bandwidth_gbps.has() && free[i] >= kv_card) {
        p.kv = &dev.memory[i];
        free[i] -= kv_card;
        parts.push_back("KV cache in " + dev.memory[i].kind);
        break;
      }
    if (!p.kv) {
      p.fits = false;
      parts.push_back(fmt::format("KV cache ({:.2f} GB per card) does not fit beside the weights", kv_card / kGB));
    }
  }
  for (const auto& s : parts) p.text += (p.text.empty() ? "" : "; ") + s;
  return p;
}

// The emitted kernel's buffers on the card's banks (hw/memory_map.hpp), for the designs
// `fpgallm emit` writes: one card, a dense llama-family model streamed from off-chip memory.
std::optional<hw::MemoryMap> bank_map_of(const arch::Design& d, const hw::Device& dev, const model::Config& config,
                                         const Placement& pl, const Constants& c);

// place(), then the KV cache where the bank map puts it, and a design whose buffers no bank
// holds does not fit.
Placement place_banked(const arch::Design& d, const hw::Device& dev, double weight_bytes, double kv_bytes, int cards,
                       const model::Config& config, const Constants& c) {
  Placement pl = place(d, dev, weight_bytes, kv_bytes, cards, c);
  if (!pl.fits) return pl;
  const std::optional<hw::MemoryMap> map = bank_map_of(d, dev, config, pl, c);
  if (!map) return pl;
  if (!map->fits) {
    pl.fits = false;
    pl.text += "; banks: " + map->problems.front();
    return pl;
  }
  const hw::MappedBuffer* kv = map->find("kv_k");
  if (kv && kv->mapped && pl.kv && &dev.memory[std::size_t(kv->banks.pool)] != pl.kv) {
    const std::string was = "KV cache in " + pl.kv->kind;
    pl.kv = &dev.memory[std::size_t(kv->banks.pool)];
    if (const auto at = pl.text.find(was); at != std::string::npos)
      pl.text.replace(at, was.size(), "KV cache in " + pl.kv->kind + " (no " + was.substr(12) + " bank range left for it)");
  }
  return pl;
}

void add_phase_totals(PhaseTime& ph, const OpTime& o) {
  ph.compute_s += o.compute_s;
  ph.memory_s += o.memory_s;
  ph.fixed_s += o.fixed_s;
  ph.link_s += o.link_s;
  ph.seconds += o.time_s;
  ph.flops += o.flops;
  ph.offchip_bytes += o.offchip_bytes;
}

void add_phase_op(PhaseTime& ph, const OpTime& o) {
  add_phase_totals(ph, o);
  ph.ops.push_back(o);
}

Bound classify(double compute, double memory, double fixed, double link) {
  const double m = std::max({compute, memory, fixed, link});
  if (m == link && link > 0) return Bound::link;
  if (m == memory && memory > 0) return Bound::memory;
  if (m == compute && compute > 0) return Bound::compute;
  return Bound::latency;
}

// Ring all-gather of `bytes` (the whole gathered tensor) over `cards`.
double all_gather_s(double bytes, int cards, double link_bytes_per_s, const Constants& c) {
  if (cards <= 1) return 0;
  return (cards - 1) * (c.link_hop_s.value + bytes / cards / link_bytes_per_s);
}

double link_bandwidth(const hw::Device& dev, const Constants& c) {
  return (dev.card_link_gbps.has() ? *dev.card_link_gbps : c.link_gbps_default.value) * kGB;
}
double pcie_bandwidth(const hw::Device& dev, const Constants& c) {
  return (dev.pcie_gbps.has() ? *dev.pcie_gbps : c.pcie_gbps_default.value) * kGB;
}

// Host traffic of one phase: token ids in, logits of the last token of each sequence out
// (the final hidden state instead when the classifier runs on the host).
double host_seconds(const graph::Workload& w, const hw::Device& dev, const Constants& c, bool classifier_on_host) {
  const double tokens_in = double(w.tokens()) * 4;
  const double out = double(w.shape.batch) * (classifier_on_host ? w.config.dim : w.config.vocab_size) * 4;
  return 2 * c.host_transfer_s.value + (tokens_in + out) / pcie_bandwidth(dev, c);
}

struct FpgaContext {
  const arch::Design& d;
  const hw::Device& dev;
  const Constants& c;
  const Placement& place;
  double f;        // clock, Hz
  int cards;
  bool tensor;     // tensor-parallel split
  bool double_buffered;
  double bw_weights = 0, bw_kv = 0, bw_act = 0, bw_pool = 0;  // bytes/s after efficiency
  double latency_weights = 0, latency_kv = 0;                  // first access of a burst, s
  double host_flops = 0, host_bytes_per_s = 0;                 // the CPU of design.host_ops
  double host_link_bytes_per_s = 0;                            // card <-> that CPU (device pcie_gbps)
  double kv_scale = 1;                                         // design.kv_bits / the workload's KV width
  int heads = 1;                                               // attention heads x sequences of the phase
  Link link = {};
  const std::vector<Transfer>* transfers = nullptr;  // of the phase being predicted
};

// An operator the design leaves to the host or embedded CPU: its flops at the CPU's rate or
// its bytes at the host memory's, whichever is longer; one host transfer each way, and its
// activations (in and out) between card and host at the card's pcie_gbps. The classifier's
// input is the phase's last hidden state, which host_seconds already sends, and its logits
// stay on the host: it moves nothing more.
OpTime host_op(const FpgaContext& x, const graph::Op& op) {
  OpTime o;
  o.name = op.name;
  o.kind = op.kind;
  o.layer = op.layer;
  o.on_host = true;
  o.flops = op.flops;
  o.compute_s = op.flops / x.host_flops;
  o.memory_s = op.bytes() / x.host_bytes_per_s;
  const double moved = op.kind == graph::OpKind::classifier ? 0.0 : op.activation_bytes;
  o.fixed_s = 2 * x.c.host_transfer_s.value + moved / x.host_link_bytes_per_s;
  o.time_s = std::max(o.compute_s, o.memory_s) + o.fixed_s;
  o.bound = classify(o.compute_s, o.memory_s, o.fixed_s, 0);
  return o;
}

OpTime fpga_op(const FpgaContext& x, const graph::Op& op, int tokens) {
  if (on_host(x.d, op.kind)) return host_op(x, op);
  const auto& d = x.d;
  const auto& mu = d.matrix_unit;
  const int cu = d.compute_units;
  OpTime o;
  o.name = op.name;
  o.kind = op.kind;
  o.layer = op.layer;
  const int n = x.tensor ? x.cards : 1;
  double passes = std::ceil(double(std::max(tokens, 1)) / d.tiling.prefill_block);
  // Without fused attention the overlay issues score, softmax and value once per head (each
  // head's K/V is its own matrix): the heads of this card, shared by its compute units.
  const bool attention = op.kind == graph::OpKind::attention_score || op.kind == graph::OpKind::softmax ||
                         op.kind == graph::OpKind::attention_value;
  if (attention && !d.fuse_attention) passes *= std::ceil(std::ceil(double(x.heads) / n) / cu);
  const double density = has_weights(op.kind) ? d.weights.density() : 1.0;
  double compute_cycles = 0, weight_bytes = 0, kv_bytes = op.kv_bytes * x.kv_scale, act_bytes = 0, share = 1;
  if (is_matrix(op.kind)) {
    std::int64_t rows = op.n, cols = op.k, batch = op.batch;
    if (x.tensor) {
      if (has_weights(op.kind)) {
        if (row_parallel(op))
          cols = (cols + n - 1) / n;
        else
          rows = (rows + n - 1) / n;
      } else {
        batch = (batch + n - 1) / n;  // attention heads split over cards
      }
    }
    share = double(rows) * cols * batch / (double(op.n) * op.k * op.batch);
    // The compute units of a card split a linear layer by output rows, attention by heads;
    // an N:M sparse engine issues only the kept weights.
    const std::int64_t unit_rows = has_weights(op.kind) ? (rows + cu - 1) / cu : rows;
    const std::int64_t unit_batch = has_weights(op.kind) ? batch : (batch + cu - 1) / cu;
    compute_cycles = double(unit_batch) * op.m * std::ceil(double(unit_rows) / mu.rows) *
                     std::ceil(double(cols) * density / mu.cols) * mu.ii;
    // Causal prefill attention computes the triangle of scores, not the square of m x span:
    // the workload's flops give the share, (P + 1) / 2P for a prompt of P tokens (1 in decode).
    if (!has_weights(op.kind) && op.flops > 0)
      compute_cycles *= std::min(1.0, op.flops / (2.0 * double(op.m) * op.n * op.k * op.batch));
    if (has_weights(op.kind) && !x.place.weights_on_chip) {
      const double fetches = std::ceil(double(op.m) / d.tiling.prefill_block);
      weight_bytes = stored_weight_bytes(d, op) * share * fetches;
    }
    kv_bytes = x.place.kv_on_chip ? 0 : op.kv_bytes * x.kv_scale * share;
  } else {
    double elements = double(op.m) * op.n * op.batch;
    // Causal prefill: softmax over the triangle of scores the queries see, not the square.
    if (op.kind == graph::OpKind::softmax && op.flops > 0)
      elements = std::ceil(elements * std::min(1.0, op.flops / (graph::kSoftmaxFlops * elements)));
    if (x.tensor && op.kind == graph::OpKind::softmax) elements = std::ceil(elements / n);
    compute_cycles = vector_passes(op.kind) * std::ceil(elements / (double(d.vector_unit.lanes) * cu));
    if (op.kind == graph::OpKind::embedding && !x.place.weights_on_chip) weight_bytes = op.weight_bytes;
    kv_bytes = x.place.kv_on_chip ? 0 : op.kv_bytes * x.kv_scale;
  }
  if (op.activation_bytes * share > double(d.buffers.activation_bytes)) act_bytes = op.activation_bytes * share;
  o.compute_s = compute_cycles / x.f;
  double memory = 0;
  if (weight_bytes > 0) memory = std::max(memory, weight_bytes / x.bw_weights);
  if (kv_bytes > 0) memory = std::max(memory, kv_bytes / x.bw_kv);
  if (act_bytes > 0) memory = std::max(memory, act_bytes / x.bw_act);
  memory = std::max(memory, (weight_bytes + kv_bytes + act_bytes) / x.bw_pool);
  o.memory_s = memory;
  o.offchip_bytes = weight_bytes + kv_bytes + act_bytes;
  o.flops = op.flops * share * density;
  // The workload counts a matmul's bias adds (OPT, GPT-2) among its flops; the store stage
  // adds them, but no operation is costed above the MAC array's peak.
  if (is_matrix(op.kind))
    o.compute_s = std::max(o.compute_s, o.flops / (2.0 * mu.rows * mu.cols * cu / std::max(1, mu.ii) * x.f));
  // Fixed latencies of each pass: the controller's overhead (issue, DMA set-up of each
  // channel streamed from, barriers), the first burst of the memory type, and the pipeline
  // fill of the unit that runs it.
  int channels = 0;
  double first_access = 0;
  if (weight_bytes > 0) {
    channels += d.memory.weight_channels;
    first_access = x.latency_weights;
  }
  if (kv_bytes > 0) {
    channels += d.memory.kv_channels > 0 ? d.memory.kv_channels : (weight_bytes > 0 ? 0 : d.memory.weight_channels);
    first_access = std::max(first_access, x.latency_kv);
  }
  if (act_bytes > 0) channels += std::max(1, d.memory.activation_channels);
  const double pipeline = is_matrix(op.kind) ? mu.pipeline_depth : x.c.vector_pipeline_cycles.value;
  // Fused work is not issued on its own: a norm folded into the next matmul's input stage
  // (fuse_norm_matmul), softmax and the value product inside the score's instruction
  // (fuse_attention). Only its pipeline fill remains.
  const bool fused = (d.fuse_norm_matmul && op.kind == graph::OpKind::norm) ||
                     (d.fuse_attention && (op.kind == graph::OpKind::softmax || op.kind == graph::OpKind::attention_value));
  o.fixed_s = fused ? passes * pipeline / x.f
                    : passes * ((instruction_overhead_cycles(d, channels, x.c) + pipeline) / x.f + first_access);
  if (x.transfers)  // the tensor split's collectives around this matmul
    for (const Transfer& t : *x.transfers)
      if (!t.linear.empty() && t.linear == op.name) o.link_s += t.seconds(x.cards, x.link.bytes_per_s, x.link.hop_s);
  const double overlapped = x.double_buffered ? std::max(o.compute_s, o.memory_s) : o.compute_s + o.memory_s;
  o.time_s = overlapped + o.fixed_s + o.link_s;
  o.bound = classify(o.compute_s, o.memory_s, o.fixed_s, o.link_s);
  return o;
}

graph::OpKind op_kind(const arch::Instruction& in) {
  switch (in.op) {
    case arch::Op::embed: return graph::OpKind::embedding;
    case arch::Op::norm:
    case arch::Op::head_norm: return graph::OpKind::norm;
    case arch::Op::matmul: return in.linear == model::Linear::cls ? graph::OpKind::classifier : graph::OpKind::matmul;
    case arch::Op::rope: return graph::OpKind::rope;
    case arch::Op::kv_store: return graph::OpKind::attention_value;
    case arch::Op::attention: return graph::OpKind::attention_score;
    case arch::Op::residual_add: return graph::OpKind::residual;
    case arch::Op::quantize:
    case arch::Op::swiglu:
    case arch::Op::gelu: return graph::OpKind::activation;
  }
  return graph::OpKind::activation;
}

// The model's promise: no operation moves bytes faster than the card's ports carry or
// computes above its MAC array's peak. check() throws std::logic_error for one that does.
struct Bounds {
  const std::string& target;
  double peak_ops_card = 0, raw_bw_card = 0;
  void check(const OpTime& o, const std::string& name) const {
    if (o.time_s <= 0 || o.on_host) return;
    if (o.offchip_bytes / o.time_s > raw_bw_card * (1 + 1e-9))
      throw std::logic_error(fmt::format("perf: {} op {} moves {:.3g} B/s, above the card's {:.3g} B/s", target, name,
                                         o.offchip_bytes / o.time_s, raw_bw_card));
    if (is_matrix(o.kind) && o.compute_s > 0 && o.flops / o.time_s > peak_ops_card * 1.001 + 1)
      throw std::logic_error(fmt::format("perf: {} op {} computes {:.3g} op/s, above the peak {:.3g}", target, name,
                                         o.flops / o.time_s, peak_ops_card));
  }
};

// Where the operations of a phase go, in order: its totals, the bounds check (null: none)
// and, when `list`, its operation list.
struct PhaseSink {
  PhaseTime& ph;
  bool list = true;
  const Bounds* bounds = nullptr;
  void add(OpTime&& o, const std::string& name, int layer) {
    add_phase_totals(ph, o);
    if (bounds) bounds->check(o, name);
    if (!list) return;
    o.name = name;
    o.layer = layer;
    ph.ops.push_back(std::move(o));
  }
};

// A phase costed instruction by instruction with the units' description (arch::unit_work):
// the instruction list the simulator executes and the kernels run, one instruction after
// another; over a tensor split every card runs its share (arch::shard) and the collectives
// around wo, w2 and the classifier follow their matmul; over a pipeline split the stages
// run in turn with the hand-offs between them. Each shape of instruction is described once;
// the instructions are summed in order.
void program_phase(const FpgaContext& x, const std::vector<ProgramRun>& runs, const arch::PortRates& rates,
                   PhaseSink& sink, std::vector<Transfer>& transfers) {
  const auto& d = x.d;
  const int share = x.tensor ? x.cards : 1;
  const double stream_rate = rates.weight_channel * rates.weight_channels;
  if (sink.list) {
    std::size_t n = sink.ph.ops.size();
    for (const ProgramRun& run : runs) n += run.program->program.instructions.size();
    sink.ph.ops.reserve(n);
  }
  std::vector<OpTime> shape_time;
  std::vector<double> link_s;  // per matmul of the step: the collectives around it
  for (const ProgramRun& run : runs) {
    const ShapedProgram& sp = *run.program;
    const arch::Program& prog = sp.program;
    const Step& step = *run.step;
    transfers.insert(transfers.end(), step.transfers.begin(), step.transfers.end());
    link_s.assign(step.linears.size(), 0.0);
    for (std::size_t k = 0; k < step.transfers.size(); ++k)
      if (step.linear_of[k] >= 0)
        link_s[step.linear_of[k]] += step.transfers[k].seconds(x.cards, x.link.bytes_per_s, x.link.hop_s);
    shape_time.clear();
    for (const auto& in : sp.shapes) {
      const arch::Instruction part = arch::shard(in, share);
      const arch::Work w = arch::unit_work(d, part, rates, false);
      OpTime o;
      o.kind = op_kind(in);
      o.flops = 2.0 * double(w.macs);
      o.offchip_bytes = double(w.weight_bytes + w.param_bytes + w.kv_read_bytes + w.kv_write_bytes);
      const double compute = w.unit == arch::UnitKind::matrix ? w.stream_compute + w.stream_fill : w.body_cycles;
      double memory = 0;
      if (w.stream_bytes > 0) memory = double(w.stream_bytes) / stream_rate;
      if (w.kv_read_bytes > 0 && rates.kv > 0) memory = std::max(memory, double(w.kv_read_bytes) / 2 / rates.kv);
      o.compute_s = std::min(compute, w.body_cycles) / x.f;
      o.memory_s = std::min(memory, w.body_cycles) / x.f;
      o.fixed_s = (w.fetch_cycles + w.host_cycles) / x.f;
      o.time_s = w.cycles / x.f;  // the collectives added per instruction
      shape_time.push_back(o);
    }
    const std::vector<int>& linear_of = *run.linear_of;
    if (sink.list || (sink.bounds && !link_s.empty())) {
      for (std::size_t i = 0; i < prog.instructions.size(); ++i) {
        const arch::Instruction& in = prog.instructions[i];
        OpTime o = shape_time[sp.shape_of[i]];
        if (linear_of[i] >= 0) o.link_s = link_s[linear_of[i]];
        o.time_s += o.link_s;
        o.bound = classify(o.compute_s, o.memory_s, o.fixed_s, o.link_s);
        sink.add(std::move(o), in.name, in.layer);
      }
      continue;
    }
    // The totals alone: the instructions' figures summed in order, each shape checked once.
    if (sink.bounds)
      for (std::size_t k = 0; k < sp.shapes.size(); ++k)
        sink.bounds->check(shape_time[k], prog.instructions[sp.first_of[k]].name);
    PhaseTime& ph = sink.ph;
    for (std::size_t i = 0; i < prog.instructions.size(); ++i) {
      const OpTime& o = shape_time[sp.shape_of[i]];
      const double link = linear_of[i] >= 0 ? link_s[linear_of[i]] : 0.0;
      ph.compute_s += o.compute_s;
      ph.memory_s += o.memory_s;
      ph.fixed_s += o.fixed_s;
      ph.link_s += link;
      ph.seconds += o.time_s + link;
      ph.flops += o.flops;
      ph.offchip_bytes += o.offchip_bytes;
    }
  }
}

// One card's cost per hour: its cloud price, else its price amortized plus the electricity
// of `watts` (that card's power).
double hourly_usd(const hw::Device& dev, double watts, const Constants& c) {
  if (dev.cloud_usd_per_hour.has()) return *dev.cloud_usd_per_hour;
  if (!dev.price_usd.has()) return 0;
  return *dev.price_usd / (c.amortization_years.value * 365 * 24) + watts / 1000 * c.electricity_usd_per_kwh.value;
}

}  // namespace

namespace {
// Channels of `pool` the design has ports on (weights, KV and activations together).
int design_channels(const arch::Design& d, const hw::MemoryPool& pool) {
  return std::min(pool_channels(pool), d.memory.weight_channels + d.memory.kv_channels + d.memory.activation_channels);
}
}  // namespace

double peak_ops_per_s(const arch::Design& d) {
  return 2.0 * d.matrix_unit.rows * d.matrix_unit.cols * d.compute_units / d.matrix_unit.ii * d.clock_mhz * 1e6;
}

double usable_bandwidth(const arch::Design& d, const hw::Device& dev, const Constants& c) {
  if (dev.memory.empty() || !dev.memory.front().bandwidth_gbps.has()) return 0;
  const auto& pool = dev.memory.front();
  return c.memory_efficiency.value * port_bandwidth(pool, design_channels(d, pool), d.clock_mhz * 1e6, d.memory.port_bits);
}

double port_limit(const arch::Design& d, const hw::Device& dev) {
  if (dev.memory.empty() || !dev.memory.front().bandwidth_gbps.has()) return 0;
  const auto& pool = dev.memory.front();
  return port_bandwidth(pool, design_channels(d, pool), d.clock_mhz * 1e6, d.memory.port_bits);
}

arch::PortRates port_rates(const arch::Design& d, const hw::Device& dev, const hw::MemoryPool& weights,
                           const hw::MemoryPool& kv, const Constants& c) {
  const double f = d.clock_mhz * 1e6, eta = c.memory_efficiency.value;
  auto channel = [&](const hw::MemoryPool& pool) {
    return pool.bandwidth_gbps.has() ? eta * port_bandwidth(pool, 1, f, d.memory.port_bits) / f : 0.0;
  };
  arch::PortRates r;
  r.weight_channel = channel(weights);
  r.weight_channels = std::clamp(d.memory.weight_channels, 1, pool_channels(weights));
  r.params = r.weight_channel;
  r.kv = channel(kv);
  r.host = pcie_bandwidth(dev, c) / f;
  r.memory_latency = first_access_s(weights, c) * f;
  r.kv_latency = first_access_s(kv, c) * f;
  r.host_latency = c.host_transfer_s.value * f;
  r.note = fmt::format("{:.1f} B/cycle per channel ({} of {}: {:.0f} GB/s over {} channels, capped by a {}-bit port at "
                       "{} MHz, x memory_efficiency {:.2f}); request latency {:.0f} cycles",
                       r.weight_channel, weights.kind, dev.id, weights.bandwidth_gbps.or_else(0), pool_channels(weights),
                       d.memory.port_bits, d.clock_mhz, eta, r.memory_latency);
  return r;
}

namespace {
// One decode step of `config` at the design's context and KV width: what the design's memory holds.
graph::Workload decode_workload(const arch::Design& d, const model::Config& config) {
  graph::Precision precision;
  precision.kv_bits = d.kv_bits;
  graph::Shape shape;
  shape.phase = graph::Phase::decode;
  shape.context = d.context;
  return graph::lower(config, shape, precision);
}
}  // namespace

arch::PortRates port_rates(const arch::Design& d, const hw::Device& dev, const model::Config& config, const Constants& c) {
  const graph::Workload wl = decode_workload(d, config);
  const Placement pl =
      place_banked(d, dev, wl.model_weight_bytes(), wl.kv_cache_bytes(d.context), d.parallel.cards, config, c);
  const hw::MemoryPool* main_pool = pl.weights ? pl.weights : (pl.kv ? pl.kv : (dev.memory.empty() ? nullptr : &dev.memory.front()));
  if (!main_pool || !main_pool->bandwidth_gbps.has())
    throw fpgallm::InputError(dev.id, "the device has no off-chip memory bandwidth figure");
  return port_rates(d, dev, *main_pool, pl.kv ? *pl.kv : *main_pool, c);
}

namespace {

// What the design stores: the model's weights as it stores them and the KV cache at its
// width (2, 4, 8 or 16 bits), whatever the workload's scheme.
struct Stored {
  double weights = 0, kv = 0, kv_scale = 1;
};
Stored stored_bytes(const arch::Design& d, const Workloads& w, WorkloadCache& cache) {
  Stored s;
  s.weights = model_weight_bytes(cache, w.decode);
  for (const auto& op : w.decode.ops)
    if (has_weights(op.kind)) s.weights += stored_weight_bytes(d, op) - op.weight_bytes;
  s.kv_scale = double(d.kv_bits) / w.decode.precision.kv_bits;
  s.kv = w.decode.kv_cache_bytes(w.scenario.context) * s.kv_scale;
  return s;
}

// `kv_sequences`: the sequences whose KV caches share the memory (one call runs one of them).
Prediction predict_fpga(const arch::Design& d, const hw::Device& dev, const Workloads& w,
                        const hw::Utilization* resources, Detail detail, const Constants& c, Hardware hardware,
                        int kv_sequences = 1) {
  if (dev.kind != hw::Kind::fpga) throw fpgallm::InputError(dev.id, "predict: a design needs an FPGA device");
  if (auto problems = d.model_problems(); !problems.empty()) throw fpgallm::InputError(d.name, problems.front());
  WorkloadCache own;  // where the workloads carry none (not from lower())
  WorkloadCache& cache = w.cache ? *w.cache : own;
  Prediction p;
  p.target = d.name;
  p.device = dev.id;
  p.kind = hw::Kind::fpga;
  p.cards = d.parallel.cards;
  p.split = arch::to_string(d.parallel.split);
  p.scenario = w.scenario;
  p.precision = graph::to_string(w.decode.precision);
  const Stored stored = stored_bytes(d, w, cache);
  p.weight_bytes = stored.weights;
  const double kv_scale = stored.kv_scale;
  p.kv_bytes = stored.kv;
  for (const auto& m : dev.memory) p.capacity_bytes += pool_bytes(m) * p.cards;
  // fpgallm's kernels keep their buffers where the emitted connectivity.cfg puts them; a
  // published accelerator's own memory map is not fpgallm's.
  const double kv_all = p.kv_bytes * kv_sequences;
  const Placement pl = hardware == Hardware::fpgallm_kernels
                           ? place_banked(d, dev, p.weight_bytes, kv_all, p.cards, w.decode.config, c)
                           : place(d, dev, p.weight_bytes, kv_all, p.cards, c);
  p.fits_memory = pl.fits;
  p.placement = pl.text;

  // fpgallm's kernels run one sequence per call: a batch of b sequences is b decode steps
  // (and b prompts) of one sequence, each with its own KV cache, costed by the same model
  // as batch 1; only the memory placement sees the whole batch.
  if (hardware == Hardware::fpgallm_kernels && w.scenario.batch > 1 && d.kernel_gaps().empty() && d.weights.bits == 0 &&
      pl.fits) {
    Scenario one = w.scenario;
    one.batch = 1;
    arch::Design d1 = d;
    d1.batch = 1;
    Prediction q = predict_fpga(d1, dev, lower(w.decode.config, w.decode.precision, one), resources, detail, c, hardware,
                                w.scenario.batch);
    const double b = w.scenario.batch;
    auto scale = [b](PhaseTime& ph) {
      for (double* v : {&ph.seconds, &ph.flops, &ph.offchip_bytes, &ph.compute_s, &ph.memory_s, &ph.fixed_s, &ph.link_s,
                        &ph.host_s})
        *v *= b;
    };
    scale(q.prefill);
    scale(q.decode);
    q.target = p.target;
    q.scenario = w.scenario;
    q.kv_bytes = p.kv_bytes;
    q.prefill_s *= b;
    q.decode_step_s *= b;
    q.notes.push_back(fmt::format("batch {}: fpgallm's kernels run one sequence per call, so a step of the batch is {} "
                                  "decode steps of one sequence (tokens/s and J/token as at batch 1)",
                                  w.scenario.batch, w.scenario.batch));
    return q;
  }

  const double f = d.clock_mhz * 1e6;
  FpgaContext x{d, dev, c, pl, f, p.cards, d.parallel.split == arch::Split::tensor, false};
  x.link = card_link(dev, c);
  x.kv_scale = kv_scale;
  const std::int64_t tile_bytes = std::int64_t(d.tiling.tile_rows) * d.tiling.tile_cols * d.matrix_unit.weight_bits / 8;
  x.double_buffered = pl.weights_on_chip || d.buffers.weight_bytes >= 2 * tile_bytes;
  const double eta = c.memory_efficiency.value;
  const hw::MemoryPool* main_pool = pl.weights ? pl.weights : (pl.kv ? pl.kv : (dev.memory.empty() ? nullptr : &dev.memory.front()));
  if (!main_pool || !main_pool->bandwidth_gbps.has())
    throw fpgallm::InputError(dev.id, "the device has no off-chip memory bandwidth figure");
  const hw::MemoryPool& wp = pl.weights ? *pl.weights : *main_pool;
  const hw::MemoryPool& kp = pl.kv ? *pl.kv : *main_pool;
  const int wc = d.memory.weight_channels;
  const int kc = d.memory.kv_channels > 0 ? d.memory.kv_channels : wc;
  const int ac = d.memory.activation_channels > 0 ? d.memory.activation_channels : wc;
  const int port_bits = d.memory.port_bits;
  x.bw_weights = eta * port_bandwidth(wp, wc, f, port_bits);
  x.bw_kv = eta * port_bandwidth(kp, kc, f, port_bits);
  x.bw_act = eta * port_bandwidth(*main_pool, ac, f, port_bits);
  x.latency_weights = first_access_s(wp, c);
  x.latency_kv = first_access_s(kp, c);
  const bool same_pool = &wp == &kp;
  // The ports the design has: nothing is predicted beyond what they carry.
  const int used_channels = same_pool ? design_channels(d, wp) : std::min(pool_channels(wp), wc);
  x.bw_pool = eta * port_bandwidth(wp, used_channels, f, port_bits) + (same_pool ? 0 : eta * port_bandwidth(kp, kc, f, port_bits));
  const double raw_bw =
      port_bandwidth(wp, used_channels, f, port_bits) + (same_pool ? 0 : port_bandwidth(kp, kc, f, port_bits));
  const bool embedded = dev.embedded_host();
  x.host_flops = (embedded && dev.host_cpu_gflops.has() ? *dev.host_cpu_gflops : c.server_cpu_gflops.value) * 1e9 *
                 c.host_cpu_efficiency.value;
  x.host_bytes_per_s = embedded ? eta * dev.memory_bandwidth_gbps() * kGB : c.server_memory_gbps.value * kGB;
  x.host_link_bytes_per_s = pcie_bandwidth(dev, c);
  const bool classifier_on_host = on_host(d, graph::OpKind::classifier);

  // Int8 activations with per-token dynamic scales: the tensor split all-reduces their
  // maximum; calibrated (static) scales need no reduction.
  const bool dynamic_scale = w.decode.precision.act_bits <= 8 && !w.decode.precision.static_act;
  // Designs the kernels run (no kernel_gaps(): one compute unit, no host operators, dense
  // 8/4-bit weights, 512-bit ports; weights in the matrix unit's format, one sequence;
  // weights and KV stream from off-chip memory whatever the style) are costed on
  // the instruction list with the units' description, as the simulator executes it; the
  // others with the per-operation model below.
  const bool program_path = hardware == Hardware::fpgallm_kernels && d.kernel_gaps().empty() && d.weights.bits == 0 &&
                            pl.fits && w.scenario.batch == 1;
  const arch::PortRates rates = program_path ? port_rates(d, dev, wp, kp, c) : arch::PortRates{};
  const Bounds bounds{p.target, peak_ops_per_s(d), raw_bw};
  // `context`: the decode phase's (wl's own but where the card's prefill varies it). `sink.ph` is the phase.
  auto run_phase = [&](const graph::Workload& wl, int context, PhaseSink sink, std::vector<Transfer>& transfers) -> bool {
    PhaseTime& ph = sink.ph;
    const int tokens = int(wl.tokens());
    int logits_tokens = int(wl.shape.batch);
    for (const auto& op : wl.ops)
      if (op.kind == graph::OpKind::classifier) logits_tokens = int(op.m);
    const auto runs = program_path ? phase_runs(cache, wl, context, d, dynamic_scale) : std::vector<ProgramRun>{};
    transfers.clear();
    if (!runs.empty()) {
      program_phase(x, runs, rates, sink, transfers);  // host transfers inside
    } else {
      transfers = card_transfers(wl.config, d.parallel, tokens, logits_tokens, dynamic_scale);
      x.transfers = &transfers;
      x.heads = wl.config.n_heads * wl.shape.batch;
      for (const auto& op : wl.ops)
        sink.add(fpga_op(x, op, op.kind == graph::OpKind::classifier ? int(op.m) : tokens), op.name, op.layer);
      x.transfers = nullptr;
      ph.host_s = host_seconds(wl, dev, c, classifier_on_host);
    }
    for (const Transfer& t : transfers)
      if (t.linear.empty()) {  // pipeline hand-offs: one after the other, on the token's path
        const double s = t.seconds(p.cards, x.link.bytes_per_s, x.link.hop_s);
        ph.link_s += s;
        ph.seconds += s;
      }
    if (d.host_launch_per_layer) ph.host_s += wl.config.n_layers * c.kernel_launch_s.value;
    ph.seconds += ph.host_s;
    if (x.tensor) {
      ph.flops *= p.cards;
      ph.offchip_bytes *= p.cards;
    }
    return !runs.empty();
  };
  std::vector<Transfer> prefill_transfers;
  const bool list = detail == Detail::ops;
  const bool costed_prefill = run_phase(w.prefill, w.prefill.shape.context, {p.prefill, list, &bounds}, prefill_transfers);
  const bool costed_decode = run_phase(w.decode, w.decode.shape.context, {p.decode, list, &bounds}, p.decode_transfers);
  if (program_path && !(costed_prefill && costed_decode))
    p.notes.push_back("the instruction list (arch::Program) cannot express this model; costed with the per-operation model");
  if (hardware == Hardware::fpgallm_kernels && !program_path)
    p.notes.push_back("fpgallm's kernels do not run this design (a kernel gap, weights.bits, batch > 1) or it does not "
                      "fit; costed with the per-operation model");
  if (costed_prefill || costed_decode)
    p.notes.push_back(
        "costed on the instruction list (arch::Program) with the units' description (arch::unit_work), as the simulator "
        "executes it");
  if (hardware == Hardware::fpgallm_kernels && costed_prefill) {
    const int prompt = int(w.prefill.tokens()), block = arch::block_tokens(d);
    const int blocks = (prompt + block - 1) / block;
    if (block > 1) {
      p.prefill_path = fmt::format("the emitted top's prompt call: {} block{} of up to {} tokens on the tiled matrix unit",
                                   blocks, blocks == 1 ? "" : "s", block);
      p.notes.push_back(fmt::format(
          "prefill_s is the emitted top's prompt call (one kernel call, fpgallm emit): prefill blocks of {} tokens "
          "(tiling.prefill_block, at most {}), each the whole instruction list with its matmuls on the tiled matrix "
          "unit (kernels::matmul_w8a8 reading the decode weights where they lie); the C-simulation backend and the "
          "simulator run the same blocks",
          block, arch::kMaxBlockTokens));
    } else {
      p.prefill_path = fmt::format("the emitted top's prompt call: {} one-token block{} on the decode datapath", blocks,
                                   blocks == 1 ? "" : "s");
      p.notes.push_back(
          "prefill_s is the emitted top's prompt call (one kernel call, fpgallm emit) with one-token blocks "
          "(tiling.prefill_block 1): each token runs the decode step's instruction list, its matmuls streamed as in "
          "decode; the C-simulation backend and the simulator run the same steps");
    }
  }
  if (p.cards > 1) {
    p.link_bytes_per_token = bytes_sent_per_card(p.decode_transfers, p.cards);
    for (double& b : p.link_bytes_per_token) b /= double(w.decode.tokens());
    if (d.parallel.split == arch::Split::tensor && w.decode.config.n_kv_heads % p.cards != 0)
      p.notes.push_back(fmt::format("the multi-card executor splits attention by KV head: {} KV heads over {} cards "
                                    "does not divide (times assume an even split)",
                                    w.decode.config.n_kv_heads, p.cards));
  }

  p.peak_ops_per_s = peak_ops_per_s(d) * p.cards;
  p.peak_bytes_per_s = raw_bw * p.cards;
  p.prefill_s = p.prefill.seconds;
  p.decode_step_s = p.decode.seconds;
  p.decode_tokens_per_s = w.scenario.batch / p.decode_step_s;
  p.prefill_tokens_per_s = double(w.prefill.tokens()) / p.prefill_s;

  // Power while decoding: the resource model's counts with the activity the timing implies.
  try {
    std::optional<hw::Utilization> estimated;
    const hw::Utilization& use =
        resources ? *resources : estimated.emplace(hw::estimate_resources(d, dev, {&w.decode.config}));
    hw::Activity act;
    act.mac_busy = std::min(1.0, p.decode.compute_s / p.decode.seconds);
    act.vector_busy = 0.2;
    act.bram_busy = 1.0;
    act.offchip_bytes_per_s = p.decode.offchip_bytes / p.cards / p.decode.seconds;
    const hw::Power pw = hw::estimate_power(d, dev, use, act);
    p.watts = pw.total_w * p.cards;
    p.power = pw;
    for (const auto& a : pw.assumptions) p.notes.push_back("power: " + a);
  } catch (const fpgallm::InputError& e) {
    p.notes.push_back(std::string("no power estimate: ") + e.what());
  }
  if (p.watts > 0) p.joules_per_token = p.watts * p.decode_step_s / w.scenario.batch;
  const double hourly = hourly_usd(dev, p.watts / p.cards, c) * p.cards;  // per card, times the cards
  if (hourly > 0) p.usd_per_mtoken = hourly / (p.decode_tokens_per_s * 3600) * 1e6;

  p.assumptions = {
      {"clock", d.clock_mhz, "MHz", "design.clock_mhz"},
      {"matrix_unit_macs", double(d.matrix_unit.rows) * d.matrix_unit.cols / d.matrix_unit.ii, "MAC/cycle",
       "design.matrix_unit rows x cols / ii"},
      {"memory_efficiency", eta, c.memory_efficiency.unit, c.memory_efficiency.source},
      {"weight_bandwidth", x.bw_weights / kGB, "GB/s",
       fmt::format("{} of {} x {} channels, {}-bit ports at the kernel clock, x memory_efficiency", wp.kind, dev.id, wc, port_bits)},
      program_path
          ? Assumption{"kv_bandwidth", 2 * rates.kv * f / kGB, "GB/s",
                       fmt::format("the emitted top's kv_k and kv_v bundles, one {} port each at one channel's rate "
                                   "(arch::PortRates.kv, as the schedule charges attention), x memory_efficiency; the "
                                   "banks connectivity.cfg gives them are checked to deliver it (hw/memory_map.hpp)",
                                   kp.kind)}
          : Assumption{"kv_bandwidth", x.bw_kv / kGB, "GB/s", fmt::format("{} x {} channels x memory_efficiency", kp.kind, kc)},
      {"port_bits", double(port_bits), "bits per channel", "design.memory.port_bits: each channel's AXI port carries port_bits / 8 bytes per cycle"},
      {"issue_cycles", c.issue_cycles.value, c.issue_cycles.unit, c.issue_cycles.source},
      {"dma_setup_cycles", c.dma_setup_cycles.value, c.dma_setup_cycles.unit, c.dma_setup_cycles.source},
      {"first_access_weights", x.latency_weights * 1e9, "ns", wp.is_hbm() ? c.hbm_first_access_ns.source : c.ddr_first_access_ns.source},
      {"host_transfer_s", c.host_transfer_s.value, c.host_transfer_s.unit, c.host_transfer_s.source},
      {"double_buffered", x.double_buffered ? 1.0 : 0.0, "bool",
       "buffers.weight_bytes >= 2 weight tiles: memory and compute overlap"},
  };
  if (p.cards > 1) {
    p.assumptions.push_back({"link_bandwidth", x.link.bytes_per_s / kGB, "GB/s", x.link.bandwidth_source});
    p.assumptions.push_back({"link_hop_s", x.link.hop_s, c.link_hop_s.unit, x.link.hop_source});
    p.notes.push_back(
        std::string("card-to-card: ") +
        (d.parallel.split == arch::Split::tensor
             ? std::string("tensor split as executed: per layer a sum all-reduce of dim x 4-byte partial sums after wo "
                           "and w2") +
                   (dynamic_scale ? " and a max all-reduce of one 4-byte scale per token before each" : "") +
                   "; an all-gather of the fp32 logits; ring algorithms (all-reduce 2(N-1) steps of B/N, all-gather "
                   "N-1 steps)"
             : "pipeline split as executed: x in fp32 (dim x 4 bytes per token) from each stage to the next, the fp32 "
               "logits from the last card back to card 0; one hop each"));
  }
  if (p.watts > 0 && !dev.cloud_usd_per_hour.has() && dev.price_usd.has()) {
    p.assumptions.push_back({"amortization_years", c.amortization_years.value, "years", c.amortization_years.source});
    p.assumptions.push_back({"electricity", c.electricity_usd_per_kwh.value, "USD/kWh", c.electricity_usd_per_kwh.source});
  }
  if (d.host_launch_per_layer)
    p.assumptions.push_back({"kernel_launch_s", c.kernel_launch_s.value, "s per layer per phase", c.kernel_launch_s.source});
  if (d.compute_units > 1)
    p.assumptions.push_back({"compute_units", double(d.compute_units), "per card",
                             "design.compute_units: matmuls split by output rows, attention by heads, vector work by "
                             "elements; a barrier after each pass: " + c.cu_barrier_cycles.source});
  if (d.weights.bits > 0 || d.weights.sparse_n > 0)
    p.assumptions.push_back({"stored_weight_bits", d.weights.bits_per_weight(d.matrix_unit.weight_bits), "bits per weight",
                             fmt::format("design.weights: {} bits{}, scales {}", d.weights.bits > 0 ? d.weights.bits : d.matrix_unit.weight_bits,
                                         d.weights.sparse_n > 0 ? fmt::format(", {}:{} sparsity with position indices (MACs x {:.2f})",
                                                                              d.weights.sparse_n, d.weights.sparse_m, d.weights.density())
                                                                : std::string(),
                                         d.weights.group_size > 0 ? fmt::format("fp16 per {} weights", d.weights.group_size)
                                                                  : std::string("fp32 per output row"))});
  if (!d.host_ops.empty()) {
    std::string ops;
    for (const auto& o : d.host_ops) ops += (ops.empty() ? "" : ", ") + o;
    p.assumptions.push_back({"host_cpu_gflops", x.host_flops / 1e9, "GFLOP/s achieved",
                             (embedded && dev.host_cpu_gflops.has() ? dev.host_cpu_gflops.source
                                                                    : c.server_cpu_gflops.source) +
                                 " x host_cpu_efficiency (" + c.host_cpu_efficiency.source + ")"});
    const std::string shared_ddr =
        embedded && !dev.memory.empty() ? dev.memory.front().bandwidth_gbps.source + " x memory_efficiency" : "";
    p.assumptions.push_back({"host_memory_bandwidth", x.host_bytes_per_s / kGB, "GB/s",
                             embedded ? "the SoC's shared memory: " + shared_ddr : c.server_memory_gbps.source});
    p.assumptions.push_back({"host_link_bandwidth", x.host_link_bytes_per_s / kGB, "GB/s",
                             "operands of the host's operators, card <-> host: " +
                                 (dev.pcie_gbps.has() ? dev.pcie_gbps.source : c.pcie_gbps_default.source)});
    p.notes.push_back("on the " + std::string(embedded ? "embedded" : "host") + " CPU: " + ops);
  }
  for (const auto& gap : d.kernel_gaps()) p.notes.push_back("predicted only; the kernels cannot run it: " + gap);
  if (!pl.fits) p.notes.push_back("does not fit: " + pl.text);
  return p;
}

}  // namespace

MemoryFit memory_fit(const arch::Design& d, const hw::Device& dev, const Workloads& w, const Constants& c,
                     Hardware hardware) {
  WorkloadCache own;
  const Stored stored = stored_bytes(d, w, w.cache ? *w.cache : own);
  const Placement pl = hardware == Hardware::fpgallm_kernels
                           ? place_banked(d, dev, stored.weights, stored.kv, d.parallel.cards, w.decode.config, c)
                           : place(d, dev, stored.weights, stored.kv, d.parallel.cards, c);
  auto index = [&](const hw::MemoryPool* pool) { return pool ? int(pool - dev.memory.data()) : -1; };
  return {pl.fits, pl.text, index(pl.weights), index(pl.kv)};
}

std::optional<hw::MemoryMap> bank_map(const arch::Design& d, const hw::Device& dev, const model::Config& config,
                                      const Constants& c) {
  const graph::Workload wl = decode_workload(d, config);
  const Placement pl = place(d, dev, wl.model_weight_bytes(), wl.kv_cache_bytes(d.context), d.parallel.cards, c);
  return bank_map_of(d, dev, config, pl, c);
}

namespace {

std::optional<hw::MemoryMap> bank_map_of(const arch::Design& d, const hw::Device& dev, const model::Config& config,
                                         const Placement& pl, const Constants& c) {
  if (d.parallel.cards != 1 || !config.llama_family() || config.moe() || config.n_layers <= 0 || pl.weights_on_chip ||
      pl.kv_on_chip || !pl.weights)
    return std::nullopt;
  const arch::PortRates rates = port_rates(d, dev, *pl.weights, pl.kv ? *pl.kv : *pl.weights, c);
  const int context = config.seq_len > 0 ? std::min(d.context, config.seq_len) : d.context;
  return hw::map_buffers(hw::kernel_buffers(config, d, context, rates), dev, d, c.memory_efficiency.value);
}

}  // namespace

Prediction predict(const arch::Design& d, const hw::Device& dev, const Workloads& w, const Constants& c,
                   Hardware hardware) {
  return predict_fpga(d, dev, w, nullptr, Detail::ops, c, hardware);
}

Prediction predict(const arch::Design& d, const hw::Device& dev, const Workloads& w, const hw::Utilization& resources,
                   Detail detail, const Constants& c, Hardware hardware) {
  return predict_fpga(d, dev, w, &resources, detail, c, hardware);
}

Prediction predict_gpu(const hw::Device& dev, const Workloads& w, int cards, GpuStack stack, const Constants& c) {
  if (dev.kind != hw::Kind::gpu) throw fpgallm::InputError(dev.id, "predict_gpu: not a GPU");
  if (cards < 1) throw fpgallm::InputError(dev.id, "predict_gpu: cards must be at least 1");
  if (dev.memory.empty() || !dev.memory.front().bandwidth_gbps.has())
    throw fpgallm::InputError(dev.id, "the GPU has no memory bandwidth figure");
  Prediction p;
  p.target = dev.id;
  p.device = dev.id;
  p.kind = hw::Kind::gpu;
  p.cards = cards;
  p.split = cards > 1 ? "tensor" : "none";
  p.scenario = w.scenario;
  p.precision = graph::to_string(w.decode.precision);
  p.weight_bytes = w.decode.model_weight_bytes();
  p.kv_bytes = w.decode.kv_cache_bytes(w.scenario.context);
  p.capacity_bytes = dev.memory_capacity_gb() * kGB * cards;
  p.fits_memory = p.weight_bytes + p.kv_bytes <= p.capacity_bytes;
  p.placement = p.fits_memory ? "weights and KV cache in " + dev.memory.front().kind
                              : fmt::format("weights + KV cache ({:.1f} GB) exceed {} x {:.0f} GB", (p.weight_bytes + p.kv_bytes) / kGB,
                                            cards, dev.memory_capacity_gb());
  const double bw_raw = dev.memory_bandwidth_gbps() * kGB;
  const GpuStackConstants& sc = c.stack(stack);
  const double bw = sc.bandwidth_efficiency.value * bw_raw;
  auto peak_for = [&](const graph::Op& op) {
    const bool int8 = op.act_bits > 0 && op.act_bits <= 8 && op.weight_bits <= 8;
    if (op.act_bits >= 32 && dev.peak_fp32_tflops.has()) return *dev.peak_fp32_tflops * 1e12;
    if (int8 && dev.peak_int8_tops.has()) return *dev.peak_int8_tops * 1e12;
    if (dev.peak_fp16_tflops.has()) return *dev.peak_fp16_tflops * 1e12;
    if (dev.peak_bf16_tflops.has()) return *dev.peak_bf16_tflops * 1e12;
    throw fpgallm::InputError(dev.id, "the GPU has no peak throughput figure");
  };
  double peak_max = 0;
  const double link = link_bandwidth(dev, c);
  const double layer_overhead = sc.layer_overhead_s.value;
  auto run_phase = [&](const graph::Workload& wl, PhaseTime& ph) {
    for (const auto& op : wl.ops) {
      OpTime o;
      o.name = op.name;
      o.kind = op.kind;
      o.layer = op.layer;
      const double split = (is_matrix(op.kind) || op.kind == graph::OpKind::softmax) ? cards : 1;
      const double peak = peak_for(op);
      peak_max = std::max(peak_max, peak);
      o.flops = op.flops / split;
      o.offchip_bytes = op.bytes() / split;
      o.compute_s = o.flops / (c.gpu_compute_efficiency.value * peak);
      o.memory_s = o.offchip_bytes / bw;
      if (cards > 1 && has_weights(op.kind) && row_parallel(op))  // ring all-reduce
        o.link_s = 2 * all_gather_s(double(op.m) * op.n * op.act_bits / 8.0, cards, link, c);
      o.time_s = std::max(o.compute_s, o.memory_s) + o.link_s;
      o.bound = classify(o.compute_s, o.memory_s, 0, o.link_s);
      add_phase_op(ph, o);
    }
    ph.fixed_s = layer_overhead * wl.config.n_layers;
    ph.seconds += ph.fixed_s;
    ph.host_s = host_seconds(wl, dev, c, false);
    ph.seconds += ph.host_s;
    ph.flops *= cards;
    ph.offchip_bytes *= cards;
  };
  run_phase(w.prefill, p.prefill);
  run_phase(w.decode, p.decode);
  p.peak_ops_per_s = peak_max * cards;
  p.peak_bytes_per_s = bw_raw * cards;
  p.prefill_s = p.prefill.seconds;
  p.decode_step_s = p.decode.seconds;
  p.decode_tokens_per_s = w.scenario.batch / p.decode_step_s;
  p.prefill_tokens_per_s = double(w.prefill.tokens()) / p.prefill_s;
  for (const PhaseTime* ph : {&p.prefill, &p.decode})
    for (const OpTime& o : ph->ops)
      if (o.time_s > 0 && (o.offchip_bytes / o.time_s > bw_raw * (1 + 1e-9) || o.flops / o.time_s > peak_max * (1 + 1e-9)))
        throw std::logic_error(fmt::format("perf: GPU {} op {} exceeds a peak", dev.id, o.name));

  const double busy = std::min(1.0, (p.decode.seconds - p.decode.fixed_s - p.decode.host_s) / p.decode.seconds);
  try {
    const hw::Power pw = hw::estimate_board_power(dev, busy);
    p.watts = pw.total_w * cards;
    for (const auto& a : pw.assumptions) p.notes.push_back("power: " + a);
  } catch (const fpgallm::InputError& e) {
    p.notes.push_back(std::string("no power estimate: ") + e.what());
  }
  if (p.watts > 0) p.joules_per_token = p.watts * p.decode_step_s / w.scenario.batch;
  const double hourly = hourly_usd(dev, p.watts / cards, c) * cards;  // per card, times the cards
  if (hourly > 0) p.usd_per_mtoken = hourly / (p.decode_tokens_per_s * 3600) * 1e6;
  p.assumptions = {
      {"gpu_bandwidth_efficiency", sc.bandwidth_efficiency.value, "fraction",
       std::string("software stack ") + to_string(stack) + ": " + sc.bandwidth_efficiency.source},
      {"gpu_compute_efficiency", c.gpu_compute_efficiency.value, "fraction", c.gpu_compute_efficiency.source},
      {"software_stack_layer_overhead", layer_overhead, "s per layer per step",
       std::string("software stack ") + to_string(stack) + ": " + sc.layer_overhead_s.source},
      {"memory_bandwidth", bw_raw / kGB, "GB/s", dev.memory.front().bandwidth_gbps.source},
      {"peak_ops", peak_max / 1e12, "TOPS", "device datasheet peak for the operand widths"},
  };
  if (cards > 1)
    p.assumptions.push_back({"link_bandwidth", link / kGB, "GB/s",
                             dev.card_link_gbps.has() ? dev.card_link_gbps.source : c.link_gbps_default.source});
  if (!p.fits_memory) p.notes.push_back("does not fit: " + p.placement);
  return p;
}

std::vector<double> decode_curve(const arch::Design& design, const hw::Device& device, const model::Config& config,
                                 const graph::Precision& precision, const Scenario& s, const std::vector<int>& contexts) {
  std::vector<double> out;
  for (int ctx : contexts) {
    Scenario t = s;
    t.context = ctx;
    t.prompt = 1;
    out.push_back(predict(design, device, lower(config, precision, t)).decode_step_s);
  }
  return out;
}

void to_json(nlohmann::json& j, const Assumption& a) {
  j = {{"name", a.name}, {"value", a.value}, {"unit", a.unit}, {"source", a.source}};
}

void to_json(nlohmann::json& j, const OpTime& o) {
  j = {{"name", o.name},           {"kind", graph::to_string(o.kind)}, {"flops", o.flops},
       {"offchip_bytes", o.offchip_bytes}, {"compute_s", o.compute_s},   {"memory_s", o.memory_s},
       {"fixed_s", o.fixed_s},     {"link_s", o.link_s},                {"time_s", o.time_s},
       {"bound", to_string(o.bound)}};
}

// Power and energy are null where the device has no power figure: unknown, never 0.
nlohmann::json known_or_null(double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json summary_json(const Prediction& p) {
  nlohmann::json j = {{"target", p.target},
                      {"device", p.device},
                      {"kind", hw::to_string(p.kind)},
                      {"cards", p.cards},
                      {"split", p.split},
                      {"batch", p.scenario.batch},
                      {"prompt", p.scenario.prompt},
                      {"context", p.scenario.context},
                      {"precision", p.precision},
                      {"weight_bytes", p.weight_bytes},
                      {"kv_bytes", p.kv_bytes},
                      {"capacity_bytes", p.capacity_bytes},
                      {"fits_memory", p.fits_memory},
                      {"placement", p.placement},
                      {"peak_ops_per_s", p.peak_ops_per_s},
                      {"peak_bytes_per_s", p.peak_bytes_per_s},
                      {"prefill_s", p.prefill_s},
                      {"prefill_tokens_per_s", p.prefill_tokens_per_s},
                      {"decode_step_s", p.decode_step_s},
                      {"decode_tokens_per_s", p.decode_tokens_per_s},
                      {"watts", known_or_null(p.watts)},
                      {"joules_per_token", known_or_null(p.joules_per_token)},
                      {"usd_per_mtoken", p.usd_per_mtoken},
                      {"assumptions", p.assumptions},
                      {"notes", p.notes}};
  if (p.power.total_w > 0) j["power"] = p.power;
  if (!p.prefill_path.empty()) j["prefill_path"] = p.prefill_path;
  j["time_to_first_token_s"] = p.time_to_first_token_s();
  if (p.kind == hw::Kind::fpga && p.cards > 1)
    j["communication"] = communication_json(p.decode_transfers, p.cards, p.scenario.batch);
  for (auto [name, ph] : {std::pair{"prefill_breakdown", &p.prefill}, std::pair{"decode_breakdown", &p.decode}})
    j[name] = {{"compute_s", ph->compute_s}, {"memory_s", ph->memory_s}, {"fixed_s", ph->fixed_s},
               {"link_s", ph->link_s},       {"host_s", ph->host_s},     {"seconds", ph->seconds},
               {"flops", ph->flops},         {"offchip_bytes", ph->offchip_bytes}};
  return j;
}

void to_json(nlohmann::json& j, const Prediction& p) {
  j = summary_json(p);
  j["prefill_ops"] = p.prefill.ops;
  j["decode_ops"] = p.decode.ops;
}

graph::Precision design_precision(const arch::Design& design) {
  graph::Precision p;
  p.weight_bits = design.matrix_unit.weight_bits;
  p.act_bits = design.matrix_unit.act_bits;
  p.kv_bits = design.kv_bits;
  p.group_size = design.matrix_unit.weight_bits == 4 ? 32 : 0;
  return p;
}

}  // namespace perf
