#include "model/safetensors.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/gguf.hpp"
#include "util/error.hpp"
#include "util/json_file.hpp"
#include "util/input_file.hpp"
#include "util/mapped_file.hpp"
#include "util/output.hpp"
#include "util/paths.hpp"

namespace model::safetensors {

namespace fs = std::filesystem;
using nlohmann::json;

std::size_t dtype_size(const std::string& d) {
  static const std::map<std::string, std::size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1}, {"U64", 8},
      {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

struct File::Mapping {
  fpgallm::MappedFile file;
};

File::File(const std::string& path) : mapping_(std::make_unique<Mapping>(Mapping{fpgallm::MappedFile(path)})), source_(path) {
  bytes_ = mapping_->file.bytes();
  parse();
}

File::File(std::span<const std::uint8_t> bytes, std::string source) : bytes_(bytes), source_(std::move(source)) { parse(); }

File::~File() = default;
File::File(File&&) noexcept = default;

namespace {
constexpr std::uint64_t kMaxHeader = 100u << 20;  // the safetensors library's own limit
}

void File::parse() {
  auto fail = [&](const std::string& problem) { throw fpgallm::InputError(source_, problem); };
  if (bytes_.size() < 8) fail(fmt::format("truncated: {} bytes is shorter than the 8-byte safetensors header length", bytes_.size()));
  std::uint64_t n = 0;
  std::memcpy(&n, bytes_.data(), 8);
  if (n > bytes_.size() - 8)
    fail(fmt::format("header length {} runs past the end of the file ({} bytes)", n, bytes_.size()));
  if (n > kMaxHeader) fail(fmt::format("header length {} exceeds the 100 MiB limit", n));
  data_offset_ = 8 + n;
  const std::uint64_t data_size = bytes_.size() - data_offset_;
  json header = fpgallm::parse_json_text(
      std::string_view(reinterpret_cast<const char*>(bytes_.data()) + 8, static_cast<std::size_t>(n)), source_);
  if (!header.is_object()) fail("header is not a JSON object");
  auto as_u64 = [](const json& j, std::uint64_t& out) {
    if (!j.is_number_unsigned()) return false;
    out = j.get<std::uint64_t>();
    return true;
  };
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) fail("__metadata__ is not an object");
      continue;
    }
    const json& e = it.value();
    TensorInfo t;
    t.name = it.key();
    if (!e.is_object()) fail(fmt::format("tensor '{}': entry is not an object", t.name));
    auto dt = e.find("dtype");
    auto sh = e.find("shape");
    auto off = e.find("data_offsets");
    if (dt == e.end() || !dt->is_string()) fail(fmt::format("tensor '{}': missing dtype", t.name));
    t.dtype = dt->get<std::string>();
    const std::size_t esize = dtype_size(t.dtype);
    if (esize == 0) fail(fmt::format("tensor '{}': unknown dtype '{}'", t.name, t.dtype));
    if (sh == e.end() || !sh->is_array() || sh->size() > 8) fail(fmt::format("tensor '{}': missing or bad shape", t.name));
    t.n_elements = 1;
    for (const auto& d : *sh) {
      std::uint64_t v = 0;
      if (!as_u64(d, v)) fail(fmt::format("tensor '{}': shape holds a non-integer or negative value", t.name));
      if (v != 0 && t.n_elements > (std::uint64_t{1} << 62) / v)
        fail(fmt::format("tensor '{}': shape [{}] overflows", t.name, sh->dump()));
      t.shape.push_back(v);
      t.n_elements *= v;
    }
    if (off == e.end() || !off->is_array() || off->size() != 2 || !as_u64((*off)[0], t.begin) || !as_u64((*off)[1], t.end))
      fail(fmt::format("tensor '{}': data_offsets must be two non-negative integers", t.name));
    if (t.begin > t.end || t.end > data_size)
      fail(fmt::format("tensor '{}': data_offsets [{}, {}] lie outside the {} data bytes", t.name, t.begin, t.end, data_size));
    if (t.end - t.begin != t.n_elements * esize)
      fail(fmt::format("tensor '{}': {} bytes do not hold shape [{}] of {}", t.name, t.end - t.begin,
                       fmt::join(t.shape, ", "), t.dtype));
    tensors_.push_back(std::move(t));
  }
  std::vector<fpgallm::Extent> extents;
  for (const auto& t : tensors_) extents.push_back({t.begin, t.end, t.name});
  if (auto overlap = fpgallm::overlapping_extents(std::move(extents)); !overlap.empty())
    fail("tensors overlap: " + overlap);
}

const TensorInfo* File::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const std::uint8_t> File::bytes(const TensorInfo& t) const {
  return bytes_.subspan(static_cast<std::size_t>(data_offset_ + t.begin), static_cast<std::size_t>(t.end - t.begin));
}

void File::read_floats(const TensorInfo& t, std::span<float> out) const {
  if (out.size() != t.n_elements)
    throw fpgallm::InputError(source_, fmt::format("tensor '{}' has {} elements, expected {}", t.name, t.n_elements, out.size()));
  auto b = bytes(t);
  if (t.dtype == "F32") gguf::dequantize(gguf::GgmlType::f32, b, out);
  else if (t.dtype == "F16") gguf::dequantize(gguf::GgmlType::f16, b, out);
  else if (t.dtype == "BF16") gguf::dequantize(gguf::GgmlType::bf16, b, out);
  else throw fpgallm::InputError(source_, fmt::format("tensor '{}' has dtype {} (F32, F16 or BF16 supported)", t.name, t.dtype));
}

std::string serialize(const std::vector<NamedTensor>& tensors, const std::string& dtype) {
  if (dtype != "F32" && dtype != "F16" && dtype != "BF16")
    throw std::invalid_argument("safetensors: cannot write dtype '" + dtype + "' (F32, F16, BF16)");
  const std::size_t esize = dtype_size(dtype);
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    std::uint64_t n = 1;
    for (auto d : t.shape) n *= d;
    if (n != t.data.size()) throw std::invalid_argument("safetensors: shape of '" + t.name + "' disagrees with its data");
    header[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + n * esize}}};
    offset += n * esize;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data 8-byte aligned, as the reference writer does
  std::string out;
  out.reserve(8 + text.size() + offset);
  const std::uint64_t n = text.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += text;
  for (const auto& t : tensors) {
    if (dtype == "F32") {
      out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * 4);
      continue;
    }
    for (float v : t.data) {
      const std::uint16_t h = dtype == "F16" ? gguf::float_to_fp16(v) : gguf::float_to_bf16(v);
      out.push_back(static_cast<char>(h & 0xFF));
      out.push_back(static_cast<char>(h >> 8));
    }
  }
  return out;
}

namespace {

int json_int(const json& j, const char* key, const std::string& source, std::optional<int> fallback = std::nullopt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (!fallback) throw fpgallm::InputError(source, fmt::format("config.json has no \"{}\"", key));
    return *fallback;
  }
  if (!it->is_number_integer()) throw fpgallm::InputError(source, fmt::format("\"{}\" is not an integer", key));
  auto v = it->get<std::int64_t>();
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw fpgallm::InputError(source, fmt::format("\"{}\" = {} is out of range", key, v));
  return static_cast<int>(v);
}

double json_number(const json& j, const char* key, const std::string& source, double fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) throw fpgallm::InputError(source, fmt::format("\"{}\" is not a number", key));
  const double v = it->get<double>();
  // The model holds these as floats: a value a float cannot hold is as wrong as inf or NaN.
  if (!std::isfinite(v) || !std::isfinite(static_cast<float>(v)))
    throw fpgallm::InputError(source, fmt::format("\"{}\" = {} is not a finite number", key, it->dump()));
  return v;
}

// A number that must be finite and above zero (rms_norm_eps, rope_theta, rope factors).
double json_positive(const json& j, const char* key, const std::string& source, double fallback) {
  const double v = json_number(j, key, source, fallback);
  if (!(v > 0) || !(static_cast<float>(v) > 0))
    throw fpgallm::InputError(source, fmt::format("\"{}\" = {} must be above zero", key, v));
  return v;
}

Config config_from_hf_json_unchecked(const std::string& text, const std::string& source);

}  // namespace

Config config_from_hf_json(const std::string& text, const std::string& source) {
  try {
    return config_from_hf_json_unchecked(text, source);
  } catch (const nlohmann::json::exception& e) {
    // A field of a type no check below expects: still the file's fault, named as such.
    throw fpgallm::InputError(source, std::string("a field has the wrong type (") + e.what() + ")");
  }
}

namespace {

Config config_from_hf_json_unchecked(const std::string& text, const std::string& source) {
  json j = fpgallm::parse_json_text(text, source);
  if (!j.is_object()) throw fpgallm::InputError(source, "is not a JSON object");
  // model_type, or the architectures list, names the block: llama, qwen2 or qwen3.
  std::optional<Arch> arch;
  const std::string model_type = j.value("model_type", json()).is_string() ? j["model_type"].get<std::string>() : "";
  if (model_type == "llama") arch = Arch::llama;
  if (model_type == "qwen2") arch = Arch::qwen2;
  if (model_type == "qwen3") arch = Arch::qwen3;
  if (auto a = j.find("architectures"); !arch && a != j.end() && a->is_array())
    for (const auto& name : *a) {
      if (name == "LlamaForCausalLM") arch = Arch::llama;
      if (name == "Qwen2ForCausalLM") arch = Arch::qwen2;
      if (name == "Qwen3ForCausalLM") arch = Arch::qwen3;
    }
  if (!arch) throw fpgallm::InputError(source, "is not a Llama, Qwen2 or Qwen3 causal LM (architectures / model_type)");
  if (auto act = j.find("hidden_act"); act != j.end() && *act != "silu")
    throw fpgallm::InputError(source, fmt::format("hidden_act {} is not supported (silu)", act->dump()));
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (auto b = j.find(key); b != j.end() && b->is_boolean() && b->get<bool>())
      throw fpgallm::InputError(source, fmt::format("\"{}\": true (biases on every projection) is not supported", key));
  if (auto sw = j.find("use_sliding_window"); sw != j.end() && sw->is_boolean() && sw->get<bool>())
    throw fpgallm::InputError(source, "use_sliding_window: true (sliding-window attention) is not supported");
  Config c;
  c.arch = *arch;
  c.qkv_bias = c.arch == Arch::qwen2;
  c.qk_norm = c.arch == Arch::qwen3;
  c.dim = json_int(j, "hidden_size", source);
  c.hidden_dim = json_int(j, "intermediate_size", source);
  c.n_layers = json_int(j, "num_hidden_layers", source);
  c.n_heads = json_int(j, "num_attention_heads", source);
  c.n_kv_heads = json_int(j, "num_key_value_heads", source, c.n_heads);
  c.vocab_size = json_int(j, "vocab_size", source);
  c.seq_len = json_int(j, "max_position_embeddings", source);
  c.norm_eps = static_cast<float>(json_positive(j, "rms_norm_eps", source, 1e-6));
  c.rope_theta = static_cast<float>(json_positive(j, "rope_theta", source, 10000.0));
  auto tie = j.find("tie_word_embeddings");
  if (tie != j.end() && !tie->is_null() && !tie->is_boolean())
    throw fpgallm::InputError(source, "\"tie_word_embeddings\" is not a boolean");
  c.shared_classifier = tie != j.end() && tie->is_boolean() && tie->get<bool>();
  if (auto rs = j.find("rope_scaling"); rs != j.end() && !rs->is_null()) {
    if (!rs->is_object()) throw fpgallm::InputError(source, fmt::format("rope_scaling is a {}, not an object", rs->type_name()));
    const std::string type = fpgallm::json_string(*rs, "rope_type", fpgallm::json_string(*rs, "type", "", source, "rope_scaling.type"),
                                                  source, "rope_scaling.rope_type");
    if (type != "llama3") throw fpgallm::InputError(source, fmt::format("rope_scaling {} is not supported (llama3)", rs->dump()));
    c.rope_scaling.factor = static_cast<float>(json_positive(*rs, "factor", source, 0));
    c.rope_scaling.low_freq_factor = static_cast<float>(json_positive(*rs, "low_freq_factor", source, 1));
    c.rope_scaling.high_freq_factor = static_cast<float>(json_positive(*rs, "high_freq_factor", source, 4));
    c.rope_scaling.original_context = json_int(*rs, "original_max_position_embeddings", source);
  }
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    const int head_dim = json_int(j, "head_dim", source);
    if (std::int64_t(head_dim) * c.n_heads != c.dim) c.head_size = head_dim;
  }
  if (auto why = c.invalid_reason(); !why.empty()) throw fpgallm::InputError(source, "bad model shape: " + why);
  return c;
}

}  // namespace

namespace {
nlohmann::ordered_json id_or_null(std::optional<int> id) { return id ? nlohmann::ordered_json(*id) : nlohmann::ordered_json(); }
}  // namespace

std::string hf_config_json(const Config& c, const std::string& dtype, SpecialIds ids) {
  const char* torch_dtype = dtype == "F16" ? "float16" : dtype == "BF16" ? "bfloat16" : "float32";
  // Floats through their shortest decimal form, so 1e-5f is written as 1e-05.
  auto shortest = [](float f) { return std::stod(fmt::format("{}", f)); };
  const char* arch_class = c.arch == Arch::qwen2 ? "Qwen2ForCausalLM" : c.arch == Arch::qwen3 ? "Qwen3ForCausalLM" : "LlamaForCausalLM";
  nlohmann::ordered_json j = {{"architectures", {arch_class}},
                              {"model_type", to_string(c.arch)},
                              {"hidden_size", c.dim},
                              {"intermediate_size", c.hidden_dim},
                              {"num_hidden_layers", c.n_layers},
                              {"num_attention_heads", c.n_heads},
                              {"num_key_value_heads", c.n_kv_heads},
                              {"vocab_size", c.vocab_size},
                              {"max_position_embeddings", c.seq_len},
                              {"rms_norm_eps", shortest(c.norm_eps)},
                              {"rope_theta", shortest(c.rope_theta)},
                              {"head_dim", c.head_dim()},
                              {"tie_word_embeddings", c.shared_classifier},
                              {"hidden_act", "silu"},
                              {"attention_bias", false},
                              {"attention_dropout", 0.0},
                              {"mlp_bias", false},
                              {"pretraining_tp", 1},
                              {"rope_scaling", nullptr},
                              {"use_cache", true},
                              {"bos_token_id", id_or_null(ids.bos)},
                              {"eos_token_id", id_or_null(ids.eos)},
                              {"torch_dtype", torch_dtype}};
  if (c.head_size) j["head_dim"] = c.head_size;
  // Qwen2's q/k/v biases are its architecture's (its config.json has no attention_bias);
  // Llama's attention_bias would put biases on every projection, o_proj included.
  if (c.arch == Arch::qwen2) j.erase("attention_bias");
  if (c.rope_scaling.factor != 0)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", shortest(c.rope_scaling.factor)},
                         {"low_freq_factor", shortest(c.rope_scaling.low_freq_factor)},
                         {"high_freq_factor", shortest(c.rope_scaling.high_freq_factor)},
                         {"original_max_position_embeddings", c.rope_scaling.original_context}};
  return j.dump(2) + "\n";
}

std::string hf_generation_config_json(SpecialIds ids) {
  const nlohmann::ordered_json j = {{"_from_model_config", true}, {"bos_token_id", id_or_null(ids.bos)}, {"eos_token_id", id_or_null(ids.eos)}};
  return j.dump(2) + "\n";
}

namespace {
// HF row h*hd + j*(hd/2) + i  <->  interleaved row h*hd + 2i + j.
void permute_rows(std::span<float> w, int n_heads, int head_dim, int cols, bool to_interleaved) {
  const std::size_t row = static_cast<std::size_t>(cols);
  std::vector<float> head(static_cast<std::size_t>(head_dim) * row);
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* base = w.data() + static_cast<std::size_t>(h) * head_dim * row;
    std::copy(base, base + head.size(), head.begin());
    for (int i = 0; i < half; ++i)
      for (int j = 0; j < 2; ++j) {
        const std::size_t hf = static_cast<std::size_t>(j * half + i), inter = static_cast<std::size_t>(2 * i + j);
        const std::size_t src = to_interleaved ? hf : inter, dst = to_interleaved ? inter : hf;
        std::copy(head.begin() + static_cast<std::ptrdiff_t>(src * row), head.begin() + static_cast<std::ptrdiff_t>((src + 1) * row),
                  base + dst * row);
      }
  }
}
}  // namespace

void hf_to_interleaved(std::span<float> w, int n_heads, int head_dim, int cols) { permute_rows(w, n_heads, head_dim, cols, true); }

void rope_rows_to_interleaved(const Config& c, LayerWeights& lw) {
  hf_to_interleaved(lw.wq, c.n_heads, c.head_dim(), c.dim);
  hf_to_interleaved(lw.wk, c.n_kv_heads, c.head_dim(), c.dim);
  if (!lw.bq.empty()) hf_to_interleaved(lw.bq, c.n_heads, c.head_dim(), 1);
  if (!lw.bk.empty()) hf_to_interleaved(lw.bk, c.n_kv_heads, c.head_dim(), 1);
  if (!lw.q_norm.empty()) hf_to_interleaved(lw.q_norm, 1, c.head_dim(), 1);
  if (!lw.k_norm.empty()) hf_to_interleaved(lw.k_norm, 1, c.head_dim(), 1);
}
void interleaved_to_hf(std::span<float> w, int n_heads, int head_dim, int cols) { permute_rows(w, n_heads, head_dim, cols, false); }

namespace {

const char* hf_linear_name(Linear l) {
  switch (l) {
    case Linear::wq: return "self_attn.q_proj";
    case Linear::wk: return "self_attn.k_proj";
    case Linear::wv: return "self_attn.v_proj";
    case Linear::wo: return "self_attn.o_proj";
    case Linear::w1: return "mlp.gate_proj";
    case Linear::w2: return "mlp.down_proj";
    case Linear::w3: return "mlp.up_proj";
    case Linear::cls: return "lm_head";
  }
  return "?";
}

std::string hf_tensor_name(int layer, Linear l) {
  if (l == Linear::cls) return "lm_head.weight";
  return fmt::format("model.layers.{}.{}.weight", layer, hf_linear_name(l));
}

// config.json's eos_token_id or bos_token_id (an integer, or the first of a list).
std::optional<int> token_id(const std::string& config_text, const char* key) {
  json j = fpgallm::parse_json_text(config_text, "config.json");
  if (!j.is_object()) return std::nullopt;
  json e = j.value(key, json());
  if (e.is_array() && !e.empty()) e = e[0];
  if (!e.is_number_integer() || e.get<std::int64_t>() < 0 || e.get<std::int64_t>() > (1 << 24)) return std::nullopt;
  return e.get<int>();
}

// tokenizer_config.json: the chat template (a string, or transformers' list of named
// templates, of which "default"), add_bos_token, and the bos, eos and padding tokens (their
// text, or {"content": text}), as ids of the added tokens that carry that text.
struct TokenizerConfig {
  std::optional<int> bos, eos, pad;
  std::optional<bool> add_bos;
  std::string chat_template;
};
TokenizerConfig read_tokenizer_config(const std::string& path, const BpeTokenizer& t) {
  const json j = fpgallm::parse_json_text(fpgallm::read_regular_file(path), path);
  if (!j.is_object()) throw fpgallm::InputError(path, "is not a JSON object");
  TokenizerConfig tc;
  if (const auto it = j.find("chat_template"); it != j.end()) {
    if (it->is_string()) tc.chat_template = it->get<std::string>();
    else if (it->is_array())
      for (const auto& e : *it)
        if (e.is_object() && e.value("name", json()) == "default" && e.value("template", json()).is_string())
          tc.chat_template = e["template"].get<std::string>();
  }
  if (const auto it = j.find("add_bos_token"); it != j.end() && it->is_boolean()) tc.add_bos = it->get<bool>();
  auto special = [&](const char* key) -> std::optional<int> {
    const auto it = j.find(key);
    if (it == j.end()) return std::nullopt;
    const json text = it->is_object() ? it->value("content", json()) : *it;
    return text.is_string() ? t.special_id(text.get<std::string>()) : std::nullopt;
  };
  tc.bos = special("bos_token");
  tc.eos = special("eos_token");
  tc.pad = special("pad_token");
  return tc;
}

std::string read_text_file(const fs::path& p) {
  fpgallm::MappedFile f(p.string());
  return std::string(reinterpret_cast<const char*>(f.data()), f.size());
}

// The safetensors files of a folder, in the order they are searched.
std::vector<std::string> shard_files(const fs::path& dir) {
  if (fs::exists(dir / "model.safetensors")) return {(dir / "model.safetensors").string()};
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    json j = fpgallm::parse_json_text(read_text_file(index), index.string());
    if (!j.is_object()) throw fpgallm::InputError(index.string(), "is not a JSON object");
    auto map = j.find("weight_map");
    if (map == j.end() || !map->is_object()) throw fpgallm::InputError(index.string(), "has no \"weight_map\" object");
    std::vector<std::string> files;
    for (auto it = map->begin(); it != map->end(); ++it) {
      if (!it.value().is_string()) throw fpgallm::InputError(index.string(), "weight_map values must be file names");
      auto name = it.value().get<std::string>();
      if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
        throw fpgallm::InputError(index.string(), fmt::format("shard name '{}' is not a file in the folder", name));
      auto path = (dir / name).string();
      if (std::find(files.begin(), files.end(), path) == files.end()) files.push_back(path);
    }
    if (files.empty()) throw fpgallm::InputError(index.string(), "weight_map is empty");
    return files;
  }
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty())
    throw fpgallm::InputError(dir.string(), "has no model.safetensors, model.safetensors.index.json or *.safetensors");
  return files;
}

}  // namespace

}  // namespace model::safetensors

namespace model {

namespace fs = std::filesystem;

Model load_safetensors_dir(const std::string& dir_name) {
  namespace st = safetensors;
  const fs::path dir(dir_name);
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) throw fpgallm::InputError(config_path.string(), "missing (a Hugging Face model folder needs config.json)");
  Model m;
  m.config = st::config_from_hf_json(st::read_text_file(config_path), config_path.string());
  m.config.name = dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string();
  m.source_format = Format::safetensors;
  m.source_path = dir_name;
  const Config& c = m.config;

  std::vector<st::File> files;
  for (const auto& f : st::shard_files(dir)) files.emplace_back(f);
  std::map<std::string, std::pair<const st::File*, const st::TensorInfo*>> index;
  for (const auto& f : files)
    for (const auto& t : f.tensors())
      if (!index.emplace(t.name, std::make_pair(&f, &t)).second)
        throw fpgallm::InputError(f.source(), fmt::format("tensor '{}' also appears in another shard", t.name));

  // Two passes: every tensor is checked (present, shape, dtype) before anything is
  // allocated, so the allocation is bounded by what the files really hold.
  bool allocated = false;
  auto fill = [&](const std::string& name, std::vector<std::uint64_t> shape, std::vector<float>& dst) {
    auto it = index.find(name);
    if (it == index.end()) throw fpgallm::InputError(dir_name, fmt::format("tensor '{}' is missing", name));
    const auto& [file, t] = it->second;
    if (t->shape != shape)
      throw fpgallm::InputError(file->source(), fmt::format("tensor '{}' has shape [{}], expected [{}] from config.json", name,
                                                            fmt::join(t->shape, ", "), fmt::join(shape, ", ")));
    if (t->dtype != "F32" && t->dtype != "F16" && t->dtype != "BF16")
      throw fpgallm::InputError(file->source(), fmt::format("tensor '{}' has dtype {} (F32, F16 or BF16 supported)", name, t->dtype));
    if (allocated) file->read_floats(*t, dst);
  };
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      m.weights = allocate_weights(c);
      allocated = true;
    }
  auto matrix = [](MatrixShape s) {
    return std::vector<std::uint64_t>{static_cast<std::uint64_t>(s.rows), static_cast<std::uint64_t>(s.cols)};
  };
  const auto dim = static_cast<std::uint64_t>(c.dim);
  std::vector<float> none;
  auto& w = m.weights;
  auto dst = [&](std::vector<float>& v) -> std::vector<float>& { return allocated ? v : none; };
  fill("model.embed_tokens.weight", matrix(linear_shape(c, Linear::cls)), dst(w.token_embedding));
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights placeholder;
    auto& lw = allocated ? w.layers[static_cast<std::size_t>(l)] : placeholder;
    fill(fmt::format("model.layers.{}.input_layernorm.weight", l), {dim}, lw.attn_norm);
    fill(fmt::format("model.layers.{}.post_attention_layernorm.weight", l), {dim}, lw.ffn_norm);
    for (Linear which : kBlockLinears) fill(st::hf_tensor_name(l, which), matrix(linear_shape(c, which)), lw.linear(which));
    const auto q_rows = static_cast<std::uint64_t>(c.n_heads) * c.head_dim(), kv_rows = static_cast<std::uint64_t>(c.kv_dim());
    const auto head = static_cast<std::uint64_t>(c.head_dim());
    if (c.qkv_bias) {
      fill(fmt::format("model.layers.{}.self_attn.q_proj.bias", l), {q_rows}, lw.bq);
      fill(fmt::format("model.layers.{}.self_attn.k_proj.bias", l), {kv_rows}, lw.bk);
      fill(fmt::format("model.layers.{}.self_attn.v_proj.bias", l), {kv_rows}, lw.bv);
    }
    if (c.qk_norm) {
      fill(fmt::format("model.layers.{}.self_attn.q_norm.weight", l), {head}, lw.q_norm);
      fill(fmt::format("model.layers.{}.self_attn.k_norm.weight", l), {head}, lw.k_norm);
    }
    if (allocated) st::rope_rows_to_interleaved(c, lw);
  }
  fill("model.norm.weight", {dim}, dst(w.final_norm));
  if (!c.shared_classifier) fill("lm_head.weight", matrix(linear_shape(c, Linear::cls)), dst(w.classifier));
  }
  if (c.rope_scaling.factor != 0) m.weights.rope_freq_factors = c.rope_freq_factors();
  if (fs::exists(dir / "tokenizer.json")) {
    auto t = std::make_shared<BpeTokenizer>(BpeTokenizer::from_hf_json((dir / "tokenizer.json").string()));
    if (t->vocab_size() > c.vocab_size)
      throw fpgallm::InputError((dir / "tokenizer.json").string(), fmt::format("has {} tokens but the model's vocabulary has {}",
                                                                              t->vocab_size(), c.vocab_size));
    // The special ids as llama.cpp's SpecialVocab takes them: tokenizer_config.json's tokens
    // first, config.json's ids for the rest.
    const std::string config_text = st::read_text_file(config_path);
    const auto tc = fs::exists(dir / "tokenizer_config.json")
                        ? st::read_tokenizer_config((dir / "tokenizer_config.json").string(), *t)
                        : st::TokenizerConfig{};
    auto id = [&](std::optional<int> named, const char* key) {
      if (!named) named = st::token_id(config_text, key);
      return named && *named < t->vocab_size() ? named : std::nullopt;
    };
    if (auto eos = id(tc.eos, "eos_token_id")) t->set_eos(*eos);
    t->set_named_bos(id(tc.bos, "bos_token_id"));
    t->set_pad(id(tc.pad, "pad_token_id"));
    if (tc.add_bos.value_or(false) && t->named_bos()) t->set_bos(t->named_bos());
    t->set_chat_template(tc.chat_template);
    m.bpe_tokenizer = std::move(t);
  }
  return m;
}

void save_safetensors_dir(const Model& m, const std::string& dir_name, const Tokenizer* tokenizer, const std::string& dtype) {
  namespace st = safetensors;
  const Config& c = m.config;
  if (!m.weights.rope_freq_factors.empty() && c.rope_scaling.factor == 0)
    throw fpgallm::InputError(dir_name, "the model's RoPE frequency factors (GGUF rope_freqs) have no config.json rope_scaling form");
  if (!m.has_weights()) throw fpgallm::InputError(dir_name, "the model has no weights to write");
  if (tokenizer && tokenizer->vocab_size() != c.vocab_size)
    throw fpgallm::InputError(dir_name, fmt::format("tokenizer has {} tokens but the model's vocabulary has {}",
                                                    tokenizer->vocab_size(), c.vocab_size));
  if (dtype != "F32" && dtype != "F16" && dtype != "BF16")
    throw fpgallm::InputError(dir_name, "safetensors output stores F32, F16 or BF16, not " + dtype);
  // Refuses a foreign folder before the work; OutputFolder checks again when it commits.
  fpgallm::check_output(dir_name, fpgallm::OutputKind::folder);

  std::vector<st::NamedTensor> tensors;
  std::vector<std::vector<float>> permuted;  // HF-ordered copies of q_proj, k_proj, their biases and gains
  permuted.reserve(static_cast<std::size_t>(c.n_layers) * 6);  // no reallocation: tensors hold spans of them
  auto hf_order = [&](const std::vector<float>& v, int heads, int cols) -> std::span<const float> {
    permuted.push_back(v);
    st::interleaved_to_hf(permuted.back(), heads, c.head_dim(), cols);
    return permuted.back();
  };
  auto matrix = [](MatrixShape s) {
    return std::vector<std::uint64_t>{static_cast<std::uint64_t>(s.rows), static_cast<std::uint64_t>(s.cols)};
  };
  const auto dim = static_cast<std::uint64_t>(c.dim);
  tensors.push_back({"model.embed_tokens.weight", matrix(linear_shape(c, Linear::cls)), m.weights.token_embedding});
  for (int l = 0; l < c.n_layers; ++l) {
    const auto& lw = m.weights.layers[static_cast<std::size_t>(l)];
    tensors.push_back({fmt::format("model.layers.{}.input_layernorm.weight", l), {dim}, lw.attn_norm});
    for (Linear which : kBlockLinears) {
      std::span<const float> data = lw.linear(which);
      if (which == Linear::wq || which == Linear::wk)
        data = hf_order(lw.linear(which), which == Linear::wq ? c.n_heads : c.n_kv_heads, c.dim);
      tensors.push_back({st::hf_tensor_name(l, which), matrix(linear_shape(c, which)), data});
    }
    const auto q_rows = static_cast<std::uint64_t>(c.n_heads) * c.head_dim(), kv_rows = static_cast<std::uint64_t>(c.kv_dim());
    if (c.qkv_bias) {
      tensors.push_back({fmt::format("model.layers.{}.self_attn.q_proj.bias", l), {q_rows}, hf_order(lw.bq, c.n_heads, 1)});
      tensors.push_back({fmt::format("model.layers.{}.self_attn.k_proj.bias", l), {kv_rows}, hf_order(lw.bk, c.n_kv_heads, 1)});
      tensors.push_back({fmt::format("model.layers.{}.self_attn.v_proj.bias", l), {kv_rows}, lw.bv});
    }
    if (c.qk_norm) {
      const auto head = static_cast<std::uint64_t>(c.head_dim());
      tensors.push_back({fmt::format("model.layers.{}.self_attn.q_norm.weight", l), {head}, hf_order(lw.q_norm, 1, 1)});
      tensors.push_back({fmt::format("model.layers.{}.self_attn.k_norm.weight", l), {head}, hf_order(lw.k_norm, 1, 1)});
    }
    tensors.push_back({fmt::format("model.layers.{}.post_attention_layernorm.weight", l), {dim}, lw.ffn_norm});
  }
  tensors.push_back({"model.norm.weight", {dim}, m.weights.final_norm});
  if (!c.shared_classifier) tensors.push_back({"lm_head.weight", matrix(linear_shape(c, Linear::cls)), m.weights.classifier});

  st::SpecialIds ids;
  if (m.bpe_tokenizer) ids = {m.bpe_tokenizer->named_bos(), m.bpe_tokenizer->eos()};
  // A Hugging Face source folder: its config.json with every key, and its tokenizer files.
  const bool hf_source = m.source_format == Format::safetensors && fs::is_directory(m.source_path);
  std::string config = st::hf_config_json(c, dtype, ids);
  if (hf_source) {
    const std::string source = (fs::path(m.source_path) / "config.json").string();
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(fpgallm::read_regular_file(source));
    } catch (const nlohmann::json::exception& e) {  // it parsed when the model was read: changed since
      throw fpgallm::InputError(source, std::string("is no longer valid JSON (") + e.what() + ")");
    }
    j["torch_dtype"] = nlohmann::ordered_json::parse(config)["torch_dtype"];
    config = j.dump(2) + "\n";
  }
  fpgallm::OutputFolder out(dir_name);
  const fs::path tmp(out.dir());
  fpgallm::write_file_atomic((tmp / "config.json").string(), config);
  bool generation_copied = false;
  if (hf_source)
    for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                             "merges.txt", "generation_config.json"}) {
      const fs::path from = fs::path(m.source_path) / name;
      if (!fs::is_regular_file(from)) continue;
      fpgallm::write_file_atomic((tmp / name).string(), fpgallm::read_regular_file(from.string()));
      generation_copied |= std::string_view(name) == "generation_config.json";
    }
  // A byte-level BPE vocabulary from elsewhere (a GGUF, synth -z) goes with it as tokenizer.json.
  if (!hf_source && m.bpe_tokenizer) fpgallm::write_file_atomic((tmp / "tokenizer.json").string(), m.bpe_tokenizer->hf_json());
  if (!generation_copied)
    fpgallm::write_file_atomic((tmp / "generation_config.json").string(), st::hf_generation_config_json(ids));
  fpgallm::write_file_atomic((tmp / "model.safetensors").string(), st::serialize(tensors, dtype));
  if (tokenizer) tokenizer->save_llama2c((tmp / "tokenizer.bin").string());
  out.commit();
}

}  // namespace model
