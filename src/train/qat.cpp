#include "train/qat.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>

#include "model/gguf.hpp"
#include "model/model.hpp"

namespace train {

namespace {

// The plan entry's weights in p (master: the embedding when the classifier is shared).
const std::vector<float>& linear_of(const Params<float>& p, int layer, model::Linear which) {
  using model::Linear;
  if (which == Linear::cls) return p.classifier.empty() ? p.token_embedding : p.classifier;
  const auto& L = p.layers[static_cast<std::size_t>(layer)];
  switch (which) {
    case Linear::wq: return L.wq;
    case Linear::wk: return L.wk;
    case Linear::wv: return L.wv;
    case Linear::wo: return L.wo;
    case Linear::w1: return L.w1;
    case Linear::w2: return L.w2;
    case Linear::w3: return L.w3;
    default: break;
  }
  throw std::invalid_argument("not a linear layer of a Llama block");
}

std::vector<float>& linear_of(Params<float>& p, int layer, model::Linear which) {
  return const_cast<std::vector<float>&>(linear_of(static_cast<const Params<float>&>(p), layer, which));
}

void check_plan(const Params<float>& master, const model::Config& c, const quant::Plan& plan) {
  if (plan.layers.size() != static_cast<std::size_t>(c.n_layers) * 7 + 1 || master.layers.size() != static_cast<std::size_t>(c.n_layers))
    throw std::invalid_argument("plan does not match the model");
}

float scale_value(float log_scale) {
  return model::gguf::fp16_to_float(model::gguf::float_to_fp16(std::exp(log_scale)));
}

// Codes of w [rows][cols] under per-group scales (fp32 values of fp16 numbers).
quant::Int4Matrix int4_with_scales(std::span<const float> w, int rows, int cols, int group,
                                   const std::vector<std::uint16_t>& bits) {
  quant::Int4Matrix m;
  m.rows = rows, m.cols = cols, m.group = group;
  m.packed.assign(static_cast<std::size_t>(rows) * static_cast<std::size_t>(m.row_bytes()), 0x88);
  m.scale = bits;
  const int G = m.groups();
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < G; ++k) {
      const float s = model::gguf::fp16_to_float(bits[static_cast<std::size_t>(r) * G + k]);
      for (int col = k * group; col < std::min(cols, (k + 1) * group); ++col)
        m.set_code(r, col, quant::quantize_value(w[static_cast<std::size_t>(r) * cols + col], s, quant::kInt4Max));
    }
  return m;
}

void round_trip(const std::vector<float>& w, const model::Config& c, const quant::Plan& plan, std::size_t i,
                const GroupScales* scales, std::vector<float>& out) {
  const auto& lp = plan.layers[i];
  const auto shape = model::linear_shape(c, lp.which);
  if (lp.weight == quant::WeightFormat::f32) {
    out = w;
    return;
  }
  if (scales && lp.weight == quant::WeightFormat::int4) {
    out.resize(w.size());
    quant::dequantize(int4_with_scales(w, shape.rows, shape.cols, plan.group, scales->fp16_bits(i)), out);
    return;
  }
  out = quant::quantize_linear(w, shape.rows, shape.cols, lp.weight, plan.group).dequantized();
}

}  // namespace

GroupScales GroupScales::round_to_nearest(const Params<float>& master, const model::Config& c, const quant::Plan& plan) {
  check_plan(master, c, plan);
  std::vector<quant::QuantLinear> linears(plan.layers.size());
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const auto& lp = plan.layers[i];
    if (lp.weight != quant::WeightFormat::int4) continue;
    const auto shape = model::linear_shape(c, lp.which);
    linears[i] = quant::quantize_linear(linear_of(master, lp.layer, lp.which), shape.rows, shape.cols, lp.weight, plan.group);
  }
  return of(plan, linears);
}

GroupScales GroupScales::of(const quant::Plan& plan, const std::vector<quant::QuantLinear>& linears) {
  if (linears.size() != plan.layers.size()) throw std::invalid_argument("linears do not match the plan");
  GroupScales s;
  s.log_scale.resize(plan.layers.size());
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    if (plan.layers[i].weight != quant::WeightFormat::int4) continue;
    if (linears[i].format != quant::WeightFormat::int4) throw std::invalid_argument("an int4 layer of the plan is not int4");
    for (const std::uint16_t b : linears[i].int4.scale)
      s.log_scale[i].push_back(std::log(model::gguf::fp16_to_float(b)));  // -inf for a zero scale
  }
  return s;
}

std::vector<std::uint16_t> GroupScales::fp16_bits(std::size_t i) const {
  std::vector<std::uint16_t> bits;
  bits.reserve(log_scale[i].size());
  for (const float t : log_scale[i]) bits.push_back(model::gguf::float_to_fp16(std::exp(t)));
  return bits;
}

ScaleAdam::ScaleAdam(const GroupScales& s, double beta1, double beta2) : m_(s), v_(s), beta1_(beta1), beta2_(beta2) {
  for (auto* g : {&m_, &v_})
    for (auto& t : g->log_scale) std::fill(t.begin(), t.end(), 0.0f);
}

void ScaleAdam::step(GroupScales& s, const GroupScales& grad, double lr) {
  ++t_;
  const double bc1 = 1.0 - std::pow(beta1_, t_), bc2 = 1.0 - std::pow(beta2_, t_);
  for (std::size_t i = 0; i < s.log_scale.size(); ++i)
    for (std::size_t j = 0; j < s.log_scale[i].size(); ++j) {
      float& t = s.log_scale[i][j];
      if (std::isinf(t)) continue;  // a zero scale
      const double g = grad.log_scale[i][j];
      const double m = m_.log_scale[i][j] = static_cast<float>(beta1_ * m_.log_scale[i][j] + (1 - beta1_) * g);
      const double v = v_.log_scale[i][j] = static_cast<float>(beta2_ * v_.log_scale[i][j] + (1 - beta2_) * g * g);
      t = static_cast<float>(t - lr * (m / bc1) / (std::sqrt(v / bc2) + 1e-8));
    }
}

void fake_quantize_weights(const Params<float>& master, const model::Config& c, const quant::Plan& plan,
                           Params<float>& out, const GroupScales* scales) {
  using model::Linear;
  check_plan(master, c, plan);
  out.token_embedding = master.token_embedding;
  out.final_norm = master.final_norm;
  out.layers.resize(master.layers.size());
  for (int l = 0; l < c.n_layers; ++l) {
    out.layers[static_cast<std::size_t>(l)].attn_norm = master.layers[static_cast<std::size_t>(l)].attn_norm;
    out.layers[static_cast<std::size_t>(l)].ffn_norm = master.layers[static_cast<std::size_t>(l)].ffn_norm;
    out.layers[static_cast<std::size_t>(l)].bq = master.layers[static_cast<std::size_t>(l)].bq;
    out.layers[static_cast<std::size_t>(l)].bk = master.layers[static_cast<std::size_t>(l)].bk;
    out.layers[static_cast<std::size_t>(l)].bv = master.layers[static_cast<std::size_t>(l)].bv;
    out.layers[static_cast<std::size_t>(l)].q_norm = master.layers[static_cast<std::size_t>(l)].q_norm;
    out.layers[static_cast<std::size_t>(l)].k_norm = master.layers[static_cast<std::size_t>(l)].k_norm;
  }
  out.classifier.clear();
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const auto& lp = plan.layers[i];
    std::vector<float>& dst = lp.which == Linear::cls ? out.classifier : linear_of(out, lp.layer, lp.which);
    round_trip(linear_of(master, lp.layer, lp.which), c, plan, i, scales, dst);
  }
}

void scale_gradient(const Params<float>& master, const model::Config& c, const quant::Plan& plan,
                    const GroupScales& scales, Params<float>& fake_grad, GroupScales& scale_grad) {
  check_plan(master, c, plan);
  scale_grad.log_scale.resize(plan.layers.size());
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const auto& lp = plan.layers[i];
    scale_grad.log_scale[i].assign(scales.log_scale[i].size(), 0.0f);
    if (lp.weight != quant::WeightFormat::int4) continue;
    const auto shape = model::linear_shape(c, lp.which);
    const std::vector<float>& w = linear_of(master, lp.layer, lp.which);
    std::vector<float>& g = lp.which == model::Linear::cls ? fake_grad.classifier : linear_of(fake_grad, lp.layer, lp.which);
    const int G = (shape.cols + plan.group - 1) / plan.group;
    for (int r = 0; r < shape.rows; ++r)
      for (int k = 0; k < G; ++k) {
        const std::size_t gi = static_cast<std::size_t>(r) * G + k;
        const float s = scale_value(scales.log_scale[i][gi]);
        if (s == 0.0f) continue;
        const float inv = 1.0f / s;
        double ds = 0;
        for (int col = k * plan.group; col < std::min(shape.cols, (k + 1) * plan.group); ++col) {
          const std::size_t at = static_cast<std::size_t>(r) * shape.cols + col;
          const float v = w[at] * inv;
          const float q = std::nearbyint(v);
          if (std::fabs(q) > static_cast<float>(quant::kInt4Max)) {
            ds += static_cast<double>(g[at]) * (q > 0 ? quant::kInt4Max : -quant::kInt4Max);
            g[at] = 0.0f;
          } else {
            ds += static_cast<double>(g[at]) * (static_cast<double>(q) - static_cast<double>(v));
          }
        }
        scale_grad.log_scale[i][gi] = static_cast<float>(ds * s);  // d/d log s = s d/ds
      }
  }
}

quant::QuantModel export_quantized(const model::Model& m, const quant::Plan& plan, const GroupScales& scales) {
  quant::QuantModel qm = quant::quantize_model(m, plan);
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const auto& lp = plan.layers[i];
    if (lp.weight != quant::WeightFormat::int4) continue;
    const auto shape = model::linear_shape(m.config, lp.which);
    const auto& w = lp.which == model::Linear::cls ? m.weights.classifier_or_embedding()
                                                   : m.weights.layers[static_cast<std::size_t>(lp.layer)].linear(lp.which);
    qm.linears[i].int4 = int4_with_scales(w, shape.rows, shape.cols, plan.group, scales.fp16_bits(i));
  }
  return qm;
}

void fold_gradient(const Params<float>& fake_grad, Params<float>& master_grad) {
  const bool shared = master_grad.classifier.empty();
  master_grad.token_embedding = fake_grad.token_embedding;
  master_grad.final_norm = fake_grad.final_norm;
  master_grad.layers = fake_grad.layers;
  if (!shared) {
    master_grad.classifier = fake_grad.classifier;
    return;
  }
  for (std::size_t i = 0; i < master_grad.token_embedding.size(); ++i)
    master_grad.token_embedding[i] += fake_grad.classifier[i];
}

std::function<void(float*, int, int)> activation_rounding(quant::ActFormat f) {
  switch (f) {
    case quant::ActFormat::f32: return {};
    case quant::ActFormat::f16:
      return [](float* x, int rows, int cols) {
        const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
        for (std::size_t i = 0; i < n; ++i) x[i] = model::gguf::fp16_to_float(model::gguf::float_to_fp16(x[i]));
      };
    case quant::ActFormat::int8_dynamic:
      return [](float* x, int rows, int cols) {
        std::vector<std::int8_t> q(static_cast<std::size_t>(cols));
        for (int r = 0; r < rows; ++r) {
          float* row = x + static_cast<std::size_t>(r) * static_cast<std::size_t>(cols);
          const float s = quant::quantize_activation_dynamic({row, static_cast<std::size_t>(cols)}, q);
          for (int j = 0; j < cols; ++j) row[j] = static_cast<float>(q[static_cast<std::size_t>(j)]) * s;
        }
      };
    case quant::ActFormat::int8_static: break;
  }
  throw std::invalid_argument("quantization-aware training rounds dynamic int8 or fp16 activations, not static int8");
}

}  // namespace train
