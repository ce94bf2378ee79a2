// Every unit's description against its kernel, in the style of ggml's test-backend-ops: one
// table of cases (a design, a model shape, a KV format, a stage), and for each case every
// instruction kind of arch::Program (embed, RMSNorm and LayerNorm, head_norm, quantize,
// matmul decode and prefill with and without bias, the classifier with its logits out,
// rope, kv_store, attention, residual_add, swiglu, gelu) run through the kernels of
// src/kernels and src/codegen/templates/overlay.hpp with their loop counters on
// (src/kernels/trip_count.hpp). The iterations each kernel loop counted must equal what
// arch::unit_work's schedule says: trip x calls, summed over the Loops naming that kernel
// loop. A Loop no kernel loop counted, or a kernel loop no Loop names, fails the case.
//
// The call sequence per instruction is the emitted top's (codegen emit_text.cpp
// fpgallm_overlay: decode, one token) and, for prefill blocks, the accelerator backend's
// (engine/accel.cpp: the tiled matrix unit per row tile; the vector kernels token by token),
// with the parameter loads (norm gain, RoPE row, head_norm gains) through the overlay's
// load_floats as the description charges them.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "arch/instances.hpp"
#include "arch/program.hpp"
#include "arch/units.hpp"
#include "kernels/attention.hpp"
#include "kernels/matrix_unit.hpp"
#include "kernels/trip_count.hpp"
#include "kernels/vector_unit.hpp"
#include "model/presets.hpp"
#include "overlay.hpp"

namespace {

// Loop bounds of the instances below (the test's model shapes stay inside them).
constexpr int kMaxWidth = 1024;  // any activation vector, matrix side
constexpr int kMaxHeads = 16;
constexpr int kMaxHeadDim = 64;
constexpr int kMaxContext = 256;
constexpr int kMaxTokens = 16;

// The kernels of one design, sized as the emitted config header and the backend size them.
template <int PE, int SIMD, int CHANNELS, int LANES, int TILE_ROWS, int TILE_COLS>
struct Instance {
  struct CFG {  // the parts of the emitted FpgallmConfig the overlay functions read
    static constexpr int dim = kMaxWidth, q_dim = kMaxWidth, kv_dim = kMaxWidth, hidden_dim = kMaxWidth;
    static constexpr int vocab_size = kMaxWidth;
    static constexpr int n_heads = kMaxHeads, n_kv_heads = kMaxHeads;
    static constexpr int max_width = 2 * kMaxWidth;  // LayerNorm's gain and bias
    static constexpr int max_tokens = kMaxTokens;    // a prefill block
    static constexpr float norm_eps = 1e-5f;
    typedef kernels::MatrixVectorConfig<PE, SIMD, CHANNELS, kMaxWidth, kMaxWidth> matrix_vector;
    typedef kernels::VectorUnitConfig<LANES, 8, max_width> vector_unit;
    typedef kernels::MatrixUnitConfig<PE, SIMD, TILE_ROWS, TILE_COLS, 1, kMaxWidth, kMaxWidth> matrix_unit;  // int4 decode
  };
  typedef typename CFG::matrix_vector MV;
  typedef typename CFG::vector_unit V;
  typedef kernels::AttentionConfig<V, kMaxHeadDim, arch::kKvBlock, kMaxTokens, kMaxContext, kMaxHeads> A;
  typedef kernels::MatrixUnitConfig<PE, SIMD, TILE_ROWS, TILE_COLS, kMaxTokens, kMaxWidth, kMaxWidth> M;
  static constexpr int pe = PE, simd = SIMD, channels = CHANNELS, lanes = LANES;
  static constexpr int tile_rows = TILE_ROWS, tile_cols = TILE_COLS;
};

// The designs of the table: two unit shapes of arch/instances.hpp, one with a weight
// channel count that makes the gather slower than one group per cycle.
typedef Instance<16, 16, 2, 16, 64, 128> Design16;
typedef Instance<32, 32, 3, 8, 128, 256> Design32;

template <class I>
arch::Design design_of(int kv_bits) {
  arch::Design d;
  d.name = fmt::format("{}x{} lanes {} ch {} kv{}", I::pe, I::simd, I::lanes, I::channels, kv_bits);
  d.matrix_unit.rows = I::pe;
  d.matrix_unit.cols = I::simd;
  d.vector_unit.lanes = I::lanes;
  d.vector_unit.exp_table_bits = 8;
  d.memory.weight_channels = I::channels;
  d.tiling.tile_rows = I::tile_rows;
  d.tiling.tile_cols = I::tile_cols;
  d.tiling.prefill_block = kMaxTokens;
  d.buffers.weight_bytes = 2 * I::tile_rows * I::tile_cols;
  d.context = kMaxContext;
  d.kv_bits = kv_bits;
  return d;
}

// Small model shapes (stories260K's and three variants covering the other op kinds; sizes
// that leave partial tiles, lane groups and KV blocks).
model::Config llama() {
  model::Config c = model::find_preset("stories260k").value();  // dim 64, hidden 172, 8 heads, 4 KV heads, vocab 512
  c.n_layers = 1;
  c.seq_len = kMaxContext;
  return c;
}
model::Config qwen2() {  // q/k/v biases
  model::Config c = llama();
  c.name = "qwen2-tiny";
  c.arch = model::Arch::qwen2;
  c.qkv_bias = true;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.hidden_dim = 96;
  c.vocab_size = 300;
  return c;
}
model::Config qwen3() {  // per-head q/k norms, a head width that is not dim / heads, w1 over
  model::Config c = llama();  // several full 64 x 128 tiles
  c.name = "qwen3-tiny";
  c.dim = 160;
  c.arch = model::Arch::qwen3;
  c.qk_norm = true;
  c.head_size = 24;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.vocab_size = 200;
  return c;
}
model::Config gpt2() {  // LayerNorm, GELU
  model::Config c = llama();
  c.name = "gpt2-tiny";
  c.arch = model::Arch::gpt2;
  c.dim = 48;
  c.hidden_dim = 192;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  c.vocab_size = 333;
  return c;
}

struct Case {
  int design;  // 0: Design16, 1: Design32
  int kv_bits;
  model::Config config;
  arch::Stage stage;
  int pos, tokens;
  bool static_act = false;  // int8 activations at calibrated scales: quantize without max_abs
  int weight_bits = 8;      // 4: int4 weights (w4a8, group 32) on the tiled unit
};

std::string case_name(const Case& c) {
  std::string s = fmt::format("{}_{}_kv{}_{}_pos{}", c.design == 0 ? "16x16" : "32x32", c.config.name, c.kv_bits,
                              arch::to_string(c.stage), c.pos);
  if (c.static_act) s += "_static";
  if (c.weight_bits == 4) s += "_w4";
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}
std::string test_name(const ::testing::TestParamInfo<Case>& info) { return case_name(info.param); }
void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

std::vector<Case> cases() {
  std::vector<Case> v;
  for (int design : {0, 1})
    for (int kv : {8, 16, 32})
      for (const model::Config& c : {llama(), qwen2(), qwen3(), gpt2()}) {
        v.push_back({design, kv, c, arch::Stage::decode, 70, 1});   // two KV blocks: 64 + 7 keys
        v.push_back({design, kv, c, arch::Stage::decode, 0, 1});    // one key
        v.push_back({design, kv, c, arch::Stage::prefill, 61, 5});  // queries on both sides of a block edge
      }
  for (int design : {0, 1}) {
    v.push_back({design, 8, llama(), arch::Stage::decode, 70, 1, true});
    v.push_back({design, 8, llama(), arch::Stage::prefill, 61, 5, true});
    for (const model::Config& c : {llama(), qwen2()}) {  // qwen2: the bias added in the store stage
      v.push_back({design, 8, c, arch::Stage::decode, 70, 1, false, 4});
      v.push_back({design, 8, c, arch::Stage::prefill, 61, 5, false, 4});
    }
  }
  return v;
}

// What the kernels work on: activations per arch::Buf ([tokens][width]), parameters, the
// KV cache. Values are arbitrary finite numbers: the loop counts depend on shapes only.
template <class I, int BITS>
struct Machine {
  typedef typename I::CFG CFG;
  typedef typename I::MV MV;
  typedef typename I::V V;
  typedef typename I::A A;
  typedef typename kernels::KvElement<BITS>::type Elem;

  const model::Config& c;
  std::vector<float> buf[int(arch::Buf::weights) + 1];
  int width[int(arch::Buf::weights) + 1] = {};
  std::vector<kernels::FloatWord> params, row_scales;
  std::vector<float> param, result;
  std::vector<kernels::i8> codes;  // [tokens][cols] (prefill) or MV::padded_cols (decode)
  std::vector<float> code_scales;
  std::vector<Elem> kv_k, kv_v;
  std::vector<float> kv_k_scale, kv_v_scale;
  std::mt19937 rng{7};

  explicit Machine(const model::Config& config) : c(config) {
    using arch::Buf;
    const int hd = c.head_dim();
    auto set = [&](Buf b, int w) {
      width[int(b)] = w;
      buf[int(b)] = random_floats(std::size_t(kMaxTokens) * w);
    };
    set(Buf::x, c.dim);
    set(Buf::xb, c.dim);
    set(Buf::xb2, c.dim);
    set(Buf::q, c.n_heads * hd);
    set(Buf::k, c.kv_dim());
    set(Buf::v, c.kv_dim());
    set(Buf::att, c.n_heads * hd);
    set(Buf::hb, c.hidden_dim);
    set(Buf::hb2, c.hidden_dim);
    set(Buf::logits, c.vocab_size);
    params.resize(2 * kMaxWidth / kernels::kFloatsPerWord);
    row_scales.resize(kMaxWidth / kernels::kFloatsPerWord);
    for (auto* words : {&params, &row_scales})
      for (auto& w : *words)
        for (float& f : w.value) f = 0.5f + std::uniform_real_distribution<float>(0, 1)(rng);
    param.assign(CFG::max_width, 0.0f);
    result.assign(CFG::vocab_size, 0.0f);
    codes.assign(std::max<std::size_t>(MV::padded_cols, std::size_t(kMaxTokens) * kMaxWidth), 1);
    code_scales.assign(kMaxTokens, 0.01f);
    const std::size_t elems = std::size_t(kMaxContext) * c.kv_dim(), scales = std::size_t(kMaxContext) * c.n_kv_heads;
    kv_k.resize(elems);
    kv_v.resize(elems);
    for (std::size_t i = 0; i < elems; ++i) {
      kv_k[i] = element(std::uniform_real_distribution<float>(-1, 1)(rng));
      kv_v[i] = element(std::uniform_real_distribution<float>(-1, 1)(rng));
    }
    kv_k_scale.assign(scales, 0.01f);
    kv_v_scale.assign(scales, 0.01f);
  }

  std::vector<float> random_floats(std::size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = std::uniform_real_distribution<float>(-1, 1)(rng);
    return v;
  }
  static Elem element(float f) {
    if (BITS == 8) return static_cast<Elem>(static_cast<int>(f * 100));
    if (BITS == 16) return static_cast<Elem>(kernels::float_to_half(f));
    return static_cast<Elem>(f);
  }
  float* b(arch::Buf which, int token) { return buf[int(which)].data() + std::size_t(token) * width[int(which)]; }
  kernels::KvCache<BITS> cache() {
    const kernels::KvCache<BITS> k = {kv_k.data(), kv_v.data(), kv_k_scale.data(), kv_v_scale.data(), c.kv_dim(),
                                      c.n_kv_heads};
    return k;
  }

  // Decode: the emitted top's DATAFLOW region (weights from the channels, gathered into
  // steps, multiplied, requantized into the destination array), then the logits out.
  void matmul_region(const arch::Instruction& in) {
    const kernels::MatrixWords m = kernels::matrix_words<MV>(in.rows, in.cols);
    std::vector<std::vector<kernels::PackedWord>> memory(MV::channels, std::vector<kernels::PackedWord>(m.beats));
    for (auto& channel_words : memory)
      for (auto& word : channel_words)
        for (auto& lane : word.lane) lane = static_cast<kernels::i8>(rng() % 255) - 127;
    kernels::Fifo<kernels::PackedWord, 64> channel[MV::channels];
    kernels::Fifo<kernels::WeightStep<MV::step_words>, 4> weight_steps;
    kernels::Fifo<kernels::AccWord<MV::pe>, 4> acc;
    for (int ch = 0; ch < MV::channels; ++ch)
      kernels::read_weight_channel<MV>(memory[std::size_t(ch)].data(), 0, m.beats, channel[ch]);
    kernels::gather_weight_steps<MV>(channel, weight_steps, m.groups, m.steps);
    kernels::matrix_vector_w8a8<MV>(weight_steps, codes.data(), acc, in.rows, in.cols);
    using arch::Buf;
    overlay::store_rows<CFG>(acc, row_scales.data(), 0, params.data(), in.bias ? 0 : -1, code_scales[0], in.rows,
                             int(in.out), b(Buf::q, 0), b(Buf::k, 0), b(Buf::v, 0), b(Buf::xb2, 0), b(Buf::hb, 0),
                             b(Buf::hb2, 0), b(Buf::logits, 0));
  }

  // Prefill, and int4 weights at any token count: the tiled matrix unit, one call per row
  // tile, as the backend calls it.
  void matmul_tiled(const arch::Instruction& in) {
    if (in.weight_bits == 4) {
      const int row_bytes = (in.cols + 31) / 32 * 16, groups = (in.cols + in.group - 1) / in.group;
      std::vector<kernels::u8> packed(std::size_t(in.rows) * row_bytes);
      for (auto& p : packed) p = static_cast<kernels::u8>(rng());
      std::vector<std::uint16_t> scale(std::size_t(in.rows) * groups, 0x2000);
      std::vector<float> bias(std::size_t(in.rows), 0.5f);
      const int y_stride = width[int(in.out)];
      for (int r0 = 0; r0 < in.rows; r0 += I::tile_rows) {
        const int rows = std::min(I::tile_rows, in.rows - r0);
        kernels::matmul_w4a8<typename I::M>(packed.data() + std::size_t(r0) * row_bytes,
                                            scale.data() + std::size_t(r0) * groups, in.group, codes.data(),
                                            code_scales.data(), buf[int(in.out)].data() + r0, in.tokens, rows, in.cols,
                                            y_stride, in.bias ? bias.data() + r0 : nullptr);
      }
      return;
    }
    std::vector<kernels::i8> w(std::size_t(in.rows) * in.cols);
    for (auto& q : w) q = static_cast<kernels::i8>(rng() % 255) - 127;
    std::vector<float> scale(std::size_t(in.rows), 0.01f), bias(std::size_t(in.rows), 0.5f);
    const int y_stride = width[int(in.out)];
    for (int r0 = 0; r0 < in.rows; r0 += I::tile_rows) {
      const int rows = std::min(I::tile_rows, in.rows - r0);
      kernels::matmul_w8a8<typename I::M>(w.data() + std::size_t(r0) * in.cols, scale.data() + r0, codes.data(),
                                          code_scales.data(), buf[int(in.out)].data() + r0, nullptr, in.tokens, rows,
                                          in.cols, y_stride, in.bias ? bias.data() + r0 : nullptr);
    }
  }

  void run(const arch::Instruction& in) {
    using arch::Buf;
    using arch::Op;
    const int n = in.tokens, hd = in.head_dim;
    int words[overlay::kWords] = {};
    const std::vector<int> program(overlay::kWords, 0);
    overlay::fetch_instruction(program.data(), 0, words);
    switch (in.op) {
      case Op::embed:
        for (int t = 0; t < n; ++t) overlay::load_floats<CFG>(params.data(), 0, in.cols, b(Buf::x, t));
        return;
      case Op::norm: {
        const bool layer_norm = c.norm() == model::Norm::layer;  // gain and bias, one load
        overlay::load_floats<CFG>(params.data(), 0, layer_norm ? 2 * in.cols : in.cols, param.data());
        for (int t = 0; t < n; ++t) {
          if (layer_norm)
            kernels::layernorm<V>(b(in.out, t), b(in.in, t), param.data(), param.data() + in.cols, in.cols, c.norm_eps);
          else
            kernels::rmsnorm<V>(b(in.out, t), b(in.in, t), param.data(), in.cols, c.norm_eps);
        }
        return;
      }
      case Op::quantize:
        for (int t = 0; t < n; ++t) {  // the top's one call site; its source choice reads this token's buffer
          const float* src = b(in.in, t);
          code_scales[std::size_t(t)] = overlay::quantize<CFG>(codes.data() + std::size_t(t) * in.cols, overlay::buf_x,
                                                               src, src, src, src, in.cols, in.static_scale, 0.05f);
        }
        return;
      case Op::matmul:
        if (n == 1 && in.weight_bits != 4)
          matmul_region(in);
        else
          matmul_tiled(in);
        if (in.host_bytes > 0)  // the classifier: the last token's logits to the result bundle
          overlay::write_result<CFG>(b(Buf::logits, n - 1), in.rows, result.data());
        return;
      case Op::head_norm:
        // The top's call: the two gains once, every head of every token.
        overlay::head_norms<CFG>(b(Buf::q, 0), b(Buf::k, 0), width[int(Buf::q)], width[int(Buf::k)], params.data(), 0,
                                 in.heads, in.kv_heads, hd, param.data(), n);
        return;
      case Op::rope:
        for (int t = 0; t < n; ++t) {
          overlay::load_floats<CFG>(params.data(), 0, hd, param.data());
          overlay::rope_heads<CFG>(b(Buf::q, t), b(Buf::k, t), param.data(), in.heads, in.kv_heads, hd);
        }
        return;
      case Op::kv_store:
        kernels::kv_store<A, BITS>(cache(), b(Buf::k, 0), b(Buf::v, 0), n, in.pos, hd);
        return;
      case Op::attention:
        kernels::attention<A, BITS>(b(Buf::att, 0), b(Buf::q, 0), cache(), n, in.pos, in.heads, hd, 0, in.heads);
        return;
      case Op::residual_add:
        for (int t = 0; t < n; ++t) kernels::residual_add<V>(b(in.out, t), b(in.in, t), in.cols);
        return;
      case Op::swiglu:
        for (int t = 0; t < n; ++t) kernels::swiglu<V>(b(in.out, t), b(in.in, t), in.cols);
        return;
      case Op::gelu:
        for (int t = 0; t < n; ++t) kernels::gelu<V>(b(in.out, t), in.cols);
        return;
    }
  }
};

// One kernel loop of one instruction: what the schedule says, what the kernels counted.
struct Row {
  std::string kernel_loop, described_by;
  long long described = 0, counted = 0;
};

// The schedule's Loops grouped by the kernel loop they name, joined with the counts.
// Loops naming no kernel loop must be the host's PCIe transfer.
std::vector<Row> compare(const arch::Work& w, const std::map<std::string, long long>& counted,
                         std::vector<std::string>& problems) {
  std::map<std::string, Row> rows;
  for (const arch::Loop& l : w.loops) {
    if (l.kernel_loop.empty()) {
      if (l.name.rfind("pcie:", 0) != 0) problems.push_back("loop \"" + l.name + "\" names no kernel loop");
      continue;
    }
    Row& r = rows[l.kernel_loop];
    r.kernel_loop = l.kernel_loop;
    r.described_by += (r.described_by.empty() ? "" : " + ") + l.name;
    r.described += l.trip * l.calls;
  }
  for (const auto& [id, n] : counted) {
    Row& r = rows[id];
    r.kernel_loop = id;
    r.counted = n;
  }
  std::vector<Row> out;
  for (const auto& [id, r] : rows) {
    if (r.described_by.empty())
      problems.push_back("kernel loop " + id + " ran but no Loop describes it");
    else if (r.described != r.counted) problems.push_back(fmt::format("{}: described {}, counted {}", id, r.described, r.counted));
    out.push_back(r);
  }
  return out;
}

std::map<std::string, long long> counts() {
  std::map<std::string, long long> m;
  const kernels::TripCounts& c = kernels::trip_counts();
  for (int i = 0; i < c.used; ++i)
    if (c.entry[i].iterations > 0) m[c.entry[i].id] = c.entry[i].iterations;
  return m;
}

class UnitLoops : public ::testing::TestWithParam<Case> {
 protected:
  void TearDown() override { kernels::trip_counting(false); }

  template <class I, int BITS>
  void check(const Case& k) {
    arch::Design d = design_of<I>(k.kv_bits);
    d.matrix_unit.weight_bits = k.weight_bits;
    ASSERT_TRUE(d.problems().empty()) << d.problems().front();
    ASSERT_TRUE(arch::instance_problems(d).empty()) << arch::instance_problems(d).front();
    const arch::Program p = arch::build_program(k.config, d, k.stage, k.pos, k.tokens, [&](int, model::Linear) {
      return arch::LinearPrecision{k.weight_bits, k.weight_bits == 4 ? 32 : 0, k.static_act};
    });
    for (const arch::Instruction& in : p.instructions)
      if (in.op == arch::Op::quantize) {
        EXPECT_EQ(in.static_scale, k.static_act) << in.name;
      }
    Machine<I, BITS> m(k.config);
    std::vector<arch::Op> ran;
    std::string table = fmt::format("{:<14} {:<28} {:<24} {:>10} {:>10}  {}\n", "op", "design", "kernel loop",
                                    "described", "counted", "described by");
    bool failed = false;
    kernels::trip_counting(true);
    for (const arch::Instruction& in : p.instructions) {
      if (in.layer > 0) continue;  // layer 0 has every kind a block has
      kernels::trip_reset();
      m.run(in);
      ASSERT_EQ(kernels::trip_counts().unregistered, 0) << "more kernel loop ids than trip_count.hpp holds";
      std::vector<std::string> problems;
      const std::vector<Row> rows = compare(arch::unit_work(d, in, arch::PortRates{}), counts(), problems);
      for (const Row& r : rows)
        table += fmt::format("{:<14} {:<28} {:<24} {:>10} {:>10}  {}\n", in.name, d.name, r.kernel_loop, r.described,
                             r.counted, r.described_by);
      for (const std::string& s : problems) ADD_FAILURE() << in.name << " (" << arch::to_string(in.op) << "): " << s;
      failed = failed || !problems.empty();
      ran.push_back(in.op);
    }
    kernels::trip_counting(false);
    if (failed) std::printf("%s", table.c_str());
    // The case covered every kind its model has.
    auto has = [&](arch::Op op) { return std::find(ran.begin(), ran.end(), op) != ran.end(); };
    for (arch::Op op : {arch::Op::embed, arch::Op::norm, arch::Op::quantize, arch::Op::matmul, arch::Op::kv_store,
                        arch::Op::attention, arch::Op::residual_add})
      EXPECT_TRUE(has(op)) << arch::to_string(op);
    EXPECT_EQ(has(arch::Op::rope), k.config.uses_rope());
    EXPECT_EQ(has(arch::Op::swiglu), k.config.gated_ffn());
    EXPECT_EQ(has(arch::Op::gelu), !k.config.gated_ffn());
    EXPECT_EQ(has(arch::Op::head_norm), k.config.qk_norm);
  }

  template <class I>
  void check_kv(const Case& k) {
    if (k.kv_bits == 8) check<I, 8>(k);
    if (k.kv_bits == 16) check<I, 16>(k);
    if (k.kv_bits == 32) check<I, 32>(k);
  }
};

TEST_P(UnitLoops, ScheduleMatchesTheKernelsLoopCounts) {
  const Case& k = GetParam();
  if (k.design == 0)
    check_kv<Design16>(k);
  else
    check_kv<Design32>(k);
}

INSTANTIATE_TEST_SUITE_P(Cases, UnitLoops, ::testing::ValuesIn(cases()), test_name);

// The comparison fails on each kind of disagreement (a wrong trip, a loop the kernels did not
// run, a kernel loop the schedule leaves out, a loop naming no kernel loop).
TEST(UnitLoopsCompare, CatchesEveryKindOfDisagreement) {
  arch::Work w;
  w.loops.push_back({"a", "lane_reduce", 4, 1, 0, 3, 12, ""});
  w.loops.push_back({"b", "rope", 2, 1, 0, 1, 2, ""});
  std::vector<std::string> problems;
  compare(w, {{"lane_reduce", 12}, {"rope", 2}}, problems);
  EXPECT_TRUE(problems.empty());
  compare(w, {{"lane_reduce", 13}, {"rope", 2}}, problems);
  EXPECT_EQ(problems.size(), 1u);
  problems.clear();
  compare(w, {{"lane_reduce", 12}}, problems);
  EXPECT_EQ(problems.size(), 1u);
  problems.clear();
  compare(w, {{"lane_reduce", 12}, {"rope", 2}, {"swiglu", 5}}, problems);
  EXPECT_EQ(problems.size(), 1u);
  problems.clear();
  w.loops.push_back({"c", "", 1, 1, 0, 1, 1, ""});
  compare(w, {{"lane_reduce", 12}, {"rope", 2}}, problems);
  EXPECT_EQ(problems.size(), 1u);
}

// Counting is off unless a harness turns it on (the backend runs the kernels uncounted).
TEST(UnitLoopsCompare, CountingIsOffByDefault) {
  typedef Design16::V V;
  std::vector<float> x(100, 1.0f), y(100, 2.0f);
  kernels::trip_reset();
  kernels::residual_add<V>(x.data(), y.data(), 100);
  EXPECT_EQ(counts().count("residual_add"), 0u);
  kernels::trip_counting(true);
  kernels::residual_add<V>(x.data(), y.data(), 100);
  kernels::trip_counting(false);
  EXPECT_EQ(counts().at("residual_add"), 7);  // ceil(100 / 16)
}

}  // namespace
