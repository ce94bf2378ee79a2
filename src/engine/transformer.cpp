#include "engine/transformer.hpp"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/threads.hpp"
#include "util/error.hpp"

namespace engine {

namespace {

// Eight interleaved partial sums, combined pairwise: vectorizes without -ffast-math and
// gives the same bits on every run and thread count.
__attribute__((target_clones("avx2", "default"))) float dot(const float* w, const float* x, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) acc[k] += w[j + k] * x[j + k];
  float tail = 0.0f;
  for (; j < n; ++j) tail += w[j] * x[j];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

// Four rows at once, each with dot()'s eight partial sums (lane k of a 8-float vector holds
// acc[k]) combined in dot()'s order, so the results are bit-identical to dot() row by row:
// four independent add chains, x loaded once for the four rows.
typedef float Float8 __attribute__((vector_size(32)));

__attribute__((target_clones("avx2", "default"))) void dot4(const float* w, std::size_t stride, const float* x, int n,
                                                            float* y) {
  const float* rows[4] = {w, w + stride, w + 2 * stride, w + 3 * stride};
  Float8 acc[4] = {};
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    Float8 xv, w0, w1, w2, w3;
    std::memcpy(&xv, x + j, sizeof xv);
    std::memcpy(&w0, rows[0] + j, sizeof w0);
    std::memcpy(&w1, rows[1] + j, sizeof w1);
    std::memcpy(&w2, rows[2] + j, sizeof w2);
    std::memcpy(&w3, rows[3] + j, sizeof w3);
    acc[0] += w0 * xv;
    acc[1] += w1 * xv;
    acc[2] += w2 * xv;
    acc[3] += w3 * xv;
  }
  for (int r = 0; r < 4; ++r) {
    float tail = 0.0f;
    for (int t = j; t < n; ++t) tail += rows[r][t] * x[t];
    const Float8& a = acc[r];
    y[r] = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7])) + tail;
  }
}

// dot4 of two inputs at once: each output's operations in dot4's order (the same bits),
// eight independent add chains, each weight vector loaded once for both inputs.
__attribute__((target_clones("avx2", "default"))) void dot4x2(const float* w, std::size_t stride, const float* x0,
                                                              const float* x1, int n, float* y0, float* y1) {
  const float* rows[4] = {w, w + stride, w + 2 * stride, w + 3 * stride};
  Float8 acc0[4] = {}, acc1[4] = {};
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    Float8 xv0, xv1, wr;
    std::memcpy(&xv0, x0 + j, sizeof xv0);
    std::memcpy(&xv1, x1 + j, sizeof xv1);
    for (int r = 0; r < 4; ++r) {
      std::memcpy(&wr, rows[r] + j, sizeof wr);
      acc0[r] += wr * xv0;
      acc1[r] += wr * xv1;
    }
  }
  for (int r = 0; r < 4; ++r) {
    float tail0 = 0.0f, tail1 = 0.0f;
    for (int t = j; t < n; ++t) tail0 += rows[r][t] * x0[t], tail1 += rows[r][t] * x1[t];
    const Float8& a = acc0[r];
    const Float8& b = acc1[r];
    y0[r] = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7])) + tail0;
    y1[r] = ((b[0] + b[4]) + (b[1] + b[5])) + ((b[2] + b[6]) + (b[3] + b[7])) + tail1;
  }
}

}  // namespace

void matvec(const float* w, const float* x, float* y, int rows, int cols) {
  const int quads = rows / 4;
  const auto stride = static_cast<std::size_t>(cols);
#pragma omp parallel for schedule(static) if (static_cast<long>(rows) * cols >= kParallelWork)
  for (int b = 0; b < quads; ++b) dot4(w + 4 * b * stride, stride, x, cols, y + 4 * b);
  for (int i = 4 * quads; i < rows; ++i) y[i] = dot(w + static_cast<std::size_t>(i) * stride, x, cols);
}

void matvec_rows(const float* x, int ldx, int n, const float* w, int rows, int cols, float* y, int ldy) {
  const int quads = rows / 4;
  const auto stride = static_cast<std::size_t>(cols);
#pragma omp parallel for schedule(static) if (static_cast<long>(rows) * cols * n >= kParallelWork)
  for (int b = 0; b < quads + 1; ++b) {
    int i = 0;
    if (b < quads)
      for (; i + 2 <= n; i += 2)
        dot4x2(w + 4 * b * stride, stride, x + static_cast<std::size_t>(i) * ldx, x + static_cast<std::size_t>(i + 1) * ldx,
               cols, y + static_cast<std::size_t>(i) * ldy + 4 * b, y + static_cast<std::size_t>(i + 1) * ldy + 4 * b);
    for (; i < n; ++i) {
      const float* xi = x + static_cast<std::size_t>(i) * ldx;
      float* yi = y + static_cast<std::size_t>(i) * ldy;
      if (b < quads)
        dot4(w + 4 * b * stride, stride, xi, cols, yi + 4 * b);
      else
        for (int r = 4 * quads; r < rows; ++r) yi[r] = dot(w + static_cast<std::size_t>(r) * stride, xi, cols);
    }
  }
}

void rmsnorm(float* out, const float* x, const float* weight, int n, float eps) {
  float ss = 0.0f;
  for (int j = 0; j < n; ++j) ss += x[j] * x[j];
  ss /= static_cast<float>(n);
  ss += eps;
  ss = 1.0f / std::sqrt(ss);
  for (int j = 0; j < n; ++j) out[j] = weight[j] * (ss * x[j]);
}

void softmax(float* x, int n) {
  float max_val = x[0];
  for (int i = 1; i < n; ++i) max_val = std::max(max_val, x[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_val);
    sum += x[i];
  }
  for (int i = 0; i < n; ++i) x[i] /= sum;
}

void rope(float* q, int q_dim, float* k, int kv_dim, int head_size, int pos, float theta, const float* freq_factors) {
  for (int i = 0; i < q_dim; i += 2) {
    const int head_dim = i % head_size;
    float freq = 1.0f / std::pow(theta, static_cast<float>(head_dim) / static_cast<float>(head_size));
    if (freq_factors) freq /= freq_factors[head_dim / 2];
    const float val = static_cast<float>(pos) * freq;
    const float fcr = std::cos(val), fci = std::sin(val);
    const int rotn = k != nullptr && i < kv_dim ? 2 : 1;
    for (int r = 0; r < rotn; ++r) {
      float* vec = r == 0 ? q : k;
      const float v0 = vec[i], v1 = vec[i + 1];
      vec[i] = v0 * fcr - v1 * fci;
      vec[i + 1] = v0 * fci + v1 * fcr;
    }
  }
}

void attention_head(const float* q, const float* keys, const float* values, std::size_t stride, int n_keys,
                    int head_size, float* att, float* out) {
  const float scale = std::sqrt(static_cast<float>(head_size));
  for (int t = 0; t < n_keys; ++t) {
    const float* kt = keys + static_cast<std::size_t>(t) * stride;
    float score = 0.0f;
    for (int i = 0; i < head_size; ++i) score += q[i] * kt[i];
    att[t] = score / scale;
  }
  softmax(att, n_keys);
  std::memset(out, 0, head_size * sizeof(float));
  for (int t = 0; t < n_keys; ++t) {
    const float* vt = values + static_cast<std::size_t>(t) * stride;
    const float a = att[t];
    for (int i = 0; i < head_size; ++i) out[i] += a * vt[i];
  }
}

void swiglu(float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) {
    float val = gate[i];
    val *= 1.0f / (1.0f + std::exp(-val));
    gate[i] = val * up[i];
  }
}

namespace {

// The engine holds the keys and values of every position of the context, and one score per
// head and position: refuse, before allocating, a context whose cache needs more than half
// this machine's physical memory (the rest is for the weights and everything else), naming
// the file and the field that set it.
void check_context_fits(const model::Model& m) {
  const auto& c = m.config;
  const double bytes = (2.0 * c.n_layers * c.kv_dim() + c.n_heads) * c.seq_len * sizeof(float);
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const double memory = pages > 0 && page > 0 ? double(pages) * double(page) : 0;
  if (memory <= 0 || bytes <= memory / 2) return;
  const char* field = m.source_format == model::Format::safetensors ? "max_position_embeddings"
                      : m.source_format == model::Format::gguf       ? "<arch>.context_length"
                                                                      : "seq_len";
  throw fpgallm::InputError(m.source_path.empty() ? c.name : m.source_path,
                            fmt::format("context {} = {} needs {:.1f} GB of KV cache and scores for the engine, more than half of "
                                        "this machine's {:.1f} GB of memory",
                                        field, c.seq_len, bytes / 1e9, memory / 1e9));
}

}  // namespace

Transformer::Transformer(const model::Model& m) : model_(m) {
  const auto& c = m.config;
  if (!m.has_weights()) throw std::invalid_argument(c.name + " has no weights (a preset cannot be run)");
  if (!c.llama_family()) throw std::invalid_argument("the engine runs llama-family models only (llama, qwen2, qwen3)");
  if (c.moe()) throw std::invalid_argument("the engine runs dense models only (mixture of experts is for planning)");
  check_context_fits(m);
  const auto dim = static_cast<std::size_t>(c.dim);
  const auto q_dim = static_cast<std::size_t>(c.n_heads) * c.head_dim();
  x_.resize(dim);
  xb_.resize(std::max(dim, q_dim));
  xb2_.resize(dim);
  hb_.resize(static_cast<std::size_t>(c.hidden_dim));
  hb2_.resize(static_cast<std::size_t>(c.hidden_dim));
  q_.resize(q_dim);
  att_.resize(static_cast<std::size_t>(c.n_heads) * c.seq_len);
  logits_.resize(static_cast<std::size_t>(c.vocab_size));
}

const float* Transformer::weight_of(int layer, model::Linear which) const {
  if (which == model::Linear::cls) return model_.weights.classifier_or_embedding().data();
  return model_.weights.layers[static_cast<std::size_t>(layer)].linear(which).data();
}

void Transformer::linear(const LinearCall& call) {
  matvec(weight_of(call.layer, call.which), call.x, call.y, call.rows, call.cols);
}

void Transformer::on_kv_stored(int, int, float*, float*) {}

void Transformer::check_input(int token, int pos) const {
  if (token < 0 || token >= model_.config.vocab_size) throw std::out_of_range("token id out of range");
  if (pos < 0 || pos >= model_.config.seq_len) throw std::out_of_range("position past the model's context");
}

void Transformer::ensure_cache() {
  if (!key_cache_.empty()) return;  // allocated on first use: subclasses that replace forward() never pay for it
  const auto& c = model_.config;
  const std::size_t cache = static_cast<std::size_t>(c.n_layers) * c.seq_len * c.kv_dim();
  key_cache_.assign(cache, 0.0f);
  value_cache_.assign(cache, 0.0f);
}

const float* Transformer::forward(int token, int pos) {
  const auto& c = model_.config;
  const auto& w = model_.weights;
  check_input(token, pos);
  const int dim = c.dim, head_size = c.head_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  const int q_dim = c.n_heads * head_size;
  const int kv_mul = c.n_heads / c.n_kv_heads;
  using model::Linear;
  ensure_cache();

  std::memcpy(x_.data(), w.token_embedding.data() + static_cast<std::size_t>(token) * dim, dim * sizeof(float));

  for (int l = 0; l < c.n_layers; ++l) {
    const auto& lw = w.layers[static_cast<std::size_t>(l)];
    rmsnorm(xb_.data(), x_.data(), lw.attn_norm.data(), dim, c.norm_eps);

    const std::size_t cache_off = (static_cast<std::size_t>(l) * c.seq_len + pos) * kv_dim;
    float* k = key_cache_.data() + cache_off;
    float* v = value_cache_.data() + cache_off;
    linear({l, Linear::wq, xb_.data(), q_.data(), q_dim, dim, pos});
    linear({l, Linear::wk, xb_.data(), k, kv_dim, dim, pos});
    linear({l, Linear::wv, xb_.data(), v, kv_dim, dim, pos});
    if (c.qkv_bias) {
      for (int i = 0; i < q_dim; ++i) q_[i] += lw.bq[i];
      for (int i = 0; i < kv_dim; ++i) k[i] += lw.bk[i];
      for (int i = 0; i < kv_dim; ++i) v[i] += lw.bv[i];
    }
    if (c.qk_norm) {
      for (int h = 0; h < c.n_heads; ++h) rmsnorm(q_.data() + h * head_size, q_.data() + h * head_size, lw.q_norm.data(), head_size, c.norm_eps);
      for (int h = 0; h < c.n_kv_heads; ++h) rmsnorm(k + h * head_size, k + h * head_size, lw.k_norm.data(), head_size, c.norm_eps);
    }

    rope(q_.data(), q_dim, k, kv_dim, head_size, pos, c.rope_theta,
         w.rope_freq_factors.empty() ? nullptr : w.rope_freq_factors.data());
    on_kv_stored(l, pos, k, v);

    const float* layer_keys = key_cache_.data() + static_cast<std::size_t>(l) * c.seq_len * kv_dim;
    const float* layer_values = value_cache_.data() + static_cast<std::size_t>(l) * c.seq_len * kv_dim;
#pragma omp parallel for schedule(static) if (static_cast<long>(c.n_heads) * (pos + 1) * head_size >= kParallelWork)
    for (int h = 0; h < c.n_heads; ++h) {
      const int kv_off = (h / kv_mul) * head_size;
      attention_head(q_.data() + h * head_size, layer_keys + kv_off, layer_values + kv_off,
                     static_cast<std::size_t>(kv_dim), pos + 1, head_size,
                     att_.data() + static_cast<std::size_t>(h) * c.seq_len, xb_.data() + h * head_size);
    }

    linear({l, Linear::wo, xb_.data(), xb2_.data(), dim, q_dim, pos});
    for (int i = 0; i < dim; ++i) x_[i] += xb2_[i];

    rmsnorm(xb_.data(), x_.data(), lw.ffn_norm.data(), dim, c.norm_eps);
    linear({l, Linear::w1, xb_.data(), hb_.data(), hidden, dim, pos});
    linear({l, Linear::w3, xb_.data(), hb2_.data(), hidden, dim, pos});
    swiglu(hb_.data(), hb2_.data(), hidden);
    linear({l, Linear::w2, hb_.data(), xb_.data(), dim, hidden, pos});
    for (int i = 0; i < dim; ++i) x_[i] += xb_[i];
  }

  rmsnorm(x_.data(), x_.data(), w.final_norm.data(), dim, c.norm_eps);
  linear({-1, Linear::cls, x_.data(), logits_.data(), c.vocab_size, dim, pos});
  return logits_.data();
}

}  // namespace engine
