#include "sim/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "perf/perf.hpp"
#include "sim/trace.hpp"
#include "util/error.hpp"
#include "util/paths.hpp"

namespace sim {

namespace {

using nlohmann::json;
constexpr double kGB = 1e9;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// data/sim_model.json: the figures the simulator needs beyond the device and perf tables.
struct SimConstants {
  double hbm_latency_ns = 0, ddr_latency_ns = 0;
  std::string hbm_source, ddr_source;
};

const SimConstants& sim_constants() {
  static const SimConstants c = [] {
    const std::string path = fpgallm::data_dir() + "/sim_model.json";
    std::ifstream in(path);
    if (!in) throw fpgallm::InputError(path, "cannot open the simulator's constants");
    json j;
    try {
      j = json::parse(in);
      SimConstants s;
      const auto& lat = j.at("memory_latency_ns");
      s.hbm_latency_ns = lat.at("HBM").at("value").get<double>();
      s.hbm_source = lat.at("HBM").at("source").get<std::string>();
      s.ddr_latency_ns = lat.at("DDR").at("value").get<double>();
      s.ddr_source = lat.at("DDR").at("source").get<std::string>();
      return s;
    } catch (const json::exception& e) {
      throw fpgallm::InputError(path, fmt::format("malformed ({})", e.what()));
    }
  }();
  return c;
}

bool is_hbm(const hw::MemoryPool& p) { return p.kind.rfind("HBM", 0) == 0; }

// Where weights and the KV cache live on one card.
struct Placement {
  const hw::MemoryPool* weights = nullptr;  // nullptr: on chip
  const hw::MemoryPool* kv = nullptr;       // nullptr: on chip
  std::string text;
};

Placement place(const arch::Design& d, const hw::Device& dev, double weight_bytes, double kv_bytes) {
  Placement p;
  const int cards = d.parallel.cards;
  const double w_card = weight_bytes / cards, kv_card = kv_bytes / cards;
  std::vector<double> free;
  for (const auto& m : dev.memory) free.push_back(m.capacity_gb.has() ? *m.capacity_gb * kGB : 0);
  std::vector<std::string> parts;
  if (d.style == arch::Style::dataflow) {
    if (w_card > double(d.buffers.weight_bytes))
      throw fpgallm::InputError(d.name, fmt::format("dataflow design: weights ({:.1f} MB per card) exceed buffers.weight_bytes ({:.1f} MB)",
                                                    w_card / 1e6, d.buffers.weight_bytes / 1e6));
    parts.push_back("weights resident on chip");
  } else {
    for (std::size_t i = 0; i < dev.memory.size() && !p.weights; ++i)
      if (dev.memory[i].bandwidth_gbps.has() && free[i] >= w_card) {
        p.weights = &dev.memory[i];
        free[i] -= w_card;
      }
    if (!p.weights)
      throw fpgallm::InputError(d.name, fmt::format("weights ({:.2f} GB per card) fit no off-chip memory of {}",
                                                    w_card / kGB, dev.id));
    parts.push_back("weights in " + p.weights->kind);
  }
  if (d.buffers.kv_bytes > 0 && kv_card <= double(d.buffers.kv_bytes)) {
    parts.push_back("KV cache on chip");
  } else {
    for (std::size_t i = 0; i < dev.memory.size() && !p.kv; ++i)
      if (dev.memory[i].bandwidth_gbps.has() && free[i] >= kv_card) {
        p.kv = &dev.memory[i];
        free[i] -= kv_card;
      }
    if (!p.kv)
      throw fpgallm::InputError(d.name, fmt::format("KV cache ({:.2f} GB per card) does not fit beside the weights on {}",
                                                    kv_card / kGB, dev.id));
    parts.push_back("KV cache in " + p.kv->kind);
  }
  for (const auto& s : parts) p.text += (p.text.empty() ? "" : "; ") + s;
  return p;
}

// One card's units, ports and buffers.
struct Card {
  int ctrl = -1, matrix = -1, vector = -1;
  int weights = -1, kv = -1, host = -1, link = -1;  // ports (-1: none)
  int weight_buf = -1, act_buf = -1;
};

bool row_parallel(model::Linear l) { return l == model::Linear::wo || l == model::Linear::w2; }

int vector_passes(arch::Op op) { return op == arch::Op::norm ? 2 : 1; }

class Lowering {
 public:
  Lowering(const model::Config& cfg, const arch::Design& d, const hw::Device& dev, bool idealized, Report& rep)
      : cfg_(cfg), d_(d), dev_(dev), c_(perf::constants()), rep_(rep), ideal_(idealized) {
    f_ = d.clock_mhz * 1e6;
    n_ = d.parallel.cards;
    tensor_ = d.parallel.split == arch::Split::tensor;
    pipeline_ = d.parallel.split == arch::Split::pipeline;
  }

  void build_machine(double weight_bytes, double kv_bytes) {
    const Placement pl = place(d_, dev_, weight_bytes, kv_bytes);
    rep_.notes.push_back(pl.text);
    const double eta = c_.memory_efficiency.value;
    auto port_spec = [&](const hw::MemoryPool& pool, int channels) {
      const int total = pool.channels.has() ? std::max(1, int(*pool.channels)) : 1;
      PortSpec s;
      s.channels = std::clamp(channels, 1, total);
      const double per_channel = *pool.bandwidth_gbps * kGB / total;  // bytes/s
      s.bytes_per_cycle = std::min(per_channel, d_.memory.port_bits / 8.0 * f_) / f_;
      s.efficiency = eta;
      s.burst_bytes = d_.memory.burst_bytes;
      const auto& sc = sim_constants();
      s.latency = ideal_ ? 0 : (is_hbm(pool) ? sc.hbm_latency_ns : sc.ddr_latency_ns) * 1e-9 * f_;
      return s;
    };
    const double pcie = (dev_.pcie_gbps.has() ? *dev_.pcie_gbps : c_.pcie_gbps_default.value) * kGB;
    const double link = (dev_.card_link_gbps.has() ? *dev_.card_link_gbps : c_.link_gbps_default.value) * kGB;
    for (int k = 0; k < n_; ++k) {
      Card cd;
      const std::string p = n_ > 1 ? fmt::format("card{}.", k) : "";
      cd.ctrl = e_.add_unit(p + "controller", UnitKind::control, k);
      cd.matrix = e_.add_unit(p + "matrix_unit", UnitKind::matrix, k);
      cd.vector = e_.add_unit(p + "vector_unit", UnitKind::vector, k);
      if (pl.weights)
        cd.weights = e_.add_port(fmt::format("{}{} weights ({} ch)", p, pl.weights->kind, d_.memory.weight_channels),
                                 UnitKind::memory, port_spec(*pl.weights, d_.memory.weight_channels), k);
      if (pl.kv) {
        if (d_.memory.kv_channels == 0 && pl.kv == pl.weights) {
          cd.kv = cd.weights;
        } else {
          const int ch = d_.memory.kv_channels > 0 ? d_.memory.kv_channels : d_.memory.weight_channels;
          cd.kv = e_.add_port(fmt::format("{}{} kv ({} ch)", p, pl.kv->kind, ch), UnitKind::memory, port_spec(*pl.kv, ch), k);
        }
      }
      PortSpec h;
      h.bytes_per_cycle = pcie / f_;
      h.latency = c_.host_transfer_s.value * f_;
      h.burst_bytes = 1 << 30;
      cd.host = e_.add_port(p + "pcie", UnitKind::host_link, h, k);
      if (n_ > 1) {
        PortSpec l;
        l.bytes_per_cycle = link / f_;
        l.latency = c_.link_hop_s.value * f_;
        l.burst_bytes = 1 << 30;
        cd.link = e_.add_port(p + "card_link", UnitKind::card_link, l, k);
      }
      const std::int64_t unbounded = std::int64_t(1) << 50;
      cd.weight_buf = e_.add_buffer(p + "weight_buffer", ideal_ ? unbounded : d_.buffers.weight_bytes, k);
      cd.act_buf = e_.add_buffer(p + "activation_buffer", ideal_ ? unbounded : d_.buffers.activation_bytes, k);
      cards_.push_back(cd);
    }
    rep_.assumptions.push_back({"memory_efficiency", eta, c_.memory_efficiency.unit, c_.memory_efficiency.source});
    rep_.assumptions.push_back({"port_bits", double(d_.memory.port_bits), "bits", "design.memory.port_bits"});
    rep_.assumptions.push_back({"instruction_overhead_cycles", perf::instruction_overhead_cycles(d_, d_.memory.weight_channels, c_),
                                "cycles per non-fused instruction streaming weights",
                                "perf::instruction_overhead_cycles: issue_cycles (" + c_.issue_cycles.source +
                                    ") + dma_setup_cycles per channel streamed from"});
    rep_.assumptions.push_back({"hbm_latency_ns", sim_constants().hbm_latency_ns, "ns", sim_constants().hbm_source});
    rep_.assumptions.push_back({"ddr_latency_ns", sim_constants().ddr_latency_ns, "ns", sim_constants().ddr_source});
    rep_.assumptions.push_back({"pcie_bandwidth", pcie / kGB, "GB/s",
                                dev_.pcie_gbps.has() ? dev_.pcie_gbps.source : c_.pcie_gbps_default.source});
    rep_.assumptions.push_back({"host_transfer_latency", c_.host_transfer_s.value, "s", c_.host_transfer_s.source});
    if (n_ > 1) {
      rep_.assumptions.push_back({"link_bandwidth", link / kGB, "GB/s",
                                  dev_.card_link_gbps.has() ? dev_.card_link_gbps.source : c_.link_gbps_default.source});
      rep_.assumptions.push_back({"link_hop_latency", c_.link_hop_s.value, "s", c_.link_hop_s.source});
    }
  }

  // The card that runs layer `layer` (pipeline split: card k holds the layers
  // perf::pipeline_layers gives it), or -1 for every card.
  int owner(int layer) const {
    if (!pipeline_) return -1;
    if (layer < 0) return -1;
    for (int k = 0; k < n_; ++k)
      if (layer < perf::pipeline_layers(cfg_.n_layers, n_, k).second) return k;
    return n_ - 1;
  }

  void lower(const arch::Program& prog, int program_index) {
    program_ = program_index;
    // The executor's communication for this step (perf::card_transfers: the analytical
    // model counts the same list).
    const auto transfers = perf::card_transfers(cfg_, d_.parallel, prog.tokens, prog.tokens, d_.matrix_unit.act_bits <= 8);
    rep_.transfers.insert(rep_.transfers.end(), transfers.begin(), transfers.end());
    for (const auto& ins : prog.instructions) {
      // Pipeline split: embedding on the first card, classifier on the last.
      int only = owner(ins.layer);
      if (pipeline_ && ins.layer < 0) only = (ins.op == arch::Op::embed) ? 0 : n_ - 1;
      if (done_.empty()) done_.assign(n_, -1);
      if (pipeline_ && ins.op == arch::Op::embed) stage_card_ = 0;  // tokens come from the host
      if (pipeline_ && only != stage_card_ && only >= 0) {
        for (const auto& t : transfers)
          if (t.kind == perf::Collective::send && t.from == stage_card_ && t.to == only) send(t);
        stage_card_ = only;
      }
      const bool matmul = ins.op == arch::Op::matmul;
      if (tensor_ && matmul)
        for (const auto& t : transfers)
          if (t.before && t.linear == ins.name) ring(t);
      for (int k = 0; k < n_; ++k) {
        if (only >= 0 && k != only) continue;
        lower_one(k, ins);
      }
      if (tensor_ && matmul)
        for (const auto& t : transfers)
          if (!t.before && t.linear == ins.name) ring(t);
      if (matmul && ins.host_bytes > 0 && n_ > 1) {
        // Logits reach the host from card 0: gathered there (tensor) or sent back by the
        // last stage (pipeline).
        if (pipeline_)
          for (const auto& t : transfers)
            if (t.kind == perf::Collective::send && t.to == 0 && t.from == n_ - 1) send(t);
        const int op = add_op(ins.name + " logits to host", "host", ins.layer, 0);
        done_[0] = e_.transfer(op, cards_[0].host, ins.host_bytes, {done_[0]});
      }
    }
  }

  Engine& engine() { return e_; }
  const std::vector<Card>& cards() const { return cards_; }
  const std::vector<int>& op_program() const { return op_program_; }
  const std::vector<std::string>& op_kind() const { return op_kind_; }

 private:
  // Point-to-point over the sending card's link (pipeline hand-offs, logits back).
  void send(const perf::Transfer& t) {
    const int op = add_op(t.name, perf::to_string(t.kind), t.layer, t.from);
    const TaskId sent = e_.transfer(op, cards_[t.from].link, std::int64_t(std::ceil(t.bytes)), {done_[t.from]});
    done_[t.to] = e_.compute(op, cards_[t.to].ctrl, 0, {sent, done_[t.to]});
  }

  // A ring collective over all cards: t.steps() steps, in each every card sends one chunk
  // to the next over its link and waits for the chunk from the previous card.
  void ring(const perf::Transfer& t) {
    const std::int64_t chunk = std::int64_t(std::ceil(t.chunk_bytes(n_)));
    std::vector<int> ops(n_);
    std::vector<TaskId> last(n_);
    for (int k = 0; k < n_; ++k) {
      ops[k] = add_op(t.name, perf::to_string(t.kind), t.layer, k);
      last[k] = e_.compute(ops[k], cards_[k].ctrl, 0, {done_[k]});
    }
    for (int step = 0; step < t.steps(n_); ++step) {
      std::vector<TaskId> sent(n_);
      for (int k = 0; k < n_; ++k) sent[k] = e_.transfer(ops[k], cards_[k].link, chunk, {last[k]});
      for (int k = 0; k < n_; ++k) last[k] = e_.compute(ops[k], cards_[k].ctrl, 0, {last[k], sent[(k + n_ - 1) % n_]});
    }
    for (int k = 0; k < n_; ++k) done_[k] = last[k];
  }

  int add_op(const std::string& name, const std::string& kind, int layer, int card) {
    const int id = e_.add_op(name, layer, card);
    op_program_.push_back(program_);
    op_kind_.push_back(kind);
    return id;
  }

  void lower_one(int k, const arch::Instruction& ins) {
    const Card& cd = cards_[k];
    if (ins.op == arch::Op::quantize && ins.fused) return;  // inside its producer's store stage
    const int op = add_op(ins.name, arch::to_string(ins.op), ins.layer, k);
    const TaskId prev = done_[k];
    TaskId issue = prev;
    // A fused norm runs inside the next matmul's input stage and is not issued on its own.
    const bool folded = ins.fused && ins.op == arch::Op::norm;
    // The controller's overhead grows with the channels the instruction streams from (DMA set-up).
    int channels = 0;
    if ((ins.op == arch::Op::matmul || ins.op == arch::Op::embed) && cd.weights >= 0) channels = d_.memory.weight_channels;
    if (ins.op == arch::Op::attention && cd.kv >= 0)
      channels = d_.memory.kv_channels > 0 ? d_.memory.kv_channels : d_.memory.weight_channels;
    if (!folded) issue = e_.compute(op, cd.ctrl, perf::instruction_overhead_cycles(d_, channels, c_), {prev});
    std::vector<TaskId> ends;
    const int share = tensor_ ? n_ : 1;
    switch (ins.op) {
      case arch::Op::embed: {
        TaskId t = e_.transfer(op, cd.host, ins.host_bytes, {issue});
        if (cd.weights >= 0) t = e_.transfer(op, cd.weights, ins.weight_bytes, {t});
        ends.push_back(t);
        break;
      }
      case arch::Op::matmul: ends.push_back(matmul(k, op, ins, issue, share)); break;
      case arch::Op::attention: ends.push_back(attention(k, op, ins, issue, share)); break;
      case arch::Op::kv_store: {
        if (cd.kv >= 0) ends.push_back(e_.transfer(op, cd.kv, ceil_div(ins.kv_write_bytes, share), {issue}));
        break;
      }
      default: {
        // Vector operations: a fused norm computes its statistics (one pass) while the
        // next matmul is issued; the scaling happens in the matmul's input stage.
        TaskId dep = issue;
        if (ins.op == arch::Op::norm && cd.weights >= 0)
          dep = e_.transfer(op, cd.weights, ins.weight_bytes, {issue});
        const int passes = folded ? 1 : vector_passes(ins.op);
        const Cycles cycles = passes * double(ceil_div(ins.vector_elements(), d_.vector_unit.lanes));
        const TaskId t = e_.compute(op, cd.vector, cycles, {dep});
        if (folded) {
          fused_inputs_[k].push_back(t);
          return;  // the next instruction waits for it; the chain does not
        }
        ends.push_back(t);
      }
    }
    ends.push_back(issue);
    done_[k] = e_.compute(op, cd.ctrl, 0, ends);
    fused_inputs_[k].clear();
  }

  TaskId matmul(int k, int op, const arch::Instruction& ins, TaskId issue, int share) {
    const Card& cd = cards_[k];
    const auto& mu = d_.matrix_unit;
    std::int64_t rows = ins.rows, cols = ins.cols;
    if (share > 1) {
      if (row_parallel(ins.linear))
        cols = ceil_div(cols, share);
      else
        rows = ceil_div(rows, share);
    }
    const std::int64_t tr = d_.tiling.tile_rows, tc = d_.tiling.tile_cols;
    const std::int64_t rt = ceil_div(rows, tr), ct = ceil_div(cols, tc);
    const std::int64_t payload_total = rows * cols * ins.weight_bits / 8;
    // Scales (and the rest of weight_bytes beyond the payload) ride with the tiles.
    const std::int64_t total = ins.weight_bytes * rows * cols / (std::int64_t(ins.rows) * ins.cols);
    const std::int64_t extra_total = std::max<std::int64_t>(0, total - payload_total);
    std::vector<TaskId> first_deps{issue};
    for (TaskId t : fused_inputs_[k]) first_deps.push_back(t);
    TaskId last = issue;
    std::int64_t extra_left = extra_total;
    bool first = true;
    for (std::int64_t r = 0; r < rt; ++r) {
      const std::int64_t tile_r = std::min(tr, rows - r * tr);
      for (std::int64_t c = 0; c < ct; ++c) {
        const std::int64_t tile_c = std::min(tc, cols - c * tc);
        const std::int64_t payload = tile_r * tile_c * ins.weight_bits / 8;
        Cycles cycles = double(ins.tokens) * ceil_div(tile_r, mu.rows) * ceil_div(tile_c, mu.cols) * mu.ii;
        if (ins.tokens == 1) {
          // Decode runs the streaming matrix unit (kernels::matrix_vector_w8a8): one
          // flattened loop over every step of the matrix fills its pipeline once, and the
          // store process requantizes each row fold while the next is multiplied.
          if (first) cycles += mu.pipeline_depth;
        } else if (!ideal_) {
          cycles += mu.pipeline_depth;
          // After the last column tile of a row block the kernel's store stage
          // requantizes the finished rows, one per cycle (kernels/matrix_unit.hpp).
          if (c == ct - 1) cycles += double(ins.tokens) * tile_r;
        } else if (first) {
          cycles += mu.pipeline_depth;
        }
        TaskId load = -1;
        if (cd.weights >= 0) {
          std::int64_t extra = (r == rt - 1 && c == ct - 1) ? extra_left : extra_total * payload / std::max<std::int64_t>(1, payload_total);
          extra = std::min(extra, extra_left);
          extra_left -= extra;
          load = e_.transfer(op, cd.weights, payload + extra, {issue});
          e_.claim(load, cd.weight_buf, payload);
        }
        std::vector<TaskId> deps{load};
        if (first) deps.insert(deps.end(), first_deps.begin(), first_deps.end());
        first = false;
        last = e_.compute(op, cd.matrix, cycles, deps);
        if (load >= 0) e_.release(last, cd.weight_buf, payload);
      }
    }
    if (ins.host_bytes > 0 && n_ == 1) last = e_.transfer(op, cd.host, ins.host_bytes, {last});
    return last;
  }

  // Keys of the block [k0, k1) that token t (absolute position pos + t) attends.
  static std::int64_t valid_keys(int pos, int t, std::int64_t k0, std::int64_t k1) {
    return std::max<std::int64_t>(0, std::min<std::int64_t>(k1, pos + t + 1) - k0);
  }

  TaskId attention(int k, int op, const arch::Instruction& ins, TaskId issue, int share) {
    const Card& cd = cards_[k];
    const auto& mu = d_.matrix_unit;
    const int kv_heads = int(ceil_div(ins.kv_heads, share));
    const int q_per_kv = ins.heads / ins.kv_heads;
    const int hd = ins.head_dim;
    const std::int64_t kv_elem = d_.kv_bits / 8;
    // Blocks of tile_rows keys; smaller when two blocks of K and V would not fit the
    // activation buffer that stages them.
    std::int64_t block = d_.tiling.tile_rows;
    while (!ideal_ && block > mu.rows && 4 * block * hd * kv_elem > d_.buffers.activation_bytes) block /= 2;
    const std::int64_t block_bytes = block * hd * kv_elem;
    if (!ideal_ && cd.kv >= 0 && 4 * block_bytes > d_.buffers.activation_bytes)
      throw fpgallm::InputError(d_.name, fmt::format("buffers.activation_bytes ({}) cannot stage two blocks of K and V ({} bytes)",
                                                     d_.buffers.activation_bytes, 4 * block_bytes));
    const std::int64_t blocks = ceil_div(ins.context, block);
    struct Pending {
      TaskId softmax = -1, v_load = -1;
      std::int64_t v_bytes = 0;
      Cycles value_cycles = 0;
    };
    TaskId last = issue;
    for (int h = 0; h < kv_heads; ++h) {
      Pending prev;
      bool have_prev = false;
      auto emit_value = [&](const Pending& p) {
        last = e_.compute(op, cd.matrix, p.value_cycles, {p.softmax, p.v_load});
        if (p.v_load >= 0) e_.release(last, cd.act_buf, p.v_bytes);
      };
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t k0 = b * block, k1 = std::min<std::int64_t>(ins.context, k0 + block);
        std::int64_t pairs = 0;
        Cycles score = 0, value = 0;
        for (int t = 0; t < ins.tokens; ++t) {
          const std::int64_t v = valid_keys(ins.pos, t, k0, k1);
          if (v == 0) continue;
          pairs += v;
          score += double(ceil_div(v, mu.rows) * ceil_div(hd, mu.cols));
          value += double(ceil_div(hd, mu.rows) * ceil_div(v, mu.cols));
        }
        if (pairs == 0) continue;
        const std::int64_t bytes = (k1 - k0) * hd * kv_elem;
        TaskId kl = -1, vl = -1;
        if (cd.kv >= 0) {
          kl = e_.transfer(op, cd.kv, bytes, {issue});
          e_.claim(kl, cd.act_buf, bytes);
          vl = e_.transfer(op, cd.kv, bytes, {issue});
          e_.claim(vl, cd.act_buf, bytes);
        }
        const Cycles depth = ideal_ ? 0 : mu.pipeline_depth;
        const TaskId s = e_.compute(op, cd.matrix, q_per_kv * score * mu.ii + depth, {kl, issue});
        if (kl >= 0) e_.release(s, cd.act_buf, bytes);
        // Online softmax: maximum, exponent sum and rescale, 3 passes over the scores.
        const TaskId sm = e_.compute(op, cd.vector, 3.0 * ceil_div(pairs * q_per_kv, d_.vector_unit.lanes), {s});
        if (have_prev) emit_value(prev);
        prev = {sm, vl, bytes, q_per_kv * value * mu.ii + depth};
        have_prev = true;
      }
      if (have_prev) emit_value(prev);
    }
    return last;
  }

  const model::Config& cfg_;
  const arch::Design& d_;
  const hw::Device& dev_;
  const perf::Constants& c_;
  Report& rep_;
  bool ideal_ = false;
  double f_ = 0;
  int n_ = 1;
  bool tensor_ = false, pipeline_ = false;
  Engine e_;
  std::vector<Card> cards_;
  std::vector<TaskId> done_;
  std::map<int, std::vector<TaskId>> fused_inputs_;
  int stage_card_ = 0;
  int program_ = 0;
  std::vector<int> op_program_;
  std::vector<std::string> op_kind_;
};

double model_weight_bytes(const model::Config& cfg, const arch::Design& d, const arch::Program& p) {
  double w = 0;
  for (const auto& i : p.instructions)
    if (i.op == arch::Op::matmul || i.op == arch::Op::norm) w += double(i.weight_bytes);
  if (!cfg.shared_classifier) w += double(cfg.vocab_size) * cfg.dim * d.matrix_unit.weight_bits / 8;
  return w;
}

void fill_report(Report& rep, const Lowering& low, const Engine& e, const Result& r,
                 const std::vector<arch::Program>& programs, const TraceOptions& trace, json* trace_out) {
  const double f = rep.clock_mhz * 1e6;
  rep.cycles = r.cycles;
  rep.seconds = r.cycles / f;
  rep.tokens_per_s = rep.seconds > 0 ? rep.tokens / rep.seconds : 0;
  rep.tasks = std::int64_t(e.task_count());
  const auto& units = e.units();
  for (std::size_t u = 0; u < units.size(); ++u) {
    UnitReport ur;
    ur.name = units[u].name;
    ur.kind = to_string(units[u].kind);
    ur.card = units[u].card;
    std::copy(std::begin(r.units[u].state), std::end(r.units[u].state), std::begin(ur.state));
    ur.bytes = r.units[u].bytes;
    if (is_transfer(units[u].kind)) {
      double sum = 0;
      for (double c : r.units[u].channel_busy) {
        ur.channel_utilization.push_back(r.cycles > 0 ? c / r.cycles : 0);
        sum += c;
      }
      ur.utilization = r.cycles > 0 ? sum / r.units[u].channel_busy.size() / r.cycles : 0;
    } else {
      ur.utilization = r.cycles > 0 ? ur.state[int(State::busy)] / r.cycles : 0;
    }
    if (units[u].kind == UnitKind::card_link) {
      if (rep.link_bytes_per_token.size() <= std::size_t(ur.card)) rep.link_bytes_per_token.resize(ur.card + 1, 0.0);
      rep.link_bytes_per_token[ur.card] = rep.tokens > 0 ? double(ur.bytes) / rep.tokens : 0;
    }
    rep.units.push_back(ur);
  }
  std::map<std::pair<int, int>, LayerReport> layers;
  const auto& ops = e.ops();
  for (std::size_t o = 0; o < ops.size(); ++o) {
    const auto& os = r.ops[o];
    if (os.tasks == 0) continue;
    OpReport op;
    op.name = ops[o].name;
    op.kind = low.op_kind()[o];
    op.layer = ops[o].layer;
    op.card = ops[o].card;
    op.program = low.op_program()[o];
    op.start = os.start;
    op.cycles = os.end - os.start;
    op.tasks = os.tasks;
    for (std::size_t u = 0; u < units.size(); ++u)
      if (os.unit_busy[u] > 0) op.busy.emplace_back(units[u].name, os.unit_busy[u]);
    for (std::size_t u = 0; u < units.size(); ++u)
      if (os.unit_busy[u] > op.critical_cycles) {
        op.critical_cycles = os.unit_busy[u];
        op.critical = units[u].name;
      }
    auto& l = layers[{op.layer, op.card}];
    l.layer = op.layer;
    l.card = op.card;
    l.cycles += op.cycles;
    if (l.cycles == op.cycles) l.start = op.start;
    rep.ops.push_back(std::move(op));
  }
  for (auto& [key, l] : layers) rep.layers.push_back(l);

  // Per program (prefill block or decode step), over all cards.
  rep.steps.assign(programs.size(), {});
  for (std::size_t p = 0; p < programs.size(); ++p) {
    rep.steps[p].stage = programs[p].stage;
    rep.steps[p].position = programs[p].pos;
    rep.steps[p].tokens = programs[p].tokens;
  }
  std::vector<bool> seen(programs.size(), false);
  for (const auto& op : rep.ops) {
    auto& st = rep.steps[std::size_t(op.program)];
    if (!seen[std::size_t(op.program)]) {
      seen[std::size_t(op.program)] = true;
      st.start = op.start;
      st.cycles = op.cycles;
      continue;
    }
    const Cycles end = std::max(st.start + st.cycles, op.start + op.cycles);
    st.start = std::min(st.start, op.start);
    st.cycles = end - st.start;
  }

  if (trace.enabled && trace_out) *trace_out = trace_json(rep, e, r, low.op_kind(), trace.tasks);
}
}  // namespace

Report simulate(const model::Config& config, const arch::Design& design, const hw::Device& device,
                const Options& options, const TraceOptions& trace, json& trace_out) {
  if (auto p = design.problems(); !p.empty()) throw fpgallm::InputError(design.name, p.front());
  if (device.kind != hw::Kind::fpga) throw fpgallm::InputError(device.id, "the simulator runs FPGA designs");
  if (device.memory.empty() || !device.memory.front().bandwidth_gbps.has())
    throw fpgallm::InputError(device.id, "the device has no off-chip memory bandwidth figure");
  if (design.style == arch::Style::dataflow && design.parallel.split == arch::Split::pipeline)
    throw fpgallm::InputError(design.name, "the simulator runs dataflow designs on one card or tensor split");
  if (design.parallel.split == arch::Split::pipeline && design.parallel.cards > config.n_layers)
    throw fpgallm::InputError(design.name, "more pipeline stages than layers");
  Report rep;
  rep.model = config.name;
  rep.design = design.name;
  rep.device = device.id;
  rep.stage = options.stage;
  rep.cards = design.parallel.cards;
  rep.clock_mhz = design.clock_mhz;

  std::vector<arch::Program> programs;
  try {
    if (options.stage == arch::Stage::decode) {
      if (options.context < 1 || options.context > config.seq_len)
        throw fpgallm::InputError("--context", fmt::format("{} outside 1..{} (the model's context)", options.context, config.seq_len));
      programs.push_back(arch::build_program(config, design, arch::Stage::decode, options.context - 1, 1, options.precision));
      rep.tokens = 1;
      rep.context = options.context;
    } else {
      if (options.prompt < 1 || options.prompt > config.seq_len)
        throw fpgallm::InputError("--prompt", fmt::format("{} outside 1..{} (the model's context)", options.prompt, config.seq_len));
      for (int pos = 0; pos < options.prompt; pos += design.tiling.prefill_block) {
        const int tokens = std::min(design.tiling.prefill_block, options.prompt - pos);
        programs.push_back(arch::build_program(config, design, arch::Stage::prefill, pos, tokens, options.precision));
      }
      rep.tokens = options.prompt;
      rep.context = options.prompt;
      if (options.decode_steps < 0 || options.prompt + options.decode_steps > config.seq_len)
        throw fpgallm::InputError("--tokens", fmt::format("{} decode steps after a prompt of {} pass the model's context of {}",
                                                          options.decode_steps, options.prompt, config.seq_len));
      for (int i = 0; i < options.decode_steps; ++i)
        programs.push_back(arch::build_program(config, design, arch::Stage::decode, options.prompt + i, 1, options.precision));
      rep.decode_steps = options.decode_steps;
      rep.tokens += options.decode_steps;
    }
  } catch (const std::invalid_argument& e) {
    throw fpgallm::InputError(design.name, e.what());
  }
  rep.programs = int(programs.size());

  Lowering low(config, design, device, options.idealized, rep);
  if (options.idealized)
    rep.notes.push_back("idealized: no request latency, unbounded buffers, pipeline filled once per instruction, no store stage");
  const double kv_bytes = 2.0 * config.n_layers * design.context * config.kv_dim() * (design.kv_bits / 8);
  low.build_machine(model_weight_bytes(config, design, programs.front()), kv_bytes);
  for (std::size_t i = 0; i < programs.size(); ++i) low.lower(programs[i], int(i));
  Result r;
  try {
    r = low.engine().run();
  } catch (const std::logic_error& e) {
    throw fpgallm::InputError(design.name, e.what());
  }
  fill_report(rep, low, low.engine(), r, programs, trace, &trace_out);
  return rep;
}

Report simulate(const model::Config& config, const arch::Design& design, const hw::Device& device,
                const Options& options) {
  json unused;
  return simulate(config, design, device, options, TraceOptions{}, unused);
}

void to_json(json& j, const Report& r) {
  j = json{{"model", r.model},   {"design", r.design},       {"device", r.device},
           {"stage", arch::to_string(r.stage)}, {"tokens", r.tokens}, {"context", r.context},
           {"programs", r.programs}, {"decode_steps", r.decode_steps}, {"cards", r.cards}, {"clock_mhz", r.clock_mhz},
           {"cycles", r.cycles}, {"seconds", r.seconds},     {"tokens_per_s", r.tokens_per_s},
           {"tasks", r.tasks},   {"notes", r.notes}};
  json units = json::array();
  for (const auto& u : r.units) {
    json s;
    for (int i = 0; i < kStates; ++i) s[to_string(State(i))] = u.state[i];
    json x = {{"name", u.name}, {"kind", u.kind}, {"card", u.card}, {"cycles", s}, {"utilization", u.utilization}};
    if (!u.channel_utilization.empty()) {
      x["bytes"] = u.bytes;
      x["channel_utilization"] = u.channel_utilization;
    }
    units.push_back(x);
  }
  j["units"] = units;
  json layers = json::array();
  for (const auto& l : r.layers)
    layers.push_back({{"layer", l.layer}, {"card", l.card}, {"cycles", l.cycles}, {"seconds", l.cycles / (r.clock_mhz * 1e6)}});
  j["layers"] = layers;
  json steps = json::array();
  for (const auto& st : r.steps)
    steps.push_back({{"stage", arch::to_string(st.stage)}, {"position", st.position}, {"tokens", st.tokens},
                     {"start_cycles", st.start}, {"cycles", st.cycles}, {"seconds", st.cycles / (r.clock_mhz * 1e6)}});
  j["steps"] = steps;
  json ops = json::array();
  for (const auto& o : r.ops) {
    json busy = json::object();
    for (const auto& [unit, cycles] : o.busy) busy[unit] = cycles;
    ops.push_back({{"name", o.name}, {"kind", o.kind}, {"layer", o.layer}, {"card", o.card}, {"program", o.program},
                   {"start_cycles", o.start}, {"cycles", o.cycles}, {"seconds", o.cycles / (r.clock_mhz * 1e6)},
                   {"critical", o.critical}, {"critical_cycles", o.critical_cycles}, {"busy_cycles", busy},
                   {"tasks", o.tasks}});
  }
  j["ops"] = ops;
  json a = json::array();
  for (const auto& x : r.assumptions) a.push_back({{"name", x.name}, {"value", x.value}, {"unit", x.unit}, {"source", x.source}});
  j["assumptions"] = a;
  if (r.cards > 1) {
    j["communication"] = perf::communication_json(r.transfers, r.cards, r.tokens);
    j["link_bytes_per_token"] = r.link_bytes_per_token;  // what the simulated links carried
  }
}

}  // namespace sim
