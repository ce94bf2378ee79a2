#pragma once
// Deterministic random weights of a given shape, identical bytes on every machine and
// thread count, for tests and benchmarks of models nobody has to download.
//
// Algorithm (integer-only up to one final multiply, so no libm or <random> distribution is
// involved): element k of tensor t draws three 64-bit words SplitMix64(key_t + (3k+j+1)*G),
// j = 0..2, G = 0x9E3779B97F4A7C15, key_t = SplitMix64(seed ^ (t+1)*0xD1B54A32D192ED03),
// where t numbers the random tensors: 0 the embedding, 3 + kind*n_layers + layer for the
// block matrices (kind 0..6 = wq wk wv wo w1 w2 w3), 4 + 7*n_layers the classifier. The 12 16-bit halves-of-halves u_i of those words give the
// Irwin-Hall sum z = (sum(u_i) + 6)/65536 - 6, a normal-like value with mean 0 and variance
// exactly 1; the weight is float(z * std). Std: 0.02 for the embedding, wq, wk, wv, w1, w3
// and the classifier; 0.02/sqrt(2*n_layers) for wo and w2 (the residual-branch outputs, as
// GPT-2 scales them), so activations keep their size through depth. Norm weights (the
// per-head q/k norms included) are 1. The q/k/v biases (qkv_bias) are tensors
// 5 + 7*n_layers + kind*n_layers + layer (kind 0..2 = bq bk bv), std 0.1.
#include <cstdint>

#include "model/model.hpp"

namespace model {

// Throws std::invalid_argument for an architecture the engine cannot run (gpt2, bert).
Model synthesize(const Config& c, std::uint64_t seed = 0);

// One draw of the generator above (exposed for tests): z for element k of stream key.
double synth_normal(std::uint64_t key, std::uint64_t k);

}  // namespace model
