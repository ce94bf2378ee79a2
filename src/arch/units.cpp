#include "arch/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/attention.hpp"
#include "kernels/matrix_unit.hpp"
#include "kernels/vector_unit.hpp"

namespace arch {

const char* to_string(UnitKind u) {
  switch (u) {
    case UnitKind::controller: return "controller";
    case UnitKind::matrix: return "matrix_unit";
    case UnitKind::vector: return "vector_unit";
    case UnitKind::host: return "pcie";
  }
  return "?";
}

int activation_partition(const Design& d) { return std::max({d.matrix_unit.rows, d.vector_unit.lanes, 16}); }

int activation_row(const Design& d, int width) {
  const int p = activation_partition(d);
  return (width + p - 1) / p * p;
}

long long activation_bank_depth(const Design& d, int width) {
  return static_cast<long long>(block_tokens(d)) * activation_row(d, width) / activation_partition(d);
}

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Cycles of a pipelined loop that moves `bytes` through a port of `rate` bytes per cycle:
// its iterations at II, or the port, whichever is slower.
double bound(double loop_cycles, double bytes, double rate) { return std::max(loop_cycles, rate > 0 ? bytes / rate : 0); }

// A loop's name or note: text, or a function that makes it (called only when loops are listed).
template <class T>
std::string text(const T& t) {
  if constexpr (std::is_invocable_v<const T&>)
    return t();
  else
    return std::string(t);
}

class Builder {
 public:
  Builder(Work& w, bool list) : w_(w), list_(list) {}
  // A loop of `calls` calls of `trip` iterations at `ii` (plus `depth` per call) taking
  // `cycles` in all, the kernel loop `kernel_loop` (its FPGALLM_TRIP id); returns the cycles.
  template <class Name, class Note = const char*>
  double loop(const Name& name, const char* kernel_loop, std::int64_t trip, int ii, int depth, std::int64_t calls,
              double cycles, const Note& note = "") {
    if (list_) w_.loops.push_back({text(name), kernel_loop, trip, ii, depth, calls, cycles, text(note)});
    return cycles;
  }
  template <class Name, class Note = const char*>
  double simple(const Name& name, const char* kernel_loop, std::int64_t trip, std::int64_t calls = 1,
                const Note& note = "") {
    return loop(name, kernel_loop, trip, 1, 0, calls, double(trip) * double(calls), note);
  }

 private:
  Work& w_;
  bool list_;
};

// Loads of `floats` fp32 values from the parameter bundle, 16 per beat, one request.
double load_floats(Builder& b, const char* name, std::int64_t floats, std::int64_t calls, const PortRates& r, Work& w) {
  const std::int64_t beats = ceil_div(floats, kernels::kFloatsPerWord);
  const double per_call = r.memory_latency + bound(double(beats), double(beats) * kernels::kWordBytes, r.params);
  w.param_bytes += beats * kernels::kWordBytes * calls;
  return b.loop([&] { return std::string(name) + ": load_floats"; }, "load_floats", beats, 1, 0, calls,
                per_call * double(calls), "one request, 16 floats per beat");
}

void decode_matmul(const Design& d, const Instruction& in, const PortRates& r, Builder& b, Work& w) {
  // kernels::MatrixVectorConfig needs PE x SIMD to fill whole 512-bit words; a smaller
  // array (powers of two below 64 MACs) is counted as the narrowest one that does.
  const int ch = std::max(1, d.memory.weight_channels), pe = d.matrix_unit.rows;
  const int simd = std::max(d.matrix_unit.cols, int(ceil_div(kernels::kWordBytes, pe)));
  const int depth = d.matrix_unit.pipeline_depth;
  const int step_words = pe * simd / kernels::kWordBytes;
  const int group_words = kernels::lcm_small(step_words, ch);
  const int gather_ii = std::max(group_words / ch, group_words / step_words);
  const int scale_words = int(ceil_div(pe, kernels::kFloatsPerWord));
  const kernels::MatrixWords m = kernels::stream_words(pe, simd, ch, in.rows, in.cols);
  // int4 does not come here (prefill_matmul: the tiled unit). Other widths below 8 bits
  // are for planning only (no kernel): the stream shrinks in proportion.
  const std::int64_t beats = in.weight_bits < 8 ? ceil_div(std::int64_t(m.beats) * in.weight_bits, 8) : m.beats;
  const std::int64_t bytes = beats * kernels::kWordBytes * ch;
  // The bundles share the pool's channels when the design has more bundles than it has.
  const double read = double(bytes) / (r.weight_channel * std::clamp(r.weight_channels, 1, ch));
  const double gather = double(m.groups) * gather_ii, mac = double(m.steps) * d.matrix_unit.ii;
  const std::int64_t folds = ceil_div(in.rows, pe);
  const double store = bound(double(folds) * scale_words, double(folds) * scale_words * kernels::kWordBytes, r.params);
  auto shape = [&](const char* loop) { return fmt::format("matmul {}x{}: {}", in.rows, in.cols, loop); };
  b.loop([&] { return shape("read_weight_channel"); }, "read_weight_channel", beats, 1, 0, ch, read, [&] {
    return fmt::format("x{} bundles in parallel over {} channels of {:.1f} B/cycle", ch,
                       std::clamp(r.weight_channels, 1, ch), r.weight_channel);
  });
  b.loop([&] { return shape("gather_weight_steps"); }, "gather_weight_steps", m.groups, gather_ii, 0, 1, gather);
  b.loop([&] { return shape("matrix_vector_w8a8"); }, "matrix_vector_w8a8", m.steps, d.matrix_unit.ii, depth, 1,
         mac + depth);
  b.loop([&] { return shape("store_rows"); }, "store_rows", folds, scale_words, 0, 1, store);
  const double slowest_compute = std::max({gather, mac, store});
  // DATAFLOW: the slowest process, the multiplier's fill, and the first request.
  w.body_cycles = std::max(read, slowest_compute) + depth + r.memory_latency;
  w.stream_bytes = bytes;
  w.stream_compute = slowest_compute;
  w.stream_fill = depth;
  // The stream moves in bursts; each channel's FIFO holds 64 words (one burst of 4 KB).
  // The kernel frees FIFO space word by word; the simulator moves pieces of 8 words per
  // channel (an eighth of each FIFO), so that several are in flight and the request
  // latency stays hidden as in the kernel. With pieces of half the FIFOs only two would
  // be in flight and each would wait for its request again (llama2-7b's matmuls ~30%
  // slower than their DATAFLOW region).
  w.pieces = std::max<std::int64_t>(1, ceil_div(beats, 8));
  w.piece_buffer_bytes = ceil_div(bytes, w.pieces);
  w.double_buffered = true;
  w.streaming = true;
  w.weight_bytes = bytes;
  // A bias (Qwen2's q/k/v) is read beside the row scales, from the parameter bundle, in the
  // same store iteration: more bytes, the same cycles.
  w.param_bytes += folds * scale_words * kernels::kWordBytes * (in.bias ? 2 : 1);
  w.macs = std::int64_t(in.rows) * in.cols;
}

void prefill_matmul(const Design& d, const Instruction& in, const PortRates& r, Builder& b, Work& w) {
  const auto& mu = d.matrix_unit;
  const std::int64_t tr = d.tiling.tile_rows, tc = d.tiling.tile_cols, rows = in.rows, cols = in.cols;
  const std::int64_t rt = ceil_div(rows, tr), ct = ceil_div(cols, tc);
  const int ch = std::clamp(r.weight_channels, 1, std::max(1, d.memory.weight_channels));
  const double port = r.weight_channel * ch;
  const std::int64_t payload_total = rows * cols * in.weight_bits / 8;
  const std::int64_t total = std::max<std::int64_t>(in.weight_bytes, payload_total);
  // Tiles fall in four classes: full, short in rows (last row tile), short in columns
  // (last column tile), short in both.
  const std::int64_t last_r = rows - (rt - 1) * tr, last_c = cols - (ct - 1) * tc;
  const std::int64_t tile_bytes = tr * tc * in.weight_bits / 8;
  const bool dbuf = d.buffers.weight_bytes >= 2 * tile_bytes;
  const std::int64_t tiles = rt * ct;
  // The load stage of a tile (kernels::matmul_w8a8): the weight tile, one SIMD word of a row
  // per cycle (int4: 32 packed columns, the whole tile width), bounded by the weight port,
  // then the tokens' activation columns, one SIMD word per cycle.
  auto act_iters = [&](std::int64_t tile_c) { return double(in.tokens) * ceil_div(tile_c, mu.cols); };
  double cycles = 0;
  auto cls = [&](const char* which, std::int64_t n, std::int64_t tile_r, std::int64_t tile_c, bool last_col) {
    if (n <= 0) return;
    const std::int64_t words = in.weight_bits < 8 ? tile_r * ceil_div(tc, 32) : tile_r * ceil_div(tile_c, mu.cols);
    const std::int64_t steps = in.tokens * ceil_div(tile_r, mu.rows) * ceil_div(tile_c, mu.cols);
    const double c = double(steps) * mu.ii + mu.pipeline_depth;
    const double st = last_col ? double(in.tokens) * tile_r : 0;
    // Scales and the rest of weight_bytes ride with the tiles, in proportion; the load loop
    // takes one SIMD word (int4: one 32-column chunk) per cycle, however fast the ports.
    const double l = bound(double(words), double(tile_r * tile_c * in.weight_bits / 8) * total /
                                              std::max<std::int64_t>(1, payload_total), port);
    const double a = act_iters(tile_c);
    cycles += n * (dbuf ? std::max(l + a, c + st) : l + a + c + st);
    auto name = [&](const char* loop) {
      return fmt::format("matmul {}x{} x{} tokens ({}): {}", rows, cols, in.tokens, which, loop);
    };
    b.loop([&] { return name("load_weight_tile"); }, "load_weight_tile", words, 1, 0, n, n * l, [&] {
      return fmt::format("one word per cycle, at most the {} weight channels' {:.1f} B/cycle{}", ch, port,
                         dbuf ? ", double-buffered" : "");
    });
    b.simple([&] { return name("load_activation_tile"); }, "load_activation_tile", std::int64_t(a), n);
    b.loop([&] { return name("compute_tile"); }, "compute_tile", steps, mu.ii, mu.pipeline_depth, n, n * c);
    if (last_col) b.simple([&] { return name("store (requantize)"); }, "store_tile", in.tokens * tile_r, n);
  };
  cls("full tiles", (rt - 1) * (ct - 1), tr, tc, false);
  cls("last column tiles", rt - 1, tr, last_c, true);
  cls("last row tiles", ct - 1, last_r, tc, false);
  cls("last tile", 1, last_r, last_c, true);
  // The first tile's load is never hidden.
  const std::int64_t first_words =
      std::min(tr, rows) * (in.weight_bits < 8 ? ceil_div(tc, 32) : ceil_div(std::min(tc, cols), mu.cols));
  const double first = bound(double(first_words), double(std::min(tr, rows) * std::min(tc, cols) * in.weight_bits / 8), port) +
                       act_iters(std::min(tc, cols));
  w.body_cycles = r.memory_latency + (dbuf ? first : 0) + cycles;
  w.stream_bytes = total;
  // The unit is busy in its load loops as in its compute (one SIMD word or 32-column chunk
  // a cycle, its own pipelined loops, not a DMA beside it): per tile the longer of load and
  // compute when double-buffered, their sum otherwise. At one token (int4 decode) and in
  // small blocks the loads bound it; in large blocks the compute (tokens x steps) does.
  w.stream_compute = cycles;
  w.stream_fill = 0;  // inside each tile's compute
  // Consecutive tiles grouped into at most 256 pieces (a piece of k tiles loads and
  // computes as k tiles do; with double buffering the next piece loads meanwhile).
  w.pieces = std::min<std::int64_t>(tiles, 256);
  w.piece_buffer_bytes = ceil_div(payload_total, w.pieces);
  w.double_buffered = dbuf;
  w.weight_bytes = total;
  // A bias is read in the store stage, one parameter word per output (overlay::FoldedRows).
  if (in.bias) w.param_bytes += std::int64_t(in.tokens) * rows * kernels::kWordBytes;
  w.macs = std::int64_t(in.tokens) * rows * cols;
}

// Latencies of Vitis HLS's binary32 cores at the design clocks (200-300 MHz), in cycles:
// the adder kernels::kAddSlots (the kernels' partial sums are sized to cover it), the
// multiplier 4, the divider 16, a conversion 2, a compare 1 [assumption: only the csynth
// schedule report gives the latencies Vitis picks]. They set the pipeline depths of the
// attention loops, charged once per call because attention calls its loops once per
// (query, block).
constexpr int kFadd = kernels::kAddSlots, kFmul = 4, kFdiv = 16, kConvert = 2, kFcmp = 1;
// kernels::exp_rom's longest chain: 7 multiplies, 8 adds, 2 conversions.
constexpr int kExpDepth = 7 * kFmul + 8 * kFadd + 2 * kConvert;

int log2_ceil(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

void attention(const Design& d, const Instruction& in, const PortRates& r, Builder& b, Work& w) {
  const int lanes = kernels::attention_lanes(d.vector_unit.lanes, d.kv_bits), hd = in.head_dim;
  const std::int64_t beat = ceil_div(hd, lanes);  // one attention-wide step over a head vector
  const std::int64_t vector_beat = ceil_div(hd, d.vector_unit.lanes);  // clear and combine: vector lanes
  const int kv_elem = d.kv_bits / 8;
  // Keys read per head (once per block for all queries of the step), keys each query sees.
  const std::int64_t keys = in.context;
  std::int64_t pairs = 0;
  for (int t = 0; t < in.tokens; ++t) pairs += in.pos + t + 1;
  // (query, block) pairs, one pass of the compute loops each. The first query that sees a
  // block loads it in its scores loop, which then sweeps the block's keys (those the step
  // sees in it); every other scores loop and every values loop sweeps the keys its query
  // sees; each at least kernels::kAddSlots positions. Equal passes are one entry.
  struct Pass {
    std::int64_t scores, loads, values;  // positions swept; keys loaded (0: none)
    bool operator==(const Pass&) const = default;
  };
  std::vector<std::pair<Pass, std::int64_t>> passes_of;  // (pass, passes per head)
  const std::int64_t slots = kernels::kAddSlots;
  for (int t = 0; t < in.tokens; ++t) {
    const std::int64_t last = in.pos + t;
    for (std::int64_t p0 = 0; p0 <= last; p0 += kKvBlock) {
      const std::int64_t n = std::min<std::int64_t>(kKvBlock, last - p0 + 1);
      const bool loads = t == std::max<std::int64_t>(0, p0 - in.pos);
      const std::int64_t nb = std::min<std::int64_t>(kKvBlock, keys - p0);
      const Pass pass{std::max(loads ? nb : n, slots), loads ? nb : 0, std::max(n, slots)};
      const auto same = std::find_if(passes_of.begin(), passes_of.end(), [&](const auto& e) { return e.first == pass; });
      if (same != passes_of.end())
        ++same->second;
      else
        passes_of.push_back({pass, 1});
    }
  }
  std::int64_t blocks_seen = 0;
  for (const auto& [pass, n] : passes_of) blocks_seen += n;
  const double key_bytes = double(hd) * kv_elem;
  const std::int64_t head_queries = std::int64_t(in.tokens) * in.heads, passes = blocks_seen * in.heads;
  double c = b.simple("attention: clear acc", "attention_clear", vector_beat, head_queries);
  c += b.simple("attention: load the query head", "attention_load_q", hd, head_queries,
                "one element per cycle (a run-time offset into q)");
  // Per (query, block): the three compute loops, each pipelined at II=1 and charged its
  // depth once per call (their chains of cores above). A loading scores loop waits for one
  // request latency and reads a beat of K and of V per key and beat, at the KV bundles' rate.
  const int scores_depth = 2 + kFmul + log2_ceil(lanes) * kFadd + kFadd + kFdiv;
  const int values_depth = 2 + kFadd + kExpDepth + kFmul + kFadd;
  const int combine_depth = 2 + log2_ceil(kernels::kAddSlots) * kFadd + kFmul + kFadd;
  const int correction = (kernels::kAddSlots - 1) * kFcmp + kFadd + kExpDepth;
  for (const auto& [pass, n] : passes_of) {
    const std::int64_t trip = beat * pass.scores, calls = n * in.heads;
    const double sweep = pass.loads > 0 ? r.kv_latency + bound(double(trip), pass.loads * key_bytes, r.kv) : double(trip);
    if (pass.loads > 0)
      c += b.loop([&] { return fmt::format("attention: scores (q . k, max), loading {} keys of K, V", pass.loads); },
                  "attention_scores", trip, 1, scores_depth, calls, double(calls) * (sweep + scores_depth),
                  "beats x the block's keys the step sees (at least kAddSlots): a beat of K and of V per cycle from "
                  "the KV bundles, a key's int8 scales on its first beat; the lane tree of products, the sum over "
                  "beats, / sqrt(d), running maxima");
    else
      c += b.loop("attention: scores (q . k, max)", "attention_scores", trip, 1, scores_depth, calls,
                  double(calls) * (sweep + scores_depth),
                  "beats x the block's keys the query sees (at least kAddSlots); the lane tree of products, the sum "
                  "over beats, / sqrt(d), running maxima");
  }
  c += b.loop("attention: correction exp(m - m_new)", "attention_correction", 1, 1, 0, passes, double(passes) * correction,
              "the block's maximum from the running maxima, then one exp (sequential)");
  for (const auto& [pass, n] : passes_of) {
    const std::int64_t trip = beat * pass.values, calls = n * in.heads;
    c += b.loop("attention: values (p = exp(s - m), p v)", "attention_values", trip, 1, values_depth, calls,
                double(calls) * double(trip + values_depth),
                "beats x the block's keys the query sees (at least kAddSlots); kAddSlots partial sums of p v and of p");
  }
  c += b.loop("attention: combine (acc x corr + slots)", "attention_combine", vector_beat, 1, combine_depth, passes,
              double(passes) * double(vector_beat + combine_depth));
  c += b.simple("attention: store", "attention_store", hd, head_queries);
  w.body_cycles = c;
  w.kv_read_bytes = 2 * std::int64_t(key_bytes) * keys * in.heads;
  w.macs = 2 * pairs * in.heads * hd;
}

}  // namespace

Work unit_work(const Design& d, const Instruction& in, const PortRates& r, bool list_loops) {
  Work w;
  Builder b(w, list_loops);
  const int lanes = d.vector_unit.lanes;
  const std::int64_t tokens = in.tokens;
  auto pass = [&](std::int64_t n) { return ceil_div(n, lanes); };
  w.fetch_cycles = b.loop("fetch instruction", "fetch_instruction", kInstructionWords, 1, 0, 1, r.memory_latency + kInstructionWords,
                          "one request to the program bundle, one word per cycle");
  switch (in.op) {
    case Op::embed: {
      w.unit = UnitKind::vector;
      w.body_cycles = load_floats(b, "embed", in.cols, tokens, r, w);
      w.host_bytes = in.host_bytes;
      break;
    }
    case Op::norm: {
      w.unit = UnitKind::vector;
      const bool layer_norm = in.weight_bytes >= 2LL * in.cols * 4;  // gain and bias
      const int reductions = layer_norm ? 2 : 1;
      double c = load_floats(b, "norm", std::int64_t(in.cols) * reductions, 1, r, w);
      c += b.simple(layer_norm ? "norm: lane_reduce (mean, variance)" : "norm: lane_reduce (sum of squares)",
                    "lane_reduce", pass(in.cols), reductions * tokens);
      c += b.simple("norm: scale", layer_norm ? "layernorm_scale" : "rmsnorm_scale", pass(in.cols), tokens);
      w.body_cycles = c;
      break;
    }
    case Op::quantize: {
      w.unit = UnitKind::vector;
      // A static scale skips the max_abs pass (overlay.hpp `quantize`, engine accel.cpp).
      w.body_cycles = (in.static_scale ? 0 : b.simple("quantize: max_abs", "max_abs", pass(in.cols), tokens)) +
                      b.simple("quantize: codes", "quantize_codes", pass(in.cols), tokens);
      break;
    }
    case Op::matmul: {
      w.unit = UnitKind::matrix;
      if (in.tokens == 1 && in.weight_bits != 4)
        decode_matmul(d, in, r, b, w);
      else  // a prefill block, or int4 weights at any token count (overlay::matmul_block)
        prefill_matmul(d, in, r, b, w);
      w.host_bytes = in.host_bytes;
      break;
    }
    case Op::head_norm: {
      // The q gain, every q head's RMSNorm, then the k gain and every k head's.
      w.unit = UnitKind::vector;
      const std::int64_t heads = tokens * (in.heads + in.kv_heads);
      w.body_cycles = load_floats(b, "head_norm (q, k gains)", in.head_dim, 2, r, w) +
                      b.simple("head_norm: lane_reduce (sum of squares) of one head", "lane_reduce", pass(in.head_dim),
                               heads) +
                      b.simple("head_norm: scale one head", "rmsnorm_scale", pass(in.head_dim), heads);
      break;
    }
    case Op::rope: {
      w.unit = UnitKind::vector;
      const std::int64_t per_head = ceil_div(in.head_dim, std::max(2, lanes));
      w.body_cycles = load_floats(b, "rope (cos/sin row)", in.head_dim, tokens, r, w) +
                      b.simple("rope: rotate one head", "rope", per_head, tokens * (in.heads + in.kv_heads));
      break;
    }
    case Op::kv_store: {
      w.unit = UnitKind::vector;
      // k and v of every KV head: int8 = the max |x| pass, then the codes pass; binary16 and
      // fp32 one element per cycle.
      const std::int64_t vectors = 2 * tokens * in.kv_heads;
      if (d.kv_bits == 8)
        w.body_cycles = b.simple("kv_store: max_abs of one head vector (k or v)", "max_abs", pass(in.head_dim), vectors) +
                        b.simple("kv_store: codes of one head vector", "quantize_codes", pass(in.head_dim), vectors);
      else
        w.body_cycles = b.simple("kv_store: one head vector (k or v)", "kv_write", in.head_dim, vectors,
                                 "one element per cycle");
      w.kv_write_bytes = in.kv_write_bytes;
      break;
    }
    case Op::attention: {
      w.unit = UnitKind::vector;
      attention(d, in, r, b, w);
      break;
    }
    case Op::residual_add:
    case Op::swiglu:
    case Op::gelu: {
      w.unit = UnitKind::vector;
      w.body_cycles = b.simple([&] { return std::string(to_string(in.op)) + ": lanes"; }, to_string(in.op),
                               pass(in.cols), tokens);
      break;
    }
  }
  if (in.op == Op::matmul && in.host_bytes > 0) {  // the last token's logits leave through the result bundle, one float per cycle
    w.after_stream = b.simple("write_result (logits)", "write_result", in.rows);
    w.body_cycles += w.after_stream;
  }
  if (w.host_bytes > 0)
    w.host_cycles = b.loop(in.op == Op::embed ? "pcie: token ids in" : "pcie: logits out", "", 1, 1, 0, 1,
                           r.host_latency + double(w.host_bytes) / r.host, "one DMA transfer");
  w.cycles = w.fetch_cycles + w.body_cycles + w.host_cycles;
  return w;
}

Instruction shard(const Instruction& ins, int cards) {
  if (cards <= 1) return ins;
  Instruction s = ins;
  auto div = [&](int n) { return int(ceil_div(n, cards)); };
  switch (ins.op) {
    case Op::matmul: {
      const bool row_parallel = ins.linear == model::Linear::wo || ins.linear == model::Linear::w2;
      const std::int64_t before = std::int64_t(ins.rows) * ins.cols;
      if (row_parallel)
        s.cols = div(ins.cols);
      else
        s.rows = div(ins.rows);
      s.weight_bytes = ins.weight_bytes * (std::int64_t(s.rows) * s.cols) / std::max<std::int64_t>(1, before);
      break;
    }
    case Op::attention:
    case Op::rope:
    case Op::head_norm:
    case Op::kv_store:
      s.heads = div(ins.heads);
      s.kv_heads = div(ins.kv_heads);
      s.kv_read_bytes = ins.kv_read_bytes / cards;
      s.kv_write_bytes = ins.kv_write_bytes / cards;
      break;
    default: break;
  }
  return s;
}

}  // namespace arch
