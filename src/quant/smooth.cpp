#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

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

// Divides the norm (or the rows of the producing linear, with its bias) by s_j and
// multiplies column j of every linear in `group` by s_j.
void apply_scales(std::vector<float>& norm, std::vector<std::vector<float>*> group, const std::vector<int>& rows,
                  const std::vector<float>& s) {
  const std::size_t cols = s.size();
  for (std::size_t j = 0; j < cols; ++j) norm[j] = norm[j] / s[j];
  for (std::size_t g = 0; g < group.size(); ++g)
    for (int r = 0; r < rows[g]; ++r)
      for (std::size_t j = 0; j < cols; ++j) {
        float& w = (*group[g])[static_cast<std::size_t>(r) * cols + j];
        w = w * s[j];
      }
}

// Smooths the linears in `group` that all read the output of `norm` (section 6).
void smooth_site(std::vector<float>& norm, std::vector<float>& xmax, std::vector<std::vector<float>*> group,
                 const std::vector<int>& rows, float alpha) {
  const std::size_t cols = norm.size();
  std::vector<float> s(cols, 1.0f);
  for (std::size_t j = 0; j < cols; ++j) {
    float wmax = 0.0f;
    for (std::size_t g = 0; g < group.size(); ++g)
      for (int r = 0; r < rows[g]; ++r) wmax = std::max(wmax, std::fabs((*group[g])[static_cast<std::size_t>(r) * cols + j]));
    if (xmax[j] > 0.0f && wmax > 0.0f) {
      const double v = std::pow(static_cast<double>(xmax[j]), alpha) / std::pow(static_cast<double>(wmax), 1.0 - alpha);
      s[j] = std::clamp(static_cast<float>(v), 1e-5f, 1e5f);
    }
    xmax[j] = xmax[j] / s[j];
  }
  apply_scales(norm, std::move(group), rows, s);
}

// sum_r e_r^T H e_r over the rows of w [rows][cols] with its columns scaled by s, e the
// int4 round trip error of the scaled row mapped back (divided by s).
double scaled_error(const std::vector<float>& w, int rows, const std::vector<float>& s, const std::vector<double>& h,
                    int group) {
  const std::size_t cols = s.size();
  std::vector<float> ws(w.size());
  for (int r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < cols; ++j) ws[r * cols + j] = w[r * cols + j] * s[j];
  std::vector<float> dq(w.size());
  dequantize(quantize_int4(ws, rows, static_cast<int>(cols), group), dq);
  double total = 0.0;
  std::vector<double> e(cols);
  for (int r = 0; r < rows; ++r) {
    for (std::size_t j = 0; j < cols; ++j)
      e[j] = static_cast<double>(dq[r * cols + j]) / s[j] - static_cast<double>(w[r * cols + j]);
    for (std::size_t i = 0; i < cols; ++i) {
      double hi = 0.0;
      for (std::size_t j = 0; j < cols; ++j) hi += h[i * cols + j] * e[j];
      total += e[i] * hi;
    }
  }
  return total;
}

constexpr int kAwqGrid = 20;  // ratios 0, 1/20, ..., 19/20 (the AWQ reference's grid)

// The AWQ search at one input site: s_j = a_j^ratio normalized by sqrt(max s * min s), the
// ratio minimizing the error summed over `linears` (each [rows][cols], column j scaled by
// s[expand[j]]). a has one entry per scale; expand maps a column to its scale.
std::vector<float> awq_search(const std::vector<double>& a, const std::vector<std::size_t>& expand,
                              const std::vector<const std::vector<float>*>& linears, const std::vector<int>& rows,
                              const std::vector<double>& h, int group, AwqSite& out) {
  const std::size_t cols = expand.size();
  std::vector<float> best(a.size(), 1.0f);
  double best_err = -1.0;
  for (int g = 0; g < kAwqGrid; ++g) {
    const double ratio = static_cast<double>(g) / kAwqGrid;
    std::vector<float> s(a.size());
    double lo = 1e300, hi = 0.0;
    for (std::size_t j = 0; j < a.size(); ++j) {
      s[j] = static_cast<float>(std::max(std::pow(std::max(a[j], 1e-12), ratio), 1e-4));
      lo = std::min(lo, static_cast<double>(s[j]));
      hi = std::max(hi, static_cast<double>(s[j]));
    }
    const double norm = std::sqrt(lo * hi);
    for (float& v : s) v = static_cast<float>(v / norm);
    std::vector<float> sc(cols);
    for (std::size_t j = 0; j < cols; ++j) sc[j] = s[expand[j]];
    double err = 0.0;
    for (std::size_t l = 0; l < linears.size(); ++l) err += scaled_error(*linears[l], rows[l], sc, h, group);
    if (g == 0) out.error_rtn = err;
    if (best_err < 0.0 || err < best_err) best_err = err, best = s, out.ratio = ratio;
  }
  out.error_awq = best_err;
  return best;
}

// RMS of each input channel from the Hessian's diagonal.
std::vector<double> rms(const std::vector<double>& h, std::size_t cols, std::size_t tokens) {
  std::vector<double> a(cols);
  for (std::size_t j = 0; j < cols; ++j) a[j] = std::sqrt(h[j * cols + j] / static_cast<double>(std::max<std::size_t>(tokens, 1)));
  return a;
}

std::vector<std::size_t> identity_map(std::size_t n) {
  std::vector<std::size_t> m(n);
  for (std::size_t j = 0; j < n; ++j) m[j] = j;
  return m;
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


Hessians Hessians::empty(const model::Config& c) {
  Hessians h;
  h.block.assign(static_cast<std::size_t>(c.n_layers), std::vector<std::vector<double>>(4));
  return h;
}

Hessians::Site Hessians::site_of(model::Linear which) {
  using model::Linear;
  switch (which) {
    case Linear::wo: return attn_out;
    case Linear::w1:
    case Linear::w3: return ffn_in;
    case Linear::w2: return ffn_hidden;
    default: return attn_in;
  }
}

std::vector<double>& Hessians::of(int layer, model::Linear which) {
  if (which == model::Linear::cls) return final_in;
  return block.at(static_cast<std::size_t>(layer)).at(site_of(which));
}

const std::vector<double>& Hessians::of(int layer, model::Linear which) const {
  return const_cast<Hessians*>(this)->of(layer, which);
}

std::vector<AwqSite> awq(model::Model& m, const Hessians& h, int group) {
  const auto& c = m.config;
  using model::Linear;
  const auto dim = static_cast<std::size_t>(c.dim), hidden = static_cast<std::size_t>(c.hidden_dim);
  const int hs = c.head_dim(), kv_mul = c.n_heads / c.n_kv_heads;
  const auto q_dim = static_cast<std::size_t>(c.n_heads) * hs, kv_dim = static_cast<std::size_t>(c.kv_dim());
  const int q_rows = model::linear_shape(c, Linear::wq).rows;
  std::vector<AwqSite> sites;
  for (int l = 0; l < c.n_layers; ++l) {
    auto& lw = m.weights.layers[static_cast<std::size_t>(l)];
    const auto& ha = h.of(l, Linear::wq), &ho = h.of(l, Linear::wo), &hf = h.of(l, Linear::w1), &hd = h.of(l, Linear::w2);
    if (ha.size() != dim * dim || ho.size() != q_dim * q_dim || hf.size() != dim * dim || hd.size() != hidden * hidden)
      throw std::invalid_argument("AWQ: Hessians of layer " + std::to_string(l) + " missing or of the wrong size");
    {
      AwqSite site{l, "attn_in", 0, 0, 0};
      const auto s = awq_search(rms(ha, dim, h.tokens), identity_map(dim), {&lw.wq, &lw.wk, &lw.wv},
                                {q_rows, c.kv_dim(), c.kv_dim()}, ha, group, site);
      apply_scales(lw.attn_norm, {&lw.wq, &lw.wk, &lw.wv}, {q_rows, c.kv_dim(), c.kv_dim()}, s);
      sites.push_back(site);
    }
    {
      // wo column (head q, d) reads v channel (q / kv_mul, d): one scale per v channel,
      // from the RMS over the query heads that read it.
      std::vector<std::size_t> expand(q_dim);
      std::vector<double> a(kv_dim, 0.0);
      const auto ao = rms(ho, q_dim, h.tokens);
      for (std::size_t j = 0; j < q_dim; ++j) {
        const std::size_t head = j / static_cast<std::size_t>(hs), d = j % static_cast<std::size_t>(hs);
        expand[j] = head / static_cast<std::size_t>(kv_mul) * static_cast<std::size_t>(hs) + d;
        a[expand[j]] += ao[j] * ao[j] / kv_mul;
      }
      for (double& v : a) v = std::sqrt(v);
      AwqSite site{l, "v->o", 0, 0, 0};
      const auto s = awq_search(a, expand, {&lw.wo}, {c.dim}, ho, group, site);
      for (std::size_t r = 0; r < kv_dim; ++r) {
        for (std::size_t j = 0; j < dim; ++j) lw.wv[r * dim + j] = lw.wv[r * dim + j] / s[r];
        if (!lw.bv.empty()) lw.bv[r] = lw.bv[r] / s[r];
      }
      for (int r = 0; r < c.dim; ++r)
        for (std::size_t j = 0; j < q_dim; ++j) lw.wo[r * q_dim + j] = lw.wo[r * q_dim + j] * s[expand[j]];
      sites.push_back(site);
    }
    {
      AwqSite site{l, "ffn_in", 0, 0, 0};
      const auto s = awq_search(rms(hf, dim, h.tokens), identity_map(dim), {&lw.w1, &lw.w3}, {c.hidden_dim, c.hidden_dim},
                                hf, group, site);
      apply_scales(lw.ffn_norm, {&lw.w1, &lw.w3}, {c.hidden_dim, c.hidden_dim}, s);
      sites.push_back(site);
    }
    {
      // w2 reads silu(w1 x) * (w3 x): linear in w3's row j.
      AwqSite site{l, "up->down", 0, 0, 0};
      const auto s = awq_search(rms(hd, hidden, h.tokens), identity_map(hidden), {&lw.w2}, {c.dim}, hd, group, site);
      for (std::size_t r = 0; r < hidden; ++r)
        for (std::size_t j = 0; j < dim; ++j) lw.w3[r * dim + j] = lw.w3[r * dim + j] / s[r];
      for (int r = 0; r < c.dim; ++r)
        for (std::size_t j = 0; j < hidden; ++j) lw.w2[r * hidden + j] = lw.w2[r * hidden + j] * s[j];
      sites.push_back(site);
    }
  }
  return sites;
}

}  // namespace quant
