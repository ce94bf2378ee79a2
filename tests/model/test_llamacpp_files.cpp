// GGUF files written by llama.cpp's llama-quantize (../shared/fixtures/llamacpp, README
// there): every tensor of every file dequantized against the figures gguf-py's dequantize()
// produced (reference.json), and the logits of the listed tokens against libllama's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/transformer.hpp"
#include "model/gguf.hpp"
#include "model/model.hpp"
#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using model::gguf::Reader;

std::string fixture_dir() { return testing_support::source_path("../shared/fixtures/llamacpp"); }

nlohmann::json reference() {
  std::ifstream in(fixture_dir() + "/reference.json");
  if (!in) return {};
  return nlohmann::json::parse(in);
}

// The files of reference.json that are shipped (k256_f32.gguf is not; README: how to rebuild).
std::vector<std::string> shipped_files(const nlohmann::json& ref) {
  std::vector<std::string> names;
  for (const auto& [name, _] : ref.items())
    if (fs::exists(fixture_dir() + "/" + name)) names.push_back(name);
  return names;
}

TEST(LlamacppFiles, FixturesArePresent) {
  const auto ref = reference();
  ASSERT_FALSE(ref.is_null()) << "missing " << fixture_dir() << "/reference.json";
  // The five llama-quantize outputs named in the README.
  EXPECT_EQ(shipped_files(ref).size(), 5u);
}

// Sums of float32 values: numpy's pairwise float64 sum is accurate to a few double ulps of the
// sum of magnitudes; ours accumulates in long double (64-bit significand), so the two agree to
// about 1e-15 relative. A float32 ulp of difference in one value of a tensor moves its sum of
// squares by ~1e-7 / N relative, which a 1e-13 tolerance still sees for these tensors' sizes,
// and the samples below are compared bit for bit.
TEST(LlamacppFiles, DequantizationReproducesGgufPyForEveryTensor) {
  const auto ref = reference();
  ASSERT_FALSE(ref.is_null());
  for (const auto& name : shipped_files(ref)) {
    SCOPED_TRACE(name);
    const Reader r(fixture_dir() + "/" + name);
    const auto& tensors = ref[name]["tensors"];
    ASSERT_EQ(r.tensors().size(), tensors.size());
    for (const auto& t : r.tensors()) {
      SCOPED_TRACE(t.name);
      ASSERT_TRUE(tensors.contains(t.name));
      const auto& e = tensors[t.name];
      EXPECT_EQ(model::gguf::type_name(t.type), e["ggml_type"].get<std::string>());
      EXPECT_EQ(t.dims, e["shape"].get<std::vector<std::uint64_t>>());
      const std::vector<float> x = r.tensor_floats(t);
      long double sum = 0, sum_sq = 0, sum_abs = 0;
      for (float v : x) {
        sum += v;
        sum_sq += static_cast<long double>(v) * v;
        sum_abs += std::fabs(v);
      }
      EXPECT_NEAR(static_cast<double>(sum), e["sum"].get<double>(), 1e-13 * static_cast<double>(sum_abs));
      EXPECT_NEAR(static_cast<double>(sum_sq), e["sum_sq"].get<double>(), 1e-13 * static_cast<double>(sum_sq));
      const auto first = e["row0_first32"].get<std::vector<float>>();
      const auto last = e["last_row_last32"].get<std::vector<float>>();
      ASSERT_EQ(first.size(), 32u);
      ASSERT_EQ(last.size(), 32u);
      // Bit-equal: the same float32 operations in the same order as ggml / gguf-py.
      for (std::size_t j = 0; j < 32; ++j) {
        EXPECT_EQ(x[j], first[j]) << "row 0 element " << j;
        EXPECT_EQ(x[x.size() - 32 + j], last[j]) << "last row element " << 224 + j;
      }
    }
  }
}

// The weights are bit-equal (test above), so what remains is the arithmetic. llama.cpp's CPU
// backend rounds each activation vector to 8 bits per 32 (Q8_0, for Q4_0/Q8_0 weights) or
// 256 (Q8_K, for K-quants) values before its integer dot products; that rounding has a
// relative error of about 1/(127 * sqrt(12)) = 0.23% per element, which every matrix product
// of the 4 layers and the classifier adds to. The tolerance is 2% of the largest magnitude
// among the 64 compared logits, fixed from that estimate before measuring (measured: 0.6% for
// the Q8_0 file, up to 1.4% for Q5_K_M); a wrong scale, nibble order or sub-block is off by
// tens of percent. The argmax after each position must match: these files have no near-tie
// (a random model whose shared embedding makes the current token win by a wide margin).
TEST(LlamacppFiles, LogitsAgreeWithLibllama) {
  const auto ref = reference();
  ASSERT_FALSE(ref.is_null());
  for (const auto& name : shipped_files(ref)) {
    SCOPED_TRACE(name);
    const model::Model m = model::load(fixture_dir() + "/" + name);
    engine::Transformer t(m);
    const auto tokens = ref[name]["tokens"].get<std::vector<int>>();
    const auto argmax = ref[name]["argmax_per_position"].get<std::vector<int>>();
    const auto expected = ref[name]["last_position_logits_first64"].get<std::vector<float>>();
    ASSERT_EQ(tokens.size(), argmax.size());
    const float* logits = nullptr;
    for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
      logits = t.forward(tokens[pos], static_cast<int>(pos));
      const int best = static_cast<int>(std::max_element(logits, logits + m.config.vocab_size) - logits);
      EXPECT_EQ(best, argmax[pos]) << "position " << pos;
    }
    float scale = 0;
    for (float v : expected) scale = std::max(scale, std::fabs(v));
    double worst = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_NEAR(logits[i], expected[i], 0.02 * scale) << "logit " << i;
      worst = std::max(worst, static_cast<double>(std::fabs(logits[i] - expected[i])));
    }
    std::printf("%s: largest |logit - llama.cpp| %.5f (%.3f%% of the largest logit %.3f)\n", name.c_str(), worst,
                100.0 * worst / scale, scale);
  }
}

}  // namespace
