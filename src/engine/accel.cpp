#include "engine/accel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "engine/accel_kernels.hpp"
#include "util/error.hpp"

namespace engine {

namespace {

bool contains(const int* begin, const int* end, int v) { return std::find(begin, end, v) != end; }

std::string list(const int* begin, const int* end) {
  std::string s;
  for (const int* p = begin; p != end; ++p) s += (s.empty() ? "" : ", ") + std::to_string(*p);
  return s;
}

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

std::vector<std::string> accel_design_problems(const arch::Design& d) {
  std::vector<std::string> p = d.problems();
  if (!p.empty()) return p;
  using namespace accel;
  const int* us = std::begin(kUnitSizes);
  const int* ue = std::end(kUnitSizes);
  if (!contains(us, ue, d.matrix_unit.rows))
    p.push_back(fmt::format("matrix_unit.rows: {} is not instantiated in the C simulation (one of {})",
                            d.matrix_unit.rows, list(us, ue)));
  if (!contains(us, ue, d.matrix_unit.cols))
    p.push_back(fmt::format("matrix_unit.cols: {} is not instantiated in the C simulation (one of {})",
                            d.matrix_unit.cols, list(us, ue)));
  bool tile_ok = false;
  std::string tiles;
  for (const auto& t : kTileShapes) {
    tile_ok |= t[0] == d.tiling.tile_rows && t[1] == d.tiling.tile_cols;
    tiles += fmt::format("{}{}x{}", tiles.empty() ? "" : ", ", t[0], t[1]);
  }
  if (!tile_ok)
    p.push_back(fmt::format("tiling: tile_rows x tile_cols {}x{} is not instantiated in the C simulation (one of {})",
                            d.tiling.tile_rows, d.tiling.tile_cols, tiles));
  if (!contains(us, ue, d.vector_unit.lanes))
    p.push_back(fmt::format("vector_unit.lanes: {} is not instantiated in the C simulation (one of {})",
                            d.vector_unit.lanes, list(us, ue)));
  if (!contains(std::begin(kExpTableBits), std::end(kExpTableBits), d.vector_unit.exp_table_bits))
    p.push_back(fmt::format("vector_unit.exp_table_bits: {} is not instantiated in the C simulation (one of {})",
                            d.vector_unit.exp_table_bits, list(std::begin(kExpTableBits), std::end(kExpTableBits))));
  return p;
}

int accel_kv_bits(const arch::Design& d) { return d.kv_bits; }

std::vector<std::string> accel_problems(const quant::QuantModel& qm, const arch::Design& d) {
  std::vector<std::string> p = accel_design_problems(d);
  const auto& c = qm.config;
  using namespace accel;
  if (c.arch != model::Arch::llama) p.push_back("the accelerator backend runs llama-architecture models only");
  if (c.head_dim() > kMaxHeadDim || c.head_dim() % 2)
    p.push_back(fmt::format("head size {} (the attention unit takes even sizes up to {})", c.head_dim(), kMaxHeadDim));
  if (c.n_heads > kMaxHeads) p.push_back(fmt::format("{} heads (at most {})", c.n_heads, kMaxHeads));
  if (std::max({c.dim, c.hidden_dim}) > kMaxCols || c.vocab_size > kMaxRows)
    p.push_back(fmt::format("model width {}/{} or vocabulary {} beyond the kernels' limits ({} / {})", c.dim,
                            c.hidden_dim, c.vocab_size, kMaxCols, kMaxRows));
  if (qm.plan.kv8 && d.kv_bits != 8)
    p.push_back(fmt::format("kv_bits: the plan quantizes the KV cache to int8 but the design stores {} bits", d.kv_bits));
  for (const auto& lp : qm.plan.layers) {
    const std::string name = model::linear_name(lp.layer, lp.which);
    if (lp.weight != quant::WeightFormat::int8 && lp.weight != quant::WeightFormat::int4) {
      p.push_back(fmt::format("{}: {} weights (the matrix unit multiplies int8 or int4 weights)", name,
                              quant::to_string(lp.weight)));
      break;
    }
    if (lp.weight == quant::WeightFormat::int4 && d.matrix_unit.weight_bits != 4) {
      p.push_back(fmt::format("{}: int4 weights on a design with matrix_unit.weight_bits {} (use 4)", name,
                              d.matrix_unit.weight_bits));
      break;
    }
    if (lp.act != quant::ActFormat::int8_dynamic && lp.act != quant::ActFormat::int8_static) {
      p.push_back(fmt::format("{}: {} activations (the matrix unit takes int8 activations)", name,
                              quant::to_string(lp.act)));
      break;
    }
  }
  return p;
}

// ---------------------------------------------------------------------------------------

struct AccelTransformer::State {
  const quant::QuantModel& qm;
  arch::Design design;
  model::Config c;
  accel::MatrixKernels mk;
  accel::VectorKernels vk;
  int kv_bits = 8;
  int max_tokens = 1;  // tokens per program

  std::vector<float> rope;  // [seq_len][head_dim]: cos, sin pairs
  std::vector<float> kf, vf;
  std::vector<std::uint16_t> kh, vh;
  std::vector<kernels::i8> kq, vq;
  std::vector<float> ks, vs;

  // Activation buffers, [max_tokens][width], indexed by arch::Buf.
  static constexpr int kBufs = static_cast<int>(arch::Buf::weights) + 1;
  std::vector<float> buf[kBufs];
  int width[kBufs] = {};
  std::vector<kernels::i8> codes[kBufs];
  std::vector<float> scales[kBufs];

  arch::Program program;
  Tap tap;

  State(const quant::QuantModel& q, const arch::Design& d) : qm(q), design(d), c(q.config) {}

  float* b(arch::Buf which, int token) { return buf[int(which)].data() + std::size_t(token) * width[int(which)]; }

  template <int BITS>
  kernels::KvCache<BITS> cache(int layer) {
    const std::size_t off = std::size_t(layer) * c.seq_len * c.kv_dim();
    const std::size_t soff = std::size_t(layer) * c.seq_len * c.n_kv_heads;
    if constexpr (BITS == 32) return {kf.data() + off, vf.data() + off, nullptr, nullptr, c.kv_dim(), c.n_kv_heads};
    if constexpr (BITS == 16) return {kh.data() + off, vh.data() + off, nullptr, nullptr, c.kv_dim(), c.n_kv_heads};
    if constexpr (BITS == 8)
      return {kq.data() + off, vq.data() + off, ks.data() + soff, vs.data() + soff, c.kv_dim(), c.n_kv_heads};
  }

  void exec(const arch::Instruction& in, std::size_t index, const std::vector<int>& tokens);
  void matmul(const arch::Instruction& in);
  template <int BITS>
  void attention(const arch::Instruction& in, const accel::AttentionKernels<BITS>& k);
};

AccelTransformer::AccelTransformer(const model::Model& base, const quant::QuantModel& qm, const arch::Design& design)
    : Transformer(base), s_(std::make_unique<State>(qm, design)) {
  if (auto p = accel_problems(qm, design); !p.empty()) throw fpgallm::InputError("design", p.front());
  State& s = *s_;
  const auto& c = s.c;
  s.mk = accel::matrix_kernels(design.matrix_unit.rows, design.matrix_unit.cols, design.tiling.tile_rows,
                               design.tiling.tile_cols);
  s.vk = accel::vector_kernels(design.vector_unit.lanes, design.vector_unit.exp_table_bits);
  s.kv_bits = accel_kv_bits(design);
  s.max_tokens = std::min(design.tiling.prefill_block, accel::kMaxTokens);

  // The RoPE table the host writes once: cos/sin of pos * theta^(-i/head_dim), computed in
  // the fp32 operations of the reference engine.
  const int hd = c.head_dim();
  s.rope.resize(std::size_t(c.seq_len) * hd);
  for (int pos = 0; pos < c.seq_len; ++pos)
    for (int i = 0; i < hd; i += 2) {
      const float freq = 1.0f / std::pow(c.rope_theta, static_cast<float>(i) / static_cast<float>(hd));
      const float val = static_cast<float>(pos) * freq;
      s.rope[std::size_t(pos) * hd + i] = std::cos(val);
      s.rope[std::size_t(pos) * hd + i + 1] = std::sin(val);
    }

  const std::size_t cache = std::size_t(c.n_layers) * c.seq_len * c.kv_dim();
  const std::size_t scales = std::size_t(c.n_layers) * c.seq_len * c.n_kv_heads;
  if (s.kv_bits == 32) s.kf.assign(cache, 0.0f), s.vf.assign(cache, 0.0f);
  if (s.kv_bits == 16) s.kh.assign(cache, 0), s.vh.assign(cache, 0);
  if (s.kv_bits == 8) s.kq.assign(cache, 0), s.vq.assign(cache, 0), s.ks.assign(scales, 0.0f), s.vs.assign(scales, 0.0f);

  using arch::Buf;
  const int q_dim = c.n_heads * hd;
  auto set = [&](Buf which, int w) {
    s.width[int(which)] = w;
    s.buf[int(which)].assign(std::size_t(s.max_tokens) * w, 0.0f);
    s.codes[int(which)].assign(std::size_t(s.max_tokens) * w, 0);
    s.scales[int(which)].assign(std::size_t(s.max_tokens), 0.0f);
  };
  set(Buf::x, c.dim);
  set(Buf::xb, c.dim);
  set(Buf::xb2, c.dim);
  set(Buf::q, q_dim);
  set(Buf::k, c.kv_dim());
  set(Buf::v, c.kv_dim());
  set(Buf::att, q_dim);
  set(Buf::hb, c.hidden_dim);
  set(Buf::hb2, c.hidden_dim);
  set(Buf::logits, c.vocab_size);
}

AccelTransformer::~AccelTransformer() = default;

const arch::Program& AccelTransformer::last_program() const { return s_->program; }
void AccelTransformer::set_tap(Tap tap) { s_->tap = std::move(tap); }

const float* AccelTransformer::forward(int token, int pos) { return run({token}, pos, arch::Stage::decode); }

const float* AccelTransformer::prefill(const std::vector<int>& tokens, int pos) {
  if (tokens.empty()) throw std::invalid_argument("prefill of no tokens");
  const float* logits = nullptr;
  for (std::size_t i = 0; i < tokens.size(); i += std::size_t(s_->max_tokens)) {
    const std::size_t n = std::min(tokens.size() - i, std::size_t(s_->max_tokens));
    logits = run(std::vector<int>(tokens.begin() + long(i), tokens.begin() + long(i + n)), pos + int(i),
                 arch::Stage::prefill);
  }
  return logits;
}

const float* AccelTransformer::run(const std::vector<int>& tokens, int pos, arch::Stage stage) {
  State& s = *s_;
  const auto& c = s.c;
  for (int t : tokens)
    if (t < 0 || t >= c.vocab_size) throw std::out_of_range("token id out of range");
  const int n = int(tokens.size());
  if (pos < 0 || pos + n > c.seq_len) throw std::out_of_range("position past the model's context");
  if (pos + n > s.design.context)
    throw std::out_of_range(fmt::format("position {} past the design's context ({})", pos + n - 1, s.design.context));
  arch::Design d = s.design;
  d.tiling.prefill_block = std::max(d.tiling.prefill_block, n);
  s.program = arch::build_program(c, d, stage, pos, n, [&](int layer, model::Linear which) {
    const auto& lp = s.qm.plan.at(layer, which);
    return arch::LinearPrecision{lp.weight == quant::WeightFormat::int4 ? 4 : 8,
                                 lp.weight == quant::WeightFormat::int4 ? s.qm.plan.group : 0};
  });
  for (std::size_t i = 0; i < s.program.instructions.size(); ++i) s.exec(s.program.instructions[i], i, tokens);
  return s.b(arch::Buf::logits, n - 1);
}

void AccelTransformer::State::exec(const arch::Instruction& in, std::size_t index, const std::vector<int>& tokens) {
  using arch::Buf;
  using arch::Op;
  const int n = in.tokens;
  switch (in.op) {
    case Op::embed:
      for (int t = 0; t < n; ++t)
        std::memcpy(b(Buf::x, t), qm.token_embedding.data() + std::size_t(tokens[std::size_t(t)]) * c.dim,
                    sizeof(float) * std::size_t(c.dim));
      return;
    case Op::norm: {
      const float* gain = in.layer < 0                        ? qm.final_norm.data()
                          : ends_with(in.name, "attn_norm") ? qm.attn_norm[std::size_t(in.layer)].data()
                                                            : qm.ffn_norm[std::size_t(in.layer)].data();
      for (int t = 0; t < n; ++t) vk.rmsnorm(b(in.out, t), b(in.in, t), gain, in.cols, c.norm_eps);
      return;
    }
    case Op::quantize: {
      // The activation format is the consumer's (the next matmul's) plan.
      const arch::Instruction* consumer = nullptr;
      for (std::size_t j = index + 1; j < program.instructions.size() && !consumer; ++j)
        if (program.instructions[j].op == Op::matmul) consumer = &program.instructions[j];
      if (!consumer) throw std::logic_error("quantize without a consuming matmul");
      const auto& lp = qm.plan.at(consumer->layer, consumer->linear);
      const int w = width[int(in.in)];
      for (int t = 0; t < n; ++t) {
        const float* x = b(in.in, t);
        if (tap) tap(*consumer, t, x, in.cols);
        kernels::i8* q = codes[int(in.in)].data() + std::size_t(t) * w;
        if (lp.act == quant::ActFormat::int8_static) {
          vk.quantize_static(q, x, lp.act_scale, in.cols);
          scales[int(in.in)][std::size_t(t)] = lp.act_scale;
        } else {
          scales[int(in.in)][std::size_t(t)] = vk.quantize_dynamic(q, x, in.cols);
        }
      }
      return;
    }
    case Op::matmul: matmul(in); return;
    case Op::rope: {
      const int hd = in.head_dim;
      for (int t = 0; t < n; ++t) {
        const float* table = rope.data() + std::size_t(in.pos + t) * hd;
        for (int h = 0; h < in.heads; ++h) vk.rope(b(Buf::q, t) + h * hd, table, hd);
        for (int h = 0; h < in.kv_heads; ++h) vk.rope(b(Buf::k, t) + h * hd, table, hd);
      }
      return;
    }
    case Op::kv_store:
      if (kv_bits == 32) vk.kv32.store(cache<32>(in.layer), b(Buf::k, 0), b(Buf::v, 0), n, in.pos, in.head_dim);
      if (kv_bits == 16) vk.kv16.store(cache<16>(in.layer), b(Buf::k, 0), b(Buf::v, 0), n, in.pos, in.head_dim);
      if (kv_bits == 8) vk.kv8.store(cache<8>(in.layer), b(Buf::k, 0), b(Buf::v, 0), n, in.pos, in.head_dim);
      return;
    case Op::attention:
      if (kv_bits == 32) attention<32>(in, vk.kv32);
      if (kv_bits == 16) attention<16>(in, vk.kv16);
      if (kv_bits == 8) attention<8>(in, vk.kv8);
      return;
    case Op::residual_add:
      for (int t = 0; t < n; ++t) vk.residual_add(b(in.out, t), b(in.in, t), in.cols);
      return;
    case Op::swiglu:
      for (int t = 0; t < n; ++t) vk.swiglu(b(in.out, t), b(in.in, t), in.cols);
      return;
    case Op::gelu: throw std::logic_error("gelu: the accelerator backend runs llama models only");
  }
}

template <int BITS>
void AccelTransformer::State::attention(const arch::Instruction& in, const accel::AttentionKernels<BITS>& k) {
  const auto view = cache<BITS>(in.layer);
  float* out = b(arch::Buf::att, 0);
  const float* q = b(arch::Buf::q, 0);
  // Heads are independent: split over host threads (any split gives the same bits).
#pragma omp parallel for schedule(static) if (in.context > 64)
  for (int h = 0; h < in.heads; ++h) k.attend(out, q, view, in.tokens, in.pos, in.heads, in.head_dim, h, h + 1);
}

void AccelTransformer::State::matmul(const arch::Instruction& in) {
  const auto& lp = qm.plan.at(in.layer, in.linear);
  const auto& L = qm.linear(in.layer, in.linear);
  const int w_in = width[int(in.in)];
  if (w_in != in.cols) throw std::logic_error("matmul input width mismatch");
  const kernels::i8* x = codes[int(in.in)].data();
  const float* xs = scales[int(in.in)].data();
  float* y = buf[int(in.out)].data();
  const int y_stride = width[int(in.out)];
  // Row blocks of whole tiles run as independent calls (as several compute units would):
  // rows do not interact, so the split does not change any bit.
  const int tile = design.tiling.tile_rows;
  const int row_tiles = (in.rows + tile - 1) / tile;
  const bool parallel = std::int64_t(in.rows) * in.cols > 32768 && row_tiles > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int rt = 0; rt < row_tiles; ++rt) {
    const int r0 = rt * tile, rows = std::min(tile, in.rows - r0);
    if (lp.weight == quant::WeightFormat::int8) {
      mk.w8a8(L.int8.q.data() + std::size_t(r0) * in.cols, L.int8.scale.data() + r0, x, xs, y + r0, nullptr,
              in.tokens, rows, in.cols, y_stride);
    } else {
      const auto& m = L.int4;
      mk.w4a8(m.packed.data() + std::size_t(r0) * std::size_t(m.row_bytes()),
              m.scale.data() + std::size_t(r0) * std::size_t(m.groups()), m.group, x, xs, y + r0, in.tokens, rows,
              in.cols, y_stride);
    }
  }
}

}  // namespace engine
