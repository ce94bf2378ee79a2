#pragma once
// Batched forward and backward pass of a Llama-family model (RMSNorm, RoPE on interleaved
// pairs, causal grouped-query attention, SwiGLU, shared or separate classifier; Qwen2's q/k/v
// biases, Qwen3's per-head q/k norms and free head width) over B sequences of L tokens, with
// next-token cross-entropy. Every matrix product goes through a Matmul<T>. Same arithmetic
// as engine::Transformer (llama2.c order), but batched and keeping the activations the
// backward pass needs.
#include <functional>
#include <vector>

#include "model/config.hpp"
#include "train/matmul.hpp"
#include "train/params.hpp"

namespace train {

// B sequences of L+1 tokens each: positions 0..L-1 are inputs, 1..L are their targets.
struct Batch {
  int batch = 0;
  int seq = 0;
  std::vector<int> tokens;  // [batch][seq + 1]
};

template <typename T>
class Llama {
 public:
  explicit Llama(const model::Config& c);

  // Mean cross-entropy (nats per predicted token) of the batch.
  double loss(const Params<T>& p, const Batch& b, Matmul<T>& mm);
  // As loss, and writes d loss / d parameter into grad (same shapes as p; overwritten).
  // With `soft_targets` ([batch*seq][vocab] probabilities, e.g. a teacher's probs()), the
  // loss is instead the mean KL divergence KL(targets || model) per predicted token
  // (distillation), and its gradient.
  double loss_and_grad(const Params<T>& p, const Batch& b, Matmul<T>& mm, Params<T>& grad,
                       const std::vector<T>* soft_targets = nullptr);
  // Logits and softmax probabilities [batch*seq][vocab] of the last forward call.
  const std::vector<T>& logits() const { return logits_; }
  const std::vector<T>& probs() const { return probs_; }
  // Mean KL(targets || softmax(logits)) per predicted token of the last forward call.
  double kl_divergence(const std::vector<T>& targets) const;

  // When set, applied in place to the input rows of every linear layer (the classifier's
  // included) before its product, and kept as the input the weight gradient sees: the
  // activation side of quantization-aware training. Its own gradient is taken as the
  // identity (straight-through estimator).
  std::function<void(T* x, int rows, int cols)> round_linear_inputs;

 private:
  struct LayerActs {
    std::vector<T> x_in, r1, xn1, q, k, v, probs, att, x_mid, r2, xn2, h1, h3, hg;
    std::vector<T> q_pre, k_pre, rq, rk;  // Qwen3: q and k before their per-head norms, 1/rms per head
  };
  double forward(const Params<T>& p, const Batch& b, Matmul<T>& mm);
  // dlogits: d loss / d logits [batch*seq][vocab].
  void backward(const Params<T>& p, const Batch& b, Matmul<T>& mm, Params<T>& grad, std::vector<T> dlogits);
  void resize(int batch, int seq);
  void rope_tables(int seq);

  model::Config c_;
  int B_ = 0, L_ = 0;
  std::vector<T> cos_, sin_;  // [seq][head_dim/2]
  std::vector<LayerActs> acts_;
  std::vector<T> x_final_, rf_, xnf_, logits_, probs_;
  std::vector<double> log_sum_exp_;  // per row of logits_
};

}  // namespace train
