#include "engine/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/transformer.hpp"
#include "util/error.hpp"

namespace engine {

int argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

void check_sampling(double temperature, double topp) {
  // The words of the command line's -t/-p checks, so the Python API says the same.
  if (!(temperature >= 0 && temperature <= kMaxTemperature))
    throw fpgallm::InputError("temperature", fmt::format("{:g} is not between 0 and {:g}", temperature, kMaxTemperature));
  if (!(topp >= 0 && topp <= 1)) throw fpgallm::InputError("topp", fmt::format("{:g} is not between 0 and 1", topp));
}

Sampler::Sampler(int vocab_size, float temperature, float topp, std::uint64_t seed)
    : vocab_size_(vocab_size), temperature_(temperature), topp_(topp), state_(seed ? seed : 1) {
  if (vocab_size < 1) throw std::invalid_argument("a sampler needs a vocabulary of at least one token");
  check_sampling(temperature, topp);
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
  if (temperature_ <= 0.0f || vocab_size_ == 1) return argmax(logits, vocab_size_);
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
  // The cutoff only saves sorting: when rounding puts every token below it (a flat
  // distribution and a small topp), every token is a candidate. NaN is never one above zero.
  if (candidates_.empty())
    for (int i = 0; i < vocab_size_; ++i) candidates_.emplace_back(std::isnan(logits[i]) ? 0.0f : logits[i], i);
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
