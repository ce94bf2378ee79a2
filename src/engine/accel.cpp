#include "engine/accel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "arch/instances.hpp"
#include "engine/accel_kernels.hpp"
#include "util/error.hpp"

namespace engine {

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// The design as one card running the whole model.
arch::Design one_card(arch::Design d) {
  d.parallel = arch::Parallelism{};
  return d;
}

}  // namespace

std::vector<std::string> accel_design_problems(const arch::Design& d) {
  std::vector<std::string> p = d.problems();
  if (!p.empty()) return p;
  return arch::instance_problems(d);
}

int accel_kv_bits(const arch::Design& d) { return d.kv_bits; }

std::vector<std::string> accel_problems(const quant::QuantModel& qm, const arch::Design& d) {
  std::vector<std::string> p = accel_design_problems(d);
  const auto& c = qm.config;
  using namespace accel;
  if (!c.llama_family()) p.push_back("the accelerator backend runs llama-family models only (llama, qwen2, qwen3)");
  if (c.moe()) p.push_back("the accelerator backend runs dense models only (mixture of experts is for planning)");
  if (c.qkv_bias && (qm.bq.size() != std::size_t(c.n_layers) || qm.bk.size() != qm.bq.size() || qm.bv.size() != qm.bq.size()))
    p.push_back("the quantized model lacks the q/k/v biases its config names");
  if (c.qk_norm && (qm.q_norm.size() != std::size_t(c.n_layers) || qm.k_norm.size() != qm.q_norm.size()))
    p.push_back("the quantized model lacks the per-head q/k norm gains its config names");
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
  accel::MatrixVectorKernel mv;
  accel::VectorKernels vk;
  // int8 weights as the streaming matrix unit reads them (decode), by plan index.
  std::vector<std::vector<kernels::i8>> steps;
  int kv_bits = 8;
  int max_tokens = 1;  // tokens per program

  // Multi-card: the card's share (the whole model on one card) and its link.
  CardShare share;
  CardLink* link = nullptr;
  bool tensor = false, pipeline = false;
  int kv_dim = 0, kv_heads = 0;  // the card's KV heads
  std::vector<std::int32_t> partial;  // [max_tokens][dim]: int32 partials of wo, w2 (tensor)
  std::vector<float> logits_part;     // [max_tokens][card's vocab rows] (tensor)
  std::vector<float> token_max;       // [max_tokens]
  std::uint64_t tokens_run = 0;

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
    const int held = layer - share.layer_begin;
    const std::size_t off = std::size_t(held) * c.seq_len * kv_dim;
    const std::size_t soff = std::size_t(held) * c.seq_len * kv_heads;
    if constexpr (BITS == 32) return {kf.data() + off, vf.data() + off, nullptr, nullptr, kv_dim, kv_heads};
    if constexpr (BITS == 16) return {kh.data() + off, vh.data() + off, nullptr, nullptr, kv_dim, kv_heads};
    if constexpr (BITS == 8)
      return {kq.data() + off, vq.data() + off, ks.data() + soff, vs.data() + soff, kv_dim, kv_heads};
  }

  void exec(const arch::Instruction& in, std::size_t index, const std::vector<int>& tokens);
  void matmul(const arch::Instruction& in);
  void card_program();
  std::uint64_t kv_bytes() const {
    return kf.size() * 8 + kh.size() * 4 + kq.size() * 2 + (ks.size() + vs.size()) * 4;
  }
  template <int BITS>
  void attention(const arch::Instruction& in, const accel::AttentionKernels<BITS>& k);
};

AccelTransformer::AccelTransformer(const model::Model& base, const quant::QuantModel& qm, const arch::Design& design)
    : AccelTransformer(base, qm, design, card_share(qm.config, qm.plan, one_card(design), 0), nullptr) {}

AccelTransformer::AccelTransformer(const model::Model& base, const quant::QuantModel& qm, const arch::Design& design,
                                   const CardShare& share, CardLink* link)
    : Transformer(base), s_(std::make_unique<State>(qm, design)) {
  if (auto p = accel_problems(qm, design); !p.empty()) throw fpgallm::InputError("design", p.front());
  State& s = *s_;
  const auto& c = s.c;
  s.share = share;
  if (s.share.cards > 1 && (!link || link->cards() != share.cards || link->card() != share.card))
    throw std::invalid_argument("a card of a multi-card design needs its link");
  s.link = link;
  s.tensor = s.share.cards > 1 && s.share.split == arch::Split::tensor;
  s.pipeline = s.share.cards > 1 && s.share.split == arch::Split::pipeline;
  s.kv_heads = s.share.kv_heads;
  s.kv_dim = s.share.kv_heads * c.head_dim();
  s.mk = accel::matrix_kernels(design.matrix_unit.rows, design.matrix_unit.cols, design.tiling.tile_rows,
                               design.tiling.tile_cols);
  s.vk = accel::vector_kernels(design.vector_unit.lanes, design.vector_unit.exp_table_bits);
  s.mv = accel::matrix_vector_kernel(design.matrix_unit.rows, design.matrix_unit.cols);
  s.steps.resize(qm.plan.layers.size());
  for (std::size_t i = 0; i < qm.plan.layers.size(); ++i) {
    const auto& lp = qm.plan.layers[i];
    const auto& L = qm.linear(lp.layer, lp.which);
    if (L.format == quant::WeightFormat::int8 && s.mv.w8a8)
      s.steps[i] = accel::pack_steps(L.int8.q.data(), L.int8.rows, L.int8.cols, design.matrix_unit.rows,
                                     design.matrix_unit.cols);
  }
  s.kv_bits = accel_kv_bits(design);
  s.max_tokens = arch::block_tokens(design);

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

  const std::size_t layers_held = std::size_t(s.share.layer_end - s.share.layer_begin);
  const std::size_t cache = layers_held * c.seq_len * s.kv_dim;
  const std::size_t scales = layers_held * c.seq_len * s.kv_heads;
  if (s.kv_bits == 32) s.kf.assign(cache, 0.0f), s.vf.assign(cache, 0.0f);
  if (s.kv_bits == 16) s.kh.assign(cache, 0), s.vh.assign(cache, 0);
  if (s.kv_bits == 8) s.kq.assign(cache, 0), s.vq.assign(cache, 0), s.ks.assign(scales, 0.0f), s.vs.assign(scales, 0.0f);

  using arch::Buf;
  auto set = [&](Buf which, int w) {
    s.width[int(which)] = w;
    s.buf[int(which)].assign(std::size_t(s.max_tokens) * w, 0.0f);
    // The matrix units read whole SIMD words: codes past the width are readable (and
    // multiply zero weights).
    s.codes[int(which)].assign(std::size_t(s.max_tokens) * w + 64, 0);
    s.scales[int(which)].assign(std::size_t(s.max_tokens), 0.0f);
  };
  set(Buf::x, c.dim);
  set(Buf::xb, c.dim);
  set(Buf::xb2, c.dim);
  set(Buf::q, s.share.q_heads * hd);
  set(Buf::k, s.kv_dim);
  set(Buf::v, s.kv_dim);
  set(Buf::att, s.share.q_heads * hd);
  set(Buf::hb, s.share.hidden);
  set(Buf::hb2, s.share.hidden);
  set(Buf::logits, c.vocab_size);
  if (s.tensor) {
    s.partial.assign(std::size_t(s.max_tokens) * c.dim, 0);
    s.logits_part.assign(std::size_t(s.max_tokens) * std::size_t(s.share.vocab_end - s.share.vocab_begin), 0.0f);
  }
  s.token_max.assign(std::size_t(s.max_tokens), 0.0f);
}

const CardShare& AccelTransformer::share() const { return s_->share; }
std::uint64_t AccelTransformer::kv_bytes() const { return s_->kv_bytes(); }
std::uint64_t AccelTransformer::tokens_run() const { return s_->tokens_run; }

AccelTransformer::~AccelTransformer() = default;

const arch::Program& AccelTransformer::last_program() const { return s_->program; }

AccelTransformer::KvRows AccelTransformer::kv_rows(int layer, int n) const {
  const State& s = *s_;
  if (!s.share.holds_layer(layer) || n < 0 || n > s.c.seq_len) throw std::out_of_range("kv_rows: layer or positions");
  const std::size_t held = std::size_t(layer - s.share.layer_begin);
  const std::size_t elems = std::size_t(n) * std::size_t(s.kv_dim), first = held * std::size_t(s.c.seq_len) * s.kv_dim;
  KvRows r;
  auto bytes = [&](const auto& cache, std::vector<std::uint8_t>& out) {
    const auto* begin = reinterpret_cast<const std::uint8_t*>(cache.data() + first);
    out.assign(begin, begin + elems * sizeof(cache[0]));
  };
  if (s.kv_bits == 32) bytes(s.kf, r.k), bytes(s.vf, r.v);
  if (s.kv_bits == 16) bytes(s.kh, r.k), bytes(s.vh, r.v);
  if (s.kv_bits == 8) {
    bytes(s.kq, r.k), bytes(s.vq, r.v);
    const std::size_t sfirst = held * std::size_t(s.c.seq_len) * s.kv_heads, sn = std::size_t(n) * s.kv_heads;
    r.k_scale.assign(s.ks.begin() + long(sfirst), s.ks.begin() + long(sfirst + sn));
    r.v_scale.assign(s.vs.begin() + long(sfirst), s.vs.begin() + long(sfirst + sn));
  }
  return r;
}
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
                                 lp.weight == quant::WeightFormat::int4 ? s.qm.plan.group : 0,
                                 lp.act == quant::ActFormat::int8_static};
  });
  s.tokens_run += std::uint64_t(n);
  if (s.tensor || s.pipeline) s.card_program();
  const int last = s.share.cards - 1;
  if (s.pipeline && s.share.card > 0) s.link->recv(s.b(arch::Buf::x, 0), std::size_t(n) * c.dim, s.share.card - 1);
  for (std::size_t i = 0; i < s.program.instructions.size(); ++i) s.exec(s.program.instructions[i], i, tokens);
  if (s.pipeline) {
    // x to the next card; the last card's logits back to card 0, where the host samples.
    float* logits = s.b(arch::Buf::logits, 0);
    if (s.share.card < last) s.link->send(s.b(arch::Buf::x, 0), std::size_t(n) * c.dim, s.share.card + 1);
    if (s.share.card == last) s.link->send(logits, std::size_t(n) * c.vocab_size, 0);
    if (s.share.card == 0) s.link->recv(logits, std::size_t(n) * c.vocab_size, last);
    s.link->host_broadcast(s.b(arch::Buf::logits, n - 1), std::size_t(c.vocab_size));
  }
  return s.b(arch::Buf::logits, n - 1);
}

// The card's part of the whole model's program: its layers (pipeline), or every
// instruction narrowed to the card's heads, hidden columns and vocabulary rows (tensor).
void AccelTransformer::State::card_program() {
  using arch::Buf;
  using arch::Op;
  using model::Linear;
  std::vector<arch::Instruction> mine;
  const int hd = c.head_dim();
  for (arch::Instruction in : program.instructions) {
    if (pipeline) {
      const bool keep = in.layer >= 0 ? share.holds_layer(in.layer) : in.op == Op::embed ? share.embedding
                                                                                        : share.classifier;
      if (keep) mine.push_back(std::move(in));
      continue;
    }
    switch (in.op) {
      case Op::matmul:
        switch (in.linear) {
          case Linear::wq: in.rows = share.q_heads * hd; break;
          case Linear::wk:
          case Linear::wv: in.rows = share.kv_heads * hd; break;
          case Linear::wo: in.cols = share.q_heads * hd; break;
          case Linear::w1:
          case Linear::w3: in.rows = share.hidden; break;
          case Linear::w2: in.cols = share.hidden; break;
          case Linear::cls: in.rows = share.vocab_end - share.vocab_begin; break;
        }
        in.row_tiles = (in.rows + design.tiling.tile_rows - 1) / design.tiling.tile_rows;
        in.col_tiles = (in.cols + design.tiling.tile_cols - 1) / design.tiling.tile_cols;
        in.weight_bytes = std::int64_t(qm.linear(in.layer, in.linear).bytes());
        break;
      case Op::rope:
      case Op::head_norm:
      case Op::kv_store:
      case Op::attention:
        in.heads = share.q_heads;
        in.kv_heads = share.kv_heads;
        if (in.op == Op::rope || in.op == Op::head_norm) in.rows = share.q_heads + share.kv_heads;
        break;
      case Op::quantize:
        if (in.in == Buf::att) in.cols = share.q_heads * hd;
        if (in.in == Buf::hb) in.cols = share.hidden;
        break;
      case Op::swiglu: in.cols = share.hidden; break;
      default: break;
    }
    mine.push_back(std::move(in));
  }
  program.instructions = std::move(mine);
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
        } else if (!(tensor && (in.in == Buf::att || in.in == Buf::hb))) {
          scales[int(in.in)][std::size_t(t)] = vk.quantize_dynamic(q, x, in.cols);
        } else {
          float m = 0.0f;
          for (int i = 0; i < in.cols; ++i) m = std::max(m, std::fabs(x[i]));
          token_max[std::size_t(t)] = m;
        }
      }
      if (tensor && (in.in == Buf::att || in.in == Buf::hb) && lp.act != quant::ActFormat::int8_static) {
        // The card holds a slice of the vector: the per-token scale comes from the max over
        // every card's slice (max is exact, so the scale is the single card's).
        link->allreduce_max(token_max.data(), std::size_t(n));
        for (int t = 0; t < n; ++t) {
          const float scale = token_max[std::size_t(t)] / 127.0f;
          vk.quantize_static(codes[int(in.in)].data() + std::size_t(t) * w, b(in.in, t), scale, in.cols);
          scales[int(in.in)][std::size_t(t)] = scale;
        }
      }
      return;
    }
    case Op::matmul: matmul(in); return;
    case Op::head_norm: {
      const std::size_t l = std::size_t(in.layer);
      for (int t = 0; t < n; ++t) {
        vk.head_rmsnorm(b(Buf::q, t), qm.q_norm[l].data(), in.heads, in.head_dim, c.norm_eps);
        vk.head_rmsnorm(b(Buf::k, t), qm.k_norm[l].data(), in.kv_heads, in.head_dim, c.norm_eps);
      }
      return;
    }
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
  int y_stride = width[int(in.out)];
  // Tensor split: wo and w2 hold the card's input columns and produce partial sums of every
  // output, which the cards add; the classifier holds the card's vocabulary rows.
  const bool partial_sums = tensor && (in.linear == model::Linear::wo || in.linear == model::Linear::w2);
  const bool vocab_rows = tensor && in.linear == model::Linear::cls;
  std::int32_t* acc = partial_sums ? partial.data() : nullptr;
  const float* bias = nullptr;  // the card's rows of the q/k/v bias
  if (in.bias) {
    const std::size_t l = std::size_t(in.layer);
    bias = in.linear == model::Linear::wq ? qm.bq[l].data() : in.linear == model::Linear::wk ? qm.bk[l].data()
                                                                                             : qm.bv[l].data();
  }
  std::vector<float> ones;
  if (vocab_rows) y = logits_part.data(), y_stride = in.rows;
  if (partial_sums && lp.weight == quant::WeightFormat::int4) ones.assign(std::size_t(in.tokens), 1.0f), xs = ones.data();
  // Row blocks of whole tiles run as independent calls (as several compute units would):
  // rows do not interact, so the split does not change any bit.
  const int tile = design.tiling.tile_rows;
  const auto& packed = steps[quant::Plan::index(c.n_layers, in.layer, in.linear)];
  if (in.tokens == 1 && lp.weight == quant::WeightFormat::int8 && !packed.empty()) {
    // Decode: the streaming matrix unit, row folds of one tile per call.
    const int pe = design.matrix_unit.rows;
    const int folds = (in.rows + pe - 1) / pe, chunk = std::max(1, tile / pe);
    const int chunks = (folds + chunk - 1) / chunk;
    const bool par = std::int64_t(in.rows) * in.cols > 32768 && chunks > 1;
#pragma omp parallel for schedule(static) if (par)
    for (int k = 0; k < chunks; ++k) {
      const int f0 = k * chunk, r0 = f0 * pe, rows = std::min(in.rows, (f0 + chunk) * pe) - r0;
      mv.w8a8(packed.data(), f0, x, L.int8.scale.data() + r0, xs[0], y + r0, acc ? acc + r0 : nullptr, rows,
              in.cols, bias ? bias + r0 : nullptr);
    }
  } else {
    // Prefill blocks and int4: the tiled kernel.
    const int row_tiles = (in.rows + tile - 1) / tile;
    const bool parallel = std::int64_t(in.rows) * in.cols > 32768 && row_tiles > 1;
#pragma omp parallel for schedule(static) if (parallel)
    for (int rt = 0; rt < row_tiles; ++rt) {
      const int r0 = rt * tile, rows = std::min(tile, in.rows - r0);
      if (lp.weight == quant::WeightFormat::int8) {
        mk.w8a8(L.int8.q.data() + std::size_t(r0) * in.cols, L.int8.scale.data() + r0, x, xs, y + r0,
                acc ? acc + r0 : nullptr, in.tokens, rows, in.cols, y_stride, bias ? bias + r0 : nullptr);
      } else {
        const auto& m = L.int4;
        mk.w4a8(m.packed.data() + std::size_t(r0) * std::size_t(m.row_bytes()),
                m.scale.data() + std::size_t(r0) * std::size_t(m.groups()), m.group, x, xs, y + r0, in.tokens, rows,
                in.cols, y_stride, bias ? bias + r0 : nullptr);
      }
    }
  }
  if (partial_sums) {
    const float* x_scale = scales[int(in.in)].data();
    const std::size_t n = std::size_t(in.tokens) * std::size_t(y_stride);
    if (lp.weight == quant::WeightFormat::int8) {
      // int32 sums are exact in any order; then the matrix unit's own dequantization.
      link->allreduce_sum(acc, n);
      for (int t = 0; t < in.tokens; ++t)
        for (int r = 0; r < in.rows; ++r)
          y[std::size_t(t) * y_stride + r] =
              (static_cast<float>(acc[std::size_t(t) * y_stride + r]) * L.int8.scale[std::size_t(r)]) * x_scale[t];
    } else {
      // int4: per-card fp32 sums over its groups, added in card order, then * x_scale.
      link->allreduce_sum(y, n);
      for (int t = 0; t < in.tokens; ++t)
        for (int r = 0; r < in.rows; ++r) y[std::size_t(t) * y_stride + r] = y[std::size_t(t) * y_stride + r] * x_scale[t];
    }
  }
  if (vocab_rows)
    for (int t = 0; t < in.tokens; ++t)
      link->allgather(logits_part.data() + std::size_t(t) * in.rows, b(arch::Buf::logits, t), share.vocab_counts);
}

}  // namespace engine
