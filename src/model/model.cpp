#include "model/model.hpp"

#include <sys/stat.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>

#include "model/gguf.hpp"
#include "model/gguf_llama.hpp"
#include "model/presets.hpp"
#include "util/error.hpp"
#include "util/json_file.hpp"
#include "util/mapped_file.hpp"
#include "util/paths.hpp"

namespace model {

const char* to_string(Linear l) {
  switch (l) {
    case Linear::wq: return "wq";
    case Linear::wk: return "wk";
    case Linear::wv: return "wv";
    case Linear::wo: return "wo";
    case Linear::w1: return "w1";
    case Linear::w2: return "w2";
    case Linear::w3: return "w3";
    case Linear::cls: return "cls";
  }
  return "?";
}

const char* gguf_name(Linear l) {
  switch (l) {
    case Linear::wq: return "attn_q";
    case Linear::wk: return "attn_k";
    case Linear::wv: return "attn_v";
    case Linear::wo: return "attn_output";
    case Linear::w1: return "ffn_gate";
    case Linear::w2: return "ffn_down";
    case Linear::w3: return "ffn_up";
    case Linear::cls: return "output";
  }
  return "?";
}

const char* to_string(Format f) {
  switch (f) {
    case Format::llama2c: return "llama2c";
    case Format::gguf: return "gguf";
    case Format::safetensors: return "safetensors";
  }
  return "?";
}

std::vector<float>& LayerWeights::linear(Linear l) {
  switch (l) {
    case Linear::wq: return wq;
    case Linear::wk: return wk;
    case Linear::wv: return wv;
    case Linear::wo: return wo;
    case Linear::w1: return w1;
    case Linear::w2: return w2;
    case Linear::w3: return w3;
    case Linear::cls: break;
  }
  throw std::invalid_argument("the classifier is not a block weight");
}

const std::vector<float>& LayerWeights::linear(Linear l) const {
  return const_cast<LayerWeights*>(this)->linear(l);
}

MatrixShape linear_shape(const Config& c, Linear l) {
  const int q = c.n_heads * c.head_dim();
  switch (l) {
    case Linear::wq: return {q, c.dim};
    case Linear::wk:
    case Linear::wv: return {c.kv_dim(), c.dim};
    case Linear::wo: return {c.dim, q};
    case Linear::w1:
    case Linear::w3: return {c.hidden_dim, c.dim};
    case Linear::w2: return {c.dim, c.hidden_dim};
    case Linear::cls: return {c.vocab_size, c.dim};
  }
  return {0, 0};
}

std::string linear_name(int layer, Linear l) {
  if (l == Linear::cls) return "cls";
  return fmt::format("blk.{}.{}", layer, to_string(l));
}

Weights allocate_weights(const Config& c) {
  auto sz = [](std::int64_t a, std::int64_t b = 1) { return static_cast<std::size_t>(a * b); };
  Weights w;
  w.token_embedding.assign(sz(c.vocab_size, c.dim), 0.0f);
  w.layers.resize(static_cast<std::size_t>(c.n_layers));
  for (auto& layer : w.layers) {
    layer.attn_norm.assign(sz(c.dim), 0.0f);
    layer.ffn_norm.assign(sz(c.dim), 0.0f);
    for (Linear l : kBlockLinears) {
      auto s = linear_shape(c, l);
      layer.linear(l).assign(sz(s.rows, s.cols), 0.0f);
    }
    if (c.qkv_bias) {
      layer.bq.assign(sz(c.n_heads, c.head_dim()), 0.0f);
      layer.bk.assign(sz(c.kv_dim()), 0.0f);
      layer.bv.assign(sz(c.kv_dim()), 0.0f);
    }
    if (c.qk_norm) {
      layer.q_norm.assign(sz(c.head_dim()), 0.0f);
      layer.k_norm.assign(sz(c.head_dim()), 0.0f);
    }
  }
  w.final_norm.assign(sz(c.dim), 0.0f);
  if (!c.shared_classifier) w.classifier.assign(sz(c.vocab_size, c.dim), 0.0f);
  return w;
}

namespace {

// Visits every tensor in llama2.c's file order (the frequency tables excepted).
template <typename W, typename Fn>
void for_each_llama2c_tensor(W& w, Fn&& fn) {
  fn(w.token_embedding);
  for (auto& l : w.layers) fn(l.attn_norm);
  for (auto& l : w.layers) fn(l.wq);
  for (auto& l : w.layers) fn(l.wk);
  for (auto& l : w.layers) fn(l.wv);
  for (auto& l : w.layers) fn(l.wo);
  for (auto& l : w.layers) fn(l.ffn_norm);
  for (auto& l : w.layers) fn(l.w1);
  for (auto& l : w.layers) fn(l.w2);
  for (auto& l : w.layers) fn(l.w3);
  fn(w.final_norm);
}

constexpr std::size_t kLlama2cHeader = 7 * sizeof(std::int32_t);

std::uint64_t llama2c_float_count(const Config& c) {
  std::uint64_t n = 0;
  auto add = [&](std::uint64_t k) { n += k; };
  add(std::uint64_t(c.vocab_size) * c.dim);
  add(std::uint64_t(c.n_layers) * c.dim * 2);
  for (Linear l : kBlockLinears) {
    auto s = linear_shape(c, l);
    add(std::uint64_t(c.n_layers) * std::uint64_t(s.rows) * std::uint64_t(s.cols));
  }
  add(c.dim);
  add(std::uint64_t(c.seq_len) * c.head_dim());  // freq_cis_real + freq_cis_imag, head_dim/2 each
  if (!c.shared_classifier) add(std::uint64_t(c.vocab_size) * c.dim);
  return n;
}

}  // namespace

Model load_llama2c(const std::string& path) {
  fpgallm::MappedFile file(path);
  fpgallm::ByteReader in(file.bytes(), path);
  if (file.size() < kLlama2cHeader)
    in.fail(fmt::format("truncated: {} bytes is shorter than the 28-byte llama2.c header", file.size()));
  Config c;
  c.dim = in.read<std::int32_t>("dim");
  c.hidden_dim = in.read<std::int32_t>("hidden_dim");
  c.n_layers = in.read<std::int32_t>("n_layers");
  c.n_heads = in.read<std::int32_t>("n_heads");
  c.n_kv_heads = in.read<std::int32_t>("n_kv_heads");
  std::int32_t vocab = in.read<std::int32_t>("vocab_size");
  c.seq_len = in.read<std::int32_t>("seq_len");
  c.shared_classifier = vocab > 0;
  c.vocab_size = vocab == INT32_MIN ? 0 : std::abs(vocab);
  c.name = std::filesystem::path(path).stem().string();
  if (auto why = c.invalid_reason(); !why.empty()) in.fail("bad llama2.c header: " + why);
  std::uint64_t floats = llama2c_float_count(c);
  std::uint64_t expected = kLlama2cHeader + floats * sizeof(float);
  if (expected != file.size())
    in.fail(fmt::format("header (dim {}, hidden {}, layers {}, heads {}/{}, vocab {}, seq {}) needs {} bytes, file has {}",
                        c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, vocab, c.seq_len,
                        expected, file.size()));
  Model m;
  m.config = c;
  m.weights = allocate_weights(c);
  m.source_format = Format::llama2c;
  m.source_path = path;
  for_each_llama2c_tensor(m.weights, [&](std::vector<float>& t) {
    auto bytes = in.read_span(t.size() * sizeof(float), "tensor");
    std::memcpy(t.data(), bytes.data(), bytes.size());
  });
  in.skip(std::size_t(c.seq_len) * c.head_dim() * sizeof(float), "rope frequency tables");
  if (!c.shared_classifier) {
    auto bytes = in.read_span(m.weights.classifier.size() * sizeof(float), "classifier");
    std::memcpy(m.weights.classifier.data(), bytes.data(), bytes.size());
  }
  return m;
}

void save_llama2c(const Model& m, const std::string& path) {
  const Config& c = m.config;
  if (c.arch != Arch::llama) throw fpgallm::InputError(path, "llama2.c format holds only llama models");
  if (!m.weights.rope_freq_factors.empty() || c.head_size != 0)
    throw fpgallm::InputError(path, "llama2.c format cannot hold RoPE scaling or a free head width");
  std::string out;
  out.reserve(kLlama2cHeader + llama2c_float_count(c) * sizeof(float));
  auto put_i32 = [&](std::int32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  auto put = [&](const std::vector<float>& t) {
    out.append(reinterpret_cast<const char*>(t.data()), t.size() * sizeof(float));
  };
  put_i32(c.dim);
  put_i32(c.hidden_dim);
  put_i32(c.n_layers);
  put_i32(c.n_heads);
  put_i32(c.n_kv_heads);
  put_i32(c.shared_classifier ? c.vocab_size : -c.vocab_size);
  put_i32(c.seq_len);
  for_each_llama2c_tensor(m.weights, put);
  // Legacy frequency tables (llama2.c ignores them; written for format compatibility).
  const int half = c.head_dim() / 2;
  std::vector<float> re(std::size_t(c.seq_len) * half), im(re.size());
  for (int p = 0; p < c.seq_len; ++p)
    for (int i = 0; i < half; ++i) {
      float freq = 1.0f / std::pow(c.rope_theta, (2.0f * i) / c.head_dim());
      re[std::size_t(p) * half + i] = std::cos(p * freq);
      im[std::size_t(p) * half + i] = std::sin(p * freq);
    }
  put(re);
  put(im);
  if (!c.shared_classifier) put(m.weights.classifier);
  fpgallm::write_file_atomic(path, out);
}

namespace {

// What load() says about a path that is not there: a preset gets one line saying that the
// command needs weights and how to make them.
[[noreturn]] void throw_missing_checkpoint(const std::string& path) {
  if (auto preset = find_preset(path))
    throw fpgallm::InputError(path, fmt::format("is a preset, a shape without weights; this command needs weights: "
                                                "`fpgallm synth --preset {} -o {}.gguf` writes random ones",
                                                preset->name, preset->name));
  throw fpgallm::InputError(path, "no such file or directory");
}

std::filesystem::path manifest_file(const std::filesystem::path& checkpoint) {
  std::error_code ec;
  return std::filesystem::is_directory(checkpoint, ec) ? checkpoint / "manifest.json"
                                                       : checkpoint.parent_path() / (checkpoint.stem().string() + ".manifest.json");
}

}  // namespace

Manifest manifest_for(const std::string& checkpoint) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(checkpoint, ec)) throw_missing_checkpoint(checkpoint);
  const fs::path file = manifest_file(checkpoint);
  Manifest out;
  if (!fs::exists(file, ec)) return out;
  out.path = file.string();
  const nlohmann::json j = fpgallm::read_json_file(out.path, "the model manifest");
  if (!j.is_object()) throw fpgallm::InputError(out.path, "a model manifest is a JSON object");
  auto entry = [&](const char* key) -> std::string {
    if (!j.contains(key)) return "";
    if (!j[key].is_string()) throw fpgallm::InputError(out.path, fmt::format("\"{}\" must be a file name", key));
    const fs::path named = file.parent_path() / j[key].get<std::string>();
    if (!fs::exists(named, ec))
      throw fpgallm::InputError(out.path, fmt::format("names {} {}, which does not exist", key, named.string()));
    return named.string();
  };
  out.tokenizer = entry("tokenizer");
  out.text = entry("text");
  return out;
}

Tokenizer tokenizer_for(const Model& m, const std::string& tokenizer_path) {
  if (!tokenizer_path.empty()) return Tokenizer::load_llama2c(tokenizer_path, m.config.vocab_size);
  if (m.tokenizer) return *m.tokenizer;
  if (m.source_path.empty()) throw fpgallm::InputError(m.config.name, "has no tokenizer; pass one with -z");
  const Manifest manifest = manifest_for(m.source_path);
  if (!manifest.tokenizer.empty()) return Tokenizer::load_llama2c(manifest.tokenizer, m.config.vocab_size);
  // Beside a file, or inside a checkpoint folder.
  const std::filesystem::path source(m.source_path);
  std::error_code ec;
  auto beside = (std::filesystem::is_directory(source, ec) ? source : source.parent_path()) / "tokenizer.bin";
  if (std::filesystem::exists(beside)) return Tokenizer::load_llama2c(beside.string(), m.config.vocab_size);
  if (m.bpe_tokenizer)
    throw fpgallm::InputError(m.source_path, "has a byte-level BPE vocabulary, which this command does not take; pass a llama2.c tokenizer with -z");
  throw fpgallm::InputError(m.source_path, "has no tokenizer inside, no " + manifest_file(source).filename().string() +
                                               " naming one and no tokenizer.bin beside it; pass one with -z");
}

StoryEncoder story_encoder(const Tokenizer& tok) {
  return [tok = std::make_shared<const Tokenizer>(tok)](const std::string& s) { return tok->encode(s, true, false); };
}

StoryEncoder story_encoder(const Model& m, const std::string& tokenizer_path) {
  if (m.bpe_tokenizer && tokenizer_path.empty())
    return [bpe = m.bpe_tokenizer](const std::string& s) { return bpe->encode(s, true, false); };
  return story_encoder(tokenizer_for(m, tokenizer_path));
}

Tokenizer load_tokenizer(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw fpgallm::InputError(path, "no such file or directory");
  if (S_ISDIR(st.st_mode)) {
    const auto inside = std::filesystem::path(path) / "tokenizer.bin";
    if (!std::filesystem::exists(inside)) throw fpgallm::InputError(path, "is a folder without tokenizer.bin");
    return Tokenizer::load_llama2c(inside.string(), 0);
  }
  fpgallm::MappedFile probe(path);
  if (probe.size() < 4 || std::memcmp(probe.data(), "GGUF", 4) != 0) return Tokenizer::load_llama2c(path, 0);
  const gguf::Reader r(path);
  if (!r.find("tokenizer.ggml.tokens")) throw fpgallm::InputError(path, "holds no tokenizer (no tokenizer.ggml.tokens)");
  auto t = tokenizer_from_gguf(r, static_cast<int>(r.get_strings("tokenizer.ggml.tokens").size()));
  if (!t) throw fpgallm::InputError(path, "holds a tokenizer that is not tokenizer.ggml.model \"llama\"");
  return *t;
}

namespace {

std::atomic<bool> g_allow_nonfinite{false};

Model load_any(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw_missing_checkpoint(path);
  if (S_ISDIR(st.st_mode)) return load_safetensors_dir(path);
  if (std::filesystem::path(path).extension() == ".gguf") return load_gguf(path);
  fpgallm::MappedFile probe(path);
  if (probe.size() >= 4 && std::memcmp(probe.data(), "GGUF", 4) == 0) return load_gguf(path);
  return load_llama2c(path);
}

void require_finite_tensor(const std::vector<float>& t, const std::string& source, const std::string& name,
                           std::string_view consequence) {
  for (std::size_t i = 0; i < t.size(); ++i)
    if (!std::isfinite(t[i]))
      throw fpgallm::InputError(source, fmt::format("weight {} [{}] is {} ({})", name, i,
                                                    std::isnan(t[i]) ? "NaN" : "infinite", consequence));
}

}  // namespace

void allow_nonfinite(bool allow) { g_allow_nonfinite = allow; }

void require_finite(const Model& m, const std::string& source, std::string_view consequence) {
  const Weights& w = m.weights;
  require_finite_tensor(w.token_embedding, source, "token embedding", consequence);
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const auto& lw = w.layers[l];
    require_finite_tensor(lw.attn_norm, source, fmt::format("blk.{}.attn_norm", l), consequence);
    require_finite_tensor(lw.ffn_norm, source, fmt::format("blk.{}.ffn_norm", l), consequence);
    for (Linear which : kBlockLinears)
      require_finite_tensor(lw.linear(which), source, linear_name(int(l), which), consequence);
    // Qwen2's q/k/v biases and Qwen3's q/k norm gains: numbers of the model like any weight.
    require_finite_tensor(lw.bq, source, fmt::format("blk.{}.attn_q.bias", l), consequence);
    require_finite_tensor(lw.bk, source, fmt::format("blk.{}.attn_k.bias", l), consequence);
    require_finite_tensor(lw.bv, source, fmt::format("blk.{}.attn_v.bias", l), consequence);
    require_finite_tensor(lw.q_norm, source, fmt::format("blk.{}.attn_q_norm", l), consequence);
    require_finite_tensor(lw.k_norm, source, fmt::format("blk.{}.attn_k_norm", l), consequence);
  }
  require_finite_tensor(w.final_norm, source, "final norm", consequence);
  require_finite_tensor(w.classifier, source, "classifier", consequence);
  require_finite_tensor(w.rope_freq_factors, source, "rope_freqs", consequence);
}

Model load(const std::string& path) {
  Model m = load_any(path);
  if (!g_allow_nonfinite) require_finite(m, path, "pass --allow-nonfinite to load it anyway");
  return m;
}

Model load_or_preset(const std::string& path_or_preset) {
  struct stat st {};
  if (::stat(path_or_preset.c_str(), &st) == 0) return load(path_or_preset);
  if (auto preset = find_preset(path_or_preset)) {
    Model m;
    m.config = *preset;
    return m;
  }
  throw fpgallm::InputError(path_or_preset, "no such file, and not a preset name (see `fpgallm presets`)" +
                                                preset_suggestion(path_or_preset));
}

}  // namespace model
