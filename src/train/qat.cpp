#include "train/qat.hpp"

#include <stdexcept>

#include "model/gguf.hpp"
#include "model/model.hpp"

namespace train {

namespace {

void round_trip(const std::vector<float>& w, const model::Config& c, const quant::Plan& plan, int layer,
                model::Linear which, std::vector<float>& out) {
  const auto& lp = plan.at(layer, which);
  const auto shape = model::linear_shape(c, which);
  if (lp.weight == quant::WeightFormat::f32) {
    out = w;
    return;
  }
  out = quant::quantize_linear(w, shape.rows, shape.cols, lp.weight, plan.group).dequantized();
}

}  // namespace

void fake_quantize_weights(const Params<float>& master, const model::Config& c, const quant::Plan& plan,
                           Params<float>& out) {
  using model::Linear;
  if (plan.layers.size() != static_cast<std::size_t>(c.n_layers) * 7 + 1 || master.layers.size() != static_cast<std::size_t>(c.n_layers))
    throw std::invalid_argument("plan does not match the model");
  out.token_embedding = master.token_embedding;
  out.final_norm = master.final_norm;
  out.layers.resize(master.layers.size());
  for (int l = 0; l < c.n_layers; ++l) {
    const auto& m = master.layers[static_cast<std::size_t>(l)];
    auto& o = out.layers[static_cast<std::size_t>(l)];
    o.attn_norm = m.attn_norm;
    o.ffn_norm = m.ffn_norm;
    round_trip(m.wq, c, plan, l, Linear::wq, o.wq);
    round_trip(m.wk, c, plan, l, Linear::wk, o.wk);
    round_trip(m.wv, c, plan, l, Linear::wv, o.wv);
    round_trip(m.wo, c, plan, l, Linear::wo, o.wo);
    round_trip(m.w1, c, plan, l, Linear::w1, o.w1);
    round_trip(m.w2, c, plan, l, Linear::w2, o.w2);
    round_trip(m.w3, c, plan, l, Linear::w3, o.w3);
  }
  round_trip(master.classifier.empty() ? master.token_embedding : master.classifier, c, plan, -1, Linear::cls,
             out.classifier);
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
