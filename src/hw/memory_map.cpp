#include "hw/memory_map.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kernels/matrix_unit.hpp"

namespace hw {

namespace {

constexpr double kFloatsPerWord = 16;  // one 512-bit word of fp32 parameters (kernels::FloatWord)

double words_of(double floats) { return std::ceil(floats / kFloatsPerWord); }

// Banks of every pool: bytes used, and whether a multi-bank buffer owns the bank.
struct PoolState {
  int index = 0;  // in Device::memory
  const MemoryPool* pool = nullptr;
  std::string kind;
  double bank = 0;
  std::vector<double> used;
  std::vector<bool> owned;
};

}  // namespace

std::string BankRange::sp() const {
  return first == last ? fmt::format("{}[{}]", kind, first) : fmt::format("{}[{}:{}]", kind, first, last);
}

const MappedBuffer* MemoryMap::find(const std::string& port) const {
  for (const auto& b : buffers)
    if (b.buffer.port == port) return &b;
  return nullptr;
}

double bank_bytes(const MemoryPool& pool) {
  const double channels = std::max(1.0, pool.channels.or_else(1));
  // HBM stacks come in binary sizes: the U280's "8 GB" is 32 pseudo-channels of 256 MB = 2^28
  // bytes (UG1393); DDR capacities are taken as the decimal figures the data sheets give.
  const double unit = pool.is_hbm() ? double(1 << 30) : 1e9;
  return pool.capacity_gb.or_else(0) * unit / channels;
}

double banks_bandwidth(const MemoryPool& pool, int banks, int port_bits, double clock_hz) {
  const double channels = std::max(1.0, pool.channels.or_else(1));
  const double share = pool.bandwidth_gbps.or_else(0) * 1e9 * std::min<double>(banks, channels) / channels;
  return std::min(share, port_bits / 8.0 * clock_hz);  // one port, however many banks behind it
}

std::vector<KernelBuffer> kernel_buffers(const model::Config& c, const arch::Design& d, int context,
                                         const arch::PortRates& rates) {
  const double f = d.clock_mhz * 1e6;
  const int pe = d.matrix_unit.rows, simd = d.matrix_unit.cols, ch = std::max(1, d.memory.weight_channels);
  const int q_dim = c.n_heads * c.head_dim(), kv = c.kv_dim();
  // Every matrix of the decode program, as codegen's layout streams it (rows x cols).
  std::vector<std::pair<int, int>> matrices;
  for (int l = 0; l < c.n_layers; ++l)
    for (auto [r, k] : {std::pair{q_dim, c.dim}, {kv, c.dim}, {kv, c.dim}, {c.dim, q_dim}, {c.hidden_dim, c.dim},
                        {c.dim, c.hidden_dim}, {c.hidden_dim, c.dim}})
      matrices.emplace_back(r, k);
  matrices.emplace_back(c.vocab_size, c.dim);
  double beats = 0, scale_words = 0, bias_words = 0;
  const double fold_words = std::ceil(pe / kFloatsPerWord);
  for (auto [r, k] : matrices) {
    beats += kernels::stream_words(pe, simd, ch, r, k).beats;
    scale_words += std::ceil(double(r) / pe) * fold_words;
  }
  if (c.qkv_bias) bias_words = c.n_layers * (std::ceil(double(q_dim) / pe) + 2 * std::ceil(double(kv) / pe)) * fold_words;
  const double dim_words = words_of(c.dim), hd_words = words_of(c.head_dim());
  const double param_words = double(c.vocab_size) * dim_words + (2.0 * c.n_layers + 1) * dim_words + bias_words +
                             (c.qk_norm ? c.n_layers * 2.0 * hd_words : 0) + double(context) * hd_words;
  const double kv_elems = double(c.n_layers) * context * kv;
  const double kv_scales = double(c.n_layers) * context * c.n_kv_heads + 1;
  std::vector<KernelBuffer> out;
  for (int w = 0; w < ch; ++w)
    out.push_back({fmt::format("w{:02d}", w), fmt::format("weights, channel {}", w), std::int64_t(beats * 64),
                   rates.weight_channel * f, fmt::format("gmem_w{:02d}", w)});
  out.push_back({"kv_k", "KV cache, keys", std::int64_t(std::ceil(kv_elems * d.kv_bits / 8)), rates.kv * f,
                 "gmem_kv_k"});
  out.push_back({"kv_v", "KV cache, values", std::int64_t(std::ceil(kv_elems * d.kv_bits / 8)), rates.kv * f,
                 "gmem_kv_v"});
  out.push_back({"params", "embedding (fp32), norm gains, RoPE table", std::int64_t(param_words * 64), rates.params * f,
                 "gmem_params"});
  out.push_back({"row_scales", "row scales of every matrix", std::int64_t(std::max(1.0, scale_words) * 64),
                 rates.params * f, "gmem_scales"});
  out.push_back({"kv_k_scale", "KV scales, keys", std::int64_t(kv_scales * 4), 0, "gmem_kv_k_scale"});
  out.push_back({"kv_v_scale", "KV scales, values", std::int64_t(kv_scales * 4), 0, "gmem_kv_v_scale"});
  // The program: at most 32 instructions per layer and 16 more (a decode step has about 20 per layer).
  out.push_back({"program", "instruction list",
                 std::int64_t(arch::kInstructionWords * 4.0 * (c.n_layers * 32.0 + 16)), 0, "gmem_host"});
  out.push_back({"prompt", "prompt token ids (the prompt call)", std::int64_t(4.0 * context), 0, "gmem_host"});
  out.push_back({"result", "logits", std::int64_t(4.0 * std::max({c.vocab_size, c.hidden_dim, c.dim, q_dim})), 0,
                 "gmem_host"});
  return out;
}

MemoryMap map_buffers(const std::vector<KernelBuffer>& buffers, const Device& dev, const arch::Design& d,
                      double memory_efficiency) {
  MemoryMap map;
  std::vector<PoolState> pools;
  for (std::size_t i = 0; i < dev.memory.size(); ++i) {
    const MemoryPool& m = dev.memory[i];
    if (!m.capacity_gb.has() || !m.channels.has() || !(*m.capacity_gb > 0) || !(*m.channels >= 1)) continue;
    PoolState s;
    s.index = int(i);
    s.pool = &m;
    s.kind = m.is_hbm() ? "HBM" : "DDR";
    s.bank = bank_bytes(m);
    s.used.assign(std::size_t(std::max(1, int(*m.channels))), 0.0);
    s.owned.assign(s.used.size(), false);
    pools.push_back(std::move(s));
  }
  auto place_range = [&](MappedBuffer& b, int p, int first, int n) {
    PoolState& s = pools[std::size_t(p)];
    double left = double(b.buffer.bytes);
    for (int i = first; i < first + n; ++i) {
      const double take = std::min(left, s.bank - s.used[std::size_t(i)]);
      s.used[std::size_t(i)] += take;
      left -= take;
      if (n > 1) s.owned[std::size_t(i)] = true;
    }
    b.banks = {s.index, s.kind, first, first + n - 1};
    b.mapped = true;
  };
  // A contiguous run of `n` banks no other buffer uses, from bank `from` on.
  auto free_run = [&](int p, int n, int from) {
    const PoolState& s = pools[std::size_t(p)];
    for (int a = from; a + n <= int(s.used.size()); ++a) {
      bool ok = true;
      for (int i = a; i < a + n && ok; ++i) ok = s.used[std::size_t(i)] == 0 && !s.owned[std::size_t(i)];
      if (ok) return a;
    }
    return -1;
  };
  // A buffer of one bank or less: the bank with the most room that holds it (spreading the
  // large ones), from `from` on, not a bank a multi-bank buffer owns.
  auto roomiest = [&](int p, double bytes, int from) {
    const PoolState& s = pools[std::size_t(p)];
    int best = -1;
    for (int i = from; i < int(s.used.size()); ++i)
      if (!s.owned[std::size_t(i)] && s.bank - s.used[std::size_t(i)] >= bytes &&
          (best < 0 || s.used[std::size_t(i)] < s.used[std::size_t(best)]))
        best = i;
    return best;
  };
  for (const auto& b : buffers) map.buffers.push_back({b, {}, false});
  if (pools.empty()) {
    map.fits = false;
    map.problems.push_back(dev.id + " lists no memory with capacity and channel figures: no bank holds the buffers");
    return map;
  }
  int next_free = 0;  // first bank of pool 0 after the weight channels
  // 1. Weight channel c on bank c (a range of banks when one does not hold it; on a card
  // with fewer banks than weight channels, the channels share them in turn).
  const int banks0 = int(pools[0].used.size());
  for (auto& b : map.buffers) {
    if (b.buffer.port.size() != 3 || b.buffer.port[0] != 'w') continue;
    const int c = std::stoi(b.buffer.port.substr(1));
    const int n = std::max(1, int(std::ceil(double(b.buffer.bytes) / pools[0].bank)));
    if (n == 1 && pools[0].used[std::size_t(c % banks0)] + double(b.buffer.bytes) <= pools[0].bank) {
      place_range(b, 0, c % banks0, 1);
      next_free = std::min(banks0, std::max(next_free, c + 1));
    } else if (n > 1 && (c + 1) * n <= banks0) {
      place_range(b, 0, c * n, n);
      next_free = std::max(next_free, (c + 1) * n);
    }
  }
  if (next_free >= banks0) next_free = 0;
  // 2. The KV data on the banks their bytes need, from the first bank after the weights (the
  // design's KV channels, where it has any): kv_k and kv_v are one port each, so more banks
  // than their bytes need add capacity, not bandwidth. 3. Then the parameters, then the small buffers, largest first.
  std::vector<MappedBuffer*> rest;
  for (auto& b : map.buffers)
    if (!b.mapped && !(b.buffer.port.size() == 3 && b.buffer.port[0] == 'w')) rest.push_back(&b);
  std::stable_sort(rest.begin(), rest.end(), [](const MappedBuffer* a, const MappedBuffer* b) {
    const bool ka = a->buffer.port == "kv_k" || a->buffer.port == "kv_v";
    const bool kb = b->buffer.port == "kv_k" || b->buffer.port == "kv_v";
    if (ka != kb) return ka;
    return a->buffer.bytes > b->buffer.bytes;
  });
  for (MappedBuffer* b : rest) {
    // A port of a bundle already mapped: the same banks (one AXI master).
    for (const auto& o : map.buffers)
      if (!b->buffer.bundle.empty() && o.mapped && o.buffer.bundle == b->buffer.bundle) {
        b->banks = o.banks;
        b->mapped = true;
        for (auto& s : pools)
          if (s.index == o.banks.pool) s.used[std::size_t(o.banks.last)] += double(b->buffer.bytes);
        break;
      }
    for (int p = 0; p < int(pools.size()) && !b->mapped; ++p) {
      const double bank = pools[std::size_t(p)].bank;
      int n = std::max(1, int(std::ceil(double(b->buffer.bytes) / bank)));
      const int from = p == 0 ? next_free : 0;
      if (n == 1) {
        int at = roomiest(p, double(b->buffer.bytes), from);
        if (at < 0 && from > 0) at = roomiest(p, double(b->buffer.bytes), 0);
        if (at >= 0) place_range(*b, p, at, 1);
      } else {
        int at = free_run(p, n, from);
        if (at < 0 && from > 0) at = free_run(p, n, 0);
        if (at >= 0) place_range(*b, p, at, n);
      }
    }
    if (!b->mapped)
      map.problems.push_back(fmt::format("{} ({}, {:.0f} MB) does not fit in the banks of {} left free", b->buffer.port,
                                         b->buffer.what, b->buffer.bytes / 1e6, dev.id));
  }
  for (auto& w : map.buffers)
    if (!w.mapped && w.buffer.port.size() == 3 && w.buffer.port[0] == 'w')
      map.problems.push_back(fmt::format("{} ({:.0f} MB): the {} weight channels do not fit in the {} banks of {}",
                                         w.buffer.port, w.buffer.bytes / 1e6, d.memory.weight_channels,
                                         pools[0].used.size(), pools[0].pool->kind));
  for (auto& p : check_map(map, dev, d, memory_efficiency)) map.problems.push_back(p);
  map.fits = map.problems.empty();
  map.assumptions.push_back(
      "banks (hw/memory_map.hpp): a buffer lies contiguously in the banks its port is connected to; one larger than a "
      "bank gets banks of its own (HBM[a:b]); weight channel c on bank c; the KV ports after the weights, on "
      "the banks their bytes need (one port each: more banks add no bandwidth); what the first memory cannot hold goes to the next (DDR)");
  map.assumptions.push_back(fmt::format(
      "bank capacity = the memory's capacity over its channels, HBM in binary units ({}); a port's bandwidth = min(its banks' share of the "
      "memory's peak, {} bits x {} MHz) x memory_efficiency {:.2f}",
      pools[0].pool->capacity_gb.source, d.memory.port_bits, d.clock_mhz, memory_efficiency));
  return map;
}

std::vector<std::string> check_map(const MemoryMap& map, const Device& dev, const arch::Design& d,
                                   double memory_efficiency) {
  std::vector<std::string> out;
  // Bytes per bank: a multi-bank buffer fills its banks in order.
  std::vector<std::vector<double>> used;
  for (const auto& m : dev.memory) used.emplace_back(std::size_t(std::max(1, int(m.channels.or_else(1)))), 0.0);
  for (const auto& b : map.buffers) {
    if (!b.mapped) continue;
    const MemoryPool& pool = dev.memory[std::size_t(b.banks.pool)];
    const double bank = bank_bytes(pool);
    if (double(b.buffer.bytes) > bank * b.banks.banks())
      out.push_back(fmt::format("{}: {:.1f} MB in {} ({:.1f} MB)", b.buffer.port, b.buffer.bytes / 1e6, b.banks.sp(),
                                bank * b.banks.banks() / 1e6));
    double left = double(b.buffer.bytes);
    for (int i = b.banks.first; i <= b.banks.last && i < int(used[std::size_t(b.banks.pool)].size()); ++i) {
      const double take = i == b.banks.last ? left : std::min(left, bank);
      used[std::size_t(b.banks.pool)][std::size_t(i)] += take;
      left -= take;
    }
    const double bw =
        memory_efficiency * banks_bandwidth(pool, b.banks.banks(), d.memory.port_bits, d.clock_mhz * 1e6);
    if (b.buffer.bytes_per_s > bw * (1 + 1e-9))
      out.push_back(fmt::format("{}: the schedule assumes {:.2f} GB/s, {} delivers {:.2f} GB/s", b.buffer.port,
                                b.buffer.bytes_per_s / 1e9, b.banks.sp(), bw / 1e9));
  }
  for (std::size_t p = 0; p < used.size(); ++p) {
    const double bank = bank_bytes(dev.memory[p]);
    for (std::size_t i = 0; i < used[p].size(); ++i)
      if (used[p][i] > bank * (1 + 1e-12))
        out.push_back(fmt::format("{}[{}]: its buffers take {:.1f} MB of {:.1f} MB",
                                  dev.memory[p].is_hbm() ? "HBM" : "DDR", i, used[p][i] / 1e6, bank / 1e6));
  }
  return out;
}

std::vector<std::string> map_lines(const MemoryMap& map, const Device& dev, const arch::Design& d,
                                   double memory_efficiency) {
  std::vector<std::string> out;
  for (const auto& b : map.buffers) {
    if (!b.mapped) {
      out.push_back(fmt::format("{} -> (no bank) {:.1f} MB", b.buffer.port, b.buffer.bytes / 1e6));
      continue;
    }
    const MemoryPool& pool = dev.memory[std::size_t(b.banks.pool)];
    const double bw = memory_efficiency * banks_bandwidth(pool, b.banks.banks(), d.memory.port_bits, d.clock_mhz * 1e6);
    out.push_back(fmt::format("{} -> {}: {:.1f} MB in {} x {:.0f} MB{}", b.buffer.port, b.banks.sp(), b.buffer.bytes / 1e6,
                              b.banks.banks(), bank_bytes(pool) / 1e6,
                              b.buffer.bytes_per_s > 0
                                  ? fmt::format("; {:.2f} GB/s assumed of {:.2f}", b.buffer.bytes_per_s / 1e9, bw / 1e9)
                                  : std::string()));
  }
  return out;
}

}  // namespace hw
