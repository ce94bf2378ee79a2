// The same model from every format: stories260K converted to GGUF and to a Hugging Face
// safetensors folder gives the .bin run's greedy tokens and logits; the HF row permutation
// against the formula of Hugging Face's conversion script; sharded folders.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/transformer.hpp"
#include "model/gguf.hpp"
#include "model/gguf_llama.hpp"
#include "model/model.hpp"
#include "model/safetensors.hpp"
#include "model/synth.hpp"
#include "testing.hpp"
#include "util/error.hpp"

namespace {

namespace fs = std::filesystem;

int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

// Greedy decoding from BOS for `steps` positions: the tokens, and the largest relative
// difference of the other model's logits along the way (fed the reference's tokens).
struct Comparison {
  std::vector<int> reference, other;
  double max_rel = 0;
};

Comparison compare(const model::Model& ref, const model::Model& other, int steps) {
  engine::Transformer a(ref), b(other);
  Comparison c;
  int ta = model::Tokenizer::kBos, tb = model::Tokenizer::kBos;
  const int vocab = ref.config.vocab_size;
  for (int pos = 0; pos < steps; ++pos) {
    const float* la = a.forward(ta, pos);
    std::vector<float> copy(la, la + vocab);
    const float* lb = b.forward(ta, pos);
    float scale = 0;
    for (int i = 0; i < vocab; ++i) scale = std::max(scale, std::fabs(copy[i]));
    for (int i = 0; i < vocab; ++i) c.max_rel = std::max(c.max_rel, double(std::fabs(copy[i] - lb[i]) / scale));
    ta = argmax(copy.data(), vocab);
    tb = argmax(lb, vocab);
    c.reference.push_back(ta);
    c.other.push_back(tb);
  }
  return c;
}

TEST(Formats, GgufGivesTheBinTokensAndLogits) {
  auto bin = model::load(testing_support::stories260k());
  auto tok = model::Tokenizer::load_llama2c(testing_support::tok512(), bin.config.vocab_size);
  auto dir = testing_support::scratch_dir("formats-gguf");
  model::save_gguf(bin, dir + "/s.gguf", model::gguf::GgmlType::f32, &tok);
  auto gguf = model::load(dir + "/s.gguf");
  EXPECT_EQ(gguf.source_format, model::Format::gguf);
  EXPECT_EQ(gguf.config.n_kv_heads, 4);
  EXPECT_EQ(gguf.config.hidden_dim, 172);
  ASSERT_TRUE(gguf.tokenizer);
  EXPECT_EQ(gguf.tokenizer->pieces()[300], tok.pieces()[300]);
  EXPECT_EQ(gguf.tokenizer->encode("Once upon a time", true, false), tok.encode("Once upon a time", true, false));
  auto c = compare(bin, gguf, 200);
  EXPECT_EQ(c.other, c.reference);
  EXPECT_LE(c.max_rel, 1e-5);
}

TEST(Formats, SafetensorsFolderGivesTheBinTokensAndLogits) {
  auto bin = model::load(testing_support::stories260k());
  auto dir = testing_support::scratch_dir("formats-st") + "/stories260K";
  model::save_safetensors_dir(bin, dir);
  ASSERT_TRUE(fs::exists(dir + "/config.json"));
  auto st = model::load(dir);
  EXPECT_EQ(st.source_format, model::Format::safetensors);
  // Hugging Face rows differ from the interleaved ones in the file.
  model::safetensors::File file(dir + "/model.safetensors");
  auto* q = file.find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_TRUE(q);
  std::vector<float> hf(q->n_elements);
  file.read_floats(*q, hf);
  EXPECT_NE(hf, bin.weights.layers[0].wq);
  EXPECT_EQ(st.weights.layers[0].wq, bin.weights.layers[0].wq);
  auto c = compare(bin, st, 200);
  EXPECT_EQ(c.other, c.reference);
  EXPECT_LE(c.max_rel, 1e-5);
}

TEST(Formats, HuggingFaceRowOrderMatchesTheirPermuteFormula) {
  // convert_llama_weights_to_hf.py: w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2):
  // interleaved row h*hd + 2i + j becomes HF row h*hd + j*(hd/2) + i. With hd = 4 the
  // interleaved rows of a head are HF rows 0, 2, 1, 3.
  const int heads = 2, hd = 4, cols = 3;
  std::vector<float> hf(heads * hd * cols);
  for (std::size_t k = 0; k < hf.size(); ++k) hf[k] = static_cast<float>(k / cols);  // value = HF row
  auto inter = hf;
  model::safetensors::hf_to_interleaved(inter, heads, hd, cols);
  const float expected_rows[] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int r = 0; r < heads * hd; ++r)
    for (int c = 0; c < cols; ++c) EXPECT_EQ(inter[r * cols + c], expected_rows[r]) << r;
  model::safetensors::interleaved_to_hf(inter, heads, hd, cols);
  EXPECT_EQ(inter, hf);
}

TEST(Formats, ShardedSafetensorsWithIndex) {
  auto bin = model::load(testing_support::stories260k());
  auto base = testing_support::scratch_dir("formats-shards");
  model::save_safetensors_dir(bin, base + "/whole");
  // Split the single file into two shards by hand, plus the index.
  model::safetensors::File whole(base + "/whole/model.safetensors");
  std::vector<model::safetensors::NamedTensor> a, b;
  std::vector<std::vector<float>> keep;
  keep.reserve(whole.tensors().size());
  std::string weight_map;
  for (const auto& t : whole.tensors()) {
    keep.emplace_back(t.n_elements);
    whole.read_floats(t, keep.back());
    bool first = t.name.find("layers.3") == std::string::npos && t.name.find("layers.4") == std::string::npos &&
                 t.name != "model.norm.weight";
    (first ? a : b).push_back({t.name, t.shape, keep.back()});
    weight_map += (weight_map.empty() ? "" : ",") + std::string("\"") + t.name + "\":\"" +
                  (first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors") + "\"";
  }
  auto dir = base + "/sharded";
  fs::create_directories(dir);
  fs::copy_file(base + "/whole/config.json", dir + "/config.json");
  testing_support::write_bytes(dir + "/model-00001-of-00002.safetensors", model::safetensors::serialize_f32(a));
  testing_support::write_bytes(dir + "/model-00002-of-00002.safetensors", model::safetensors::serialize_f32(b));
  testing_support::write_bytes(dir + "/model.safetensors.index.json",
                               "{\"metadata\": {}, \"weight_map\": {" + weight_map + "}}");
  auto m = model::load(dir);
  EXPECT_EQ(m.weights.token_embedding, bin.weights.token_embedding);
  EXPECT_EQ(m.weights.layers[4].w2, bin.weights.layers[4].w2);
  EXPECT_EQ(m.weights.layers[2].wk, bin.weights.layers[2].wk);
  EXPECT_EQ(m.weights.final_norm, bin.weights.final_norm);
  // A shard that escapes the folder is refused.
  testing_support::write_bytes(dir + "/model.safetensors.index.json",
                               "{\"weight_map\": {\"model.norm.weight\": \"../whole/model.safetensors\"}}");
  EXPECT_THROW(model::load(dir), fpgallm::InputError);
}

TEST(Formats, Bf16AndF16SafetensorsAndUntiedClassifier) {
  // A hand-written single-layer model in BF16/F16 dtypes with a separate lm_head.
  model::Config c;
  c.name = "tiny";
  c.dim = 8;
  c.hidden_dim = 16;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.vocab_size = 32;
  c.seq_len = 16;
  c.shared_classifier = false;
  auto m = model::synthesize(c, 7);
  auto dir = testing_support::scratch_dir("formats-bf16") + "/tiny";
  model::save_safetensors_dir(m, dir);
  auto back = model::load(dir);
  EXPECT_FALSE(back.config.shared_classifier);
  EXPECT_EQ(back.weights.classifier, m.weights.classifier);
  EXPECT_EQ(back.weights.layers[0].wk, m.weights.layers[0].wk);

  // Rewrite the embedding as BF16 by hand: header + 2-byte values.
  std::vector<std::uint8_t> bf16;
  for (float v : m.weights.token_embedding) {
    auto h = model::gguf::float_to_bf16(v);
    bf16.push_back(static_cast<std::uint8_t>(h & 0xFF));
    bf16.push_back(static_cast<std::uint8_t>(h >> 8));
  }
  std::string header = "{\"e\":{\"dtype\":\"BF16\",\"shape\":[32,8],\"data_offsets\":[0," + std::to_string(bf16.size()) + "]}}";
  std::uint64_t n = header.size();
  std::string file(reinterpret_cast<const char*>(&n), 8);
  file += header;
  file.append(reinterpret_cast<const char*>(bf16.data()), bf16.size());
  auto path = testing_support::scratch_dir("formats-bf16-file") + "/e.safetensors";
  testing_support::write_bytes(path, file);
  model::safetensors::File f(path);
  std::vector<float> out(32 * 8);
  f.read_floats(*f.find("e"), out);
  for (std::size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i], model::gguf::bf16_to_float(model::gguf::float_to_bf16(m.weights.token_embedding[i])));
}

TEST(Formats, QuantizedGgufStaysClose) {
  auto bin = model::load(testing_support::stories260k());
  auto dir = testing_support::scratch_dir("formats-q8");
  model::save_gguf(bin, dir + "/q8.gguf", model::gguf::GgmlType::q8_0);
  model::gguf::Reader r(dir + "/q8.gguf");
  EXPECT_EQ(r.tensor("blk.0.attn_q.weight").type, model::gguf::GgmlType::q8_0);
  EXPECT_EQ(r.tensor("blk.0.ffn_down.weight").type, model::gguf::GgmlType::f16);  // 172 columns: not whole blocks
  EXPECT_EQ(r.tensor("blk.0.attn_norm.weight").type, model::gguf::GgmlType::f32);
  auto q8 = model::load(dir + "/q8.gguf");
  auto c = compare(bin, q8, 64);
  EXPECT_LT(c.max_rel, 0.05);  // int8 weights: a percent-level change of the logits
  EXPECT_GT(c.max_rel, 0.0);
}

TEST(Formats, GgufVersion2Loads) {
  auto bin = model::load(testing_support::stories260k());
  auto dir = testing_support::scratch_dir("formats-v2");
  model::save_gguf(bin, dir + "/v2.gguf", model::gguf::GgmlType::f16, nullptr, 2);
  model::gguf::Reader r(dir + "/v2.gguf");
  EXPECT_EQ(r.version(), 2u);
  auto m = model::load(dir + "/v2.gguf");
  EXPECT_FALSE(m.tokenizer);
  for (std::size_t i = 0; i < 100; ++i)
    EXPECT_EQ(m.weights.layers[1].wv[i], model::gguf::fp16_to_float(model::gguf::float_to_fp16(bin.weights.layers[1].wv[i])));
}

}  // namespace
