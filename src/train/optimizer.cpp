#include "train/optimizer.hpp"

#include <cmath>

namespace train {

template <typename T>
double global_norm(Params<T>& grad) {
  double ss = 0;
  for (auto& t : grad.tensors())
    for (T g : *t.data) ss += static_cast<double>(g) * static_cast<double>(g);
  return std::sqrt(ss);
}

template <typename T>
AdamW<T>::AdamW(const Params<T>& p, AdamWOptions o) : o_(o), m_(zeros_like(p)), v_(zeros_like(p)) {}

template <typename T>
double AdamW<T>::step(Params<T>& p, Params<T>& grad) {
  const double norm = global_norm(grad);
  const double clip = o_.clip_norm > 0 && norm > o_.clip_norm ? o_.clip_norm / norm : 1.0;
  ++t_;
  const double bc1 = 1.0 - std::pow(o_.beta1, t_), bc2 = 1.0 - std::pow(o_.beta2, t_);
  auto pt = p.tensors(), gt = grad.tensors(), mt = m_.tensors(), vt = v_.tensors();
  for (std::size_t i = 0; i < pt.size(); ++i) {
    auto& w = *pt[i].data;
    auto& g = *gt[i].data;
    auto& m = *mt[i].data;
    auto& v = *vt[i].data;
    const double decay = pt[i].decay ? o_.weight_decay : 0.0;
#pragma omp parallel for schedule(static) if (w.size() > 16384)
    for (std::size_t j = 0; j < w.size(); ++j) {
      const double gj = static_cast<double>(g[j]) * clip;
      g[j] = static_cast<T>(gj);
      const double mj = o_.beta1 * m[j] + (1 - o_.beta1) * gj;
      const double vj = o_.beta2 * v[j] + (1 - o_.beta2) * gj * gj;
      m[j] = static_cast<T>(mj);
      v[j] = static_cast<T>(vj);
      const double update = (mj / bc1) / (std::sqrt(vj / bc2) + o_.eps) + decay * w[j];
      w[j] = static_cast<T>(w[j] - o_.lr * update);
    }
  }
  return norm;
}

template class AdamW<float>;
template class AdamW<double>;
template double global_norm<float>(Params<float>&);
template double global_norm<double>(Params<double>&);

}  // namespace train
