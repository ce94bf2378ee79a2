// synth: the documented generator (SplitMix64 + Irwin-Hall) against published SplitMix64
// outputs, its statistics, and determinism.
#include <gtest/gtest.h>

#include <cmath>

#include "model/presets.hpp"
#include "model/synth.hpp"

namespace {

TEST(Synth, FirstDrawMatchesPublishedSplitMix64Outputs) {
  // SplitMix64 seeded with 0 (Steele et al.; the sequence java.util.SplittableRandom and
  // the reference C code by Vigna produce): e220a8397b1dcdaf, 6e789e6aa1b965f4, 06c45d188009454f.
  const std::uint64_t words[3] = {0xE220A8397B1DCDAFull, 0x6E789E6AA1B965F4ull, 0x06C45D188009454Full};
  std::uint64_t sum = 0;
  for (auto w : words)
    for (int s = 0; s < 64; s += 16) sum += (w >> s) & 0xFFFF;
  const double expected = (static_cast<double>(sum) + 6.0) / 65536.0 - 6.0;
  EXPECT_EQ(model::synth_normal(0, 0), expected);
}

TEST(Synth, DrawsHaveUnitVarianceAndZeroMean) {
  double s = 0, s2 = 0, s4 = 0;
  const int n = 200000;
  for (int k = 0; k < n; ++k) {
    double z = model::synth_normal(12345, static_cast<std::uint64_t>(k));
    s += z;
    s2 += z * z;
    s4 += z * z * z * z;
    ASSERT_LT(std::fabs(z), 6.0);
  }
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.01);
  EXPECT_NEAR(s4 / n, 2.9, 0.05);  // Irwin-Hall(12) kurtosis: 3 - 1.2/12 = 2.9
}

TEST(Synth, DeterministicAndSeeded) {
  auto c = *model::find_preset("stories15m");
  c.n_layers = 1;  // keep the test small
  c.vocab_size = 512;
  auto a = model::synthesize(c, 1), b = model::synthesize(c, 1), d = model::synthesize(c, 2);
  EXPECT_EQ(a.weights.layers[0].wq, b.weights.layers[0].wq);
  EXPECT_EQ(a.weights.token_embedding, b.weights.token_embedding);
  EXPECT_NE(a.weights.layers[0].wq, d.weights.layers[0].wq);
  EXPECT_NE(a.weights.layers[0].wq, a.weights.layers[0].wk);
  EXPECT_EQ(a.weights.layers[0].attn_norm[0], 1.0f);
  double ss = 0;
  for (float v : a.weights.layers[0].w1) ss += double(v) * v;
  EXPECT_NEAR(std::sqrt(ss / a.weights.layers[0].w1.size()), 0.02, 0.0005);
  double so = 0;
  for (float v : a.weights.layers[0].w2) so += double(v) * v;
  EXPECT_NEAR(std::sqrt(so / a.weights.layers[0].w2.size()), 0.02 / std::sqrt(2.0), 0.0005);
}

TEST(Synth, RefusesArchitecturesTheEngineCannotRun) {
  EXPECT_THROW(model::synthesize(*model::find_preset("gpt2")), std::invalid_argument);
  EXPECT_THROW(model::synthesize(*model::find_preset("bert-base")), std::invalid_argument);
}

}  // namespace
