#include "dse/dse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "arch/instances.hpp"
#include "arch/units.hpp"
#include "hw/resources.hpp"
#include "util/error.hpp"

namespace dse {

const char* to_string(Objective o) {
  switch (o) {
    case Objective::decode_tps: return "decode-tps";
    case Objective::prefill_latency: return "prefill-latency";
    case Objective::tokens_per_joule: return "tokens-per-joule";
    case Objective::usd_per_mtoken: return "usd-per-mtoken";
  }
  return "?";
}

Objective objective_from_string(const std::string& s) {
  for (Objective o : {Objective::decode_tps, Objective::prefill_latency, Objective::tokens_per_joule,
                      Objective::usd_per_mtoken})
    if (s == to_string(o)) return o;
  throw fpgallm::InputError("--objective",
                            "'" + s + "' is not one of decode-tps, prefill-latency, tokens-per-joule, usd-per-mtoken");
}

double score(const perf::Prediction& p, Objective o) {
  const double worst = -std::numeric_limits<double>::infinity();
  switch (o) {
    case Objective::decode_tps: return p.decode_tokens_per_s;
    case Objective::prefill_latency: return -p.time_to_first_token_s();
    case Objective::tokens_per_joule: return p.joules_per_token > 0 ? 1.0 / p.joules_per_token : worst;
    case Objective::usd_per_mtoken: return p.usd_per_mtoken > 0 ? -p.usd_per_mtoken : worst;
  }
  return worst;
}

bool scorable(const perf::Prediction& p, Objective o) { return std::isfinite(score(p, o)); }

bool better(const Candidate& a, const Candidate& b, Objective o) {
  const double sa = score(a.prediction, o), sb = score(b.prediction, o);
  if (sa != sb) return sa > sb;
  if (!std::isfinite(sa) && a.prediction.decode_tokens_per_s != b.prediction.decode_tokens_per_s)
    return a.prediction.decode_tokens_per_s > b.prediction.decode_tokens_per_s;
  return a.binding_fraction < b.binding_fraction;
}

namespace {

constexpr double kGB = 1e9;

double design_price_usd(const hw::Device& dev, int cards) { return dev.price_usd.has() ? *dev.price_usd * cards : 0; }

std::int64_t pow2_ceil(double v) {
  std::int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

double max_activation_bytes(const graph::Workload& w) {
  double m = 0;
  for (const auto& op : w.ops) m = std::max(m, op.activation_bytes);
  return m;
}

// Pareto front in (decode tokens/s up, joules/token down); candidates without a power
// estimate compare on tokens/s alone.
std::vector<Candidate> pareto_front(const std::vector<Candidate>& all) {
  std::vector<Candidate> front;
  for (const auto& a : all) {
    bool dominated = false;
    for (const auto& b : all) {
      const auto &pa = a.prediction, &pb = b.prediction;
      const double ja = pa.joules_per_token > 0 ? pa.joules_per_token : 1e30;
      const double jb = pb.joules_per_token > 0 ? pb.joules_per_token : 1e30;
      if (pb.decode_tokens_per_s >= pa.decode_tokens_per_s && jb <= ja &&
          (pb.decode_tokens_per_s > pa.decode_tokens_per_s || jb < ja)) {
        dominated = true;
        break;
      }
    }
    if (!dominated) front.push_back(a);
  }
  std::sort(front.begin(), front.end(), [](const Candidate& a, const Candidate& b) {
    return a.prediction.decode_tokens_per_s < b.prediction.decode_tokens_per_s;
  });
  // Identical designs in performance (e.g. two tilings) appear once.
  front.erase(std::unique(front.begin(), front.end(),
                          [](const Candidate& a, const Candidate& b) {
                            return a.prediction.decode_tokens_per_s == b.prediction.decode_tokens_per_s &&
                                   a.prediction.joules_per_token == b.prediction.joules_per_token;
                          }),
              front.end());
  return front;
}

// Candidates equal in hw::resource_view share one count.
struct ViewHash {
  std::size_t operator()(const arch::Design& d) const {
    std::size_t h = 0;
    for (int v : {d.matrix_unit.rows, d.matrix_unit.cols, d.vector_unit.lanes, d.memory.weight_channels,
                  d.memory.kv_channels, d.parallel.cards})
      h = h * 1000003 + std::size_t(v);
    return h;
  }
};

DeviceResult explore_gpu(const hw::Device& dev, const Request& req, Objective obj, const perf::Workloads& w) {
  DeviceResult r;
  r.device = dev.id;
  r.kind = hw::Kind::gpu;
  const double need = w.decode.model_weight_bytes() + w.decode.kv_cache_bytes(req.scenario.context);
  const double cap = dev.memory_capacity_gb() * kGB;
  for (int cards = 1; cards <= 8; cards *= 2) {
    if (cap <= 0 || need > cap * cards) continue;
    try {
      Candidate c;
      c.design.name = dev.id;
      c.design.device = dev.id;
      c.design.parallel.cards = cards;
      c.prediction = perf::predict_gpu(dev, w, cards, perf::GpuStack::graphs);
      c.price_usd = design_price_usd(dev, cards);
      ++r.evaluated;
      r.ranked.push_back(c);
    } catch (const fpgallm::InputError& e) {
      r.why_not.push_back(e.what());
    }
    break;
  }
  if (r.ranked.empty() && r.why_not.empty())
    r.why_not.push_back(fmt::format("weights + KV cache ({:.1f} GB) exceed 8 x {:.0f} GB", need / kGB, cap / kGB));
  r.pareto = r.ranked;
  (void)obj;
  return r;
}

}  // namespace

DeviceResult explore_device(const hw::Device& dev, const Request& req, Objective obj, const perf::Workloads& w) {
  if (dev.kind == hw::Kind::gpu) return explore_gpu(dev, req, obj, w);
  DeviceResult r;
  r.device = dev.id;
  r.kind = hw::Kind::fpga;
  const perf::Constants& k = perf::constants();
  const graph::Precision& prec = req.precision;

  // 1. Bit widths from the scheme.
  if (prec.float_weights) {
    r.why_not.push_back(fmt::format("the FPGA overlay computes with 8- or 4-bit integer weights; {} needs --scheme int8 or int4",
                                    graph::to_string(prec)));
    return r;
  }
  // A card without the figures a plan needs gets one line naming the figure.
  const char* missing = nullptr;
  if (dev.memory.empty() || !dev.memory.front().bandwidth_gbps.has()) missing = "off-chip memory bandwidth";
  else if (!dev.memory.front().capacity_gb.has()) missing = "off-chip memory capacity";
  else if (!dev.kernel_clock_mhz.has()) missing = "kernel clock";
  else if (!dev.usable().lut.has() || !dev.usable().dsp.has() || !dev.usable().bram36.has()) missing = "fabric resources (LUT/DSP/BRAM)";
  if (missing) {
    r.why_not.push_back(fmt::format("{}: no {} figure in data/devices.json", dev.id, missing));
    return r;
  }
  const int weight_bits = prec.weight_bits <= 4 ? 4 : 8;
  const int kv_bits = prec.kv_bits <= 8 ? 8 : 16;
  r.method.push_back(fmt::format("1. bit widths from the scheme {}: {}-bit weights, 8-bit activations, {}-bit KV cache",
                                 graph::to_string(prec), weight_bits, kv_bits));

  // The clock the device family closes at (data/devices.json kernel_clock_mhz, cited there).
  const double clock_mhz = std::min(*dev.kernel_clock_mhz, dev.max_clock_mhz.or_else(1000.0));
  const auto& pool = dev.memory.front();
  const int channels = pool.channels.has() ? std::max(1, int(*pool.channels)) : 1;
  const double weight_bytes = w.decode.model_weight_bytes();
  const double onchip = dev.onchip_mb.or_else(0) * 1e6 * k.onchip_usable_fraction.value;
  const bool has_uram = dev.usable().uram.or_else(0) > 0;

  // 2. Bandwidth decides the useful MAC count: weights per cycle delivered x reuse.
  arch::Design probe;
  probe.clock_mhz = clock_mhz;
  probe.memory.weight_channels = std::min(channels, 64);
  probe.memory.kv_channels = 0;
  probe.memory.activation_channels = 0;
  const double bw = perf::usable_bandwidth(probe, dev);
  const double reuse = std::min<double>(req.scenario.batch, 64);
  const double weights_per_cycle = bw / (clock_mhz * 1e6) * 8.0 / weight_bits;
  const double useful_macs = weights_per_cycle * reuse;
  r.method.push_back(fmt::format(
      "2. {:.0f} GB/s usable at {:.0f} MHz deliver {:.0f} weights per cycle; with reuse {} the useful matrix unit has about "
      "{:.0f} MACs (batch 1 decode is bandwidth-bound: more MACs only wait)",
      bw / kGB, clock_mhz, weights_per_cycle, reuse, useful_macs));

  const double act_need = std::max(max_activation_bytes(w.decode), 64.0 * 1024);
  std::vector<std::pair<int, int>> shapes;
  for (int rows : arch::kUnitRows)
    for (int cols : arch::kUnitCols) {
      const double macs = double(rows) * cols;
      if (macs < useful_macs / 8 || macs > std::max(useful_macs * 8, 1024.0)) continue;
      if (rows > cols) continue;  // a wide dot product per row keeps the input vector shared
      if (!arch::unit_built(rows, cols)) continue;
      shapes.emplace_back(rows, cols);
    }
  if (shapes.empty()) shapes = {{arch::kUnitRows.back(), arch::kUnitCols.back()}};  // bandwidth beyond every built unit
  r.method.push_back(fmt::format("3. matrix units from {} to {} MACs (the shapes fpgallm builds, arch/instances.hpp), tiles matched to {} x 512-bit ports; clock {:.0f} MHz, "
                                 "what the device family closes at ({}); designs stay under the resource ceilings for timing closure",
                                 shapes.front().first * shapes.front().second,
                                 shapes.back().first * shapes.back().second, channels, clock_mhz,
                                 dev.kernel_clock_mhz.source));

  // 4. What the kernels build: the overlay, weights and KV cache streamed from off-chip
  // memory. A dataflow design with resident weights would be faster where the weights fit
  // on chip, but the kernels do not implement one (Design::kernel_gaps), and a design the
  // search returns is the one emitted, simulated and sized.
  r.method.push_back(fmt::format("4. overlay: weights ({:.3g} MB) and KV cache stream from {} (the kernels keep neither on chip{})",
                                 weight_bytes / 1e6, pool.kind,
                                 weight_bytes <= onchip ? fmt::format("; the weights would fit in the {:.1f} MB usable on chip", onchip / 1e6)
                                                        : std::string()));
  std::vector<Candidate> all;
  std::unordered_map<arch::Design, hw::Utilization, ViewHash> resources;
  bool unusable = false;  // the device's data cannot size a design: r.why_not says why
  // One design of the space: kept in `all` when it is valid, fits the memory and the fabric.
  auto evaluate = [&](int rows, int cols, const std::array<int, 2>& tile, int kv_channels, int lanes, int cards) {
    if (!arch::tile_fits_unit(tile[0], tile[1], rows, cols)) return;
    arch::Design d;
    d.name = fmt::format("{}-{}x{}", dev.id, rows, cols);
    d.device = dev.id;
    d.style = arch::Style::overlay;
    d.clock_mhz = clock_mhz;
    d.matrix_unit.rows = rows;
    d.matrix_unit.cols = cols;
    d.matrix_unit.weight_bits = weight_bits;
    d.matrix_unit.pipeline_depth = arch::hls_matrix_unit_depth(cols);
    d.vector_unit.lanes = lanes;
    d.tiling.tile_rows = tile[0];
    d.tiling.tile_cols = tile[1];
    d.tiling.prefill_block = arch::kMaxBlockTokens;
    const std::int64_t tile_bytes = std::int64_t(d.tiling.tile_rows) * d.tiling.tile_cols * weight_bits / 8;
    d.buffers.weight_bytes = 2 * tile_bytes;
    d.buffers.activation_bytes = pow2_ceil(act_need);
    d.buffers.kv_bytes = 0;
    d.memory.kv_channels = kv_channels;
    d.memory.weight_channels = std::max(1, channels - d.memory.kv_channels);
    d.memory.activation_channels = 0;
    d.parallel.cards = cards;
    d.parallel.split = cards > 1 ? arch::Split::tensor : arch::Split::none;
    d.batch = req.scenario.batch;
    d.context = req.scenario.context;
    d.kv_bits = kv_bits;
    if (!d.problems().empty() || !arch::instance_problems(d).empty()) return;
    ++r.evaluated;
    auto utilization = [&](const arch::Design& x) -> const hw::Utilization* {
      arch::Design view = hw::resource_view(x);
      auto found = resources.find(view);
      if (found == resources.end()) {
        try {
          found = resources.emplace(std::move(view), hw::estimate_resources(x, dev, {&req.config, false})).first;
        } catch (const fpgallm::InputError& e) {
          r.why_not.push_back(e.what());
          unusable = true;
          return nullptr;
        }
      }
      return &found->second;
    };
    // The prompt call's block: the most tokens (at most arch::kMaxBlockTokens, halving) whose
    // tiled matrix unit and block arrays still fit beside the decode datapath, the arrays in
    // block RAM or else, on a card with UltraRAM, in UltraRAM; a design that fits only with
    // one-token blocks runs its prompt one token per block.
    const hw::Utilization* fitted = nullptr;
    for (;;) {
      d.buffers.activations_in_uram = false;
      fitted = utilization(d);
      if (fitted && !fitted->fits && has_uram && d.tiling.prefill_block > 1) {
        d.buffers.activations_in_uram = true;
        fitted = utilization(d);
      }
      if (!fitted || fitted->fits || d.tiling.prefill_block == 1) break;
      d.tiling.prefill_block /= 2;
    }
    if (!fitted) return;
    const hw::Utilization& use = *fitted;
    if (!use.fits) {
      ++r.rejected_resources;
      if (r.rejected_resources == 1)
        for (const auto& o : use.overflows()) r.why_not.push_back(fmt::format("{}x{} MACs: {}", rows, cols, o));
      return;
    }
    if (const perf::MemoryFit m = perf::memory_fit(d, dev, w); !m.fits) {
      ++r.rejected_memory;
      if (r.rejected_memory == 1) r.why_not.push_back(m.placement);
      return;
    }
    Candidate c;
    c.design = d;
    c.prediction = perf::predict(d, dev, w, use, perf::Detail::totals);
    c.price_usd = design_price_usd(dev, cards);
    const hw::Resource b = use.binding();
    const auto& bl = use.line(b);
    c.binding_fraction = bl.ceiling > 0 ? bl.used / bl.ceiling : 0;
    c.binding = fmt::format("{} {:.0f}% of ceiling", hw::to_string(b), 100 * c.binding_fraction);
    all.push_back(std::move(c));
  };
  // The vector unit's lanes are a choice of their own: every shape with the fewest lanes,
  // then each other lane count for the best kLaneTrials matrix units with their KV channels,
  // each on its best tiling (vector work grows with the model's width per token, so the lanes
  // move a design's rank less than its matrix unit and KV channels, and not with the tiling).
  constexpr std::size_t kKept = 24, kLaneTrials = 8;
  for (int cards = 1; cards <= req.max_cards; cards *= 2) {
    if (cards > 1 && !all.empty()) break;  // more cards only when one does not fit
    for (auto [rows, cols] : shapes)
      for (const auto& tile : arch::kTileShapes)
        for (int kv_share : {0, 4, 8}) {  // KV channels: none (shared), a quarter, an eighth
          if (kv_share && channels < 2) continue;
          evaluate(rows, cols, tile, kv_share ? std::max(1, channels / kv_share) : 0, arch::kVectorLanes.front(), cards);
          if (unusable) return r;
        }
  }
  std::stable_sort(all.begin(), all.end(), [&](const Candidate& a, const Candidate& b) { return better(a, b, obj); });
  std::vector<arch::Design> best;
  for (const Candidate& c : all) {
    if (best.size() == kLaneTrials) break;
    const arch::Design& d = c.design;
    if (std::none_of(best.begin(), best.end(), [&](const arch::Design& b) {
          return b.matrix_unit.rows == d.matrix_unit.rows && b.matrix_unit.cols == d.matrix_unit.cols &&
                 b.memory.kv_channels == d.memory.kv_channels && b.parallel.cards == d.parallel.cards;
        }))
      best.push_back(d);
  }
  for (const arch::Design& b : best)
    for (std::size_t l = 1; l < arch::kVectorLanes.size(); ++l)
      evaluate(b.matrix_unit.rows, b.matrix_unit.cols, {b.tiling.tile_rows, b.tiling.tile_cols}, b.memory.kv_channels,
               arch::kVectorLanes[l], b.parallel.cards);
  r.method.push_back(fmt::format("5. vector lanes: {} for every design above, then {} to {} for the {} best matrix units "
                                 "with their KV channels, on their best tiling (the lanes are a choice of their own; "
                                 "attention takes one KV beat per cycle whatever they are)",
                                 arch::kVectorLanes.front(), arch::kVectorLanes[1], arch::kVectorLanes.back(), best.size()));
  r.method.push_back(fmt::format("6. prompt blocks: each design takes the most tokens per block of its prompt call "
                                 "({} at most, halving) for which the tiled matrix unit and the activation arrays' rows "
                                 "fit beside the decode datapath, the arrays in block RAM, else in UltraRAM{}",
                                 arch::kMaxBlockTokens, has_uram ? "" : " (none on this card)"));
  std::stable_sort(all.begin(), all.end(), [&](const Candidate& a, const Candidate& b) { return better(a, b, obj); });
  r.pareto = pareto_front(all);
  if (all.size() > kKept) all.resize(kKept);
  r.ranked = std::move(all);
  // The designs kept get their operation lists.
  if (req.operation_lists) {
    for (auto& c : r.ranked)
      c.prediction = perf::predict(c.design, dev, w, resources.at(hw::resource_view(c.design)), perf::Detail::ops);
    for (auto& c : r.pareto) {
      const auto same =
          std::find_if(r.ranked.begin(), r.ranked.end(), [&](const Candidate& k) { return k.design == c.design; });
      c.prediction = same != r.ranked.end()
                         ? same->prediction
                         : perf::predict(c.design, dev, w, resources.at(hw::resource_view(c.design)), perf::Detail::ops);
    }
  }
  if (r.ranked.empty() && r.why_not.empty()) r.why_not.push_back("no design of the explored space fits");
  return r;
}

std::string fit_suggestion(const Request& req, const hw::Device& dev) {
  const perf::Workloads w = perf::lower(req.config, req.precision, req.scenario);
  const double weights = w.decode.model_weight_bytes(), kv = w.decode.kv_cache_bytes(req.scenario.context);
  const double cap = dev.memory_capacity_gb() * kGB;
  std::vector<std::string> options;
  if (cap <= 0) return "the device has no off-chip memory figure";
  // Weights and KV cache fit the card's memory: what is short is the fabric (the smallest
  // design fpgallm's kernels build), which fewer weight bits or a shorter context do not shrink.
  if (weights + kv <= cap)
    return fmt::format("a card with more programmable logic ({:.2f} GB of weights and KV cache fit this card's {:.0f} GB; "
                       "the smallest design fpgallm builds does not fit its fabric)",
                       (weights + kv) / kGB, cap / kGB);
  if (req.precision.weight_bits > 4) {
    graph::Precision p4 = req.precision;
    p4.weight_bits = 4;
    p4.float_weights = false;
    p4.act_bits = std::min(p4.act_bits, 8);
    const double w4 = perf::lower(req.config, p4, req.scenario).decode.model_weight_bytes();
    if (w4 + kv <= cap) options.push_back(fmt::format("int4 weights ({:.2f} GB + {:.2f} GB KV)", w4 / kGB, kv / kGB));
  }
  const int cards = int(std::ceil((weights + kv) / cap));
  if (cards > 1) options.push_back(fmt::format("{} cards (tensor parallel, {:.2f} GB each)", pow2_ceil(cards), (weights + kv) / pow2_ceil(cards) / kGB));
  if (weights < cap && kv > 0) {
    const int ctx = int(req.scenario.context * (cap - weights) / kv);
    if (ctx >= 16) options.push_back(fmt::format("a context of at most {} positions", ctx));
  }
  std::string s;
  for (const auto& o : options) s += (s.empty() ? "" : ", or ") + o;
  return s.empty() ? "a card with more memory" : s;
}

Exploration explore(const std::vector<const hw::Device*>& devices, const Request& req, Objective obj) {
  const perf::Workloads w = perf::lower(req.config, req.precision, req.scenario);
  std::vector<DeviceResult> results;
  for (const hw::Device* d : devices) results.push_back(explore_device(*d, req, obj, w));
  return combine(std::move(results), req, obj);
}

Exploration combine(std::vector<DeviceResult> results, const Request& req, Objective obj) {
  Exploration e;
  e.devices = std::move(results);
  const perf::Workloads w = perf::lower(req.config, req.precision, req.scenario);
  std::stable_sort(e.devices.begin(), e.devices.end(), [&](const DeviceResult& a, const DeviceResult& b) {
    if (a.fits() != b.fits()) return a.fits();
    if (!a.fits()) return false;
    return better(a.best(), b.best(), obj);
  });

  // Advice in plain words.
  const double weights = w.decode.model_weight_bytes(), kv = w.decode.kv_cache_bytes(req.scenario.context);
  const std::string model = req.config.name.empty() ? "the model" : req.config.name;
  for (const auto& r : e.devices) {
    const hw::Device* dev = hw::lookup_device(r.device);
    if (!r.fits()) {
      if (dev && dev->memory_capacity_gb() > 0 && weights + kv > dev->memory_capacity_gb() * kGB)
        e.advice.push_back(fmt::format("{} does not fit {} at {} ({:.2f} GB weights + {:.2f} GB KV cache at context {} > {:.0f} GB): "
                                       "use {}",
                                       model, r.device, graph::to_string(req.precision), weights / kGB, kv / kGB,
                                       req.scenario.context, dev->memory_capacity_gb(), fit_suggestion(req, *dev)));
      continue;
    }
  }
  // Bandwidth-bound at batch 1: a cheaper design may reach the same tokens/s. Prices are
  // those of every card each design needs.
  auto cards_price = [](const Candidate& c) {
    return c.prediction.cards > 1 ? fmt::format("${:.0f} ({} cards)", c.price_usd, c.prediction.cards)
                                  : fmt::format("${:.0f}", c.price_usd);
  };
  for (const auto& r : e.devices) {
    if (!r.fits() || r.kind != hw::Kind::fpga || req.scenario.batch != 1) continue;
    const auto& p = r.best().prediction;
    if (p.decode.memory_s < 0.5 * p.decode.seconds || r.best().price_usd <= 0) continue;
    for (const auto& other : e.devices) {
      if (&other == &r || !other.fits() || other.kind != hw::Kind::fpga) continue;
      const Candidate& o = other.best();
      if (o.price_usd <= 0 || o.price_usd >= r.best().price_usd) continue;
      if (o.prediction.decode_tokens_per_s >= 0.9 * p.decode_tokens_per_s) {
        e.advice.push_back(fmt::format("{} is bandwidth-bound at batch 1 ({:.0f} tokens/s); {} reaches {:.0f} tokens/s for "
                                       "{} instead of {}",
                                       r.device, p.decode_tokens_per_s, other.device, o.prediction.decode_tokens_per_s,
                                       cards_price(o), cards_price(r.best())));
        break;
      }
    }
  }
  // Figures the objective needs and a device lacks: said once, never ranked as 0.
  for (const auto& r : e.devices) {
    if (!r.fits() || scorable(r.best().prediction, obj)) continue;
    e.advice.push_back(fmt::format("{}: {} unknown (no figure in data/devices.json), so it is not ranked by {}: its designs "
                                   "are ranked by decode tokens/s and listed after those with the figure",
                                   r.device, obj == Objective::usd_per_mtoken ? "cost per token" : "power", to_string(obj)));
  }
  // Best FPGA against best GPU.
  const DeviceResult *fpga = nullptr, *gpu = nullptr;
  for (const auto& r : e.devices) {
    if (!r.fits()) continue;
    if (r.kind == hw::Kind::fpga && !fpga) fpga = &r;
    if (r.kind == hw::Kind::gpu && !gpu) gpu = &r;
  }
  auto energy = [](const perf::Prediction& p) {
    return p.joules_per_token > 0 ? fmt::format("{:.3g} J/token", p.joules_per_token) : std::string("J/token unknown");
  };
  auto on = [](const DeviceResult& r) {
    const int cards = r.best().prediction.cards;
    return cards > 1 ? fmt::format("{} x{}", r.device, cards) : r.device;
  };
  if (fpga && gpu)
    e.advice.push_back(fmt::format("by {}: best FPGA {} ({:.1f} tokens/s, {}), best GPU {} ({:.1f} tokens/s, {}, "
                                   "CUDA-graph serving stack)",
                                   to_string(obj), on(*fpga), fpga->best().prediction.decode_tokens_per_s,
                                   energy(fpga->best().prediction), on(*gpu), gpu->best().prediction.decode_tokens_per_s,
                                   energy(gpu->best().prediction)));
  return e;
}

void to_json(nlohmann::json& j, const Candidate& c) {
  j = {{"design", c.design}, {"prediction", perf::summary_json(c.prediction)}, {"binding_resource", c.binding}};
  j["price_usd"] = c.price_usd > 0 ? nlohmann::json(c.price_usd) : nlohmann::json(nullptr);
}

void to_json(nlohmann::json& j, const DeviceResult& r) {
  j = {{"device", r.device},
       {"kind", hw::to_string(r.kind)},
       {"fits", r.fits()},
       {"evaluated", r.evaluated},
       {"rejected_resources", r.rejected_resources},
       {"rejected_memory", r.rejected_memory},
       {"why_not", r.why_not},
       {"method", r.method}};
  if (r.fits()) j["best"] = r.best();
  j["pareto"] = nlohmann::json::array();
  for (const auto& c : r.pareto)
    j["pareto"].push_back({{"design", c.design.name},
                           {"style", arch::to_string(c.design.style)},
                           {"macs", c.design.matrix_unit.rows * c.design.matrix_unit.cols},
                           {"decode_tokens_per_s", c.prediction.decode_tokens_per_s},
                           {"joules_per_token", perf::known_or_null(c.prediction.joules_per_token)}});
}

void to_json(nlohmann::json& j, const Exploration& e) { j = {{"devices", e.devices}, {"advice", e.advice}}; }

int weight_bits(quant::WeightFormat f) {
  switch (f) {
    case quant::WeightFormat::int4: return 4;
    case quant::WeightFormat::int8: return 8;
    case quant::WeightFormat::f16: return 16;
    case quant::WeightFormat::f32: return 32;
  }
  return 32;
}

graph::Precision precision_of(const quant::Plan& plan) {
  graph::Precision p;
  p.weight_bits = 0;
  bool float_act = false, int4 = false, all_static = true;
  for (const auto& l : plan.layers) {
    if (l.act == quant::ActFormat::int8_dynamic) all_static = false;
    const int b = weight_bits(l.weight);
    p.layer_weight_bits[model::linear_name(l.layer, l.which)] = b;
    p.weight_bits = std::max(p.weight_bits, b);
    int4 = int4 || b == 4;
    float_act = float_act || l.act == quant::ActFormat::f16 || l.act == quant::ActFormat::f32;
  }
  if (p.weight_bits == 0) throw std::invalid_argument("the plan has no layers");
  p.act_bits = float_act ? 16 : 8;
  p.kv_bits = plan.kv8 ? 8 : 16;
  p.group_size = int4 ? plan.group : 0;
  p.float_weights = p.weight_bits >= 16;
  p.static_act = !float_act && all_static;
  return p;
}

}  // namespace dse
