#include <stdexcept>

#include "model/gguf.hpp"
#include "quant/quant.hpp"

namespace quant {

std::vector<float> QuantLinear::dequantized() const {
  std::vector<float> out(static_cast<std::size_t>(rows) * cols);
  switch (format) {
    case WeightFormat::f32: out = f32; break;
    case WeightFormat::f16:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = model::gguf::fp16_to_float(f16[i]);
      break;
    case WeightFormat::int8: dequantize(int8, out); break;
    case WeightFormat::int4: dequantize(int4, out); break;
  }
  return out;
}

std::uint64_t QuantLinear::bytes() const {
  switch (format) {
    case WeightFormat::f32: return f32.size() * 4;
    case WeightFormat::f16: return f16.size() * 2;
    case WeightFormat::int8: return int8.q.size() + int8.scale.size() * 4;
    case WeightFormat::int4: return int4.packed.size() + int4.scale.size() * 2;
  }
  return 0;
}

const QuantLinear& QuantModel::linear(int layer, model::Linear which) const {
  return linears.at(Plan::index(config.n_layers, layer, which));
}

std::uint64_t QuantModel::linear_weight_bytes() const {
  std::uint64_t total = 0;
  for (const auto& l : linears) total += l.bytes();
  return total;
}

model::Model QuantModel::dequantized_model() const {
  model::Model m;
  m.config = config;
  m.config.shared_classifier = false;
  m.weights = model::allocate_weights(m.config);
  m.weights.token_embedding = token_embedding;
  m.weights.final_norm = final_norm;
  for (int l = 0; l < config.n_layers; ++l) {
    auto& lw = m.weights.layers[static_cast<std::size_t>(l)];
    lw.attn_norm = attn_norm[static_cast<std::size_t>(l)];
    lw.ffn_norm = ffn_norm[static_cast<std::size_t>(l)];
    if (config.qkv_bias) {
      lw.bq = bq[static_cast<std::size_t>(l)];
      lw.bk = bk[static_cast<std::size_t>(l)];
      lw.bv = bv[static_cast<std::size_t>(l)];
    }
    if (config.qk_norm) {
      lw.q_norm = q_norm[static_cast<std::size_t>(l)];
      lw.k_norm = k_norm[static_cast<std::size_t>(l)];
    }
    for (model::Linear which : model::kBlockLinears) lw.linear(which) = linear(l, which).dequantized();
  }
  m.weights.classifier = linear(-1, model::Linear::cls).dequantized();
  return m;
}

QuantLinear quantize_linear(std::span<const float> w, int rows, int cols, WeightFormat f, int group) {
  QuantLinear q;
  q.format = f;
  q.rows = rows;
  q.cols = cols;
  switch (f) {
    case WeightFormat::f32: q.f32.assign(w.begin(), w.end()); break;
    case WeightFormat::f16: q.f16 = to_f16(w); break;
    case WeightFormat::int8: q.int8 = quantize_int8(w, rows, cols); break;
    case WeightFormat::int4: q.int4 = quantize_int4(w, rows, cols, group); break;
  }
  return q;
}

QuantModel quantize_model(const model::Model& m, const Plan& plan) {
  const auto& c = m.config;
  if (plan.layers.size() != static_cast<std::size_t>(c.n_layers) * 7 + 1)
    throw std::invalid_argument("plan does not match the model's layer count");
  QuantModel qm;
  qm.config = c;
  qm.plan = plan;
  qm.token_embedding = m.weights.token_embedding;
  qm.final_norm = m.weights.final_norm;
  for (const auto& lw : m.weights.layers) {
    qm.attn_norm.push_back(lw.attn_norm);
    qm.ffn_norm.push_back(lw.ffn_norm);
    qm.bq.push_back(lw.bq);
    qm.bk.push_back(lw.bk);
    qm.bv.push_back(lw.bv);
    qm.q_norm.push_back(lw.q_norm);
    qm.k_norm.push_back(lw.k_norm);
  }
  for (const auto& lp : plan.layers) {
    const auto shape = model::linear_shape(c, lp.which);
    const auto& w = lp.which == model::Linear::cls ? m.weights.classifier_or_embedding()
                                                   : m.weights.layers[static_cast<std::size_t>(lp.layer)].linear(lp.which);
    qm.linears.push_back(quantize_linear(w, shape.rows, shape.cols, lp.weight, plan.group));
  }
  return qm;
}

}  // namespace quant
