#include "graph/workload.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include <fmt/format.h>

#include "model/model.hpp"
#include "util/error.hpp"

namespace graph {

const char* to_string(Phase p) {
  switch (p) {
    case Phase::prefill: return "prefill";
    case Phase::decode: return "decode";
    case Phase::train: return "train";
  }
  return "?";
}

const char* to_string(Pass p) {
  switch (p) {
    case Pass::forward: return "forward";
    case Pass::backward: return "backward";
    case Pass::optimizer: return "optimizer";
  }
  return "?";
}

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::embedding: return "embedding";
    case OpKind::norm: return "norm";
    case OpKind::matmul: return "matmul";
    case OpKind::rope: return "rope";
    case OpKind::attention_score: return "attention_score";
    case OpKind::softmax: return "softmax";
    case OpKind::attention_value: return "attention_value";
    case OpKind::activation: return "activation";
    case OpKind::residual: return "residual";
    case OpKind::classifier: return "classifier";
    case OpKind::loss: return "loss";
    case OpKind::optimizer: return "optimizer";
  }
  return "?";
}

const char* to_string(Group g) {
  switch (g) {
    case Group::embedding: return "embedding";
    case Group::attention: return "attention";
    case Group::feed_forward: return "feed_forward";
    case Group::norm: return "norm";
    case Group::residual: return "residual";
    case Group::classifier: return "classifier";
    case Group::optimizer: return "optimizer";
  }
  return "?";
}

Phase phase_from_string(const std::string& s) {
  if (s == "prefill") return Phase::prefill;
  if (s == "decode") return Phase::decode;
  if (s == "train") return Phase::train;
  throw std::invalid_argument("unknown phase '" + s + "' (prefill, decode, train)");
}

double Op::intensity() const { return bytes() > 0 ? flops / bytes() : 0; }
double Op::offchip_intensity() const {
  const double b = weight_bytes + kv_bytes;
  return b > 0 ? flops / b : 0;
}

int Precision::bits_for(const std::string& linear_name) const {
  auto it = layer_weight_bits.find(linear_name);
  return it == layer_weight_bits.end() ? weight_bits : it->second;
}

Precision parse_scheme(const std::string& scheme) {
  auto bad = [&](const std::string& why) -> fpgallm::InputError {
    return fpgallm::InputError("--scheme", "'" + scheme + "': " + why +
                                               " (fp32, fp16, bf16, int8, int4, w8a8, w8a16, w4a8, w4a16; "
                                               "optional -g<group>, -kv<8|16> and -static suffixes)");
  };
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    std::size_t dash = scheme.find('-', start);
    parts.push_back(scheme.substr(start, dash == std::string::npos ? std::string::npos : dash - start));
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  Precision p;
  const std::string& base = parts[0];
  auto set = [&](int w, int a, bool fl) {
    p.weight_bits = w;
    p.act_bits = a;
    p.kv_bits = fl ? a : (a > 8 ? 16 : 8);
    p.float_weights = fl;
  };
  if (base == "fp32")
    set(32, 32, true);
  else if (base == "fp16" || base == "bf16")
    set(16, 16, true);
  else if (base == "int8" || base == "w8a8")
    set(8, 8, false);
  else if (base == "w8a16")
    set(8, 16, false);
  else if (base == "int4" || base == "w4a8")
    set(4, 8, false);
  else if (base == "w4a16")
    set(4, 16, false);
  else
    throw bad("unknown scheme");
  auto number = [&](const std::string& s) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 6) throw bad("bad suffix");
    return std::stoi(s);
  };
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string& s = parts[i];
    if (s == "static") {
      if (p.float_weights || p.act_bits > 8) throw bad("static scales need 8-bit activations");
      p.static_act = true;
    } else if (s.rfind("kv", 0) == 0) {
      int kv = number(s.substr(2));
      if (kv != 4 && kv != 8 && kv != 16 && kv != 32) throw bad("KV bits must be 4, 8, 16 or 32");
      p.kv_bits = kv;
    } else if (s.rfind("g", 0) == 0) {
      if (p.float_weights) throw bad("a group size needs integer weights");
      int g = number(s.substr(1));
      if (g < 8 || g > 65536) throw bad("group size must be 8..65536");
      p.group_size = g;
    } else {
      throw bad("unknown suffix '" + s + "'");
    }
  }
  return p;
}

std::string to_string(const Precision& p) {
  std::string s;
  if (p.float_weights)
    s = p.weight_bits == 32 ? "fp32" : "fp16";
  else
    s = fmt::format("w{}a{}", p.weight_bits, p.act_bits);
  if (p.group_size) s += fmt::format("-g{}", p.group_size);
  if (p.static_act) s += "-static";
  if (p.kv_bits != (p.float_weights ? p.act_bits : (p.act_bits > 8 ? 16 : 8))) s += fmt::format("-kv{}", p.kv_bits);
  if (!p.layer_weight_bits.empty()) s += fmt::format(" (+{} per-layer widths)", p.layer_weight_bits.size());
  return s;
}

namespace {

// FLOPs per element of the elementwise operations (multiply, add, compare, exp and divide
// each counted as one; see docs/performance-model.md).
constexpr double kRmsNormFlops = 4;     // x*x accumulated (2), x*rsqrt (1), *gain (1)
constexpr double kLayerNormFlops = 7;   // mean (1), subtract (1), square-accumulate (2), scale (1), gain (1), bias (1)
constexpr double kRopeFlops = 3;        // per element: a pair takes 4 multiplies and 2 adds
constexpr double kSiluGateFlops = 5;    // x*sigmoid(x): negate, exp, add, divide; then *up
constexpr double kGeluFlops = 8;        // tanh form: x^3 (2), *c, +x, *k, tanh, +1, *0.5x
constexpr double kLossFlops = 5;        // softmax over the vocabulary plus the log-likelihood term
constexpr double kAdamWFlops = 12;      // m, v moments (7), bias-corrected step with sqrt, eps, decay (5)
constexpr double kAdamWBytesPerParam = 28;  // read fp32 w, g, m, v; write w, m, v
constexpr double kParamBytes = 4;       // norm gains/biases, biases of integer layers: fp32

bool has_bias(const model::Config& c, model::Linear l) {
  using model::Linear;
  if (l == Linear::cls) return false;
  return c.has_bias() || (c.qkv_bias && (l == Linear::wq || l == Linear::wk || l == Linear::wv));
}

struct Lowering {
  const model::Config& c;
  const Shape& s;
  const Precision& p;
  Workload& w;
  std::int64_t tok = 0;   // token rows through the blocks (batch x tokens per sequence)
  std::int64_t q_len = 0; // queries per sequence
  std::int64_t span = 0;  // keys each sequence attends (for decode: the context)
  bool train = false;
  bool kv_cache = false;  // K and V go to a cache (inference of causal models); else they are activations
  double params = 0;      // parameters touched, for the optimizer

  double act(double elements) const { return elements * p.act_bits / 8.0; }
  double kv(double elements) const { return elements * p.kv_bits / 8.0; }

  // Bytes of a weight matrix [rows][cols] at `bits`, with scales and bias.
  double matrix_bytes(std::int64_t rows, std::int64_t cols, int bits, bool bias) const {
    double b = double(rows) * double(cols) * bits / 8.0;
    if (!p.float_weights && bits < 16) {
      if (p.group_size > 0)
        b += double(rows) * std::ceil(double(cols) / p.group_size) * 2.0;  // fp16 scale per group
      else
        b += double(rows) * 4.0;  // fp32 scale per output channel
    }
    if (bias) b += double(rows) * (p.float_weights ? p.weight_bits / 8.0 : kParamBytes);
    return b;
  }

  Op& add(Op op) {
    w.ops.push_back(std::move(op));
    return w.ops.back();
  }

  // GPT-2 and BERT layers have biases, Qwen2's q/k/v projections too (added in the
  // requantization epilogue: one add per output); tied classifiers have none.
  void linear(int layer, model::Linear l, Group group, std::int64_t rows, bool writes_kv) {
    const bool bias = has_bias(c, l);
    const auto shape = model::linear_shape(c, l);
    const std::string name = model::linear_name(layer, l);
    Op op;
    op.name = name;
    op.kind = l == model::Linear::cls ? OpKind::classifier : OpKind::matmul;
    op.group = group;
    op.layer = l == model::Linear::cls ? -1 : layer;
    op.m = rows;
    op.n = shape.rows;
    op.k = shape.cols;
    op.weight_bits = p.bits_for(name);
    op.act_bits = p.act_bits;
    op.flops = 2.0 * op.m * op.n * op.k + (bias ? double(op.m) * op.n : 0);
    op.weight_bytes = matrix_bytes(op.n, op.k, op.weight_bits, bias);
    op.activation_bytes = act(double(op.m) * op.k);
    if (writes_kv && kv_cache)
      op.kv_bytes = kv(double(op.m) * op.n);
    else
      op.activation_bytes += act(double(op.m) * op.n);
    params += double(op.n) * op.k + (bias ? op.n : 0);
    add(op);
  }

  void elementwise(const std::string& name, OpKind kind, Group group, int layer, std::int64_t rows, std::int64_t cols,
                   double flops_per_element, double tensors_in, double param_bytes = 0) {
    Op op;
    op.name = name;
    op.kind = kind;
    op.group = group;
    op.layer = layer;
    op.m = rows;
    op.n = cols;
    op.k = 1;
    op.act_bits = p.act_bits;
    op.flops = flops_per_element * double(rows) * cols;
    op.activation_bytes = act((tensors_in + 1) * double(rows) * cols);
    op.weight_bytes = param_bytes;
    add(op);
  }

  void norm(const std::string& name, int layer, std::int64_t rows) {
    const bool layer_norm = c.norm() == model::Norm::layer;
    const int n_params = layer_norm ? 2 * c.dim : c.dim;
    params += n_params;
    elementwise(name, OpKind::norm, Group::norm, layer, rows, c.dim, layer_norm ? kLayerNormFlops : kRmsNormFlops, 1,
                n_params * kParamBytes);
  }

  // Scores one query attends: `span` for decode and non-causal, the causal triangle else.
  double scores_per_head() const {
    if (s.phase == Phase::decode || !c.causal()) return double(q_len) * span;
    return double(q_len) * (q_len + 1) / 2.0;
  }

  void attention(int layer) {
    const std::int64_t hd = c.head_dim();
    const std::int64_t heads = c.n_heads;
    const double seqs = s.batch;
    const double scores = seqs * heads * scores_per_head();
    const double keys_read = seqs * span * c.kv_dim();  // each K (and V) entry read once per sequence
    const std::string base = fmt::format("blk.{}.attn", layer);

    Op score;
    score.name = base + ".score";
    score.kind = OpKind::attention_score;
    score.group = Group::attention;
    score.layer = layer;
    score.m = q_len;
    score.n = span;
    score.k = hd;
    score.batch = s.batch * heads;
    score.weight_bits = kv_cache ? p.kv_bits : p.act_bits;
    score.act_bits = p.act_bits;
    score.flops = 2.0 * scores * hd;
    score.activation_bytes = act(double(tok) * heads * hd) + act(scores);
    if (kv_cache)
      score.kv_bytes = kv(keys_read);
    else
      score.activation_bytes += act(keys_read);
    add(score);

    elementwise(base + ".softmax", OpKind::softmax, Group::attention, layer, 1, 0, 0, 0);
    Op& sm = w.ops.back();
    sm.m = s.batch * heads * q_len;
    sm.n = span;
    sm.flops = kSoftmaxFlops * scores;
    sm.activation_bytes = act(2 * scores);

    Op value;
    value.name = base + ".value";
    value.kind = OpKind::attention_value;
    value.group = Group::attention;
    value.layer = layer;
    value.m = q_len;
    value.n = hd;
    value.k = span;
    value.batch = s.batch * heads;
    value.weight_bits = score.weight_bits;
    value.act_bits = p.act_bits;
    value.flops = 2.0 * scores * hd;
    value.activation_bytes = act(scores) + act(double(tok) * heads * hd);
    if (kv_cache)
      value.kv_bytes = kv(keys_read);
    else
      value.activation_bytes += act(keys_read);
    add(value);
  }

  void block(int layer) {
    using model::Linear;
    const std::string b = fmt::format("blk.{}", layer);
    const bool post_norm = c.arch == model::Arch::bert;  // BERT normalizes after the residual add
    if (!post_norm) norm(b + ".attn_norm", layer, tok);
    linear(layer, Linear::wq, Group::attention, tok, false);
    linear(layer, Linear::wk, Group::attention, tok, true);
    linear(layer, Linear::wv, Group::attention, tok, true);
    if (c.qk_norm) {  // per-head RMSNorm of q and k on the vector unit, one gain vector each
      const std::int64_t hd = c.head_dim();
      params += 2.0 * hd;
      elementwise(b + ".qk_norm", OpKind::norm, Group::norm, layer, tok, (c.n_heads + c.n_kv_heads) * hd, kRmsNormFlops, 1,
                  2.0 * hd * kParamBytes);
    }
    if (c.uses_rope())
      elementwise(b + ".rope", OpKind::rope, Group::attention, layer, tok, c.n_heads * c.head_dim() + c.kv_dim(),
                  kRopeFlops, 1);
    attention(layer);
    linear(layer, Linear::wo, Group::attention, tok, false);
    elementwise(b + ".attn_residual", OpKind::residual, Group::residual, layer, tok, c.dim, 1, 2);
    if (post_norm) norm(b + ".attn_norm", layer, tok);
    if (!post_norm) norm(b + ".ffn_norm", layer, tok);
    if (c.moe_layer(layer)) {
      experts(layer);
      elementwise(b + ".ffn_residual", OpKind::residual, Group::residual, layer, tok, c.dim, 1, 2);
      return;
    }
    linear(layer, Linear::w1, Group::feed_forward, tok, false);
    if (c.gated_ffn()) {
      linear(layer, Linear::w3, Group::feed_forward, tok, false);
      elementwise(b + ".ffn_act", OpKind::activation, Group::feed_forward, layer, tok, c.hidden_dim, kSiluGateFlops, 2);
    } else {
      elementwise(b + ".ffn_act", OpKind::activation, Group::feed_forward, layer, tok, c.hidden_dim, kGeluFlops, 1);
    }
    linear(layer, Linear::w2, Group::feed_forward, tok, false);
    elementwise(b + ".ffn_residual", OpKind::residual, Group::residual, layer, tok, c.dim, 1, 2);
    if (post_norm) norm(b + ".ffn_norm", layer, tok);
  }

  // One expert matrix product over `rows` token-expert rows: [rows][cols] x [cols][out],
  // reading `matrices` weight matrices of [out][cols].
  void expert_matmul(const std::string& name, int layer, double rows, std::int64_t out, std::int64_t cols,
                     double matrices) {
    Op op;
    op.name = name;
    op.kind = OpKind::matmul;
    op.group = Group::feed_forward;
    op.layer = layer;
    op.m = static_cast<std::int64_t>(std::llround(rows));
    op.n = out;
    op.k = cols;
    op.weight_bits = p.bits_for(name);
    op.act_bits = p.act_bits;
    op.flops = 2.0 * rows * out * cols;
    op.weight_bytes = matrices * matrix_bytes(out, cols, op.weight_bits, false);
    op.activation_bytes = act(rows * cols) + act(rows * out);
    add(op);
  }

  // A mixture-of-experts feed-forward: the router (a [n_experts][dim] matrix, softmax and
  // top-k over its scores), the active experts' SwiGLU on tok x n_experts_active rows, and
  // the shared experts on every token. Weights read: every expert some token routes to.
  void experts(int layer) {
    const std::string b = fmt::format("blk.{}", layer);
    const std::int64_t eh = c.expert_hidden_dim;
    const double rows = double(tok) * c.n_experts_active;
    const double touched = experts_touched(c.n_experts, c.n_experts_active, double(tok));
    params += double(c.n_experts) * c.dim + 3.0 * double(c.n_experts + c.n_shared_experts) * eh * c.dim;
    expert_matmul(b + ".router", layer, double(tok), c.n_experts, c.dim, 1);
    elementwise(b + ".router_topk", OpKind::softmax, Group::feed_forward, layer, tok, c.n_experts, kSoftmaxFlops, 1);
    expert_matmul(b + ".experts.gate", layer, rows, eh, c.dim, touched);
    expert_matmul(b + ".experts.up", layer, rows, eh, c.dim, touched);
    elementwise(b + ".experts.act", OpKind::activation, Group::feed_forward, layer,
                static_cast<std::int64_t>(std::llround(rows)), eh, kSiluGateFlops, 2);
    expert_matmul(b + ".experts.down", layer, rows, c.dim, eh, touched);
    // The weighted sum of the active experts' outputs (one multiply-add per element).
    elementwise(b + ".experts.combine", OpKind::residual, Group::feed_forward, layer, tok, c.dim,
                2.0 * c.n_experts_active, c.n_experts_active);
    if (c.n_shared_experts > 0) {
      const std::int64_t sh = eh * c.n_shared_experts;
      expert_matmul(b + ".shared.gate", layer, double(tok), sh, c.dim, 1);
      expert_matmul(b + ".shared.up", layer, double(tok), sh, c.dim, 1);
      elementwise(b + ".shared.act", OpKind::activation, Group::feed_forward, layer, tok, sh, kSiluGateFlops, 2);
      expert_matmul(b + ".shared.down", layer, double(tok), c.dim, sh, 1);
    }
  }

  int embedding_bits() const {
    if (p.float_weights) return p.weight_bits;
    return c.shared_classifier ? p.bits_for("cls") : std::max(8, p.weight_bits);
  }

  void embedding() {
    Op op;
    op.name = "embedding";
    op.kind = OpKind::embedding;
    op.group = Group::embedding;
    op.m = tok;
    op.n = c.dim;
    op.weight_bits = embedding_bits();
    op.act_bits = p.act_bits;
    op.weight_bytes = double(tok) * c.dim * op.weight_bits / 8.0;  // one row per token
    op.activation_bytes = act(double(tok) * c.dim);
    if (!c.uses_rope()) {  // learned positions (GPT-2, BERT; BERT's one token type row too)
      const double tables = c.arch == model::Arch::bert ? 2 : 1;
      op.weight_bytes += tables * double(tok) * c.dim * op.weight_bits / 8.0;
      op.flops = tables * double(tok) * c.dim;
      params += double(c.seq_len) * c.dim;
    }
    params += double(c.vocab_size) * c.dim;
    add(op);
    if (c.arch == model::Arch::bert) norm("embedding_norm", -1, tok);
  }

  void head() {
    std::int64_t rows = tok;  // encoders and training: every token
    if (!train && c.causal()) rows = s.batch;  // generation needs the last token's logits only
    if (c.arch != model::Arch::bert) norm("final_norm", -1, rows);
    const double params_before = params;
    linear(0, model::Linear::cls, Group::classifier, rows, false);
    if (c.shared_classifier) params = params_before;  // the embedding table, counted there
    if (train) {
      elementwise("loss", OpKind::loss, Group::classifier, -1, rows, c.vocab_size, kLossFlops, 0);
    }
  }

  void backward() {
    const std::size_t forward_ops = w.ops.size();
    for (std::size_t i = forward_ops; i-- > 0;) {
      const Op f = w.ops[i];
      if (f.kind == OpKind::loss) continue;  // the loss op already yields dlogits
      if (f.kind == OpKind::matmul || f.kind == OpKind::classifier) {
        Op dx = f;
        dx.name = f.name + ".dx";
        dx.pass = Pass::backward;
        dx.k = f.k;  // dX[M][K] = dY[M][N] W[N][K]
        dx.flops = 2.0 * f.m * f.n * f.k;
        dx.weight_bytes = double(f.n) * f.k * f.weight_bits / 8.0;
        dx.activation_bytes = act(double(f.m) * f.n) + act(double(f.m) * f.k);
        dx.kv_bytes = 0;
        add(dx);
        Op dw = f;
        dw.name = f.name + ".dw";
        dw.pass = Pass::backward;
        dw.flops = 2.0 * f.m * f.n * f.k;
        dw.weight_bytes = double(f.n) * f.k * p.act_bits / 8.0;  // gradient written at activation width
        dw.activation_bytes = act(double(f.m) * f.n) + act(double(f.m) * f.k);
        dw.kv_bytes = 0;
        add(dw);
      } else {
        Op b = f;
        b.name = f.name + ".bwd";
        b.pass = Pass::backward;
        b.flops = 2.0 * f.flops;  // attention: two products per forward product; elementwise: ~2x
        b.activation_bytes = 1.5 * f.activation_bytes + f.kv_bytes;
        b.kv_bytes = 0;
        if (f.kind == OpKind::embedding) {  // scatter-add of gradient rows
          b.flops = double(f.m) * f.n;
          b.weight_bytes = f.weight_bytes;
        }
        add(b);
      }
    }
  }

  void optimizer() {
    Op op;
    op.name = "adamw";
    op.kind = OpKind::optimizer;
    op.group = Group::optimizer;
    op.pass = Pass::optimizer;
    op.m = static_cast<std::int64_t>(params);
    op.n = 1;
    op.flops = kAdamWFlops * params;
    op.weight_bytes = kAdamWBytesPerParam * params;
    add(op);
  }

  void run() {
    switch (s.phase) {
      case Phase::decode:
        q_len = 1;
        span = s.context;
        break;
      case Phase::prefill:
        q_len = s.prompt;
        span = s.prompt;
        break;
      case Phase::train:
        q_len = s.seq;
        span = s.seq;
        train = true;
        break;
    }
    tok = std::int64_t(s.batch) * q_len;
    kv_cache = !train && c.causal();
    embedding();
    for (int l = 0; l < c.n_layers; ++l) block(l);
    head();
    if (train) {
      backward();
      optimizer();
    }
  }
};

constexpr int kMaxShape = 1 << 24;

void check_shape(const model::Config& c, const Shape& s) {
  auto check = [](int v, const char* flag) {
    if (v < 1 || v > kMaxShape)
      throw fpgallm::InputError(flag, fmt::format("{} is out of range (1..{})", v, kMaxShape));
  };
  check(s.batch, "--batch");
  if (s.phase == Phase::prefill) check(s.prompt, "--prompt");
  if (s.phase == Phase::decode) check(s.context, "--context");
  if (s.phase == Phase::train) check(s.seq, "--seq");
  if (s.phase == Phase::decode && !c.causal())
    throw fpgallm::InputError("--phase", c.name + " is an encoder (BERT): it has no decode phase; use prefill or train");
  if (auto why = c.invalid_reason(); !why.empty()) throw fpgallm::InputError(c.name, why);
}

}  // namespace

double experts_touched(int experts, int active, double tokens) {
  return experts * (1.0 - std::pow(1.0 - double(active) / experts, tokens));
}

Workload lower(const model::Config& config, const Shape& shape, const Precision& precision) {
  check_shape(config, shape);
  for (const auto& [name, bits] : precision.layer_weight_bits)
    if (bits < 1 || bits > 32) throw fpgallm::InputError(name, fmt::format("weight bits {} out of range", bits));
  Workload w;
  w.config = config;
  w.shape = shape;
  w.precision = precision;
  Lowering lowering{config, shape, precision, w};
  lowering.run();
  return w;
}

std::int64_t Workload::tokens() const {
  switch (shape.phase) {
    case Phase::decode: return shape.batch;
    case Phase::prefill: return std::int64_t(shape.batch) * shape.prompt;
    case Phase::train: return std::int64_t(shape.batch) * shape.seq;
  }
  return 0;
}

namespace {
void accumulate(Totals& t, const Op& op) {
  t.flops += op.flops;
  t.weight_bytes += op.weight_bytes;
  t.activation_bytes += op.activation_bytes;
  t.kv_bytes += op.kv_bytes;
}
}  // namespace

Totals Workload::totals() const {
  Totals t;
  for (const auto& op : ops) accumulate(t, op);
  return t;
}

Totals Workload::totals(Group g) const {
  Totals t;
  for (const auto& op : ops)
    if (op.group == g) accumulate(t, op);
  return t;
}

Totals Workload::totals(OpKind k) const {
  Totals t;
  for (const auto& op : ops)
    if (op.kind == k) accumulate(t, op);
  return t;
}

double Workload::model_weight_bytes() const {
  Shape one;
  one.phase = Phase::decode;
  one.batch = 1;
  one.context = 1;
  const model::Config& c = config;
  Workload tmp;
  tmp.config = c;
  Lowering l{c, one, precision, tmp};
  double bytes = 0;
  // Every matrix once, every norm once, the embedding table (and position tables).
  // A MoE block holds every expert (and the router), whichever ones a token uses.
  for (int layer = 0; layer < c.n_layers; ++layer) {
    for (auto lin : model::kBlockLinears) {
      if (!c.gated_ffn() && lin == model::Linear::w3) continue;
      const bool ffn = lin == model::Linear::w1 || lin == model::Linear::w2 || lin == model::Linear::w3;
      if (ffn && c.moe_layer(layer)) continue;
      const auto s = model::linear_shape(c, lin);
      bytes += l.matrix_bytes(s.rows, s.cols, precision.bits_for(model::linear_name(layer, lin)), has_bias(c, lin));
    }
    if (c.moe_layer(layer)) {
      const std::string b = fmt::format("blk.{}", layer);
      const std::int64_t eh = c.expert_hidden_dim;
      bytes += l.matrix_bytes(c.n_experts, c.dim, precision.bits_for(b + ".router"), false);
      const std::int64_t sh = eh * c.n_shared_experts;
      for (const char* m : {".experts.gate", ".experts.up"})
        bytes += double(c.n_experts) * l.matrix_bytes(eh, c.dim, precision.bits_for(b + m), false);
      bytes += double(c.n_experts) * l.matrix_bytes(c.dim, eh, precision.bits_for(b + ".experts.down"), false);
      if (sh > 0) {
        for (const char* m : {".shared.gate", ".shared.up"}) bytes += l.matrix_bytes(sh, c.dim, precision.bits_for(b + m), false);
        bytes += l.matrix_bytes(c.dim, sh, precision.bits_for(b + ".shared.down"), false);
      }
    }
  }
  const double norm_params = (c.norm() == model::Norm::layer ? 2.0 : 1.0) * c.dim;
  bytes += (2.0 * c.n_layers + 1) * norm_params * kParamBytes;
  if (c.qk_norm) bytes += 2.0 * c.n_layers * c.head_dim() * kParamBytes;
  const int emb_bits = l.embedding_bits();
  // A shared table is the classifier's matrix, stored with its scales as the classifier
  // operation reads it.
  bytes += c.shared_classifier ? l.matrix_bytes(c.vocab_size, c.dim, emb_bits, false)
                               : double(c.vocab_size) * c.dim * emb_bits / 8.0;
  if (!c.uses_rope()) bytes += double(c.seq_len) * c.dim * emb_bits / 8.0;
  if (!c.shared_classifier) {
    const auto s = model::linear_shape(c, model::Linear::cls);
    bytes += l.matrix_bytes(s.rows, s.cols, precision.bits_for("cls"), false);
  }
  return bytes;
}

double Workload::kv_cache_bytes(int positions) const {
  return double(shape.batch) * config.n_layers * 2.0 * positions * config.kv_dim() * precision.kv_bits / 8.0;
}

void to_json(nlohmann::json& j, const Op& op) {
  j = nlohmann::json{{"name", op.name},
                     {"kind", to_string(op.kind)},
                     {"group", to_string(op.group)},
                     {"pass", to_string(op.pass)},
                     {"layer", op.layer},
                     {"m", op.m},
                     {"n", op.n},
                     {"k", op.k},
                     {"batch", op.batch},
                     {"weight_bits", op.weight_bits},
                     {"act_bits", op.act_bits},
                     {"flops", op.flops},
                     {"weight_bytes", op.weight_bytes},
                     {"activation_bytes", op.activation_bytes},
                     {"kv_bytes", op.kv_bytes},
                     {"intensity", op.intensity()}};
}

void to_json(nlohmann::json& j, const Totals& t) {
  j = nlohmann::json{{"flops", t.flops},
                     {"weight_bytes", t.weight_bytes},
                     {"activation_bytes", t.activation_bytes},
                     {"kv_bytes", t.kv_bytes},
                     {"bytes", t.bytes()},
                     {"intensity", t.intensity()}};
}

void to_json(nlohmann::json& j, const Workload& w) {
  j = nlohmann::json::object();
  j["model"] = w.config.name;
  j["phase"] = to_string(w.shape.phase);
  j["batch"] = w.shape.batch;
  if (w.shape.phase == Phase::prefill) j["prompt"] = w.shape.prompt;
  if (w.shape.phase == Phase::decode) j["context"] = w.shape.context;
  if (w.shape.phase == Phase::train) j["seq"] = w.shape.seq;
  j["scheme"] = to_string(w.precision);
  j["tokens"] = w.tokens();
  j["ops"] = w.ops;
  j["total"] = w.totals();
}

}  // namespace graph
