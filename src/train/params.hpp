#pragma once
// Trainable parameters of a Llama-family model in scalar type T (fp32 master weights, or
// fp64 for gradient checks), with the same layout as model::Weights; gradients and
// optimizer moments use the same type.
#include <string>
#include <vector>

#include "model/model.hpp"

namespace train {

template <typename T>
struct LayerParams {
  std::vector<T> attn_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3;
  std::vector<T> bq, bk, bv;  // q/k/v biases (Qwen2, model::Config::qkv_bias); empty otherwise
  std::vector<T> q_norm, k_norm;  // per-head q/k norm gains [head_dim] (Qwen3, qk_norm); empty otherwise
};

template <typename T>
struct Params {
  std::vector<T> token_embedding;  // [vocab][dim]
  std::vector<LayerParams<T>> layers;
  std::vector<T> final_norm;       // [dim]
  std::vector<T> classifier;       // [vocab][dim]; empty when shared with the embedding

  struct Tensor {
    std::string name;    // "tok_embeddings", "blk.0.wq", "blk.0.attn_norm", "norm", "output"
    std::vector<T>* data;
    bool decay;          // matrices and embeddings take weight decay; norm gains do not
  };
  // Every tensor in a fixed order (embedding, blocks, final norm, classifier if separate).
  std::vector<Tensor> tensors();
  std::size_t size() const;  // total number of scalars
};

template <typename T>
Params<T> from_weights(const model::Weights& w);
// Same shapes as p, all zero.
template <typename T>
Params<T> zeros_like(const Params<T>& p);
// Writes fp32 values back into model weights of the same shape.
void to_weights(const Params<float>& p, model::Weights& w);

}  // namespace train
