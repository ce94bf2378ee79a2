#pragma once
// AdamW (Loshchilov & Hutter, decoupled weight decay) with global-norm gradient clipping,
// on fp32 (or fp64) master weights.
#include "train/params.hpp"

namespace train {

struct AdamWOptions {
  double lr = 1e-5;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // applied to matrices and embeddings, not to norm gains
  double clip_norm = 1.0;     // global L2 norm of all gradients; <= 0 disables clipping
};

template <typename T>
class AdamW {
 public:
  AdamW(const Params<T>& p, AdamWOptions o);
  // Clips grad in place to clip_norm, updates p, returns the gradient norm before clipping.
  double step(Params<T>& p, Params<T>& grad);
  int steps() const { return t_; }
  void set_lr(double lr) { o_.lr = lr; }
  const AdamWOptions& options() const { return o_; }

 private:
  AdamWOptions o_;
  Params<T> m_, v_;
  int t_ = 0;
};

// sqrt of the sum of squares of every gradient, accumulated in double.
template <typename T>
double global_norm(Params<T>& grad);

}  // namespace train
