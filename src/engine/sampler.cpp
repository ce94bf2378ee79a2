#include "engine/sampler.hpp"

#include <algorithm>

#include "engine/transformer.hpp"

namespace engine {

int argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

Sampler::Sampler(int vocab_size, float temperature, float topp, std::uint64_t seed)
    : vocab_size_(vocab_size), temperature_(temperature), topp_(topp), state_(seed ? seed : 1) {
  candidates_.reserve(static_cast<std::size_t>(vocab_size));
}

float Sampler::random_f32() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  auto u = static_cast<std::uint32_t>((state_ * 0x2545F4914F6CDD1Dull) >> 32);
  return static_cast<float>(u >> 8) / 16777216.0f;
}

int Sampler::sample(float* logits) {
  if (temperature_ <= 0.0f) return argmax(logits, vocab_size_);
  for (int i = 0; i < vocab_size_; ++i) logits[i] /= temperature_;
  softmax(logits, vocab_size_);
  const float coin = random_f32();
  if (topp_ <= 0.0f || topp_ >= 1.0f) {
    float cdf = 0.0f;
    for (int i = 0; i < vocab_size_; ++i) {
      cdf += logits[i];
      if (coin < cdf) return i;
    }
    return vocab_size_ - 1;
  }
  // Nucleus: the smallest set of most likely tokens whose probability exceeds topp.
  // Tokens below (1 - topp) / (n - 1) cannot be in it and are dropped before sorting.
  const float cutoff = (1.0f - topp_) / static_cast<float>(vocab_size_ - 1);
  candidates_.clear();
  for (int i = 0; i < vocab_size_; ++i)
    if (logits[i] >= cutoff) candidates_.emplace_back(logits[i], i);
  std::sort(candidates_.begin(), candidates_.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  float cumulative = 0.0f;
  std::size_t last = candidates_.size() - 1;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    cumulative += candidates_[i].first;
    if (cumulative > topp_) {
      last = i;
      break;
    }
  }
  const float r = coin * cumulative;
  float cdf = 0.0f;
  for (std::size_t i = 0; i <= last; ++i) {
    cdf += candidates_[i].first;
    if (r < cdf) return candidates_[i].second;
  }
  return candidates_[last].second;
}

}  // namespace engine
