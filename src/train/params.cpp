#include "train/params.hpp"

#include <algorithm>

namespace train {

namespace {

template <typename T>
std::vector<T> convert(const std::vector<float>& v) {
  return std::vector<T>(v.begin(), v.end());
}

}  // namespace

template <typename T>
std::vector<typename Params<T>::Tensor> Params<T>::tensors() {
  std::vector<Tensor> t;
  t.push_back({"tok_embeddings", &token_embedding, true});
  for (std::size_t l = 0; l < layers.size(); ++l) {
    auto& L = layers[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    t.push_back({p + "attn_norm", &L.attn_norm, false});
    t.push_back({p + "wq", &L.wq, true});
    t.push_back({p + "wk", &L.wk, true});
    t.push_back({p + "wv", &L.wv, true});
    t.push_back({p + "wo", &L.wo, true});
    t.push_back({p + "ffn_norm", &L.ffn_norm, false});
    t.push_back({p + "w1", &L.w1, true});
    t.push_back({p + "w2", &L.w2, true});
    t.push_back({p + "w3", &L.w3, true});
    if (!L.bq.empty()) {
      t.push_back({p + "bq", &L.bq, false});
      t.push_back({p + "bk", &L.bk, false});
      t.push_back({p + "bv", &L.bv, false});
    }
    if (!L.q_norm.empty()) {
      t.push_back({p + "q_norm", &L.q_norm, false});
      t.push_back({p + "k_norm", &L.k_norm, false});
    }
  }
  t.push_back({"norm", &final_norm, false});
  if (!classifier.empty()) t.push_back({"output", &classifier, true});
  return t;
}

template <typename T>
std::size_t Params<T>::size() const {
  std::size_t n = token_embedding.size() + final_norm.size() + classifier.size();
  for (const auto& L : layers)
    n += L.attn_norm.size() + L.wq.size() + L.wk.size() + L.wv.size() + L.wo.size() + L.ffn_norm.size() +
         L.w1.size() + L.w2.size() + L.w3.size() + L.bq.size() + L.bk.size() + L.bv.size() + L.q_norm.size() +
         L.k_norm.size();
  return n;
}

template <typename T>
Params<T> from_weights(const model::Weights& w) {
  Params<T> p;
  p.token_embedding = convert<T>(w.token_embedding);
  for (const auto& L : w.layers) {
    p.layers.push_back({convert<T>(L.attn_norm), convert<T>(L.wq), convert<T>(L.wk), convert<T>(L.wv),
                        convert<T>(L.wo), convert<T>(L.ffn_norm), convert<T>(L.w1), convert<T>(L.w2),
                        convert<T>(L.w3), convert<T>(L.bq), convert<T>(L.bk), convert<T>(L.bv),
                        convert<T>(L.q_norm), convert<T>(L.k_norm)});
  }
  p.final_norm = convert<T>(w.final_norm);
  p.classifier = convert<T>(w.classifier);
  return p;
}

template <typename T>
Params<T> zeros_like(const Params<T>& p) {
  Params<T> z = p;
  for (auto& t : z.tensors()) std::fill(t.data->begin(), t.data->end(), T(0));
  return z;
}

void to_weights(const Params<float>& p, model::Weights& w) {
  w.token_embedding = p.token_embedding;
  w.layers.resize(p.layers.size());
  for (std::size_t l = 0; l < p.layers.size(); ++l) {
    const auto& s = p.layers[l];
    auto& d = w.layers[l];
    d.attn_norm = s.attn_norm;
    d.wq = s.wq;
    d.wk = s.wk;
    d.wv = s.wv;
    d.wo = s.wo;
    d.ffn_norm = s.ffn_norm;
    d.w1 = s.w1;
    d.w2 = s.w2;
    d.w3 = s.w3;
    d.bq = s.bq;
    d.bk = s.bk;
    d.bv = s.bv;
    d.q_norm = s.q_norm;
    d.k_norm = s.k_norm;
  }
  w.final_norm = p.final_norm;
  w.classifier = p.classifier;
}

template struct Params<float>;
template struct Params<double>;
template Params<float> from_weights<float>(const model::Weights&);
template Params<double> from_weights<double>(const model::Weights&);
template Params<float> zeros_like<float>(const Params<float>&);
template Params<double> zeros_like<double>(const Params<double>&);

}  // namespace train
