#include "sim/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "arch/units.hpp"
#include "perf/perf.hpp"
#include "sim/trace.hpp"
#include "util/error.hpp"
#include "util/paths.hpp"

namespace sim {

namespace {

using nlohmann::json;
constexpr double kGB = 1e9;


// Where weights and the KV cache live on one card.
struct Placement {
  const hw::MemoryPool* weights = nullptr;  // nullptr: on chip
  const hw::MemoryPool* kv = nullptr;       // nullptr: on chip
  std::string text;
};

// The kernels stream the weights and the KV cache from off-chip memory (Design::kernel_gaps
// refuses designs that keep either on chip): both go to the first pool with room.
Placement place(const arch::Design& d, const hw::Device& dev, double weight_bytes, double kv_bytes) {
  Placement p;
  const int cards = d.parallel.cards;
  const double w_card = weight_bytes / cards, kv_card = kv_bytes / cards;
  std::vector<double> free;
  for (const auto& m : dev.memory) free.push_back(m.capacity_gb.has() ? *m.capacity_gb * kGB : 0);
  // The first pool with a bandwidth figure and `bytes` free, charged with them.
  auto first_fit = [&](double bytes) -> const hw::MemoryPool* {
    for (std::size_t i = 0; i < dev.memory.size(); ++i)
      if (dev.memory[i].bandwidth_gbps.has() && free[i] >= bytes) {
        free[i] -= bytes;
        return &dev.memory[i];
      }
    return nullptr;
  };
  p.weights = first_fit(w_card);
  if (!p.weights)
    throw fpgallm::InputError(d.name, fmt::format("weights ({:.2f} GB per card) fit no off-chip memory of {}",
                                                  w_card / kGB, dev.id));
  p.kv = first_fit(kv_card);
  if (!p.kv)
    throw fpgallm::InputError(d.name, fmt::format("KV cache ({:.2f} GB per card) does not fit beside the weights on {}",
                                                  kv_card / kGB, dev.id));
  p.text = "weights in " + p.weights->kind + "; KV cache in " + p.kv->kind;
  return p;
}

// One card's units, ports and buffers.
struct Card {
  int ctrl = -1, matrix = -1, vector = -1;
  int weights = -1, params = -1, kv = -1, host = -1, link = -1;  // ports (-1: none)
  int weight_buf = -1, act_buf = -1, stream_buf = -1;
};

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
    Placement pl = place(d_, dev_, weight_bytes, kv_bytes);
    // The KV cache where connectivity.cfg puts it (perf::bank_map: what plan and emit read).
    if (const auto map = perf::bank_map(d_, dev_, cfg_)) {
      const hw::MappedBuffer* kv = map->find("kv_k");
      if (kv && kv->mapped && &dev_.memory[std::size_t(kv->banks.pool)] != pl.kv) {
        pl.kv = &dev_.memory[std::size_t(kv->banks.pool)];
        pl.text = "weights in " + pl.weights->kind + "; KV cache in " + pl.kv->kind + " (" + kv->banks.sp() +
                  " in connectivity.cfg)";
      }
    }
    rep_.notes.push_back(pl.text);
    const double eta = c_.memory_efficiency.value;
    rates_ = perf::port_rates(d_, dev_, *pl.weights, *pl.kv, c_);
    if (ideal_) rates_.memory_latency = rates_.kv_latency = 0;
    // One port per group of bundles: each channel carries what arch::PortRates gives one
    // bundle (efficiency applied there), the request latency of its pool.
    auto port_spec = [&](const hw::MemoryPool& pool, int channels, double rate, double latency) {
      const int total = pool.channels.has() ? std::max(1, int(*pool.channels)) : 1;
      PortSpec s;
      s.channels = std::clamp(channels, 1, total);
      s.bytes_per_cycle = rate;
      s.efficiency = 1;
      s.burst_bytes = d_.memory.burst_bytes;
      s.latency = latency;
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
      if (pl.weights) {
        cd.weights = e_.add_port(fmt::format("{}{} weights ({} ch)", p, pl.weights->kind, d_.memory.weight_channels),
                                 UnitKind::memory,
                                 port_spec(*pl.weights, d_.memory.weight_channels, rates_.weight_channel, rates_.memory_latency), k);
        cd.params = e_.add_port(fmt::format("{}{} params (1 ch)", p, pl.weights->kind), UnitKind::memory,
                                port_spec(*pl.weights, 1, rates_.params, rates_.memory_latency), k);
      }
      if (pl.kv)  // the kv_k and kv_v bundles, one channel each
        cd.kv = e_.add_port(fmt::format("{}{} kv (k, v)", p, pl.kv->kind), UnitKind::memory,
                            port_spec(*pl.kv, 2, rates_.kv, rates_.kv_latency), k);
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
      // The decode stream's FIFOs: 64 words of 64 bytes per weight channel (the emitted
      // matmul region's channel streams).
      cd.stream_buf = e_.add_buffer(p + "weight_stream_fifos", std::int64_t(std::max(1, d_.memory.weight_channels)) * 64 * 64, k);
      cards_.push_back(cd);
    }
    rep_.assumptions.push_back({"memory_efficiency", eta, c_.memory_efficiency.unit, c_.memory_efficiency.source});
    rep_.assumptions.push_back({"port_bits", double(d_.memory.port_bits), "bits", "design.memory.port_bits"});
    rep_.assumptions.push_back({"weight_channel_bytes_per_cycle", rates_.weight_channel, "B/cycle", rates_.note});
    rep_.assumptions.push_back({"instruction_fetch_cycles", rates_.memory_latency + arch::kInstructionWords, "cycles",
                                "arch::unit_work: one request to the program bundle, then 16 words at II=1"});
    rep_.assumptions.push_back({"hbm_latency_ns", c_.hbm_first_access_ns.value, "ns", c_.hbm_first_access_ns.source});
    rep_.assumptions.push_back({"ddr_latency_ns", c_.ddr_first_access_ns.value, "ns", c_.ddr_first_access_ns.source});
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

  // One instruction on card k, from the units' description (arch::unit_work): the
  // controller fetches it, then its unit runs it. A matmul streams its weights in pieces
  // (transfers on the weight port, each feeding a compute task on the matrix unit; decode:
  // the DATAFLOW stream, prefill: the weight tiles, overlapping when double-buffered);
  // every other instruction is one task on its unit, its off-chip bytes moving on their
  // ports meanwhile. The next instruction starts when this one has finished.
  void lower_one(int k, const arch::Instruction& full) {
    const Card& cd = cards_[k];
    const arch::Instruction ins = arch::shard(full, tensor_ ? n_ : 1);
    const arch::Work w = arch::unit_work(d_, ins, rates_);
    const int op = add_op(ins.name, arch::to_string(ins.op), ins.layer, k);
    const TaskId issue = e_.compute(op, cd.ctrl, w.fetch_cycles, {done_[k]});
    std::vector<TaskId> ends{issue};
    TaskId start = issue;
    if (ins.op == arch::Op::embed && w.host_bytes > 0) start = e_.transfer(op, cd.host, w.host_bytes, {issue});
    if (ins.op == arch::Op::matmul) {
      start = matmul(k, op, w, start);
    } else {
      const int unit = w.unit == arch::UnitKind::matrix ? cd.matrix : cd.vector;
      const Cycles body = w.body_cycles;
      const TaskId t = e_.compute(op, unit, body, {start});
      if (cd.params >= 0 && w.param_bytes > 0) ends.push_back(e_.transfer(op, cd.params, w.param_bytes, {start}));
      if (cd.kv >= 0 && w.kv_read_bytes + w.kv_write_bytes > 0)
        ends.push_back(e_.transfer(op, cd.kv, w.kv_read_bytes + w.kv_write_bytes, {start}));
      start = t;
    }
    if (ins.op == arch::Op::matmul && w.host_bytes > 0 && n_ == 1) start = e_.transfer(op, cd.host, w.host_bytes, {start});
    ends.push_back(start);
    done_[k] = e_.compute(op, cd.ctrl, 0, ends);
  }

  TaskId matmul(int k, int op, const arch::Work& w, TaskId issue) {
    const Card& cd = cards_[k];
    std::vector<TaskId> ends;
    if (cd.params >= 0 && w.param_bytes > 0) ends.push_back(e_.transfer(op, cd.params, w.param_bytes, {issue}));
    const std::int64_t pieces = std::max<std::int64_t>(1, w.pieces);
    const Cycles compute = w.stream_compute / double(pieces);
    const int buffer = w.pieces > 0 && !ideal_ ? (ins_decode(w) ? cd.stream_buf : cd.weight_buf) : -1;
    TaskId last = issue;
    std::int64_t left = w.stream_bytes;
    for (std::int64_t i = 0; i < pieces; ++i) {
      const std::int64_t bytes = i == pieces - 1 ? left : w.stream_bytes / pieces;
      left -= bytes;
      TaskId load = -1;
      if (cd.weights >= 0 && bytes > 0) {
        load = e_.transfer(op, cd.weights, bytes, {issue});
        if (buffer >= 0) e_.claim(load, buffer, piece_claim(w, buffer));
      }
      const Cycles fill = (i == 0 || !ins_decode(w)) ? (ins_decode(w) ? w.stream_fill : 0) : 0;
      last = e_.compute(op, cd.matrix, compute + fill, {load, last});
      if (load >= 0 && buffer >= 0)
        e_.release(last, buffer, piece_claim(w, buffer));
    }
    if (w.after_stream > 0) last = e_.compute(op, cd.matrix, w.after_stream, {last});
    ends.push_back(last);
    return ends.size() == 1 ? last : e_.compute(op, cd.ctrl, 0, ends);
  }

  static bool ins_decode(const arch::Work& w) { return w.streaming; }
  // Space a piece holds while in flight: double-buffered (the decode stream's FIFOs, or a
  // tile buffer with room for two tiles), its bytes up to half the buffer, so that the next
  // piece loads while this one is used; single-buffered, the whole buffer.
  std::int64_t piece_claim(const arch::Work& w, int buffer) const {
    const std::int64_t cap = e_.buffers()[std::size_t(buffer)].capacity;
    return w.double_buffered ? std::min(w.piece_buffer_bytes, std::max<std::int64_t>(1, cap / 2)) : cap;
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
  arch::PortRates rates_;
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
      const int block = arch::block_tokens(design);
      for (int pos = 0; pos < options.prompt; pos += block) {
        const int tokens = std::min(block, options.prompt - pos);
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
    rep.notes.push_back("idealized: no request latency, unbounded buffers");
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
