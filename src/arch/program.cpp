#include "arch/program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace arch {

const char* to_string(Stage s) { return s == Stage::prefill ? "prefill" : "decode"; }

const char* to_string(Op op) {
#define FPGALLM_ISA_OP_NAME(name) #name,
  static const char* const names[] = {FPGALLM_ISA_OPS(FPGALLM_ISA_OP_NAME)};
#undef FPGALLM_ISA_OP_NAME
  return int(op) >= 0 && int(op) < fpgallm_isa::op_count ? names[int(op)] : "?";
}

const char* to_string(Buf b) {
#define FPGALLM_ISA_BUF_NAME(name) #name,
  static const char* const names[] = {FPGALLM_ISA_BUFS(FPGALLM_ISA_BUF_NAME)};
#undef FPGALLM_ISA_BUF_NAME
  return int(b) >= 0 && int(b) < fpgallm_isa::buf_count ? names[int(b)] : "?";
}

const char* to_string(MemGroup g) {
  switch (g) {
    case MemGroup::none: return "none";
    case MemGroup::weights: return "weights";
    case MemGroup::kv: return "kv";
    case MemGroup::activations: return "activations";
    case MemGroup::host: return "host";
  }
  return "?";
}

std::int64_t Instruction::macs() const {
  if (op == Op::matmul) return std::int64_t(tokens) * rows * cols;
  if (op == Op::attention) {
    // q·k and p·v for each head over the keys each token sees (causal: pos+1 .. pos+tokens).
    std::int64_t keys = 0;
    for (int t = 0; t < tokens; ++t) keys += context - tokens + 1 + t;
    return 2 * keys * heads * head_dim;
  }
  return 0;
}

std::int64_t Instruction::vector_elements() const {
  switch (op) {
    case Op::matmul:
    case Op::kv_store:
    case Op::embed: return 0;
    case Op::attention: {
      std::int64_t keys = 0;
      for (int t = 0; t < tokens; ++t) keys += context - tokens + 1 + t;
      return keys * heads;  // one exp per score
    }
    default: return std::int64_t(tokens) * std::max(rows, 1) * cols;
  }
}

std::int64_t Program::total_weight_bytes() const {
  std::int64_t s = 0;
  for (const auto& i : instructions) s += i.weight_bytes;
  return s;
}

std::int64_t Program::total_macs() const {
  std::int64_t s = 0;
  for (const auto& i : instructions) s += i.macs();
  return s;
}

namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

ProgramFields program_fields(const Design& d) {
  return {d.matrix_unit.weight_bits, d.kv_bits,         d.tiling.tile_rows,   d.tiling.tile_cols,
          d.tiling.prefill_block,    d.fuse_norm_matmul, d.fuse_attention};
}

namespace {

// build_program on the fields it reads, so that program_fields is all it reads.
Program build(const model::Config& c, const ProgramFields& d, Stage stage, int pos, int tokens,
              const PrecisionFn& precision) {
  if (!c.invalid_reason().empty()) throw std::invalid_argument("model config: " + c.invalid_reason());
  if (c.moe()) throw std::invalid_argument("the overlay's instruction list has no mixture of experts (planning only)");
  if (tokens < 1) throw std::invalid_argument("a program runs at least one token");
  if (stage == Stage::decode && tokens != 1) throw std::invalid_argument("a decode step runs one token");
  if (stage == Stage::prefill && tokens > d.prefill_block)
    throw std::invalid_argument(fmt::format("prefill of {} tokens exceeds tiling.prefill_block ({})", tokens,
                                            d.prefill_block));
  if (pos < 0 || pos + tokens > c.seq_len)
    throw std::invalid_argument(fmt::format("positions {}..{} past the model's context ({})", pos, pos + tokens - 1,
                                            c.seq_len));

  Program p;
  p.stage = stage;
  p.pos = pos;
  p.tokens = tokens;
  const int hd = c.head_dim(), q_dim = c.n_heads * hd, kv_dim = c.kv_dim();
  const std::int64_t kv_elem_bytes = d.kv_bits / 8;
  const bool rms = c.norm() == model::Norm::rms;

  auto base = [&](Op op, int layer, std::string name) {
    Instruction i;
    i.op = op;
    i.layer = layer;
    i.name = std::move(name);
    i.tokens = tokens;
    i.pos = pos;
    return i;
  };
  auto vec = [&](Op op, int layer, std::string name, int cols, Buf in, Buf out) {
    Instruction i = base(op, layer, std::move(name));
    i.rows = 1;
    i.cols = cols;
    i.in = in;
    i.out = out;
    return i;
  };
  auto norm = [&](int layer, std::string name, Buf in, Buf out) {
    Instruction i = vec(Op::norm, layer, std::move(name), c.dim, in, out);
    i.mem = MemGroup::weights;  // the gain vector
    i.weight_bytes = std::int64_t(c.dim) * 4 * (rms ? 1 : 2);
    i.fused = d.fuse_norm_matmul;
    p.instructions.push_back(i);
  };
  auto quantize = [&](int layer, std::string name, int cols, Buf buf) {
    Instruction i = vec(Op::quantize, layer, std::move(name), cols, buf, buf);
    i.fused = true;
    p.instructions.push_back(i);
  };
  auto matmul = [&](int layer, model::Linear which, Buf in, Buf out) {
    const auto shape = model::linear_shape(c, which);
    Instruction i = base(Op::matmul, layer, model::linear_name(layer, which));
    i.linear = which;
    i.rows = shape.rows;
    i.cols = shape.cols;
    i.in = in;
    i.out = out;
    i.mem = MemGroup::weights;
    LinearPrecision lp{d.weight_bits, d.weight_bits == 4 ? 32 : 0};
    if (precision) lp = precision(layer, which);
    i.weight_bits = lp.weight_bits;
    i.group = lp.group;
    i.row_tiles = ceil_div(shape.rows, d.tile_rows);
    i.col_tiles = ceil_div(shape.cols, d.tile_cols);
    const std::int64_t scales = lp.group > 0 ? std::int64_t(shape.rows) * ceil_div(shape.cols, lp.group) : shape.rows;
    i.bias = c.qkv_bias && (which == model::Linear::wq || which == model::Linear::wk || which == model::Linear::wv);
    // Scales: fp32 per row (int8), fp16 per group (int4, as quant::Int4Matrix and the weight
    // channels of the emitted project hold them).
    i.weight_bytes = std::int64_t(shape.rows) * shape.cols * lp.weight_bits / 8 + scales * (lp.group > 0 ? 2 : 4) +
                     (i.bias ? shape.rows * 4 : 0);
    if (which == model::Linear::cls) {
      i.host_bytes = std::int64_t(shape.rows) * 4;  // the last token's logits back to the host (what it samples from)
    }
    p.instructions.push_back(i);
  };

  {
    Instruction e = vec(Op::embed, -1, "token_embd", c.dim, Buf::token, Buf::x);
    e.mem = MemGroup::weights;
    e.weight_bytes = std::int64_t(tokens) * c.dim * d.weight_bits / 8 + tokens * 4;
    e.host_bytes = std::int64_t(tokens) * 4;
    p.instructions.push_back(e);
  }

  for (int l = 0; l < c.n_layers; ++l) {
    const std::string blk = fmt::format("blk.{}.", l);
    norm(l, blk + "attn_norm", Buf::x, Buf::xb);
    quantize(l, blk + "attn_norm.q", c.dim, Buf::xb);
    matmul(l, model::Linear::wq, Buf::xb, Buf::q);
    matmul(l, model::Linear::wk, Buf::xb, Buf::k);
    matmul(l, model::Linear::wv, Buf::xb, Buf::v);
    // Every q head and every k head, in place in q and k (head_norm, rope).
    auto per_head = [&](Op op, const std::string& name) {
      Instruction h = base(op, l, name);
      h.rows = c.n_heads + c.n_kv_heads;
      h.cols = hd;
      h.heads = c.n_heads;
      h.kv_heads = c.n_kv_heads;
      h.head_dim = hd;
      h.in = Buf::q;
      h.in2 = Buf::k;
      h.out = Buf::q;
      return h;
    };
    if (c.qk_norm) {
      Instruction h = per_head(Op::head_norm, blk + "qk_norm");
      h.mem = MemGroup::weights;  // the two gain vectors
      h.weight_bytes = 2 * std::int64_t(hd) * 4;
      p.instructions.push_back(h);
    }
    if (c.uses_rope()) p.instructions.push_back(per_head(Op::rope, blk + "rope"));
    {
      Instruction s = base(Op::kv_store, l, blk + "kv_store");
      s.rows = 2;
      s.cols = kv_dim;
      s.kv_heads = c.n_kv_heads;
      s.head_dim = hd;
      s.in = Buf::k;
      s.in2 = Buf::v;
      s.out = Buf::kv_cache;
      s.mem = MemGroup::kv;
      s.kv_write_bytes = 2 * std::int64_t(tokens) * kv_dim * kv_elem_bytes;
      p.instructions.push_back(s);
    }
    {
      Instruction a = base(Op::attention, l, blk + "attention");
      a.heads = c.n_heads;
      a.kv_heads = c.n_kv_heads;
      a.head_dim = hd;
      a.rows = c.n_heads;
      a.cols = hd;
      a.context = pos + tokens;
      a.in = Buf::q;
      a.in2 = Buf::kv_cache;
      a.out = Buf::att;
      a.mem = MemGroup::kv;
      // Each key/value row is read once per step: the tokens of a prefill block share it.
      a.kv_read_bytes = 2 * std::int64_t(a.context) * kv_dim * kv_elem_bytes;
      a.fused = d.fuse_attention;
      p.instructions.push_back(a);
    }
    quantize(l, blk + "attn_out.q", q_dim, Buf::att);
    matmul(l, model::Linear::wo, Buf::att, Buf::xb2);
    p.instructions.push_back(vec(Op::residual_add, l, blk + "attn_residual", c.dim, Buf::xb2, Buf::x));
    norm(l, blk + "ffn_norm", Buf::x, Buf::xb);
    quantize(l, blk + "ffn_norm.q", c.dim, Buf::xb);
    matmul(l, model::Linear::w1, Buf::xb, Buf::hb);
    if (c.gated_ffn()) {
      matmul(l, model::Linear::w3, Buf::xb, Buf::hb2);
      Instruction s = vec(Op::swiglu, l, blk + "swiglu", c.hidden_dim, Buf::hb2, Buf::hb);
      p.instructions.push_back(s);
    } else {
      p.instructions.push_back(vec(Op::gelu, l, blk + "gelu", c.hidden_dim, Buf::hb, Buf::hb));
    }
    quantize(l, blk + "ffn_act.q", c.hidden_dim, Buf::hb);
    matmul(l, model::Linear::w2, Buf::hb, Buf::xb2);
    p.instructions.push_back(vec(Op::residual_add, l, blk + "ffn_residual", c.dim, Buf::xb2, Buf::x));
  }
  norm(-1, "output_norm", Buf::x, Buf::x);
  quantize(-1, "output_norm.q", c.dim, Buf::x);
  matmul(-1, model::Linear::cls, Buf::x, Buf::logits);
  // A quantize takes its scale as the next matmul (its consumer) is planned.
  if (precision)
    for (std::size_t k = 0; k < p.instructions.size(); ++k) {
      if (p.instructions[k].op != Op::quantize) continue;
      for (std::size_t m = k + 1; m < p.instructions.size(); ++m)
        if (p.instructions[m].op == Op::matmul) {
          p.instructions[k].static_scale = precision(p.instructions[m].layer, p.instructions[m].linear).static_act;
          break;
        }
    }
  return p;
}

}  // namespace

Program build_program(const model::Config& c, const Design& d, Stage stage, int pos, int tokens,
                      const PrecisionFn& precision) {
  return build(c, program_fields(d), stage, pos, tokens, precision);
}

void to_json(nlohmann::json& j, const Instruction& i) {
  j = nlohmann::json{{"op", to_string(i.op)}, {"layer", i.layer}, {"name", i.name}, {"tokens", i.tokens},
                     {"pos", i.pos},         {"rows", i.rows},   {"cols", i.cols}, {"in", to_string(i.in)},
                     {"out", to_string(i.out)}, {"mem", to_string(i.mem)}, {"fused", i.fused}};
  if (i.in2 != Buf::none) j["in2"] = to_string(i.in2);
  if (i.op == Op::matmul) {
    j["linear"] = model::to_string(i.linear);
    j["weight_bits"] = i.weight_bits;
    j["group"] = i.group;
    j["row_tiles"] = i.row_tiles;
    j["col_tiles"] = i.col_tiles;
    if (i.bias) j["bias"] = true;
  }
  if (i.heads) {
    j["heads"] = i.heads;
    j["kv_heads"] = i.kv_heads;
    j["head_dim"] = i.head_dim;
  }
  if (i.op == Op::attention) j["context"] = i.context;
  if (i.static_scale) j["static_scale"] = true;
  if (i.weight_bytes) j["weight_bytes"] = i.weight_bytes;
  if (i.kv_read_bytes) j["kv_read_bytes"] = i.kv_read_bytes;
  if (i.kv_write_bytes) j["kv_write_bytes"] = i.kv_write_bytes;
  if (i.host_bytes) j["host_bytes"] = i.host_bytes;
}

void to_json(nlohmann::json& j, const Program& p) {
  j = nlohmann::json{{"stage", to_string(p.stage)},
                     {"pos", p.pos},
                     {"tokens", p.tokens},
                     {"total_weight_bytes", p.total_weight_bytes()},
                     {"total_macs", p.total_macs()},
                     {"instructions", p.instructions}};
}

}  // namespace arch
