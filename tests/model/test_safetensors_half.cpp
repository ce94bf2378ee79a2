// safetensors folders in f16 and bf16, as Hugging Face stores most checkpoints: written by
// `convert --to safetensors --type f16|bf16`, read back, and run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/transformer.hpp"
#include "model/gguf.hpp"
#include "model/model.hpp"
#include "model/safetensors.hpp"
#include "testing.hpp"

namespace {

struct HalfFormat {
  const char* dtype;       // safetensors dtype
  const char* cli_type;    // convert --type
  const char* torch_dtype;  // config.json
  std::uint16_t (*encode)(float);
  float (*decode)(std::uint16_t);
  double unit_roundoff;    // 2^-(mantissa bits + 1): the largest relative rounding error
};

const HalfFormat kFormats[] = {
    {"F16", "f16", "float16", model::gguf::float_to_fp16, model::gguf::fp16_to_float, std::ldexp(1.0, -11)},
    {"BF16", "bf16", "bfloat16", model::gguf::float_to_bf16, model::gguf::bf16_to_float, std::ldexp(1.0, -8)},
};

std::vector<float> rounded(const std::vector<float>& v, const HalfFormat& f) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = f.decode(f.encode(v[i]));
  return out;
}

// Greedy decoding from BOS; the logits of every position.
std::vector<int> greedy(const model::Model& m, int steps, std::vector<std::vector<float>>& logits) {
  engine::Transformer t(m);
  std::vector<int> tokens = {1};
  for (int pos = 0; pos < steps; ++pos) {
    const float* l = t.forward(tokens.back(), pos);
    logits.emplace_back(l, l + m.config.vocab_size);
    tokens.push_back(static_cast<int>(std::max_element(l, l + m.config.vocab_size) - l));
  }
  return tokens;
}

TEST(SafetensorsHalf, WritesAndReadsF16AndBf16) {
  const model::Model m = model::load(testing_support::stories260k());
  const auto dir = testing_support::scratch_dir("st-half");
  std::vector<std::vector<float>> ref_logits;
  const int steps = 48;
  const auto ref_tokens = greedy(m, steps, ref_logits);
  for (const auto& f : kFormats) {
    SCOPED_TRACE(f.dtype);
    const std::string out = dir + "/" + f.cli_type;
    const auto r = testing_support::run_fpgallm("convert " + testing_support::stories260k() + " --to safetensors --type " +
                                                f.cli_type + " -o " + out);
    ASSERT_EQ(r.status, 0) << r.err;

    // As transformers writes them: config.json with torch_dtype, generation_config.json, and
    // every tensor (norms included) in the one dtype.
    const auto config = nlohmann::json::parse(testing_support::read_bytes(out + "/config.json"));
    EXPECT_EQ(config["torch_dtype"], f.torch_dtype);
    EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
    const auto gen = nlohmann::json::parse(testing_support::read_bytes(out + "/generation_config.json"));
    EXPECT_EQ(gen["bos_token_id"], 1);
    EXPECT_EQ(gen["eos_token_id"], 2);
    const model::safetensors::File file(out + "/model.safetensors");
    for (const auto& t : file.tensors()) EXPECT_EQ(t.dtype, f.dtype) << t.name;

    // Read back: every weight is the original rounded to nearest even, bit for bit.
    const model::Model back = model::load(out);
    EXPECT_EQ(back.weights.token_embedding, rounded(m.weights.token_embedding, f));
    EXPECT_EQ(back.weights.final_norm, rounded(m.weights.final_norm, f));
    for (std::size_t l = 0; l < m.weights.layers.size(); ++l) {
      EXPECT_EQ(back.weights.layers[l].attn_norm, rounded(m.weights.layers[l].attn_norm, f));
      for (model::Linear w : model::kBlockLinears)
        EXPECT_EQ(back.weights.layers[l].linear(w), rounded(m.weights.layers[l].linear(w), f)) << l;
    }

    // Same greedy tokens; logits within the format's precision: every weight carries a
    // relative error of at most u (the unit roundoff), so a logit moves by about u times the
    // size of its terms, compounded over the layers; 16 u of the largest logit bounds that
    // with room (f16: 0.8%, bf16: 6%) while a misplaced row or wrong byte order is off by O(1).
    std::vector<std::vector<float>> logits;
    EXPECT_EQ(greedy(back, steps, logits), ref_tokens);
    double worst = 0, largest = 0;
    for (int pos = 0; pos < steps; ++pos)
      for (std::size_t i = 0; i < logits[pos].size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(logits[pos][i] - ref_logits[pos][i])));
        largest = std::max(largest, static_cast<double>(std::fabs(ref_logits[pos][i])));
      }
    EXPECT_LE(worst, 16 * f.unit_roundoff * largest);
    std::printf("%s: largest logit change %.6f, largest logit %.3f (%.2f u)\n", f.dtype, worst, largest,
                worst / largest / f.unit_roundoff);
  }
}

}  // namespace
