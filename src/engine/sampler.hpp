#pragma once
// Picks the next token from logits: greedy (temperature 0), or temperature with optional
// top-p (nucleus) sampling. The random stream is llama2.c's xorshift, so a seed gives the
// same tokens as llama2.c's run with that seed.
#include <cstdint>
#include <vector>

namespace engine {

// The highest temperature the command line and the Python API take.
inline constexpr double kMaxTemperature = 100.0;

// Refuses (InputError naming "temperature" or "topp") a temperature outside 0..100 or a
// top-p outside 0..1, NaN included: the one check the command line and the Python API share.
void check_sampling(double temperature, double topp);

class Sampler {
 public:
  Sampler(int vocab_size, float temperature, float topp, std::uint64_t seed);
  // May modify logits (scaled and turned into probabilities).
  int sample(float* logits);

 private:
  float random_f32();
  int vocab_size_;
  float temperature_;
  float topp_;
  std::uint64_t state_;
  std::vector<std::pair<float, int>> candidates_;
};

int argmax(const float* v, int n);

}  // namespace engine
