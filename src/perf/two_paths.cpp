#include "perf/two_paths.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

#include "arch/units.hpp"
#include "kernels/attention.hpp"
#include "perf/workload_cache.hpp"

namespace perf {

namespace {

// The ideal-unit assumptions in the order compare_paths applies them.
enum Step { attention, classifier, matmul, vector, kv_memory, kv_channels, fixed_costs, kSteps };

bool wanted(const arch::IdealUnits& u, int step) {
  switch (step) {
    case attention: return u.attention_on_matrix_unit;
    case classifier: return u.classifier_last_token_only;
    case matmul: return u.matmul_stages_overlapped;
    case vector: return u.vector_work_as_operators;
    case kv_memory: return u.kv_in_first_free_memory;
    case kv_channels: return u.kv_over_all_kv_channels;
    case fixed_costs: return u.fixed_costs_per_operation;
  }
  return false;
}

const char* field_name(int step) {
  switch (step) {
    case attention: return "attention_on_matrix_unit";
    case classifier: return "classifier_last_token_only";
    case matmul: return "matmul_stages_overlapped";
    case vector: return "vector_work_as_operators";
    case kv_memory: return "kv_in_first_free_memory";
    case kv_channels: return "kv_over_all_kv_channels";
    case fixed_costs: return "fixed_costs_per_operation";
  }
  return "?";
}

// Which assumptions are in force: the first `applied` of the wanted ones.
using Applied = std::array<bool, kSteps>;

int pool_channels(const hw::MemoryPool& p) { return p.channels.has() ? std::max(1, int(*p.channels)) : 1; }

// Everything the instructions are costed with, for both memories the KV cache can be in.
struct Costing {
  const arch::Design& d;
  const Constants& c;
  arch::PortRates kernel_rates;  // as predict() has them (the bank map's KV memory)
  arch::PortRates first_free;    // the KV cache in the per-operation model's memory
  int kv_ports_kernel = 2, kv_ports_first_free = 2;  // KV channels of each memory the design reads over

  // QK and PV of an attention instruction on the matrix unit, each head's product a matrix
  // of its own: per query over all `context` keys, q K^T in ceil(context / rows) x
  // ceil(head_dim / cols) steps and p V in ceil(head_dim / rows) x ceil(context / cols), scaled
  // to the (query, key) pairs the step's queries see (causal).
  double attention_mac_cycles(const arch::Instruction& in) const {
    auto ceil_div = [](double a, double b) { return std::ceil(a / b); };
    const auto& mu = d.matrix_unit;
    const double per_query = ceil_div(in.context, mu.rows) * ceil_div(in.head_dim, mu.cols) +
                             ceil_div(in.head_dim, mu.rows) * ceil_div(in.context, mu.cols);
    double pairs = 0;
    for (int t = 0; t < in.tokens; ++t) pairs += in.pos + t + 1;
    return double(in.heads) * per_query * pairs / std::max(1, in.context) * std::max(1, mu.ii);
  }

  // Softmax of an attention instruction on the vector unit: three passes (maximum, exponent
  // sum, normalization) over the scores the step's queries see, lanes per cycle.
  double softmax_cycles(const arch::Instruction& in) const {
    double pairs = 0;
    for (int t = 0; t < in.tokens; ++t) pairs += in.pos + t + 1;
    return 3 * std::ceil(double(in.heads) * pairs / d.vector_unit.lanes);
  }

  // Cycles of one instruction (one card's part) with the assumptions of `on` in force;
  // `last_logits`: the prefill's last classifier instruction.
  double cycles(const arch::Instruction& ins, const Applied& on, bool last_logits) const {
    arch::Instruction in = ins;
    if (on[classifier] && in.op == arch::Op::matmul && in.linear == model::Linear::cls) {
      if (!last_logits) return 0;  // an earlier block's logits (one-token blocks included)
      in.tokens = 1;               // host_bytes are already the last token's logits
    }
    arch::PortRates r = kernel_rates;
    int kv_ports = kv_ports_kernel;
    if (on[kv_memory]) {
      r.kv = first_free.kv;
      r.kv_latency = first_free.kv_latency;
      kv_ports = kv_ports_first_free;
    }
    // The attention unit charges K and V on a bundle each at r.kv: all the ports read
    // together at the same bytes per cycle are r.kv x ports / 2 per bundle.
    if (on[kv_channels]) r.kv = r.kv * kv_ports / 2;
    arch::PortRates no_latency = r;
    no_latency.memory_latency = 0;
    no_latency.kv_latency = 0;
    const arch::Work w = arch::unit_work(d, in, r, false);
    const arch::Work w0 = arch::unit_work(d, in, no_latency, false);
    // The controller's fetch words and every request latency are the kernels' fixed costs.
    double fixed = w.cycles - w0.cycles + arch::kInstructionWords;
    double body = w0.cycles - arch::kInstructionWords;
    const double macs_per_cycle = double(d.matrix_unit.rows) * d.matrix_unit.cols / std::max(1, d.matrix_unit.ii);
    if (on[attention] && in.op == arch::Op::attention)
      body = std::max(attention_mac_cycles(in), double(w.kv_read_bytes) / (2 * r.kv)) + softmax_cycles(in);
    if (on[matmul] && in.op == arch::Op::matmul) {
      const double channels = std::clamp(r.weight_channels, 1, std::max(1, d.memory.weight_channels));
      body = std::max(double(w.stream_bytes) / (r.weight_channel * channels), double(w.macs) / macs_per_cycle) +
             w0.host_cycles;
    }
    if (on[vector] && w.unit == arch::UnitKind::vector && in.op != arch::Op::attention && in.op != arch::Op::embed) {
      if (in.op == arch::Op::quantize || in.op == arch::Op::kv_store) return 0;
      const int passes = in.op == arch::Op::norm || in.op == arch::Op::head_norm ? 2 : 1;
      body = passes * std::ceil(double(in.vector_elements()) / d.vector_unit.lanes);
    }
    if (on[fixed_costs]) {
      int channels = 0;
      double first_access = 0;
      if (in.op == arch::Op::matmul || in.op == arch::Op::embed) {
        channels = in.op == arch::Op::matmul ? d.memory.weight_channels : 0;
        first_access = r.memory_latency;
      } else if (in.op == arch::Op::attention) {
        channels = d.memory.kv_channels > 0 ? d.memory.kv_channels : d.memory.weight_channels;
        first_access = r.kv_latency;
      }
      fixed = instruction_overhead_cycles(d, channels, c) + first_access;
    }
    return body + fixed;
  }
};

// Seconds the kernel path saves on a phase under each cumulative set of assumptions
// (index k: the first k wanted steps applied; index 0 is 0).
std::array<double, kSteps + 1> savings(const Costing& k, const std::vector<ProgramRun>& runs, int share, double f,
                                       const arch::IdealUnits& ideal) {
  auto is_logits = [](const arch::Instruction& in) { return in.op == arch::Op::matmul && in.linear == model::Linear::cls; };
  std::size_t last_logits_run = 0;
  for (std::size_t r = 0; r < runs.size(); ++r)
    for (const arch::Instruction& in : runs[r].program->shapes)
      if (is_logits(in)) last_logits_run = r;
  std::array<double, kSteps + 1> saved{};
  std::vector<std::array<double, kSteps + 1>> per_shape;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const ShapedProgram& sp = *runs[r].program;
    per_shape.assign(sp.shapes.size(), {});
    for (std::size_t s = 0; s < sp.shapes.size(); ++s) {
      const arch::Instruction part = arch::shard(sp.shapes[s], share);
      const bool last_logits = r == last_logits_run && is_logits(part);
      Applied on{};
      const double kernel = k.cycles(part, on, last_logits);
      for (int step = 0; step < kSteps; ++step) {
        if (wanted(ideal, step)) on[step] = true;
        per_shape[s][step + 1] = (kernel - k.cycles(part, on, last_logits)) / f;
      }
    }
    for (int shape : sp.shape_of)
      for (int i = 1; i <= kSteps; ++i) saved[i] += per_shape[shape][i];
  }
  return saved;
}

std::string pool_kind(const hw::Device& dev, int pool) {
  return pool >= 0 && pool < int(dev.memory.size()) ? dev.memory[std::size_t(pool)].kind : std::string("on chip");
}

}  // namespace

double PhasePaths::relative_difference() const {
  return per_operation_s > 0 ? std::abs(kernel_s - per_operation_s) / per_operation_s : 0.0;
}

TwoPaths compare_paths(const arch::Design& d, const hw::Device& dev, const Workloads& w, const arch::IdealUnits& ideal,
                       const Constants& c) {
  TwoPaths t;
  t.ideal = ideal;
  const Prediction kernel = predict(d, dev, w, c, Hardware::fpgallm_kernels);
  const Prediction per_op = predict(d, dev, w, c, Hardware::published_accelerator);
  t.decode = {kernel.decode_step_s, per_op.decode_step_s, kernel.decode_step_s, {}};
  t.prefill = {kernel.prefill_s, per_op.prefill_s, kernel.prefill_s, {}};

  const MemoryFit kernel_fit = memory_fit(d, dev, w, c, Hardware::fpgallm_kernels);
  const MemoryFit per_op_fit = memory_fit(d, dev, w, c, Hardware::published_accelerator);
  if (!d.kernel_gaps().empty() || d.weights.bits != 0 || !kernel_fit.fits || dev.memory.empty()) return t;

  // predict() runs a batch of b sequences as b steps of one sequence: the instruction list
  // of batch 1, its savings times b.
  const int batch = w.scenario.batch;
  Scenario one = w.scenario;
  one.batch = 1;
  const Workloads w1 = batch > 1 ? lower(w.decode.config, w.decode.precision, one) : w;
  WorkloadCache own;
  WorkloadCache& cache = w1.cache ? *w1.cache : own;
  const bool dynamic_scale = w1.decode.precision.act_bits <= 8 && !w1.decode.precision.static_act;
  const auto prefill_runs = phase_runs(cache, w1.prefill, w1.prefill.shape.context, d, dynamic_scale);
  const auto decode_runs = phase_runs(cache, w1.decode, w1.decode.shape.context, d, dynamic_scale);
  if (prefill_runs.empty() || decode_runs.empty()) return t;
  t.on_instruction_list = true;

  // The memories predict() streams from: the weights' (else the KV cache's, else the first).
  auto pool_or = [&](int pool, int fallback) { return pool >= 0 ? pool : fallback; };
  const int main_pool = pool_or(kernel_fit.weights_pool, pool_or(kernel_fit.kv_pool, 0));
  const int kv_pool = pool_or(kernel_fit.kv_pool, main_pool);
  const int first_free_kv = pool_or(per_op_fit.kv_pool, pool_or(per_op_fit.weights_pool, main_pool));
  const hw::MemoryPool& wp = dev.memory[std::size_t(main_pool)];
  const hw::MemoryPool& kp = dev.memory[std::size_t(kv_pool)];
  const hw::MemoryPool& fp = dev.memory[std::size_t(first_free_kv)];
  const int kv_channels = d.memory.kv_channels > 0 ? d.memory.kv_channels : d.memory.weight_channels;
  const Costing costing{d,
                        c,
                        port_rates(d, dev, wp, kp, c),
                        port_rates(d, dev, wp, fp, c),
                        std::clamp(kv_channels, 1, pool_channels(kp)),
                        std::clamp(kv_channels, 1, pool_channels(fp))};
  const int share = d.parallel.split == arch::Split::tensor ? d.parallel.cards : 1;
  const double f = d.clock_mhz * 1e6;

  const std::array<std::string, kSteps> what = {
      fmt::format("attention on the vector unit ({} elements per cycle)",
                  kernels::attention_lanes(d.vector_unit.lanes, d.kv_bits)),
      "logits of every prompt token",
      "matmul stages in sequence",
      "vector instructions as the kernels run them",
      fmt::format("KV cache in {} not {}", pool_kind(dev, kernel_fit.kv_pool), pool_kind(dev, per_op_fit.kv_pool)),
      fmt::format("KV over 2 bundles not {} channels", std::clamp(kv_channels, 1, pool_channels(fp))),
      "fixed costs (fetch and request latencies vs issue, DMA set-up, first access)"};
  auto explain = [&](PhasePaths& ph, const std::vector<ProgramRun>& runs) {
    const std::array<double, kSteps + 1> saved = savings(costing, runs, share, f, ideal);
    ph.ideal_kernel_s = ph.kernel_s - batch * saved[kSteps];
    const double difference = ph.kernel_s - ph.per_operation_s;
    if (difference == 0) return;
    for (int step = 0; step < kSteps; ++step)
      if (wanted(ideal, step))
        ph.parts.push_back({field_name(step), what[std::size_t(step)], batch * (saved[step + 1] - saved[step]) / difference});
    ph.parts.push_back({"rest",
                        "what the two lists still cost differently (embedding rows, pipeline fills, tile padding)",
                        (ph.ideal_kernel_s - ph.per_operation_s) / difference});
  };
  explain(t.decode, decode_runs);
  explain(t.prefill, prefill_runs);
  return t;
}

std::string two_paths_text(const TwoPaths& t, double threshold) {
  std::string out;
  for (auto [name, ph] : {std::pair{"decode step", &t.decode}, std::pair{"prefill", &t.prefill}}) {
    if (ph->relative_difference() <= threshold) continue;
    out += fmt::format("two costing paths ({}): kernel {:.4g} ms, per-operation {:.4g} ms; difference from:", name,
                       1e3 * ph->kernel_s, 1e3 * ph->per_operation_s);
    std::string parts;
    for (const PathDifference& p : ph->parts)
      if (std::abs(p.fraction) >= 0.005 || p.assumption == "rest")
        parts += fmt::format("{}{} {:+d}%", parts.empty() ? " " : ", ", p.assumption == "rest" ? "rest" : p.what,
                           int(std::lround(100 * p.fraction)));
    out += (parts.empty() ? std::string(" (the kernel path is not costed on the instruction list)") : parts) + "\n";
    out += fmt::format("  under ideal units (perf::compare_paths) the kernel path gives {:.4g} ms\n", 1e3 * ph->ideal_kernel_s);
  }
  return out;
}

void to_json(nlohmann::json& j, const PathDifference& d) {
  j = {{"assumption", d.assumption}, {"what", d.what}, {"fraction", d.fraction}};
}

void to_json(nlohmann::json& j, const PhasePaths& p) {
  j = {{"kernel_s", p.kernel_s},
       {"per_operation_s", p.per_operation_s},
       {"ideal_kernel_s", p.ideal_kernel_s},
       {"relative_difference", p.relative_difference()},
       {"parts", p.parts}};
}

void to_json(nlohmann::json& j, const TwoPaths& t) {
  j = {{"ideal_units",
        {{"attention_on_matrix_unit", t.ideal.attention_on_matrix_unit},
         {"classifier_last_token_only", t.ideal.classifier_last_token_only},
         {"matmul_stages_overlapped", t.ideal.matmul_stages_overlapped},
         {"vector_work_as_operators", t.ideal.vector_work_as_operators},
         {"kv_in_first_free_memory", t.ideal.kv_in_first_free_memory},
         {"kv_over_all_kv_channels", t.ideal.kv_over_all_kv_channels},
         {"fixed_costs_per_operation", t.ideal.fixed_costs_per_operation}}},
       {"on_instruction_list", t.on_instruction_list},
       {"decode", t.decode},
       {"prefill", t.prefill}};
}

}  // namespace perf
