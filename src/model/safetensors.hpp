#pragma once
// Hugging Face safetensors files and LlamaForCausalLM checkpoint folders.
//
// A safetensors file: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {string: string}}, then the data; offsets are relative to the data start.
// A folder: config.json (Llama/Qwen2/Qwen3ForCausalLM), tokenizer.json when present, and model.safetensors, or shards listed in
// model.safetensors.index.json ("weight_map": {tensor: file}), or else every *.safetensors.
// Hugging Face orders the rows of q_proj/k_proj for rotate-half RoPE; the loader permutes
// them to the interleaved pairs the engine uses, and the writer permutes them back.
#include <cstdint>
#include <memory>
#include <span>
#include <optional>
#include <string>
#include <vector>

#include "model/model.hpp"

namespace model::safetensors {

struct TensorInfo {
  std::string name;
  std::string dtype;                 // "F32", "F16", "BF16", "I64", ...
  std::vector<std::uint64_t> shape;  // row-major, outermost first
  std::uint64_t begin = 0;           // from the start of the data
  std::uint64_t end = 0;
  std::uint64_t n_elements = 0;
};

// Bytes per element of a dtype; 0 for one this code does not know.
std::size_t dtype_size(const std::string& dtype);

// One parsed file. Header length, JSON, dtypes, shapes and offsets are all checked against
// the file; errors throw fpgallm::InputError naming it.
class File {
 public:
  explicit File(const std::string& path);
  File(std::span<const std::uint8_t> bytes, std::string source);  // caller owns the bytes
  ~File();
  File(File&&) noexcept;
  File& operator=(File&&) = delete;

  const std::string& source() const { return source_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  std::span<const std::uint8_t> bytes(const TensorInfo& t) const;
  // F32, F16 or BF16 elements as fp32 into out (out.size() == n_elements).
  void read_floats(const TensorInfo& t, std::span<float> out) const;

 private:
  void parse();
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
  std::span<const std::uint8_t> bytes_;
  std::string source_;
  std::uint64_t data_offset_ = 0;
  std::vector<TensorInfo> tensors_;
};

// Serializes tensors (data row-major) into safetensors bytes, every tensor stored as dtype
// "F32", "F16" or "BF16" (rounded to nearest even); throws std::invalid_argument otherwise.
struct NamedTensor {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::span<const float> data;
};
std::string serialize(const std::vector<NamedTensor>& tensors, const std::string& dtype);
inline std::string serialize_f32(const std::vector<NamedTensor>& tensors) { return serialize(tensors, "F32"); }

// The Config described by a config.json text (`source` names it in errors).
Config config_from_hf_json(const std::string& json_text, const std::string& source);
// The token ids config.json and generation_config.json carry: llama2.c's 1 and 2, or a
// byte-level BPE vocabulary's own (null where it has none).
struct SpecialIds {
  std::optional<int> bos = 1, eos = 2;
};
// config.json for c as transformers writes a LlamaForCausalLM's (Qwen2/Qwen3ForCausalLM's),
// with torch_dtype "float32", "float16" or "bfloat16" for dtype F32, F16 or BF16.
std::string hf_config_json(const Config& c, const std::string& dtype = "F32", SpecialIds ids = {});
// generation_config.json as transformers derives it from the model config.
std::string hf_generation_config_json(SpecialIds ids = {});

// Row order conversions for one q_proj/k_proj matrix of n_heads heads, each [head_dim][cols].
void hf_to_interleaved(std::span<float> w, int n_heads, int head_dim, int cols);
void interleaved_to_hf(std::span<float> w, int n_heads, int head_dim, int cols);
// hf_to_interleaved on everything of a block in RoPE order: wq, wk, their biases, q_norm, k_norm.
void rope_rows_to_interleaved(const Config& c, LayerWeights& lw);

}  // namespace model::safetensors

namespace model {
// Writes dir/config.json, dir/generation_config.json and dir/model.safetensors (every tensor
// as dtype F32, F16 or BF16; Hugging Face names and row order), and dir/tokenizer.bin
// (llama2.c format) when a tokenizer is given. A model read from a Hugging Face folder keeps
// that folder's config.json (every key; torch_dtype set to the dtype written) and its
// tokenizer and generation files (tokenizer.json, tokenizer_config.json, ...), copied
// byte for byte. The folder appears whole or not at all; an existing non-empty folder is an
// error.
void save_safetensors_dir(const Model& m, const std::string& dir, const Tokenizer* tokenizer = nullptr,
                          const std::string& dtype = "F32");
}  // namespace model
