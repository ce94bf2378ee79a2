// The priority-queue BPE merge against the implementation it replaced: a straight
// transcription of llama2.c's encode (fuzz/reference_encode.hpp, shared with fuzz_text),
// which is quadratic and so runs here on texts of a few kilobytes only.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../../fuzz/reference_encode.hpp"
#include "model/model.hpp"
#include "testing.hpp"

namespace {

std::vector<int> reference_encode(const model::Tokenizer& tok, const std::string& text, bool bos, bool eos) {
  return reference::llama2c_encode(tok, text, bos, eos);
}

TEST(TokenizerReference, SampleStoriesGiveIdenticalTokens) {
  const auto tok = model::Tokenizer::load_llama2c(testing_support::tok512(), 512);
  std::istringstream in(testing_support::read_bytes(testing_support::sample_text()));
  std::string line;
  int compared = 0;
  while (std::getline(in, line) && compared < 8) {
    ASSERT_EQ(tok.encode(line, true, false), reference_encode(tok, line, true, false)) << "story " << compared;
    ++compared;
  }
  EXPECT_EQ(compared, 8);
  // Lines joined with their newlines, odd bytes and multi-byte characters.
  const std::string mixed = "Tom said: \"Hi!\"\n\tLily \xc3\xa9t\xc3\xa9 \xe2\x82\xac 12345 \xf0\x9f\x98\x80 \xff\xfe end";
  EXPECT_EQ(tok.encode(mixed, true, true), reference_encode(tok, mixed, true, true));
  EXPECT_EQ(tok.encode("", true, true), reference_encode(tok, "", true, true));
}

// A vocabulary built so that equal scores and chains of merges are everywhere: the
// leftmost of equal best pairs must win, as in the rescanning loop.
TEST(TokenizerReference, TiesAndChainsOnRandomVocabularies) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::string> pieces = {"<unk>", "<s>", "</s>", " ", "a", "b", "c"};
    std::vector<float> scores(pieces.size(), 0.0f);
    std::uniform_int_distribution<int> pick(3, 6), score(-3, 0), len(1, 4);
    while (pieces.size() < 40) {
      std::string p;
      for (int k = len(rng); k > 0; --k) p += pieces[static_cast<std::size_t>(pick(rng))];
      if (std::find(pieces.begin(), pieces.end(), p) != pieces.end()) continue;
      pieces.push_back(p);
      scores.push_back(static_cast<float>(score(rng)));  // few distinct scores: many ties
    }
    model::Tokenizer tok(pieces, scores);
    std::string text;
    for (int k = 0; k < 300; ++k) text += "abc "[static_cast<std::size_t>(rng() % 4)];
    ASSERT_EQ(tok.encode(text, true, false), reference_encode(tok, text, true, false)) << "trial " << trial;
  }
}

}  // namespace
