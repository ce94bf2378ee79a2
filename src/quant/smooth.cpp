#include <algorithm>
#include <cmath>

#include "quant/quant.hpp"

namespace quant {

ActStats ActStats::zeros(const model::Config& c) {
  ActStats s;
  const auto L = static_cast<std::size_t>(c.n_layers);
  const auto dim = static_cast<std::size_t>(c.dim), hidden = static_cast<std::size_t>(c.hidden_dim);
  const auto q_dim = static_cast<std::size_t>(c.n_heads) * c.head_dim();
  s.attn_in.assign(L, std::vector<float>(dim, 0.0f));
  s.attn_out.assign(L, std::vector<float>(q_dim, 0.0f));
  s.ffn_in.assign(L, std::vector<float>(dim, 0.0f));
  s.ffn_hidden.assign(L, std::vector<float>(hidden, 0.0f));
  s.final_in.assign(dim, 0.0f);
  return s;
}

const std::vector<float>& ActStats::channel_max(int layer, model::Linear which) const {
  using model::Linear;
  if (which == Linear::cls) return final_in;
  const auto l = static_cast<std::size_t>(layer);
  switch (which) {
    case Linear::wq:
    case Linear::wk:
    case Linear::wv: return attn_in.at(l);
    case Linear::wo: return attn_out.at(l);
    case Linear::w1:
    case Linear::w3: return ffn_in.at(l);
    case Linear::w2: return ffn_hidden.at(l);
    case Linear::cls: break;
  }
  return final_in;
}

float ActStats::amax(int layer, model::Linear which) const {
  const auto& m = channel_max(layer, which);
  return m.empty() ? 0.0f : *std::max_element(m.begin(), m.end());
}

namespace {

// Smooths the linears in `group` that all read the output of `norm` (section 6).
void smooth_site(std::vector<float>& norm, std::vector<float>& xmax, std::vector<std::vector<float>*> group,
                 const std::vector<int>& rows, float alpha) {
  const std::size_t cols = norm.size();
  for (std::size_t j = 0; j < cols; ++j) {
    float wmax = 0.0f;
    for (std::size_t g = 0; g < group.size(); ++g)
      for (int r = 0; r < rows[g]; ++r) wmax = std::max(wmax, std::fabs((*group[g])[static_cast<std::size_t>(r) * cols + j]));
    float s = 1.0f;
    if (xmax[j] > 0.0f && wmax > 0.0f) {
      const double v = std::pow(static_cast<double>(xmax[j]), alpha) / std::pow(static_cast<double>(wmax), 1.0 - alpha);
      s = std::clamp(static_cast<float>(v), 1e-5f, 1e5f);
    }
    norm[j] = norm[j] / s;
    xmax[j] = xmax[j] / s;
    for (std::size_t g = 0; g < group.size(); ++g)
      for (int r = 0; r < rows[g]; ++r) {
        float& w = (*group[g])[static_cast<std::size_t>(r) * cols + j];
        w = w * s;
      }
  }
}

}  // namespace

void smooth(model::Model& m, ActStats& stats, float alpha) {
  const auto& c = m.config;
  using model::Linear;
  for (int l = 0; l < c.n_layers; ++l) {
    auto& lw = m.weights.layers[static_cast<std::size_t>(l)];
    const auto li = static_cast<std::size_t>(l);
    smooth_site(lw.attn_norm, stats.attn_in[li], {&lw.wq, &lw.wk, &lw.wv},
                {model::linear_shape(c, Linear::wq).rows, c.kv_dim(), c.kv_dim()}, alpha);
    smooth_site(lw.ffn_norm, stats.ffn_in[li], {&lw.w1, &lw.w3}, {c.hidden_dim, c.hidden_dim}, alpha);
  }
}

}  // namespace quant
