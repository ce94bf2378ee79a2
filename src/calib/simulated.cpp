#include "calib/simulated.hpp"

#include <cmath>
#include <stdexcept>

#include "model/gguf.hpp"

namespace calib {

using quant::ActFormat;
using quant::WeightFormat;

SimulatedTransformer::SimulatedTransformer(const model::Model& base, const quant::Plan& plan,
                                           const std::vector<quant::QuantLinear>& linears, FloatProducts products,
                                           DequantizedWeights dequantized)
    : engine::Transformer(base), plan_(plan), linears_(linears), products_(products),
      float_weights_(std::move(dequantized)) {
  const auto& c = base.config;
  if (plan.layers.size() != static_cast<std::size_t>(c.n_layers) * 7 + 1 || linears.size() != plan.layers.size())
    throw std::invalid_argument("plan does not match the model");
  float_weights_.resize(plan.layers.size());
  int widest = c.dim;
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const auto& lp = plan.layers[i];
    const auto s = model::linear_shape(c, lp.which);
    widest = std::max(widest, s.cols);
    const bool integer_path = (lp.weight == WeightFormat::int8 || lp.weight == WeightFormat::int4) &&
                              (lp.act == ActFormat::int8_dynamic || lp.act == ActFormat::int8_static);
    if (lp.weight != WeightFormat::f32 && !integer_path && !float_weights_[i])
      float_weights_[i] = std::make_shared<const std::vector<float>>(linears[i].dequantized());
  }
  x_round_.resize(static_cast<std::size_t>(widest));
  qx_.resize(static_cast<std::size_t>(widest));
}

void SimulatedTransformer::linear(const engine::LinearCall& call) {
  const std::size_t i = quant::Plan::index(config().n_layers, call.layer, call.which);
  const auto& lp = plan_.layers[i];
  const std::span<const float> x(call.x, static_cast<std::size_t>(call.cols));
  if (lp.act == ActFormat::int8_dynamic || lp.act == ActFormat::int8_static) {
    const float s_x = lp.act == ActFormat::int8_dynamic ? quant::quantize_activation_dynamic(x, qx_)
                                                        : (quant::quantize_activation_static(x, lp.act_scale, qx_), lp.act_scale);
    if (lp.weight == WeightFormat::int8) return quant::linear_w8a8(linears_[i].int8, qx_.data(), s_x, call.y);
    if (lp.weight == WeightFormat::int4) return quant::linear_w4a8(linears_[i].int4, qx_.data(), s_x, call.y);
    // Float weights with int8 activations: fake-quantized input.
    for (int c = 0; c < call.cols; ++c) x_round_[c] = static_cast<float>(qx_[c]) * s_x;
  } else if (lp.act == ActFormat::f16) {
    model::gguf::round_to_fp16(call.x, x_round_.data(), static_cast<std::size_t>(call.cols));
  } else {
    std::copy(call.x, call.x + call.cols, x_round_.begin());
  }
  const float* w = lp.weight == WeightFormat::f32 ? weight_of(call.layer, call.which) : float_weights_[i]->data();
  engine::matvec(w, x_round_.data(), call.y, call.rows, call.cols);
}

void SimulatedTransformer::linear_rows(const engine::LinearRows& call) {
  const std::size_t i = quant::Plan::index(config().n_layers, call.layer, call.which);
  const auto& lp = plan_.layers[i];
  const int n = call.n, cols = call.cols;
  const auto elements = static_cast<std::size_t>(n) * cols;
  if (x_round_.size() < elements) x_round_.resize(elements);
  if (lp.act == ActFormat::int8_dynamic || lp.act == ActFormat::int8_static) {
    if (qx_.size() < elements) qx_.resize(elements);
    s_x_.resize(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      const std::span<const float> x(call.x + static_cast<std::size_t>(r) * call.ldx, static_cast<std::size_t>(cols));
      const std::span<std::int8_t> q(qx_.data() + static_cast<std::size_t>(r) * cols, static_cast<std::size_t>(cols));
      if (lp.act == ActFormat::int8_dynamic) {
        s_x_[r] = quant::quantize_activation_dynamic(x, q);
      } else {
        quant::quantize_activation_static(x, lp.act_scale, q);
        s_x_[r] = lp.act_scale;
      }
    }
    if (lp.weight == WeightFormat::int8)
      return quant::linear_w8a8_rows(linears_[i].int8, qx_.data(), s_x_.data(), n, call.y, call.ldy);
    if (lp.weight == WeightFormat::int4)
      return quant::linear_w4a8_rows(linears_[i].int4, qx_.data(), s_x_.data(), n, call.y, call.ldy);
    for (std::size_t e = 0; e < elements; ++e) x_round_[e] = static_cast<float>(qx_[e]) * s_x_[e / cols];
  } else {
    for (int r = 0; r < n; ++r) {
      const float* x = call.x + static_cast<std::size_t>(r) * call.ldx;
      float* out = x_round_.data() + static_cast<std::size_t>(r) * cols;
      if (lp.act == ActFormat::f16)
        model::gguf::round_to_fp16(x, out, static_cast<std::size_t>(cols));
      else
        std::copy(x, x + cols, out);
    }
  }
  const float* w = lp.weight == WeightFormat::f32 ? weight_of(call.layer, call.which) : float_weights_[i]->data();
  if (products_ == FloatProducts::gemm) {
    if (lp.weight == WeightFormat::f32 && lp.act == ActFormat::f32) return engine::Transformer::linear_rows(call);
    return engine::matmul_rows(x_round_.data(), cols, n, w, call.rows, cols, call.y, call.ldy);
  }
  engine::matvec_rows(x_round_.data(), cols, n, w, call.rows, cols, call.y, call.ldy);
}

void SimulatedTransformer::on_kv_stored(int, int, float* k, float* v) {
  if (!plan_.kv8) return;
  const int hs = config().head_dim();
  for (int h = 0; h < config().n_kv_heads; ++h) {
    quant::fake_quantize_int8({k + h * hs, static_cast<std::size_t>(hs)});
    quant::fake_quantize_int8({v + h * hs, static_cast<std::size_t>(hs)});
  }
}

HessianTransformer::HessianTransformer(const model::Model& base, const quant::Plan& plan,
                                       const std::vector<quant::QuantLinear>& linears, int layer)
    : SimulatedTransformer(base, plan, linears), layer_(layer), h_(quant::Hessians::empty(base.config)) {
  const auto& c = base.config;
  using model::Linear;
  for (int l = 0; l < c.n_layers; ++l) {
    if (layer != kAllLayers && layer != l) continue;
    for (Linear which : {Linear::wq, Linear::wo, Linear::w1, Linear::w2}) {
      const auto n = static_cast<std::size_t>(model::linear_shape(c, which).cols);
      h_.of(l, which).assign(n * n, 0.0);
    }
  }
  if (layer == kAllLayers || layer == -1) h_.final_in.assign(static_cast<std::size_t>(c.dim) * c.dim, 0.0);
}

void HessianTransformer::add(int layer, model::Linear which, const float* x, int cols) {
  using model::Linear;
  // One record per input site, as StatsTransformer; the classifier runs once per token.
  if (which == Linear::wk || which == Linear::wv || which == Linear::w3 || (layer_ != kAllLayers && layer_ != layer)) return;
  auto& h = h_.of(layer, which);
  const auto n = static_cast<std::size_t>(cols);
  for (std::size_t i = 0; i < n; ++i) {
    const double xi = x[i];
    double* row = h.data() + i * n;
    for (std::size_t j = i; j < n; ++j) row[j] += xi * static_cast<double>(x[j]);
  }
}

void HessianTransformer::linear(const engine::LinearCall& call) {
  add(call.layer, call.which, call.x, call.cols);
  if (call.which == model::Linear::cls) ++h_.tokens;
  SimulatedTransformer::linear(call);
}

// Rows in order: the sums take the tokens in the per-token pass's order.
void HessianTransformer::linear_rows(const engine::LinearRows& call) {
  for (int r = 0; r < call.n; ++r) add(call.layer, call.which, call.x + static_cast<std::size_t>(r) * call.ldx, call.cols);
  if (call.which == model::Linear::cls) h_.tokens += static_cast<std::size_t>(call.n);
  SimulatedTransformer::linear_rows(call);
}

quant::Hessians HessianTransformer::hessians() const {
  quant::Hessians out = h_;
  auto mirror = [](std::vector<double>& h) {
    const auto n = static_cast<std::size_t>(std::llround(std::sqrt(static_cast<double>(h.size()))));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < i; ++j) h[i * n + j] = h[j * n + i];
  };
  for (auto& sites : out.block)
    for (auto& h : sites) mirror(h);
  mirror(out.final_in);
  return out;
}

StatsTransformer::StatsTransformer(const model::Model& m)
    : engine::Transformer(m), stats_(quant::ActStats::zeros(m.config)) {}

void StatsTransformer::record(int layer, model::Linear which, const float* x, int cols) {
  using model::Linear;
  // One record per input site: wq for the attention input, w1 for the ffn input.
  if (which == Linear::wk || which == Linear::wv || which == Linear::w3) return;
  auto& m = const_cast<std::vector<float>&>(stats_.channel_max(layer, which));
  for (int c = 0; c < cols; ++c) m[static_cast<std::size_t>(c)] = std::max(m[static_cast<std::size_t>(c)], std::fabs(x[c]));
}

void StatsTransformer::linear(const engine::LinearCall& call) {
  record(call.layer, call.which, call.x, call.cols);
  engine::Transformer::linear(call);
}

void StatsTransformer::linear_rows(const engine::LinearRows& call) {
  for (int r = 0; r < call.n; ++r) record(call.layer, call.which, call.x + static_cast<std::size_t>(r) * call.ldx, call.cols);
  engine::Transformer::linear_rows(call);
}

}  // namespace calib
