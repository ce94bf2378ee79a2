#include "engine/shard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "util/error.hpp"

namespace engine {

namespace {

using model::Linear;

bool any_int4(const quant::Plan& plan) {
  return std::any_of(plan.layers.begin(), plan.layers.end(),
                     [](const quant::LayerPlan& lp) { return lp.weight == quant::WeightFormat::int4; });
}

// Rows [r0, r0 + n) of a quantized matrix, per-row scales kept.
quant::QuantLinear rows_of(const quant::QuantLinear& l, int r0, int n) {
  quant::QuantLinear s;
  s.format = l.format;
  s.rows = n;
  s.cols = l.cols;
  if (l.format == quant::WeightFormat::int8) {
    const auto& m = l.int8;
    s.int8.rows = n, s.int8.cols = m.cols;
    s.int8.q.assign(m.q.begin() + std::ptrdiff_t(r0) * m.cols, m.q.begin() + std::ptrdiff_t(r0 + n) * m.cols);
    s.int8.scale.assign(m.scale.begin() + r0, m.scale.begin() + r0 + n);
  } else if (l.format == quant::WeightFormat::int4) {
    const auto& m = l.int4;
    s.int4.rows = n, s.int4.cols = m.cols, s.int4.group = m.group;
    s.int4.packed.assign(m.packed.begin() + std::ptrdiff_t(r0) * m.row_bytes(),
                         m.packed.begin() + std::ptrdiff_t(r0 + n) * m.row_bytes());
    s.int4.scale.assign(m.scale.begin() + std::ptrdiff_t(r0) * m.groups(),
                        m.scale.begin() + std::ptrdiff_t(r0 + n) * m.groups());
  } else {
    throw std::logic_error("shard of a non-integer layer");
  }
  return s;
}

// Columns [c0, c0 + n) of every row; per-row scales (int8) are those of the full row.
quant::QuantLinear cols_of(const quant::QuantLinear& l, int c0, int n) {
  quant::QuantLinear s;
  s.format = l.format;
  s.rows = l.rows;
  s.cols = n;
  if (l.format == quant::WeightFormat::int8) {
    const auto& m = l.int8;
    s.int8.rows = m.rows, s.int8.cols = n;
    s.int8.q.resize(std::size_t(m.rows) * std::size_t(n));
    for (int r = 0; r < m.rows; ++r)
      std::memcpy(s.int8.q.data() + std::size_t(r) * n, m.q.data() + std::size_t(r) * m.cols + c0, std::size_t(n));
    s.int8.scale = m.scale;
  } else if (l.format == quant::WeightFormat::int4) {
    const auto& m = l.int4;
    if (c0 % m.group || c0 % 32) throw std::logic_error("int4 column shard off a group boundary");
    auto& o = s.int4;
    o.rows = m.rows, o.cols = n, o.group = m.group;
    o.packed.resize(std::size_t(m.rows) * std::size_t(o.row_bytes()));
    o.scale.resize(std::size_t(m.rows) * std::size_t(o.groups()));
    for (int r = 0; r < m.rows; ++r) {
      std::memcpy(o.packed.data() + std::size_t(r) * o.row_bytes(),
                  m.packed.data() + std::size_t(r) * m.row_bytes() + std::size_t(c0 / 32 * 16),
                  std::size_t(o.row_bytes()));
      std::memcpy(o.scale.data() + std::size_t(r) * o.groups(),
                  m.scale.data() + std::size_t(r) * m.groups() + c0 / m.group, sizeof(std::uint16_t) * o.groups());
    }
  } else {
    throw std::logic_error("shard of a non-integer layer");
  }
  return s;
}

}  // namespace

CardShare card_share(const model::Config& c, const quant::Plan& plan, const arch::Design& d, int card) {
  CardShare s;
  s.split = d.parallel.split;
  s.cards = d.parallel.cards;
  s.card = card;
  if (card < 0 || card >= s.cards)
    throw fpgallm::InputError("design", fmt::format("card {} of parallel.cards {}", card, s.cards));
  s.q_heads = c.n_heads, s.kv_heads = c.n_kv_heads, s.hidden = c.hidden_dim;
  s.vocab_begin = 0, s.vocab_end = c.vocab_size;
  s.vocab_counts = {c.vocab_size};
  s.layer_begin = 0, s.layer_end = c.n_layers;
  const int n = s.cards;
  if (n == 1) return s;
  if (s.split == arch::Split::tensor) {
    if (c.n_kv_heads % n)
      throw fpgallm::InputError("design", fmt::format("parallel.cards {} does not divide the model's {} KV heads "
                                                      "(tensor split by heads)", n, c.n_kv_heads));
    if (c.hidden_dim % n)
      throw fpgallm::InputError("design", fmt::format("parallel.cards {} does not divide hidden_dim {} (tensor split "
                                                      "of w1, w3, w2)", n, c.hidden_dim));
    s.q_heads = c.n_heads / n, s.kv_heads = c.n_kv_heads / n, s.hidden = c.hidden_dim / n;
    if (any_int4(plan) && ((s.q_heads * c.head_dim()) % plan.group || s.hidden % plan.group || plan.group % 32))
      throw fpgallm::InputError(
          "design", fmt::format("int4 weights with group {}: each card's {} wo columns and {} w2 columns must be whole "
                                "groups", plan.group, s.q_heads * c.head_dim(), s.hidden));
    s.vocab_counts.clear();
    for (int k = 0; k < n; ++k)
      s.vocab_counts.push_back(int(std::int64_t(k + 1) * c.vocab_size / n - std::int64_t(k) * c.vocab_size / n));
    s.vocab_begin = int(std::int64_t(card) * c.vocab_size / n);
    s.vocab_end = int(std::int64_t(card + 1) * c.vocab_size / n);
  } else if (s.split == arch::Split::pipeline) {
    if (n > c.n_layers)
      throw fpgallm::InputError("design", fmt::format("parallel.cards {} is more than the model's {} layers (pipeline "
                                                      "split by layer)", n, c.n_layers));
    s.layer_begin = int(std::int64_t(card) * c.n_layers / n);
    s.layer_end = int(std::int64_t(card + 1) * c.n_layers / n);
    s.embedding = card == 0;
    s.classifier = card == n - 1;
  }
  return s;
}

quant::QuantModel shard_model(const quant::QuantModel& full, const CardShare& share) {
  const auto& c = full.config;
  quant::QuantModel s;
  s.config = c;
  s.plan = full.plan;
  s.calibration_file = full.calibration_file;
  s.calibration_fnv1a = full.calibration_fnv1a;
  if (share.embedding) s.token_embedding = full.token_embedding;
  s.attn_norm.resize(full.attn_norm.size());
  s.ffn_norm.resize(full.ffn_norm.size());
  for (auto* v : {&s.bq, &s.bk, &s.bv, &s.q_norm, &s.k_norm}) v->resize(full.attn_norm.size());
  s.linears.resize(full.linears.size());
  const int hd = c.head_dim();
  const bool tensor = share.split == arch::Split::tensor && share.cards > 1;
  for (int layer = share.layer_begin; layer < share.layer_end; ++layer) {
    s.attn_norm[std::size_t(layer)] = full.attn_norm[std::size_t(layer)];
    s.ffn_norm[std::size_t(layer)] = full.ffn_norm[std::size_t(layer)];
    // The card's heads of the q/k/v biases; the per-head norm gains are shared by all heads.
    auto slice = [&](const std::vector<std::vector<float>>& v, int heads) {
      const auto& all = v[std::size_t(layer)];
      if (!tensor || all.empty()) return all;
      const auto first = all.begin() + std::ptrdiff_t(share.card) * heads * hd;
      return std::vector<float>(first, first + std::ptrdiff_t(heads) * hd);
    };
    s.bq[std::size_t(layer)] = slice(full.bq, share.q_heads);
    s.bk[std::size_t(layer)] = slice(full.bk, share.kv_heads);
    s.bv[std::size_t(layer)] = slice(full.bv, share.kv_heads);
    s.q_norm[std::size_t(layer)] = full.q_norm[std::size_t(layer)];
    s.k_norm[std::size_t(layer)] = full.k_norm[std::size_t(layer)];
    for (Linear w : model::kBlockLinears) {
      const auto& l = full.linear(layer, w);
      auto& out = s.linears[quant::Plan::index(c.n_layers, layer, w)];
      if (!tensor) {
        out = l;
        continue;
      }
      switch (w) {
        case Linear::wq: out = rows_of(l, share.card * share.q_heads * hd, share.q_heads * hd); break;
        case Linear::wk:
        case Linear::wv: out = rows_of(l, share.card * share.kv_heads * hd, share.kv_heads * hd); break;
        case Linear::wo: out = cols_of(l, share.card * share.q_heads * hd, share.q_heads * hd); break;
        case Linear::w1:
        case Linear::w3: out = rows_of(l, share.card * share.hidden, share.hidden); break;
        case Linear::w2: out = cols_of(l, share.card * share.hidden, share.hidden); break;
        case Linear::cls: break;
      }
    }
  }
  if (share.classifier) {
    s.final_norm = full.final_norm;
    const auto& cls = full.linear(-1, Linear::cls);
    s.linears[quant::Plan::index(c.n_layers, -1, Linear::cls)] =
        tensor ? rows_of(cls, share.vocab_begin, share.vocab_end - share.vocab_begin) : cls;
  }
  return s;
}

std::uint64_t resident_weight_bytes(const quant::QuantModel& qm) {
  std::uint64_t total = qm.linear_weight_bytes() + 4 * qm.token_embedding.size() + 4 * qm.final_norm.size();
  for (const auto& v : qm.attn_norm) total += 4 * v.size();
  for (const auto& v : qm.ffn_norm) total += 4 * v.size();
  for (const auto* per_layer : {&qm.bq, &qm.bk, &qm.bv, &qm.q_norm, &qm.k_norm})
    for (const auto& v : *per_layer) total += 4 * v.size();
  return total;
}

std::uint64_t replicated_weight_bytes(const quant::QuantModel& qm, const CardShare& share) {
  if (share.cards == 1 || share.split != arch::Split::tensor) return 0;
  std::uint64_t total = 4 * (qm.token_embedding.size() + qm.final_norm.size());
  for (const auto& v : qm.attn_norm) total += 4 * v.size();
  for (const auto& v : qm.ffn_norm) total += 4 * v.size();
  for (const auto* per_layer : {&qm.bq, &qm.bk, &qm.bv, &qm.q_norm, &qm.k_norm})
    for (const auto& v : *per_layer) total += 4 * v.size();
  for (int layer = 0; layer < qm.config.n_layers; ++layer)
    for (Linear w : {Linear::wo, Linear::w2}) {
      const auto& l = qm.linear(layer, w);
      if (l.format == quant::WeightFormat::int8) total += 4 * l.int8.scale.size();
    }
  return total;
}

}  // namespace engine
