#include "model/gguf_llama.hpp"

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>

#include "model/safetensors.hpp"
#include "util/error.hpp"

namespace model {

namespace {

constexpr const char* kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  std::size_t at = 0;
  while ((at = s.find(from, at)) != std::string::npos) {
    s.replace(at, from.size(), to);
    at += to.size();
  }
  return s;
}

// SentencePiece token types, as tokenizer.ggml.token_type stores them.
enum TokenType : std::int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUnused = 5, kByte = 6 };

int checked_int(const gguf::Reader& r, const std::string& key, std::optional<std::int64_t> fallback = std::nullopt) {
  auto v = r.int_or_none(key);
  if (!v) {
    if (!fallback) r.fail(fmt::format("metadata key '{}' is missing", key));
    v = fallback;
  }
  if (*v < 0 || *v > std::numeric_limits<int>::max()) r.fail(fmt::format("metadata key '{}' = {} is out of range", key, *v));
  return static_cast<int>(*v);
}

}  // namespace

std::uint32_t llama_file_type(gguf::GgmlType t) {
  switch (t) {
    case gguf::GgmlType::f32: return 0;
    case gguf::GgmlType::f16: return 1;
    case gguf::GgmlType::q4_0: return 2;
    case gguf::GgmlType::q4_1: return 3;
    case gguf::GgmlType::q8_0: return 7;
    case gguf::GgmlType::q5_0: return 8;
    case gguf::GgmlType::q5_1: return 9;
    case gguf::GgmlType::q2_k: return 10;
    case gguf::GgmlType::q3_k: return 12;  // Q3_K_M
    case gguf::GgmlType::q4_k: return 15;  // Q4_K_M
    case gguf::GgmlType::q5_k: return 17;  // Q5_K_M
    case gguf::GgmlType::q6_k: return 18;
    case gguf::GgmlType::iq4_nl: return 25;
    case gguf::GgmlType::iq4_xs: return 30;
    case gguf::GgmlType::bf16: return 32;
    default: return 0;
  }
}

std::string gguf_tensor_name(int layer, Linear l) {
  if (l == Linear::cls) return "output.weight";
  return fmt::format("blk.{}.{}.weight", layer, gguf_name(l));
}

std::vector<std::uint64_t> gguf_matrix_dims(MatrixShape s) {
  return {static_cast<std::uint64_t>(s.cols), static_cast<std::uint64_t>(s.rows)};
}

void put_llama_metadata(gguf::Writer& w, const Config& c) {
  using gguf::Value;
  const std::string arch = to_string(c.arch), k = arch + ".";
  w.set("general.architecture", Value::string(arch));
  w.set("general.name", Value::string(c.name));
  w.set(k + "context_length", Value::u32(static_cast<std::uint32_t>(c.seq_len)));
  w.set(k + "embedding_length", Value::u32(static_cast<std::uint32_t>(c.dim)));
  w.set(k + "block_count", Value::u32(static_cast<std::uint32_t>(c.n_layers)));
  w.set(k + "feed_forward_length", Value::u32(static_cast<std::uint32_t>(c.hidden_dim)));
  w.set(k + "rope.dimension_count", Value::u32(static_cast<std::uint32_t>(c.head_dim())));
  w.set(k + "attention.head_count", Value::u32(static_cast<std::uint32_t>(c.n_heads)));
  w.set(k + "attention.head_count_kv", Value::u32(static_cast<std::uint32_t>(c.n_kv_heads)));
  if (c.head_size) {  // a head width other than dim / heads (Qwen3)
    w.set(k + "attention.key_length", Value::u32(static_cast<std::uint32_t>(c.head_size)));
    w.set(k + "attention.value_length", Value::u32(static_cast<std::uint32_t>(c.head_size)));
  }
  w.set(k + "attention.layer_norm_rms_epsilon", Value::f32(c.norm_eps));
  w.set(k + "rope.freq_base", Value::f32(c.rope_theta));
  w.set(k + "vocab_size", Value::u32(static_cast<std::uint32_t>(c.vocab_size)));
}

void put_tokenizer_metadata(gguf::Writer& w, const Tokenizer& t) {
  using gguf::Value;
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  tokens.reserve(static_cast<std::size_t>(t.vocab_size()));
  for (int id = 0; id < t.vocab_size(); ++id) {
    std::string p = t.piece(id);
    TokenType type = kNormal;
    if (id == Tokenizer::kBos || id == Tokenizer::kEos) {
      // llama2.c's tokenizer.bin spells them "\n<s>\n" and "\n</s>\n".
      p = id == Tokenizer::kBos ? "<s>" : "</s>";
      type = kControl;
    } else if (id == 0 && (p == "<unk>" || p.empty())) {
      p = "<unk>";
      type = kUnknown;
    } else if (p.size() == 6 && p.starts_with("<0x") && p.back() == '>') {
      type = kByte;
    } else {
      p = replace_all(std::move(p), " ", kSpaceMarker);
    }
    tokens.push_back(std::move(p));
    types.push_back(type);
  }
  w.set("tokenizer.ggml.model", Value::string("llama"));
  w.set("tokenizer.ggml.tokens", Value::strings(std::move(tokens)));
  w.set("tokenizer.ggml.scores", Value::f32s(t.scores()));
  w.set("tokenizer.ggml.token_type", Value::i32s(types));
  w.set("tokenizer.ggml.bos_token_id", Value::u32(Tokenizer::kBos));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(Tokenizer::kEos));
  w.set("tokenizer.ggml.unknown_token_id", Value::u32(0));
}

Config llama_config_from_gguf(const gguf::Reader& r) {
  const std::string arch = r.find("general.architecture") ? r.get_string("general.architecture") : "";
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3")
    r.fail(arch.empty() ? "metadata has no general.architecture"
                        : fmt::format("architecture '{}' is not supported (llama, qwen2, qwen3)", arch));
  const std::string k = arch + ".";
  Config c;
  c.arch = arch_from_string(arch);
  c.qkv_bias = c.arch == Arch::qwen2;
  c.qk_norm = c.arch == Arch::qwen3;
  c.dim = checked_int(r, k + "embedding_length");
  c.hidden_dim = checked_int(r, k + "feed_forward_length");
  c.n_layers = checked_int(r, k + "block_count");
  c.n_heads = checked_int(r, k + "attention.head_count");
  c.n_kv_heads = checked_int(r, k + "attention.head_count_kv", c.n_heads);
  c.seq_len = checked_int(r, k + "context_length");
  c.rope_theta = static_cast<float>(r.float_or_none(k + "rope.freq_base").value_or(10000.0));
  c.norm_eps = static_cast<float>(r.float_or_none(k + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (auto key_length = r.int_or_none(k + "attention.key_length")) {
    if (auto value_length = r.int_or_none(k + "attention.value_length"); value_length && *value_length != *key_length)
      r.fail(fmt::format("{}attention.value_length {} differs from key_length {} (not supported)", k, *value_length, *key_length));
    if (*key_length < 1 || *key_length > (1 << 20)) r.fail(fmt::format("{}attention.key_length {} is out of range", k, *key_length));
    if (*key_length * c.n_heads != c.dim) c.head_size = static_cast<int>(*key_length);
  }
  const gguf::TensorInfo& embd = r.tensor("token_embd.weight");
  if (embd.dims.size() != 2 || embd.dims[1] > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    r.fail("token_embd.weight is not a [vocab][dim] matrix");
  c.vocab_size = static_cast<int>(embd.dims[1]);
  // A header count must agree with the tensor it counts.
  if (auto stated = r.int_or_none(k + "vocab_size"); stated && *stated != c.vocab_size)
    r.fail(fmt::format("{}vocab_size {} disagrees with token_embd.weight's {} rows", k, *stated, c.vocab_size));
  c.shared_classifier = r.find_tensor("output.weight") == nullptr;
  if (const gguf::Value* name = r.find("general.name"); name && name->type == gguf::ValueType::string && !name->s[0].empty())
    c.name = name->s[0];
  else
    c.name = std::filesystem::path(r.source()).stem().string();
  if (auto why = c.invalid_reason(); !why.empty()) r.fail(fmt::format("bad {} hyper-parameters: {}", arch, why));
  if (auto rot = r.int_or_none(k + "rope.dimension_count"); rot && *rot != c.head_dim())
    r.fail(fmt::format("{}rope.dimension_count {} differs from the head size {} (partial rotary embedding is not supported)",
                       k, *rot, c.head_dim()));
  return c;
}

std::optional<Tokenizer> tokenizer_from_gguf(const gguf::Reader& r, int vocab_size) {
  const gguf::Value* model = r.find("tokenizer.ggml.model");
  if (!model || model->type != gguf::ValueType::string || model->s[0] != "llama") return std::nullopt;
  const auto& tokens = r.get_strings("tokenizer.ggml.tokens");
  if (tokens.size() != static_cast<std::size_t>(vocab_size))
    r.fail(fmt::format("tokenizer has {} tokens but the model's vocabulary has {}", tokens.size(), vocab_size));
  std::vector<double> raw_scores =
      r.find("tokenizer.ggml.scores") ? r.get_floats("tokenizer.ggml.scores") : std::vector<double>(tokens.size(), 0.0);
  if (raw_scores.size() != tokens.size())
    r.fail(fmt::format("tokenizer has {} tokens but {} scores", tokens.size(), raw_scores.size()));
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
    const int expected = std::string(key).find("bos") != std::string::npos ? Tokenizer::kBos : Tokenizer::kEos;
    if (auto id = r.int_or_none(key); id && *id != expected)
      r.fail(fmt::format("{} is {}; fpgallm's SentencePiece tokenizer needs {}", key, *id, expected));
  }
  std::vector<std::string> pieces;
  pieces.reserve(tokens.size());
  for (const auto& t : tokens) pieces.push_back(replace_all(t, kSpaceMarker, " "));
  std::vector<float> scores(raw_scores.begin(), raw_scores.end());
  return Tokenizer(std::move(pieces), std::move(scores));
}

Model load_gguf(const std::string& path) { return load_gguf(gguf::Reader(path)); }

Model load_gguf(const gguf::Reader& r) {
  Model m;
  m.config = llama_config_from_gguf(r);
  const Config& c = m.config;
  m.source_format = Format::gguf;
  m.source_path = r.source();
  // Every tensor is checked (present, shape, type) before anything is allocated, so the
  // allocation is bounded by what the file really holds.
  struct Load {
    const gguf::TensorInfo* tensor;
    std::vector<float>* dst;
  };
  std::vector<Load> loads;
  auto plan = [&](const std::string& name, std::vector<std::uint64_t> dims) {
    const gguf::TensorInfo& t = r.tensor(name);
    if (t.dims != dims)
      r.fail(fmt::format("tensor '{}' has shape [{}], expected [{}] from the metadata", name, fmt::join(t.dims, ", "),
                         fmt::join(dims, ", ")));
    auto tr = gguf::type_traits(t.type);
    if (!tr || !tr->dequantizable)
      r.fail(fmt::format("tensor '{}' has ggml type {}, which fpgallm cannot dequantize ({})", name,
                         gguf::type_name(t.type), gguf::dequantizable_type_names()));
    loads.push_back({&t, nullptr});
  };
  const auto dim = static_cast<std::uint64_t>(c.dim);
  plan("token_embd.weight", {dim, static_cast<std::uint64_t>(c.vocab_size)});
  const auto q_rows = static_cast<std::uint64_t>(c.n_heads) * c.head_dim(), kv_rows = static_cast<std::uint64_t>(c.kv_dim());
  const auto head = static_cast<std::uint64_t>(c.head_dim());
  for (int l = 0; l < c.n_layers; ++l) {
    plan(fmt::format("blk.{}.attn_norm.weight", l), {dim});
    plan(fmt::format("blk.{}.ffn_norm.weight", l), {dim});
    for (Linear which : kBlockLinears) plan(gguf_tensor_name(l, which), gguf_matrix_dims(linear_shape(c, which)));
    if (c.qkv_bias) {
      plan(fmt::format("blk.{}.attn_q.bias", l), {q_rows});
      plan(fmt::format("blk.{}.attn_k.bias", l), {kv_rows});
      plan(fmt::format("blk.{}.attn_v.bias", l), {kv_rows});
    }
    if (c.qk_norm) {
      plan(fmt::format("blk.{}.attn_q_norm.weight", l), {head});
      plan(fmt::format("blk.{}.attn_k_norm.weight", l), {head});
    }
  }
  plan("output_norm.weight", {dim});
  if (!c.shared_classifier) plan("output.weight", gguf_matrix_dims(linear_shape(c, Linear::cls)));
  const bool rope_freqs = r.find_tensor("rope_freqs.weight") != nullptr;  // Llama 3 RoPE scaling, as llama.cpp writes it
  if (rope_freqs) plan("rope_freqs.weight", {head / 2});
  m.tokenizer = tokenizer_from_gguf(r, c.vocab_size);
  if (auto bpe = BpeTokenizer::from_gguf(r)) {
    if (bpe->vocab_size() > c.vocab_size)
      r.fail(fmt::format("tokenizer has {} tokens but the model's vocabulary has {}", bpe->vocab_size(), c.vocab_size));
    m.bpe_tokenizer = std::make_shared<BpeTokenizer>(std::move(*bpe));
  }

  // The tensors' shapes were checked above, so each vector takes its tensor's floats as they
  // are (allocate_weights would zero-fill every one first: a second pass over the weights).
  m.weights.layers.resize(static_cast<std::size_t>(c.n_layers));
  std::size_t k = 0;
  loads[k++].dst = &m.weights.token_embedding;
  for (auto& lw : m.weights.layers) {
    loads[k++].dst = &lw.attn_norm;
    loads[k++].dst = &lw.ffn_norm;
    for (Linear which : kBlockLinears) loads[k++].dst = &lw.linear(which);
    for (auto* v : {&lw.bq, &lw.bk, &lw.bv})
      if (c.qkv_bias) loads[k++].dst = v;
    for (auto* v : {&lw.q_norm, &lw.k_norm})
      if (c.qk_norm) loads[k++].dst = v;
  }
  loads[k++].dst = &m.weights.final_norm;
  if (!c.shared_classifier) loads[k++].dst = &m.weights.classifier;
  if (rope_freqs) loads[k++].dst = &m.weights.rope_freq_factors;
  for (const auto& l : loads) *l.dst = r.tensor_floats(*l.tensor);
  for (float f : m.weights.rope_freq_factors)
    if (!(f > 0) || !std::isfinite(f)) r.fail("rope_freqs.weight holds a factor that is not a positive number");
  // llama.cpp's converter permutes llama's q/k rows to interleaved RoPE pairs, but keeps
  // Qwen's in Hugging Face (rotate-half, "NEOX") order.
  if (c.arch != Arch::llama)
    for (auto& lw : m.weights.layers) safetensors::rope_rows_to_interleaved(c, lw);
  return m;
}

void put_bpe_tokenizer_metadata(gguf::Writer& w, const BpeTokenizer& t, int n_vocab, const std::string& path) {
  using gguf::Value;
  const std::string pre = t.gguf_pre();
  if (pre.empty())
    throw fpgallm::InputError(t.source(), "its pre-tokenizer regexes are none that GGUF names (tokenizer.ggml.pre qwen2, "
                                          "llama-bpe or gpt-2), so " + path + " cannot carry it");
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  for (int id = 0; id < n_vocab; ++id) {
    if (id < t.vocab_size()) {
      tokens.push_back(t.token(id));
      types.push_back(t.is_special(id) ? kControl : kNormal);
    } else {  // embedding rows beyond the tokenizer's (Qwen pads its vocabulary)
      tokens.push_back(fmt::format("[PAD{}]", id));
      types.push_back(kUnused);
    }
  }
  w.set("tokenizer.ggml.model", Value::string("gpt2"));
  w.set("tokenizer.ggml.pre", Value::string(pre));
  w.set("tokenizer.ggml.tokens", Value::strings(std::move(tokens)));
  w.set("tokenizer.ggml.token_type", Value::i32s(types));
  w.set("tokenizer.ggml.merges", Value::strings(t.merges()));
  if (auto id = t.named_bos()) w.set("tokenizer.ggml.bos_token_id", Value::u32(static_cast<std::uint32_t>(*id)));
  if (auto id = t.eos()) w.set("tokenizer.ggml.eos_token_id", Value::u32(static_cast<std::uint32_t>(*id)));
  if (auto id = t.pad()) w.set("tokenizer.ggml.padding_token_id", Value::u32(static_cast<std::uint32_t>(*id)));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(t.bos().has_value()));
  if (!t.chat_template().empty()) w.set("tokenizer.chat_template", Value::string(t.chat_template()));
}

void save_gguf(const Model& m, const std::string& path, gguf::GgmlType matrix_type, const Tokenizer* tokenizer,
               std::uint32_t version) {
  const Config& c = m.config;
  if (!m.has_weights()) throw fpgallm::InputError(path, "the model has no weights to write");
  if (auto tr = gguf::type_traits(matrix_type); !tr || !tr->dequantizable)
    throw fpgallm::InputError(path, "cannot write matrices as ggml " + gguf::type_name(matrix_type));
  if (tokenizer && tokenizer->vocab_size() != c.vocab_size)
    throw fpgallm::InputError(path, fmt::format("tokenizer has {} tokens but the model's vocabulary has {}",
                                                tokenizer->vocab_size(), c.vocab_size));
  gguf::Writer w;
  put_llama_metadata(w, c);
  w.set("general.file_type", gguf::Value::u32(llama_file_type(matrix_type)));
  if (tokenizer) put_tokenizer_metadata(w, *tokenizer);
  else if (m.bpe_tokenizer) put_bpe_tokenizer_metadata(w, *m.bpe_tokenizer, c.vocab_size, path);

  auto as_bytes = [](const std::vector<float>& v) {
    return std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * sizeof(float));
  };
  auto add_vector = [&](const std::string& name, const std::vector<float>& v) {
    w.add_tensor_view(name, gguf::GgmlType::f32, {v.size()}, as_bytes(v));
  };
  auto add_matrix = [&](const std::string& name, MatrixShape s, const std::vector<float>& v) {
    gguf::GgmlType type = matrix_type;
    if (static_cast<std::uint64_t>(s.cols) % gguf::type_traits(type)->block != 0) type = gguf::GgmlType::f16;
    if (type == gguf::GgmlType::f32)
      w.add_tensor_view(name, type, gguf_matrix_dims(s), as_bytes(v));
    else
      w.add_tensor(name, type, gguf_matrix_dims(s), gguf::quantize(type, v));
  };
  add_matrix("token_embd.weight", linear_shape(c, Linear::cls), m.weights.token_embedding);
  // llama.cpp keeps Qwen's q/k rows (and their biases and gains) in Hugging Face order;
  // the permuted copies live until the file is written.
  const bool qwen = c.arch != Arch::llama;
  std::deque<std::vector<float>> permuted;
  auto rope_rows = [&](const std::vector<float>& v, int heads, int cols) -> const std::vector<float>& {
    if (!qwen) return v;
    safetensors::interleaved_to_hf(permuted.emplace_back(v), heads, c.head_dim(), cols);
    return permuted.back();
  };
  for (int l = 0; l < c.n_layers; ++l) {
    const auto& lw = m.weights.layers[static_cast<std::size_t>(l)];
    const std::string blk = fmt::format("blk.{}.", l);
    add_vector(blk + "attn_norm.weight", lw.attn_norm);
    for (Linear which : kBlockLinears) {
      const std::vector<float>& data = which == Linear::wq   ? rope_rows(lw.wq, c.n_heads, c.dim)
                                       : which == Linear::wk ? rope_rows(lw.wk, c.n_kv_heads, c.dim)
                                                             : lw.linear(which);
      add_matrix(gguf_tensor_name(l, which), linear_shape(c, which), data);
    }
    if (c.qkv_bias) {
      add_vector(blk + "attn_q.bias", rope_rows(lw.bq, c.n_heads, 1));
      add_vector(blk + "attn_k.bias", rope_rows(lw.bk, c.n_kv_heads, 1));
      add_vector(blk + "attn_v.bias", lw.bv);
    }
    if (c.qk_norm) {
      add_vector(blk + "attn_q_norm.weight", rope_rows(lw.q_norm, 1, 1));
      add_vector(blk + "attn_k_norm.weight", rope_rows(lw.k_norm, 1, 1));
    }
    add_vector(blk + "ffn_norm.weight", lw.ffn_norm);
  }
  add_vector("output_norm.weight", m.weights.final_norm);
  if (!m.weights.rope_freq_factors.empty()) add_vector("rope_freqs.weight", m.weights.rope_freq_factors);
  if (!c.shared_classifier) add_matrix("output.weight", linear_shape(c, Linear::cls), m.weights.classifier);
  w.write(path, version);
}

}  // namespace model
