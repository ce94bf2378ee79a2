// The batched forward pass of the fp32 reference: many positions at once (a block of one
// sequence, or one position of each of several sequences), every linear layer one
// matrix-matrix product through OpenBLAS.
//
// Threads: the OpenMP build of OpenBLAS (libopenblas-openmp) runs its GEMMs on OpenMP
// threads, the runtime of the engine's own loops, as many as OMP_NUM_THREADS. A GEMM called
// outside a parallel region uses them all; one called from inside a parallel region (the
// attention heads below) runs on its calling thread alone (OpenBLAS checks
// omp_in_parallel()). The rule, so that the two never oversubscribe the cores: link the
// OpenMP build (libopenblas-pthread's own pool would run beside OpenMP's) and leave its
// thread count to OMP_NUM_THREADS, never openblas_set_num_threads() (a small product runs
// on one thread by this thread's OpenMP count, matmul below). (The server's replicas
// each run on a thread of their own with its own OpenMP team, as the per-token pass has.)
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "engine/threads.hpp"
#include "engine/transformer.hpp"

namespace engine {

// Split over threads for the weight matrices the per-token pass splits (matvec), on one
// thread else: OpenBLAS runs one thread where this thread's OpenMP thread count is 1.
void matmul_rows(const float* x, int ldx, int n, const float* w, int rows, int cols, float* y, int ldy) {
  if (n == 1) {
    matvec(w, x, y, rows, cols);  // one row: the per-token pass's own product, same bits
    return;
  }
  const int threads = omp_get_max_threads();
  const bool serial = static_cast<long>(rows) * cols < kParallelWork;
  if (serial) omp_set_num_threads(1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, cols, 1.0f, x, ldx, w, cols, 0.0f, y, ldy);
  if (serial) omp_set_num_threads(threads);
}

namespace {

// rope() of q (q_heads heads) and k (k_heads) at pos, with each pair's frequency freq[j]
// computed as rope() computes it: the same bits, cos and sin taken once for all heads.
void rope_heads(float* q, int q_heads, float* k, int k_heads, int hs, int pos, const float* freq) {
  for (int j = 0; j < hs / 2; ++j) {
    const float val = static_cast<float>(pos) * freq[j];
    const float fcr = std::cos(val), fci = std::sin(val);
    for (int h = 0; h < std::max(q_heads, k_heads); ++h)
      for (float* vec : {h < q_heads ? q : nullptr, h < k_heads ? k : nullptr}) {
        if (!vec) continue;
        float* p = vec + h * hs + 2 * j;
        const float v0 = p[0], v1 = p[1];
        p[0] = v0 * fcr - v1 * fci;
        p[1] = v0 * fci + v1 * fcr;
      }
  }
}

// The rows of one batched pass: row r runs token[r] at pos[r] against the KV cache whose
// layer-0 keys and values start at keys[r], values[r] ([layer][seq_len][kv_dim]).
// `block`: every row is of one sequence at consecutive positions pos[0].. (one cache), and
// attention is two GEMMs per head; otherwise it is the per-token pass's, row by row (each
// row's keys, its own position's among them, are in the cache before any row attends).
// `linear` runs every product; `kv_stored`, when set, is called with row i's key and value
// in the cache of `layer` once they are written (as the per-token pass calls on_kv_stored).
struct Rows {
  int n;
  const int* token;
  const int* pos;
  float* const* keys;
  float* const* values;
  bool block;
  bool one_sequence;  // (when not `block`) rows at consecutive positions of one cache
  const std::function<void(const LinearRows&)>& linear;
  const std::function<void(int layer, int row, float* k, float* v)>& kv_stored;
  // Where the pass starts: block first_layer, from the residual stream x_in [n][dim] entering
  // it (first_layer = n_layers: entering the final norm); 0 and null: the embeddings.
  int first_layer = 0;
  const float* x_in = nullptr;
  // Given: receives the residual stream [n][dim] entering each block run (and the final norm).
  const std::function<void(int layer, const float* x)>* block_input = nullptr;
  // (when `block`) the rows are this many sequences of n / segments rows each, all from
  // pos[0], each in its own cache (keys[first row of the segment]).
  int segments = 1;
};

// attention_head's arithmetic for the rows of one sequence at once, output for output the
// same operations in the same order (so the same bits), with independent outputs side by
// side instead of one dependent chain at a time:
// - a score is 0 + q[0] k[0] + q[1] k[1] + ... in order, then / sqrt(hs); the head's keys
//   are transposed once ([hs][keys], padded with zeros) and kScoreKeys scores run in lanes;
// - softmax() as it is;
// - out[d] is 0 + a[0] v[0][d] + a[1] v[1][d] + ... in order, D outputs in lanes;
// - with AVX-512, two rows at a time (twice the independent sums in flight).
// Each function is compiled for AVX-512, AVX2 and the base ISA (same IEEE operations,
// no contraction: -ffp-contract=off), chosen once by the CPU.
constexpr int kScoreKeys = 64;

// P consecutive rows i.. of head_rows_body at once (each row's operations as alone; the
// rows share the loads of the transposed keys and of the values). att holds P rows of
// `padded` scores.
template <int D, int P>
[[gnu::always_inline]] inline void head_rows_pass(const float* q, int q_stride, int i, int pos0, const float* kt,
                                                  int padded, const float* values, std::size_t stride, int hs,
                                                  float* att, float* out, int out_stride) {
  const float scale = std::sqrt(static_cast<float>(hs));
  int valid[P];
  for (int p = 0; p < P; ++p) valid[p] = pos0 + i + p + 1;
  for (int t0 = 0; t0 < valid[P - 1]; t0 += kScoreKeys) {
    float acc[P][kScoreKeys] = {};
    for (int d = 0; d < hs; ++d) {
      const float* k = kt + static_cast<std::size_t>(d) * padded + t0;
      for (int p = 0; p < P; ++p) {
        const float qd = q[static_cast<std::size_t>(i + p) * q_stride + d];
        for (int j = 0; j < kScoreKeys; ++j) acc[p][j] = acc[p][j] + qd * k[j];
      }
    }
    for (int p = 0; p < P; ++p) {
      const int m = std::min(kScoreKeys, valid[p] - t0);
      for (int j = 0; j < m; ++j) att[static_cast<std::size_t>(p) * padded + t0 + j] = acc[p][j] / scale;
    }
  }
  for (int p = 0; p < P; ++p) softmax(att + static_cast<std::size_t>(p) * padded, valid[p]);
  for (int d0 = 0; d0 < hs; d0 += D) {
    float acc[P][D] = {};
    int t = 0;
    for (; t < valid[0]; ++t) {  // keys every row attends to
      const float* v = values + static_cast<std::size_t>(t) * stride + d0;
      for (int p = 0; p < P; ++p) {
        const float a = att[static_cast<std::size_t>(p) * padded + t];
        for (int j = 0; j < D; ++j) acc[p][j] = acc[p][j] + a * v[j];
      }
    }
    for (; t < valid[P - 1]; ++t) {  // the later rows' last keys, still in order
      const float* v = values + static_cast<std::size_t>(t) * stride + d0;
      for (int p = 1; p < P; ++p) {
        if (t >= valid[p]) continue;
        const float a = att[static_cast<std::size_t>(p) * padded + t];
        for (int j = 0; j < D; ++j) acc[p][j] = acc[p][j] + a * v[j];
      }
    }
    for (int p = 0; p < P; ++p) {
      float* o = out + static_cast<std::size_t>(i + p) * out_stride + d0;
      for (int j = 0; j < D; ++j) o[j] = acc[p][j];
    }
  }
}

// P: rows per pass (2 where the vector registers hold both rows' sums).
template <int D, int P>
[[gnu::always_inline]] inline void head_rows_body(const float* q, int q_stride, int n, int pos0, const float* keys,
                                                  const float* values, std::size_t stride, int hs, float* kt,
                                                  float* att, float* out, int out_stride) {
  const int n_keys = pos0 + n;
  const int padded = (n_keys + kScoreKeys - 1) / kScoreKeys * kScoreKeys;
  for (int d = 0; d < hs; ++d) {
    float* row = kt + static_cast<std::size_t>(d) * padded;
    for (int t = 0; t < n_keys; ++t) row[t] = keys[static_cast<std::size_t>(t) * stride + d];
    for (int t = n_keys; t < padded; ++t) row[t] = 0.0f;
  }
  int i = 0;
  for (; i + P <= n; i += P) head_rows_pass<D, P>(q, q_stride, i, pos0, kt, padded, values, stride, hs, att, out, out_stride);
  for (; i < n; ++i) head_rows_pass<D, 1>(q, q_stride, i, pos0, kt, padded, values, stride, hs, att, out, out_stride);
}

using HeadRowsFn = void (*)(const float*, int, int, int, const float*, const float*, std::size_t, int, float*, float*,
                            float*, int);

#define FPGALLM_HEAD_ROWS(name, attr, P)                                                                           \
  template <int D>                                                                                                  \
  attr void name(const float* q, int q_stride, int n, int pos0, const float* keys, const float* values,            \
                 std::size_t stride, int hs, float* kt, float* att, float* out, int out_stride) {                  \
    head_rows_body<D, P>(q, q_stride, n, pos0, keys, values, stride, hs, kt, att, out, out_stride);                  \
  }
FPGALLM_HEAD_ROWS(head_rows_avx512, __attribute__((target("avx512f"))), 2)
FPGALLM_HEAD_ROWS(head_rows_avx2, __attribute__((target("avx2"))), 1)
FPGALLM_HEAD_ROWS(head_rows_base, , 1)
#undef FPGALLM_HEAD_ROWS

// The kernel for head size hs (null where hs is not a multiple of 16: attention_head then).
HeadRowsFn head_rows_for(int hs) {
  static const int isa = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
  if (hs % 64 == 0) return isa == 2 ? head_rows_avx512<64> : isa == 1 ? head_rows_avx2<64> : head_rows_base<64>;
  if (hs % 16 == 0) return isa == 2 ? head_rows_avx512<16> : isa == 1 ? head_rows_avx2<16> : head_rows_base<16>;
  return nullptr;
}

// The activations of a pass, kept from one call to the next by each thread: fresh buffers
// of this size cost page faults and zeroing (5% of a stories110m block), and every element
// is written before it is read.
struct Scratch {
  std::vector<float> x, xb, xb2, q, kb, vb, hb, hb2, att;
};

float* sized(std::vector<float>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Runs the blocks and the final norm; returns x [n][dim], normalized, for the classifier
// (valid until this thread's next call).
const float* run_layers(const model::Model& m, const Rows& r) {
  using model::Linear;
  const auto& c = m.config;
  const auto& w = m.weights;
  const int n = r.n, dim = c.dim, hs = c.head_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  const int q_dim = c.n_heads * hs, kv_mul = c.n_heads / c.n_kv_heads;
  const std::size_t layer_stride = static_cast<std::size_t>(c.seq_len) * kv_dim;
  const float* freq_factors = w.rope_freq_factors.empty() ? nullptr : w.rope_freq_factors.data();
  std::vector<float> freq(static_cast<std::size_t>(hs / 2));
  for (int j = 0; j < hs / 2; ++j) {
    freq[j] = 1.0f / std::pow(c.rope_theta, static_cast<float>(2 * j) / static_cast<float>(hs));
    if (freq_factors) freq[j] /= freq_factors[j];
  }
  const auto rows = [n](int width) { return static_cast<std::size_t>(n) * width; };
  // The row-wise work between the products (norms, RoPE, residuals, SwiGLU) on the
  // products' threads where a block is large enough: each row's operations as alone.
  const bool rows_parallel = n > 1 && static_cast<long>(rows(hidden)) * 8 >= kParallelWork;
  thread_local Scratch scratch;
  float* x = sized(scratch.x, rows(dim));
  float* xb = sized(scratch.xb, rows(std::max(dim, q_dim)));
  float* xb2 = sized(scratch.xb2, rows(dim));
  float* q = sized(scratch.q, rows(q_dim));
  float* kb = sized(scratch.kb, rows(kv_dim));
  float* vb = sized(scratch.vb, rows(kv_dim));
  float* hb = sized(scratch.hb, rows(hidden));
  float* hb2 = sized(scratch.hb2, rows(hidden));
  // Attention scores of a segment, [seg_n][keys] (keys = pos0 + seg_n) for each thread.
  const int seg_n = n / r.segments;
  const int keys = r.block ? r.pos[0] + seg_n : c.seq_len;
  const auto seg_rows = [seg_n](int width) { return static_cast<std::size_t>(seg_n) * width; };
  float* att = sized(scratch.att, r.block ? static_cast<std::size_t>(omp_get_max_threads()) * seg_rows(keys) : 0);

  if (r.x_in)
    std::memcpy(x, r.x_in, rows(dim) * sizeof(float));
  else
    for (int i = 0; i < n; ++i)
      std::memcpy(x + std::size_t(i) * dim, w.token_embedding.data() + static_cast<std::size_t>(r.token[i]) * dim,
                  dim * sizeof(float));

  for (int l = r.first_layer; l < c.n_layers; ++l) {
    if (r.block_input) (*r.block_input)(l, x);
    const auto& lw = w.layers[static_cast<std::size_t>(l)];
#pragma omp parallel for schedule(static) if (rows_parallel)
    for (int i = 0; i < n; ++i)
      rmsnorm(xb + std::size_t(i) * dim, x + std::size_t(i) * dim, lw.attn_norm.data(), dim, c.norm_eps);
    r.linear({l, Linear::wq, xb, dim, q, q_dim, n, q_dim, dim, r.pos[0]});
    r.linear({l, Linear::wk, xb, dim, kb, kv_dim, n, kv_dim, dim, r.pos[0]});
    r.linear({l, Linear::wv, xb, dim, vb, kv_dim, n, kv_dim, dim, r.pos[0]});
    // Rows apart; the KV hook of a subclass (kv_stored) is called in row order.
#pragma omp parallel for schedule(static) if (rows_parallel && !r.kv_stored)
    for (int i = 0; i < n; ++i) {
      float* qi = q + std::size_t(i) * q_dim;
      float* k = kb + std::size_t(i) * kv_dim;
      float* v = vb + std::size_t(i) * kv_dim;
      if (c.qkv_bias) {
        for (int j = 0; j < q_dim; ++j) qi[j] += lw.bq[j];
        for (int j = 0; j < kv_dim; ++j) k[j] += lw.bk[j];
        for (int j = 0; j < kv_dim; ++j) v[j] += lw.bv[j];
      }
      if (c.qk_norm) {
        for (int h = 0; h < c.n_heads; ++h) rmsnorm(qi + h * hs, qi + h * hs, lw.q_norm.data(), hs, c.norm_eps);
        for (int h = 0; h < c.n_kv_heads; ++h) rmsnorm(k + h * hs, k + h * hs, lw.k_norm.data(), hs, c.norm_eps);
      }
      rope_heads(qi, c.n_heads, k, c.n_kv_heads, hs, r.pos[i], freq.data());
      const std::size_t off = l * layer_stride + static_cast<std::size_t>(r.pos[i]) * kv_dim;
      std::memcpy(r.keys[i] + off, k, kv_dim * sizeof(float));
      std::memcpy(r.values[i] + off, v, kv_dim * sizeof(float));
      if (r.kv_stored) r.kv_stored(l, i, r.keys[i] + off, r.values[i] + off);
    }

    if (r.block) {
      // Per segment and head: scores [seg_n][keys] = q_h k_h^T / sqrt(hs) by one GEMM, row
      // i's softmax over its keys 0..pos0+i (causal), zeros after, then out_h = att v_h.
      const int pos0 = r.pos[0];
      const float inv_scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for collapse(2) schedule(static) \
    if (static_cast<long>(c.n_heads) * n * keys * hs >= kParallelWork)
      for (int sg = 0; sg < r.segments; ++sg)
        for (int h = 0; h < c.n_heads; ++h) {
          const std::size_t row0 = static_cast<std::size_t>(sg) * seg_n;
          const float* layer_keys = r.keys[row0] + l * layer_stride;
          const float* layer_values = r.values[row0] + l * layer_stride;
          const int kv_off = (h / kv_mul) * hs;
          float* s = att + static_cast<std::size_t>(omp_get_thread_num()) * seg_rows(keys);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seg_n, keys, hs, inv_scale, q + row0 * q_dim + h * hs,
                      q_dim, layer_keys + kv_off, kv_dim, 0.0f, s, keys);
          for (int i = 0; i < seg_n; ++i) {
            float* row = s + static_cast<std::size_t>(i) * keys;
            const int valid = pos0 + i + 1;
            softmax(row, valid);
            std::memset(row + valid, 0, (keys - valid) * sizeof(float));
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, seg_n, hs, keys, 1.0f, s, keys,
                      layer_values + kv_off, kv_dim, 0.0f, xb + row0 * q_dim + h * hs, q_dim);
        }
    } else if (const HeadRowsFn head_rows = r.one_sequence && n > 1 ? head_rows_for(hs) : nullptr) {
      // Rows of one sequence with the per-token pass's bits: head_rows_body.
      const float* layer_keys = r.keys[0] + l * layer_stride;
      const float* layer_values = r.values[0] + l * layer_stride;
      const int pos0 = r.pos[0], n_keys = pos0 + n;
      const auto padded = static_cast<std::size_t>((n_keys + kScoreKeys - 1) / kScoreKeys * kScoreKeys);
#pragma omp parallel for schedule(static) if (static_cast<long>(c.n_heads) * n * n_keys * hs >= kParallelWork)
      for (int h = 0; h < c.n_heads; ++h) {
        const int kv_off = (h / kv_mul) * hs;
        thread_local std::vector<float> kt, scores;
        if (kt.size() < padded * hs) kt.resize(padded * hs);
        if (scores.size() < 2 * padded) scores.resize(2 * padded);  // two rows' scores (head_rows_pass)
        head_rows(q + h * hs, q_dim, n, pos0, layer_keys + kv_off, layer_values + kv_off,
                  static_cast<std::size_t>(kv_dim), hs, kt.data(), scores.data(), xb + h * hs, q_dim);
      }
    } else {
      // One position per sequence: the per-token pass's attention, row by row.
      long work = 0;
      for (int i = 0; i < n; ++i) work += static_cast<long>(c.n_heads) * (r.pos[i] + 1) * hs;
#pragma omp parallel for collapse(2) schedule(static) if (work >= kParallelWork)
      for (int i = 0; i < n; ++i)
        for (int h = 0; h < c.n_heads; ++h) {
          const int kv_off = (h / kv_mul) * hs;
          thread_local std::vector<float> scores;
          if (scores.size() < static_cast<std::size_t>(r.pos[i] + 1)) scores.resize(static_cast<std::size_t>(c.seq_len));
          attention_head(q + std::size_t(i) * q_dim + h * hs, r.keys[i] + l * layer_stride + kv_off,
                         r.values[i] + l * layer_stride + kv_off, static_cast<std::size_t>(kv_dim), r.pos[i] + 1, hs,
                         scores.data(), xb + std::size_t(i) * q_dim + h * hs);
        }
    }

    r.linear({l, Linear::wo, xb, q_dim, xb2, dim, n, dim, q_dim, r.pos[0]});
#pragma omp parallel for schedule(static) if (rows_parallel)
    for (int i = 0; i < n; ++i) {
      float* xi = x + std::size_t(i) * dim;
      const float* add = xb2 + std::size_t(i) * dim;
      for (int j = 0; j < dim; ++j) xi[j] += add[j];
      rmsnorm(xb + std::size_t(i) * dim, xi, lw.ffn_norm.data(), dim, c.norm_eps);
    }
    r.linear({l, Linear::w1, xb, dim, hb, hidden, n, hidden, dim, r.pos[0]});
    r.linear({l, Linear::w3, xb, dim, hb2, hidden, n, hidden, dim, r.pos[0]});
#pragma omp parallel for schedule(static) if (rows_parallel)
    for (int i = 0; i < n; ++i) swiglu(hb + std::size_t(i) * hidden, hb2 + std::size_t(i) * hidden, hidden);
    r.linear({l, Linear::w2, hb, hidden, xb, dim, n, dim, hidden, r.pos[0]});
#pragma omp parallel for schedule(static) if (rows_parallel)
    for (std::size_t j = 0; j < rows(dim); ++j) x[j] += xb[j];
  }
  if (r.block_input) (*r.block_input)(c.n_layers, x);
#pragma omp parallel for schedule(static) if (rows_parallel)
  for (int i = 0; i < n; ++i)
    rmsnorm(x + std::size_t(i) * dim, x + std::size_t(i) * dim, w.final_norm.data(), dim, c.norm_eps);
  return x;
}

}  // namespace

bool Transformer::supports_block() const { return typeid(*this) == typeid(Transformer); }

bool Transformer::plain_batched() const { return block_batched() && typeid(*this) == typeid(Transformer); }

void Transformer::linear_rows(const LinearRows& call) {
  matmul_rows(call.x, call.ldx, call.n, weight_of(call.layer, call.which), call.rows, call.cols, call.y, call.ldy);
}

const float* Transformer::forward_block(std::span<const int> tokens, int pos0, int logits_from) {
  return run_block(tokens, pos0, logits_from, 0, nullptr, nullptr);
}

const float* Transformer::forward_windows(std::span<const int> tokens, int windows, int length, int logits_from) {
  const auto& c = model_.config;
  if (!plain_batched()) throw std::logic_error("forward_windows: the pass does not run batched");
  if (windows < 1 || length < 1 || tokens.size() != static_cast<std::size_t>(windows) * length)
    throw std::invalid_argument("forward_windows: tokens are not windows x length");
  if (static_cast<long>(windows) * length > c.seq_len) throw std::out_of_range("forward_windows: windows past the context");
  if (logits_from < 0 || logits_from >= length) throw std::invalid_argument("forward_windows: logits_from outside a window");
  const int n = windows * length;
  for (int i = 0; i < n; ++i) check_input(tokens[i], i % length);
  ensure_cache();
  std::vector<int> pos(static_cast<std::size_t>(n));
  std::vector<float*> keys(pos.size()), values(pos.size());
  for (int i = 0; i < n; ++i) {
    pos[i] = i % length;
    const std::size_t base = static_cast<std::size_t>(i / length) * length * c.kv_dim();
    keys[i] = key_cache_.data() + base;
    values[i] = value_cache_.data() + base;
  }
  const std::function<void(const LinearRows&)> linear = [this](const LinearRows& call) { linear_rows(call); };
  const std::function<void(int, int, float*, float*)> no_kv_hook;
  Rows rows{n, tokens.data(), pos.data(), keys.data(), values.data(), length > 1, false, linear, no_kv_hook};
  rows.segments = length > 1 ? windows : 1;
  const float* x = run_layers(model_, rows);
  // The classifier over the kept rows of every window, gathered first.
  const auto dim = static_cast<std::size_t>(c.dim), vocab = static_cast<std::size_t>(c.vocab_size);
  const int kept = length - logits_from;
  thread_local std::vector<float> gathered;
  float* g = sized(gathered, static_cast<std::size_t>(windows) * kept * dim);
  for (int w = 0; w < windows; ++w)
    std::memcpy(g + static_cast<std::size_t>(w) * kept * dim, x + (static_cast<std::size_t>(w) * length + logits_from) * dim,
                kept * dim * sizeof(float));
  block_logits_.resize(static_cast<std::size_t>(windows) * kept * vocab);
  linear_rows({-1, model::Linear::cls, g, c.dim, block_logits_.data(), c.vocab_size, windows * kept, c.vocab_size, c.dim,
               logits_from});
  return block_logits_.data();
}

const float* Transformer::forward_block_from(int first_layer, const float* x, std::span<const int> tokens, int pos0,
                                             const BlockInputFn& block_input) {
  if (!block_batched()) throw std::logic_error("forward_block_from: the pass does not run batched");
  if (first_layer < 0 || first_layer > model_.config.n_layers || (first_layer > 0 && !x))
    throw std::invalid_argument("forward_block_from: no residual stream for block " + std::to_string(first_layer));
  return run_block(tokens, pos0, 0, first_layer, x, block_input ? &block_input : nullptr);
}

const float* Transformer::run_block(std::span<const int> tokens, int pos0, int logits_from, int first_layer,
                                    const float* x_in, const BlockInputFn* block_input) {
  const auto& c = model_.config;
  const int n = static_cast<int>(tokens.size());
  if (n == 0) throw std::invalid_argument("forward_block: no tokens");
  if (pos0 < 0 || static_cast<long>(pos0) + n > c.seq_len) throw std::out_of_range("position past the model's context");
  if (logits_from < 0 || logits_from >= n) throw std::invalid_argument("forward_block: logits_from outside the block");
  const auto vocab = static_cast<std::size_t>(c.vocab_size);
  block_logits_.resize(static_cast<std::size_t>(n - logits_from) * vocab);
  if (!block_batched()) {
    for (int i = 0; i < n; ++i) {
      const float* out = forward(tokens[i], pos0 + i);
      if (i >= logits_from)
        std::memcpy(block_logits_.data() + static_cast<std::size_t>(i - logits_from) * vocab, out, vocab * sizeof(float));
    }
    return block_logits_.data();
  }
  for (int i = 0; i < n; ++i) check_input(tokens[i], pos0 + i);
  ensure_cache();
  std::vector<int> pos(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) pos[i] = pos0 + i;
  std::vector<float*> keys(pos.size(), key_cache_.data()), values(pos.size(), value_cache_.data());
  const std::function<void(const LinearRows&)> linear = [this](const LinearRows& call) { linear_rows(call); };
  const std::function<void(int, int, float*, float*)> kv_stored = [this, pos0](int layer, int row, float* k, float* v) {
    on_kv_stored(layer, pos0 + row, k, v);
  };
  const bool gemm_attention = n > 1 && !block_keeps_token_bits();
  const float* x = run_layers(model_, {n, tokens.data(), pos.data(), keys.data(), values.data(), gemm_attention, true,
                                       linear, kv_stored, first_layer, x_in, block_input});
  linear_rows({-1, model::Linear::cls, x + static_cast<std::size_t>(logits_from) * c.dim, c.dim, block_logits_.data(),
               c.vocab_size, n - logits_from, c.vocab_size, c.dim, pos0 + logits_from});
  return block_logits_.data();
}

void Transformer::forward_batch(std::span<Transformer* const> ts, std::span<const int> tokens,
                                std::span<const int> positions, std::vector<const float*>& logits) {
  if (tokens.size() != ts.size() || positions.size() != ts.size())
    throw std::invalid_argument("forward_batch: one token and one position per transformer");
  logits.assign(ts.size(), nullptr);
  bool batched = !ts.empty();
  for (Transformer* t : ts)
    batched = batched && t->plain_batched() && &t->model_ == &ts[0]->model_;
  if (!batched) {
    for (std::size_t i = 0; i < ts.size(); ++i) logits[i] = ts[i]->forward(tokens[i], positions[i]);
    return;
  }
  const int n = static_cast<int>(ts.size());
  std::vector<float*> keys(ts.size()), values(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j)
      if (ts[j] == ts[i]) throw std::invalid_argument("forward_batch: a transformer appears twice");
    ts[i]->check_input(tokens[i], positions[i]);
    ts[i]->ensure_cache();
    keys[i] = ts[i]->key_cache_.data();
    values[i] = ts[i]->value_cache_.data();
  }
  const model::Model& m = ts[0]->model_;
  const auto& c = m.config;
  Transformer* first = ts[0];
  const std::function<void(const LinearRows&)> linear = [first](const LinearRows& call) { first->linear_rows(call); };
  const std::function<void(int, int, float*, float*)> no_kv_hook;
  const float* x = run_layers(m, {n, tokens.data(), positions.data(), keys.data(), values.data(), false, false, linear, no_kv_hook});
  thread_local std::vector<float> all_logits;
  float* out = sized(all_logits, static_cast<std::size_t>(n) * c.vocab_size);
  linear({-1, model::Linear::cls, x, c.dim, out, c.vocab_size, n, c.vocab_size, c.dim, positions[0]});
  for (int i = 0; i < n; ++i) {
    std::memcpy(ts[i]->logits_.data(), out + static_cast<std::size_t>(i) * c.vocab_size,
                c.vocab_size * sizeof(float));
    logits[i] = ts[i]->logits_.data();
  }
}

}  // namespace engine
