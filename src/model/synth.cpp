#include "model/synth.hpp"

#include <cmath>
#include <stdexcept>

namespace model {

namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr double kBiasStd = 0.1;

std::uint64_t splitmix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void fill(std::vector<float>& t, std::uint64_t seed, std::uint64_t index, double std) {
  const std::uint64_t key = splitmix64(seed ^ ((index + 1) * 0xD1B54A32D192ED03ull));
  const auto n = static_cast<std::int64_t>(t.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t k = 0; k < n; ++k) t[static_cast<std::size_t>(k)] = static_cast<float>(synth_normal(key, static_cast<std::uint64_t>(k)) * std);
}

}  // namespace

double synth_normal(std::uint64_t key, std::uint64_t k) {
  std::uint64_t sum = 0;
  for (std::uint64_t j = 0; j < 3; ++j) {
    const std::uint64_t w = splitmix64(key + (3 * k + j + 1) * kGolden);
    sum += (w & 0xFFFF) + ((w >> 16) & 0xFFFF) + ((w >> 32) & 0xFFFF) + (w >> 48);
  }
  // Each u_i = (raw_i + 0.5)/65536 is uniform on (0,1); the sum of 12 has mean 6, variance 1.
  return (static_cast<double>(sum) + 6.0) / 65536.0 - 6.0;
}

Model synthesize(const Config& c, std::uint64_t seed) {
  if (!c.llama_family())
    throw std::invalid_argument(std::string("synth makes llama-family models only (llama, qwen2, qwen3); ") + c.name +
                                " is " + to_string(c.arch));
  if (auto why = c.invalid_reason(); !why.empty()) throw std::invalid_argument("bad shape: " + why);
  Model m;
  m.config = c;
  m.weights = allocate_weights(c);
  m.source_format = Format::llama2c;
  m.source_path = "synth:" + c.name;
  const double base = 0.02, residual = 0.02 / std::sqrt(2.0 * c.n_layers);
  std::uint64_t index = 0;
  auto& w = m.weights;
  fill(w.token_embedding, seed, index++, base);
  for (auto& l : w.layers) {
    l.attn_norm.assign(l.attn_norm.size(), 1.0f);
    l.ffn_norm.assign(l.ffn_norm.size(), 1.0f);
  }
  index += 2;  // the norms' places in llama2.c order
  for (Linear which : kBlockLinears) {
    const double std = (which == Linear::wo || which == Linear::w2) ? residual : base;
    for (auto& l : w.layers) fill(l.linear(which), seed, index++, std);
  }
  w.final_norm.assign(w.final_norm.size(), 1.0f);
  ++index;
  if (!c.shared_classifier) fill(w.classifier, seed, index, base);
  ++index;
  for (std::vector<float> LayerWeights::*bias : {&LayerWeights::bq, &LayerWeights::bk, &LayerWeights::bv})
    for (auto& l : w.layers) {
      if (c.qkv_bias) fill(l.*bias, seed, index, kBiasStd);
      ++index;
    }
  for (auto& l : w.layers) {
    l.q_norm.assign(l.q_norm.size(), 1.0f);
    l.k_norm.assign(l.k_norm.size(), 1.0f);
  }
  return m;
}

}  // namespace model
