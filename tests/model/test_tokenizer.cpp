#include <gtest/gtest.h>

#include "model/model.hpp"
#include "testing.hpp"
#include "util/error.hpp"

namespace {

TEST(Tokenizer, RoundTripsText) {
  auto tok = model::Tokenizer::load_llama2c(testing_support::tok512(), 512);
  const std::string text = "Lily saw a big red ball in the park.";
  auto ids = tok.encode(text, true, false);
  ASSERT_EQ(ids[0], model::Tokenizer::kBos);
  std::string back;
  for (std::size_t i = 1; i < ids.size(); ++i) back += tok.decode(ids[i - 1], ids[i]);
  EXPECT_EQ(back, text);
  EXPECT_LT(ids.size(), text.size());  // merges happened
}

TEST(Tokenizer, BytesOutsideTheVocabularyFallBackToByteTokens) {
  auto tok = model::Tokenizer::load_llama2c(testing_support::tok512(), 512);
  auto ids = tok.encode("\xc3\xa9", false, false);  // "é": not a piece of this tiny vocabulary
  std::string back;
  for (std::size_t i = 0; i < ids.size(); ++i) back += tok.decode(i ? ids[i - 1] : 0, ids[i]);
  EXPECT_EQ(back, " \xc3\xa9");
}

TEST(Tokenizer, HandBuiltMergesPickTheHighestScore) {
  // Vocabulary: <unk>, <s>, </s>, then "a", "b", " ", "ab", " a" with chosen scores.
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>", "a", "b", " ", "ab", " a"};
  std::vector<float> scores = {0, 0, 0, 0, 0, 0, -1.0f, -2.0f};
  model::Tokenizer tok(pieces, scores);
  auto ids = tok.encode("ab", false, true);
  // " ", "a", "b": "ab" (score -1) beats " a" (score -2).
  EXPECT_EQ(ids, (std::vector<int>{5, 6, model::Tokenizer::kEos}));
}

TEST(Tokenizer, VocabularyMismatchIsAnInputError) {
  EXPECT_THROW(model::Tokenizer::load_llama2c(testing_support::tok512(), 32000), fpgallm::InputError);
  EXPECT_THROW(model::Tokenizer::load_llama2c(testing_support::tok512(), 100), fpgallm::InputError);
}

}  // namespace
