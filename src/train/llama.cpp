#include "train/llama.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace train {

namespace {

template <typename T>
Gemm<T> linear_fwd(const T* x, const T* w, T* y, int tokens, int out, int in) {
  // y[tokens][out] = x[tokens][in] W^T, W stored [out][in].
  Gemm<T> g;
  g.m = tokens, g.n = out, g.k = in;
  g.a = x, g.lda = in;
  g.b = w, g.ldb = in, g.trans_b = true;
  g.c = y, g.ldc = out;
  return g;
}

template <typename T>
Gemm<T> linear_dx(const T* dy, const T* w, T* dx, int tokens, int out, int in, bool accumulate) {
  // dx[tokens][in] (+)= dy[tokens][out] W.
  Gemm<T> g;
  g.m = tokens, g.n = in, g.k = out;
  g.a = dy, g.lda = out;
  g.b = w, g.ldb = in;
  g.c = dx, g.ldc = in;
  g.accumulate = accumulate;
  return g;
}

template <typename T>
Gemm<T> linear_dw(const T* dy, const T* x, T* dw, int tokens, int out, int in) {
  // dW[out][in] += dy^T x.
  Gemm<T> g;
  g.m = out, g.n = in, g.k = tokens;
  g.a = dy, g.lda = out, g.trans_a = true;
  g.b = x, g.ldb = in;
  g.c = dw, g.ldc = in;
  g.accumulate = true;
  return g;
}

// out = w * x / rms(x) per row; r[row] = 1 / rms.
// Threads only pay off above this many scalars of work (a parallel region costs a few us,
// far more on a loaded machine).
constexpr long kParallelWork = 1L << 16;

template <typename T>
void rmsnorm_rows(const T* x, const T* w, T* out, T* r, int rows, int dim, T eps) {
#pragma omp parallel for schedule(static) if (static_cast<long>(rows) * dim > kParallelWork)
  for (int n = 0; n < rows; ++n) {
    const T* xr = x + static_cast<std::size_t>(n) * dim;
    T ss = 0;
    for (int j = 0; j < dim; ++j) ss += xr[j] * xr[j];
    ss /= static_cast<T>(dim);
    ss += eps;
    const T inv = T(1) / std::sqrt(ss);
    r[n] = inv;
    T* o = out + static_cast<std::size_t>(n) * dim;
    for (int j = 0; j < dim; ++j) o[j] = w[j] * (inv * xr[j]);
  }
}

// dx += r dy w - x r^3 / dim * sum(dy w x); dw += dy x r (summed over rows, in a fixed
// order whatever the thread count: rows are cut into fixed chunks summed in chunk order).
template <typename T>
void rmsnorm_rows_backward(const T* dy, const T* x, const T* w, const T* r, T* dx, T* dw, int rows, int dim) {
  constexpr int kChunk = 64;
  const int chunks = (rows + kChunk - 1) / kChunk;
  std::vector<T> partial(static_cast<std::size_t>(chunks) * dim, T(0));
#pragma omp parallel for schedule(static) if (static_cast<long>(rows) * dim > kParallelWork)
  for (int ch = 0; ch < chunks; ++ch) {
    T* dwp = &partial[static_cast<std::size_t>(ch) * dim];
    for (int n = ch * kChunk; n < std::min(rows, (ch + 1) * kChunk); ++n) {
      const T* dyr = dy + static_cast<std::size_t>(n) * dim;
      const T* xr = x + static_cast<std::size_t>(n) * dim;
      T* dxr = dx + static_cast<std::size_t>(n) * dim;
      const T inv = r[n];
      T dot = 0;
      for (int j = 0; j < dim; ++j) dot += dyr[j] * w[j] * xr[j];
      const T coef = dot * inv * inv * inv / static_cast<T>(dim);
      for (int j = 0; j < dim; ++j) {
        dxr[j] += inv * dyr[j] * w[j] - xr[j] * coef;
        dwp[j] += dyr[j] * xr[j] * inv;
      }
    }
  }
  for (int ch = 0; ch < chunks; ++ch)
    for (int j = 0; j < dim; ++j) dw[j] += partial[static_cast<std::size_t>(ch) * dim + j];
}

// Rotates the interleaved pairs of vec [rows][width] (head-major, head_size each) by the
// angle of each row's position; sign -1 applies the inverse rotation (the backward pass).
// y[r][j] += bias[j] for rows r < n.
template <typename T>
void add_bias_rows(T* y, const T* bias, int n, int width) {
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < width; ++j) y[static_cast<std::size_t>(r) * width + j] += bias[j];
}

// out[j] = sum over rows r < n of d[r][j] (the gradient of a bias added to every row).
template <typename T>
void sum_rows(const T* d, int n, int width, T* out) {
  for (int j = 0; j < width; ++j) out[j] = T(0);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < width; ++j) out[j] += d[static_cast<std::size_t>(r) * width + j];
}

template <typename T>
void rope_rows(T* vec, int rows, int width, int seq, int head_size, const T* cos, const T* sin, T sign) {
  const int half = head_size / 2;
#pragma omp parallel for schedule(static) if (static_cast<long>(rows) * width > kParallelWork)
  for (int n = 0; n < rows; ++n) {
    const int pos = n % seq;
    T* v = vec + static_cast<std::size_t>(n) * width;
    for (int i = 0; i < width; i += 2) {
      const int f = (i % head_size) / 2;
      const T c = cos[pos * half + f], s = sign * sin[pos * half + f];
      const T v0 = v[i], v1 = v[i + 1];
      v[i] = v0 * c - v1 * s;
      v[i + 1] = v0 * s + v1 * c;
    }
  }
}

template <typename T>
T sigmoid(T a) {
  return T(1) / (T(1) + std::exp(-a));
}

}  // namespace

template <typename T>
Llama<T>::Llama(const model::Config& c) : c_(c) {
  if (!c.llama_family()) throw std::invalid_argument("training supports llama, qwen2 and qwen3 models only");
  if (c.head_dim() % 2 != 0) throw std::invalid_argument("rotary embedding needs an even head dimension");
}

template <typename T>
void Llama<T>::rope_tables(int seq) {
  const int hs = c_.head_dim(), half = hs / 2;
  cos_.resize(static_cast<std::size_t>(seq) * half);
  sin_.resize(cos_.size());
  for (int pos = 0; pos < seq; ++pos)
    for (int f = 0; f < half; ++f) {
      // As the engine: the frequency in the working precision of T.
      const T freq = T(1) / std::pow(static_cast<T>(c_.rope_theta), static_cast<T>(2 * f) / static_cast<T>(hs));
      const T val = static_cast<T>(pos) * freq;
      cos_[static_cast<std::size_t>(pos) * half + f] = std::cos(val);
      sin_[static_cast<std::size_t>(pos) * half + f] = std::sin(val);
    }
}

template <typename T>
void Llama<T>::resize(int batch, int seq) {
  if (batch == B_ && seq == L_) return;
  if (seq > c_.seq_len) throw std::invalid_argument("sequence longer than the model's context");
  B_ = batch, L_ = seq;
  const std::size_t N = static_cast<std::size_t>(batch) * seq;
  const std::size_t D = c_.dim, Q = static_cast<std::size_t>(c_.n_heads) * c_.head_dim(), KV = c_.kv_dim(),
                    H = c_.hidden_dim, V = c_.vocab_size;
  acts_.resize(static_cast<std::size_t>(c_.n_layers));
  for (auto& a : acts_) {
    a.x_in.resize(N * D), a.r1.resize(N), a.xn1.resize(N * D);
    a.q.resize(N * Q), a.k.resize(N * KV), a.v.resize(N * KV);
    if (c_.qk_norm) {
      a.q_pre.resize(N * Q), a.k_pre.resize(N * KV);
      a.rq.resize(N * c_.n_heads), a.rk.resize(N * c_.n_kv_heads);
    }
    a.probs.resize(static_cast<std::size_t>(batch) * c_.n_heads * seq * seq);
    a.att.resize(N * Q), a.x_mid.resize(N * D), a.r2.resize(N), a.xn2.resize(N * D);
    a.h1.resize(N * H), a.h3.resize(N * H), a.hg.resize(N * H);
  }
  x_final_.resize(N * D), rf_.resize(N), xnf_.resize(N * D), logits_.resize(N * V), probs_.resize(N * V);
  log_sum_exp_.resize(N);
  rope_tables(seq);
}

template <typename T>
double Llama<T>::forward(const Params<T>& p, const Batch& b, Matmul<T>& mm) {
  if (b.batch <= 0 || b.seq <= 0 || b.tokens.size() != static_cast<std::size_t>(b.batch) * (b.seq + 1))
    throw std::invalid_argument("batch tokens do not match batch x (seq + 1)");
  resize(b.batch, b.seq);
  const int N = B_ * L_, D = c_.dim, hs = c_.head_dim(), Q = c_.n_heads * hs, KV = c_.kv_dim(), H = c_.hidden_dim,
            V = c_.vocab_size;
  const int kv_mul = c_.n_heads / c_.n_kv_heads;
  const T eps = static_cast<T>(c_.norm_eps);
  const T inv_sqrt = T(1) / std::sqrt(static_cast<T>(hs));
  for (int t : b.tokens)
    if (t < 0 || t >= V) throw std::invalid_argument("token id out of range");

  std::vector<T> x(static_cast<std::size_t>(N) * D), y(static_cast<std::size_t>(N) * D);
  for (int s = 0; s < B_; ++s)
    for (int t = 0; t < L_; ++t) {
      const int tok = b.tokens[static_cast<std::size_t>(s) * (L_ + 1) + t];
      std::memcpy(&x[(static_cast<std::size_t>(s) * L_ + t) * D], &p.token_embedding[static_cast<std::size_t>(tok) * D],
                  D * sizeof(T));
    }

  for (int l = 0; l < c_.n_layers; ++l) {
    const auto& w = p.layers[static_cast<std::size_t>(l)];
    auto& a = acts_[static_cast<std::size_t>(l)];
    a.x_in = x;
    rmsnorm_rows(x.data(), w.attn_norm.data(), a.xn1.data(), a.r1.data(), N, D, eps);
    if (round_linear_inputs) round_linear_inputs(a.xn1.data(), N, D);
    mm.gemm(linear_fwd(a.xn1.data(), w.wq.data(), a.q.data(), N, Q, D));
    mm.gemm(linear_fwd(a.xn1.data(), w.wk.data(), a.k.data(), N, KV, D));
    mm.gemm(linear_fwd(a.xn1.data(), w.wv.data(), a.v.data(), N, KV, D));
    if (c_.qkv_bias) {  // Qwen2: before RoPE, as engine::Transformer adds them
      add_bias_rows(a.q.data(), w.bq.data(), N, Q);
      add_bias_rows(a.k.data(), w.bk.data(), N, KV);
      add_bias_rows(a.v.data(), w.bv.data(), N, KV);
    }
    if (c_.qk_norm) {  // Qwen3: each head of q and k RMS-normed with one gain per head width
      a.q_pre = a.q;
      a.k_pre = a.k;
      rmsnorm_rows(a.q_pre.data(), w.q_norm.data(), a.q.data(), a.rq.data(), N * c_.n_heads, hs, eps);
      rmsnorm_rows(a.k_pre.data(), w.k_norm.data(), a.k.data(), a.rk.data(), N * c_.n_kv_heads, hs, eps);
    }
    rope_rows(a.q.data(), N, Q, L_, hs, cos_.data(), sin_.data(), T(1));
    rope_rows(a.k.data(), N, KV, L_, hs, cos_.data(), sin_.data(), T(1));

    const bool parallel_attention = static_cast<long>(B_) * c_.n_heads * L_ * L_ * hs > kParallelWork;
#pragma omp parallel for collapse(2) schedule(static) if (parallel_attention)
    for (int s = 0; s < B_; ++s)
      for (int h = 0; h < c_.n_heads; ++h) {
        const std::size_t row0 = static_cast<std::size_t>(s) * L_;
        const int kv_off = (h / kv_mul) * hs;
        T* P = &a.probs[(static_cast<std::size_t>(s) * c_.n_heads + h) * L_ * L_];
        Gemm<T> sc;  // S = Q K^T / sqrt(head_size)
        sc.m = L_, sc.n = L_, sc.k = hs;
        sc.a = &a.q[row0 * Q + h * hs], sc.lda = Q;
        sc.b = &a.k[row0 * KV + kv_off], sc.ldb = KV, sc.trans_b = true;
        sc.c = P, sc.ldc = L_;
        sc.alpha = inv_sqrt;
        mm.gemm(sc);
        for (int i = 0; i < L_; ++i) {  // causal softmax of row i over keys 0..i
          T* row = P + static_cast<std::size_t>(i) * L_;
          T mx = row[0];
          for (int j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
          T sum = 0;
          for (int j = 0; j <= i; ++j) {
            row[j] = std::exp(row[j] - mx);
            sum += row[j];
          }
          for (int j = 0; j <= i; ++j) row[j] /= sum;
          for (int j = i + 1; j < L_; ++j) row[j] = 0;
        }
        Gemm<T> pv;  // O = P V
        pv.m = L_, pv.n = hs, pv.k = L_;
        pv.a = P, pv.lda = L_;
        pv.b = &a.v[row0 * KV + kv_off], pv.ldb = KV;
        pv.c = &a.att[row0 * Q + h * hs], pv.ldc = Q;
        mm.gemm(pv);
      }

    if (round_linear_inputs) round_linear_inputs(a.att.data(), N, Q);
    mm.gemm(linear_fwd(a.att.data(), w.wo.data(), y.data(), N, D, Q));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    a.x_mid = x;
    rmsnorm_rows(x.data(), w.ffn_norm.data(), a.xn2.data(), a.r2.data(), N, D, eps);
    if (round_linear_inputs) round_linear_inputs(a.xn2.data(), N, D);
    mm.gemm(linear_fwd(a.xn2.data(), w.w1.data(), a.h1.data(), N, H, D));
    mm.gemm(linear_fwd(a.xn2.data(), w.w3.data(), a.h3.data(), N, H, D));
    for (std::size_t i = 0; i < a.hg.size(); ++i) {
      const T g = a.h1[i];
      a.hg[i] = g * sigmoid(g) * a.h3[i];
    }
    if (round_linear_inputs) round_linear_inputs(a.hg.data(), N, H);
    mm.gemm(linear_fwd(a.hg.data(), w.w2.data(), y.data(), N, D, H));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  }
  x_final_ = x;
  rmsnorm_rows(x.data(), p.final_norm.data(), xnf_.data(), rf_.data(), N, D, eps);
  if (round_linear_inputs) round_linear_inputs(xnf_.data(), N, D);
  const std::vector<T>& cls = p.classifier.empty() ? p.token_embedding : p.classifier;
  mm.gemm(linear_fwd(xnf_.data(), cls.data(), logits_.data(), N, V, D));

  std::vector<double> nll(static_cast<std::size_t>(N));
#pragma omp parallel for schedule(static) if (static_cast<long>(N) * V > kParallelWork)
  for (int n = 0; n < N; ++n) {
    const int s = n / L_, t = n % L_;
    const int target = b.tokens[static_cast<std::size_t>(s) * (L_ + 1) + t + 1];
    const T* z = &logits_[static_cast<std::size_t>(n) * V];
    T* pr = &probs_[static_cast<std::size_t>(n) * V];
    T mx = z[0];
    for (int j = 1; j < V; ++j) mx = std::max(mx, z[j]);
    T sum = 0;
    for (int j = 0; j < V; ++j) {
      pr[j] = std::exp(z[j] - mx);
      sum += pr[j];
    }
    for (int j = 0; j < V; ++j) pr[j] /= sum;
    log_sum_exp_[static_cast<std::size_t>(n)] = static_cast<double>(std::log(sum) + mx);
    nll[static_cast<std::size_t>(n)] = static_cast<double>(std::log(sum) + mx - z[target]);
  }
  double total = 0;
  for (double v : nll) total += v;  // in token order: the same bits whatever the thread count
  return total / N;
}

template <typename T>
void Llama<T>::backward(const Params<T>& p, const Batch& b, Matmul<T>& mm, Params<T>& grad, std::vector<T> dlogits) {
  const int N = B_ * L_, D = c_.dim, hs = c_.head_dim(), Q = c_.n_heads * hs, KV = c_.kv_dim(), H = c_.hidden_dim,
            V = c_.vocab_size;
  const int kv_mul = c_.n_heads / c_.n_kv_heads;
  const T inv_sqrt = T(1) / std::sqrt(static_cast<T>(hs));
  const bool shared = p.classifier.empty();

  const std::vector<T>& cls = shared ? p.token_embedding : p.classifier;
  std::vector<T>& dcls = shared ? grad.token_embedding : grad.classifier;
  mm.gemm(linear_dw(dlogits.data(), xnf_.data(), dcls.data(), N, V, D));
  std::vector<T> dxn(static_cast<std::size_t>(N) * D);
  mm.gemm(linear_dx(dlogits.data(), cls.data(), dxn.data(), N, V, D, false));
  std::vector<T> dx(static_cast<std::size_t>(N) * D, T(0));
  rmsnorm_rows_backward(dxn.data(), x_final_.data(), p.final_norm.data(), rf_.data(), dx.data(), grad.final_norm.data(), N, D);

  std::vector<T> dhg(static_cast<std::size_t>(N) * H), dh1(dhg.size()), dh3(dhg.size());
  std::vector<T> datt(static_cast<std::size_t>(N) * Q), dq(datt.size());
  std::vector<T> dk(static_cast<std::size_t>(N) * KV), dv(dk.size());
  std::vector<T> dq_pre(c_.qk_norm ? dq.size() : 0), dk_pre(c_.qk_norm ? dk.size() : 0);
  for (int l = c_.n_layers - 1; l >= 0; --l) {
    const auto& w = p.layers[static_cast<std::size_t>(l)];
    auto& g = grad.layers[static_cast<std::size_t>(l)];
    const auto& a = acts_[static_cast<std::size_t>(l)];

    // Feed-forward: x_out = x_mid + (silu(h1) * h3) W2^T.
    mm.gemm(linear_dw(dx.data(), a.hg.data(), g.w2.data(), N, D, H));
    mm.gemm(linear_dx(dx.data(), w.w2.data(), dhg.data(), N, D, H, false));
    for (std::size_t i = 0; i < dhg.size(); ++i) {
      const T h = a.h1[i], sg = sigmoid(h);
      const T silu = h * sg;
      dh3[i] = dhg[i] * silu;
      dh1[i] = dhg[i] * a.h3[i] * sg * (T(1) + h * (T(1) - sg));
    }
    mm.gemm(linear_dw(dh1.data(), a.xn2.data(), g.w1.data(), N, H, D));
    mm.gemm(linear_dw(dh3.data(), a.xn2.data(), g.w3.data(), N, H, D));
    mm.gemm(linear_dx(dh1.data(), w.w1.data(), dxn.data(), N, H, D, false));
    mm.gemm(linear_dx(dh3.data(), w.w3.data(), dxn.data(), N, H, D, true));
    rmsnorm_rows_backward(dxn.data(), a.x_mid.data(), w.ffn_norm.data(), a.r2.data(), dx.data(), g.ffn_norm.data(), N, D);

    // Attention output projection: x_mid = x_in + att Wo^T.
    mm.gemm(linear_dw(dx.data(), a.att.data(), g.wo.data(), N, D, Q));
    mm.gemm(linear_dx(dx.data(), w.wo.data(), datt.data(), N, D, Q, false));

    // Attention, one task per (sequence, key/value head) so that the heads sharing a
    // key/value head accumulate into dk, dv without races.
    const bool parallel_attention = static_cast<long>(B_) * c_.n_heads * L_ * L_ * hs > kParallelWork;
#pragma omp parallel for collapse(2) schedule(static) if (parallel_attention)
    for (int s = 0; s < B_; ++s)
      for (int kvh = 0; kvh < c_.n_kv_heads; ++kvh) {
        const std::size_t row0 = static_cast<std::size_t>(s) * L_;
        const int kv_off = kvh * hs;
        std::vector<T> dP(static_cast<std::size_t>(L_) * L_);
        for (int h = kvh * kv_mul; h < (kvh + 1) * kv_mul; ++h) {
          const T* P = &a.probs[(static_cast<std::size_t>(s) * c_.n_heads + h) * L_ * L_];
          const T* dO = &datt[row0 * Q + h * hs];
          Gemm<T> g1;  // dP = dO V^T
          g1.m = L_, g1.n = L_, g1.k = hs;
          g1.a = dO, g1.lda = Q;
          g1.b = &a.v[row0 * KV + kv_off], g1.ldb = KV, g1.trans_b = true;
          g1.c = dP.data(), g1.ldc = L_;
          mm.gemm(g1);
          Gemm<T> g2;  // dV += P^T dO
          g2.m = L_, g2.n = hs, g2.k = L_;
          g2.a = P, g2.lda = L_, g2.trans_a = true;
          g2.b = dO, g2.ldb = Q;
          g2.c = &dv[row0 * KV + kv_off], g2.ldc = KV;
          g2.accumulate = h != kvh * kv_mul;
          mm.gemm(g2);
          // dS = P * (dP - sum_j P dP) / sqrt(head_size)
          for (int i = 0; i < L_; ++i) {
            const T* pr = P + static_cast<std::size_t>(i) * L_;
            T* dr = &dP[static_cast<std::size_t>(i) * L_];
            T dot = 0;
            for (int j = 0; j <= i; ++j) dot += pr[j] * dr[j];
            for (int j = 0; j <= i; ++j) dr[j] = pr[j] * (dr[j] - dot) * inv_sqrt;
            for (int j = i + 1; j < L_; ++j) dr[j] = 0;
          }
          Gemm<T> g3;  // dQ = dS K
          g3.m = L_, g3.n = hs, g3.k = L_;
          g3.a = dP.data(), g3.lda = L_;
          g3.b = &a.k[row0 * KV + kv_off], g3.ldb = KV;
          g3.c = &dq[row0 * Q + h * hs], g3.ldc = Q;
          mm.gemm(g3);
          Gemm<T> g4;  // dK += dS^T Q
          g4.m = L_, g4.n = hs, g4.k = L_;
          g4.a = dP.data(), g4.lda = L_, g4.trans_a = true;
          g4.b = &a.q[row0 * Q + h * hs], g4.ldb = Q;
          g4.c = &dk[row0 * KV + kv_off], g4.ldc = KV;
          g4.accumulate = h != kvh * kv_mul;
          mm.gemm(g4);
        }
      }
    rope_rows(dq.data(), N, Q, L_, hs, cos_.data(), sin_.data(), T(-1));
    rope_rows(dk.data(), N, KV, L_, hs, cos_.data(), sin_.data(), T(-1));
    if (c_.qk_norm) {
      std::fill(dq_pre.begin(), dq_pre.end(), T(0));
      std::fill(dk_pre.begin(), dk_pre.end(), T(0));
      rmsnorm_rows_backward(dq.data(), a.q_pre.data(), w.q_norm.data(), a.rq.data(), dq_pre.data(), g.q_norm.data(),
                            N * c_.n_heads, hs);
      rmsnorm_rows_backward(dk.data(), a.k_pre.data(), w.k_norm.data(), a.rk.data(), dk_pre.data(), g.k_norm.data(),
                            N * c_.n_kv_heads, hs);
      dq.swap(dq_pre);
      dk.swap(dk_pre);
    }
    if (c_.qkv_bias) {
      sum_rows(dq.data(), N, Q, g.bq.data());
      sum_rows(dk.data(), N, KV, g.bk.data());
      sum_rows(dv.data(), N, KV, g.bv.data());
    }

    mm.gemm(linear_dw(dq.data(), a.xn1.data(), g.wq.data(), N, Q, D));
    mm.gemm(linear_dw(dk.data(), a.xn1.data(), g.wk.data(), N, KV, D));
    mm.gemm(linear_dw(dv.data(), a.xn1.data(), g.wv.data(), N, KV, D));
    mm.gemm(linear_dx(dq.data(), w.wq.data(), dxn.data(), N, Q, D, false));
    mm.gemm(linear_dx(dk.data(), w.wk.data(), dxn.data(), N, KV, D, true));
    mm.gemm(linear_dx(dv.data(), w.wv.data(), dxn.data(), N, KV, D, true));
    rmsnorm_rows_backward(dxn.data(), a.x_in.data(), w.attn_norm.data(), a.r1.data(), dx.data(), g.attn_norm.data(), N, D);
  }

  for (int s = 0; s < B_; ++s)
    for (int t = 0; t < L_; ++t) {
      const int tok = b.tokens[static_cast<std::size_t>(s) * (L_ + 1) + t];
      T* row = &grad.token_embedding[static_cast<std::size_t>(tok) * D];
      const T* d = &dx[(static_cast<std::size_t>(s) * L_ + t) * D];
      for (int j = 0; j < D; ++j) row[j] += d[j];
    }
}

template <typename T>
double Llama<T>::kl_divergence(const std::vector<T>& targets) const {
  // KL(t || softmax(z)) = sum_j t_j (log t_j - z_j + log sum_k exp z_k).
  if (targets.size() != logits_.size()) throw std::invalid_argument("soft targets do not match batch x seq x vocab");
  const int N = B_ * L_, V = c_.vocab_size;
  double kl = 0;
  for (int n = 0; n < N; ++n) {
    const T* t = &targets[static_cast<std::size_t>(n) * V];
    const T* z = &logits_[static_cast<std::size_t>(n) * V];
    double row = 0;
    for (int j = 0; j < V; ++j)
      if (t[j] > T(0))
        row += static_cast<double>(t[j]) *
               (std::log(static_cast<double>(t[j])) - static_cast<double>(z[j]) + log_sum_exp_[static_cast<std::size_t>(n)]);
    kl += row;
  }
  return kl / N;
}

template <typename T>
double Llama<T>::loss(const Params<T>& p, const Batch& b, Matmul<T>& mm) {
  return forward(p, b, mm);
}

template <typename T>
double Llama<T>::loss_and_grad(const Params<T>& p, const Batch& b, Matmul<T>& mm, Params<T>& grad,
                               const std::vector<T>* soft_targets) {
  double l = forward(p, b, mm);
  const int N = B_ * L_, V = c_.vocab_size;
  const T invN = T(1) / static_cast<T>(N);
  std::vector<T> dlogits(probs_);
  if (soft_targets) {
    // d KL / d z = softmax(z) - t.
    l = kl_divergence(*soft_targets);
    for (std::size_t i = 0; i < dlogits.size(); ++i) dlogits[i] = (dlogits[i] - (*soft_targets)[i]) * invN;
  } else {
    // (softmax - onehot) / N.
    for (int n = 0; n < N; ++n) {
      const int s = n / L_, t = n % L_;
      const int target = b.tokens[static_cast<std::size_t>(s) * (L_ + 1) + t + 1];
      dlogits[static_cast<std::size_t>(n) * V + target] -= T(1);
    }
    for (auto& v : dlogits) v *= invN;
  }
  if (grad.size() != p.size() || grad.layers.size() != p.layers.size() || grad.classifier.size() != p.classifier.size())
    grad = zeros_like(p);
  for (auto& t : grad.tensors()) std::fill(t.data->begin(), t.data->end(), T(0));
  backward(p, b, mm, grad, std::move(dlogits));
  return l;
}

template class Llama<float>;
template class Llama<double>;

}  // namespace train
