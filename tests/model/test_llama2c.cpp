#include <gtest/gtest.h>

#include "model/model.hpp"
#include "model/presets.hpp"
#include "testing.hpp"
#include "util/error.hpp"

namespace {

TEST(Llama2c, ReadsStories260K) {
  auto m = model::load(testing_support::stories260k());
  const auto& c = m.config;
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_TRUE(c.shared_classifier);
  EXPECT_EQ(m.weights.layers[0].wk.size(), 32u * 64u);
}

TEST(Llama2c, SaveThenLoadIsIdentical) {
  auto m = model::load(testing_support::stories260k());
  auto dir = testing_support::scratch_dir("llama2c-roundtrip");
  model::save_llama2c(m, dir + "/m.bin");
  auto back = model::load(dir + "/m.bin");
  EXPECT_EQ(back.weights.token_embedding, m.weights.token_embedding);
  for (int l = 0; l < m.config.n_layers; ++l)
    for (auto which : model::kBlockLinears) EXPECT_EQ(back.weights.layers[l].linear(which), m.weights.layers[l].linear(which));
  EXPECT_EQ(back.weights.final_norm, m.weights.final_norm);
  // Header and weights are byte-identical to the original; only the legacy rope tables
  // (ignored by every reader) may differ in their last bits.
  auto a = testing_support::read_bytes(dir + "/m.bin"), b = testing_support::read_bytes(testing_support::stories260k());
  ASSERT_EQ(a.size(), b.size());
  const std::size_t weights_end = a.size() - std::size_t(512) * 8 * 4;
  EXPECT_EQ(a.substr(0, weights_end), b.substr(0, weights_end));
}

TEST(Presets, PublishedShapes) {
  auto c = model::find_preset("llama2-7b");
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->n_params() / 1e9, 6.74, 0.01);  // Llama 2 paper: 7B (6.74B)
  auto l3 = model::find_preset("LLAMA3-8B");
  ASSERT_TRUE(l3);
  EXPECT_NEAR(l3->n_params() / 1e9, 8.03, 0.01);
  auto bert = model::find_preset("bert-base");
  ASSERT_TRUE(bert);
  EXPECT_NEAR(bert->n_params() / 1e6, 109.5, 1.5);  // 110M in the BERT paper (pooler excluded here)
  auto gpt2 = model::find_preset("gpt2");
  ASSERT_TRUE(gpt2);
  EXPECT_NEAR(gpt2->n_params() / 1e6, 124.4, 0.5);
  for (const char* name : {"llama2-13b", "llama3.2-1b", "tinyllama-1.1b", "gpt2-xl", "bert-large", "stories15m", "stories110m"})
    EXPECT_TRUE(model::find_preset(name)) << name;
  EXPECT_FALSE(model::find_preset("llama-7b"));
  EXPECT_NE(model::preset_suggestion("llama-7b").find("llama2-7b"), std::string::npos);
}

}  // namespace
