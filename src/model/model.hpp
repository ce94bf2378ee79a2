#pragma once
// A model with fp32 weights in memory, laid out the way llama2.c does: row-major
// [out][in] matrices, rotary embedding on interleaved (even, odd) pairs.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/bpe_tokenizer.hpp"
#include "model/config.hpp"
#include "model/tokenizer.hpp"

namespace model {

// The linear (matrix) layers of one block, in a fixed order used for per-layer plans.
// w1 = gate, w2 = down, w3 = up; cls = the classifier (not part of a block).
enum class Linear { wq, wk, wv, wo, w1, w2, w3, cls };
inline constexpr Linear kBlockLinears[] = {Linear::wq, Linear::wk, Linear::wv, Linear::wo,
                                           Linear::w1, Linear::w2, Linear::w3};
const char* to_string(Linear l);  // "wq", ..., matches GGUF names via gguf_name()
const char* gguf_name(Linear l);  // "attn_q", ..., "ffn_gate", "ffn_down", "ffn_up", "output"

struct LayerWeights {
  std::vector<float> attn_norm;  // [dim]
  std::vector<float> wq;         // [n_heads*head_dim][dim]
  std::vector<float> wk;         // [kv_dim][dim]
  std::vector<float> wv;         // [kv_dim][dim]
  std::vector<float> wo;         // [dim][n_heads*head_dim]
  std::vector<float> ffn_norm;   // [dim]
  std::vector<float> w1;         // gate [hidden][dim]
  std::vector<float> w2;         // down [dim][hidden]
  std::vector<float> w3;         // up   [hidden][dim]
  // Present only when the config says so (else empty):
  std::vector<float> bq, bk, bv;     // qkv_bias: [n_heads*head_dim], [kv_dim], [kv_dim]
  std::vector<float> q_norm, k_norm; // qk_norm: [head_dim] each, shared by the heads

  std::vector<float>& linear(Linear l);
  const std::vector<float>& linear(Linear l) const;
};

// (rows = output features, cols = input features) of a block's linear layer.
struct MatrixShape {
  int rows;
  int cols;
};
MatrixShape linear_shape(const Config& c, Linear l);
// "blk.3.wq"-style name of a linear layer (layer is ignored for the classifier).
std::string linear_name(int layer, Linear l);

struct Weights {
  std::vector<float> token_embedding;  // [vocab][dim]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;       // [dim]
  std::vector<float> classifier;       // [vocab][dim]; empty when shared with the embedding
  // RoPE frequency divisors per pair [head_dim/2] (Llama 3 scaling; GGUF rope_freqs.weight);
  // empty: none.
  std::vector<float> rope_freq_factors;

  const std::vector<float>& classifier_or_embedding() const {
    return classifier.empty() ? token_embedding : classifier;
  }
};

enum class Format { llama2c, gguf, safetensors };
const char* to_string(Format f);

struct Model {
  Config config;
  Weights weights;
  Format source_format = Format::llama2c;
  std::string source_path;
  // Present when the file carries its tokenizer (GGUF); empty otherwise.
  std::optional<Tokenizer> tokenizer;
  // A byte-level BPE vocabulary (GGUF tokenizer.ggml.model "gpt2", or tokenizer.json in a folder).
  std::shared_ptr<const BpeTokenizer> bpe_tokenizer;

  bool has_weights() const { return !weights.layers.empty(); }
};

// Allocates zeroed weights of the config's shape.
Weights allocate_weights(const Config& c);

// Loads any supported checkpoint: a llama2.c .bin, a .gguf, or a folder with config.json
// and *.safetensors. Throws fpgallm::InputError naming the file and the problem; for a
// preset name, one line saying that the command needs weights and how to make some. A NaN or infinite weight
// is refused unless allow_nonfinite(true) was set (for debugging).
Model load(const std::string& path);
void allow_nonfinite(bool allow);

// Throws InputError naming `source` and the tensor when a weight is NaN or infinite;
// `consequence` ends the line (what the user can do, or why it cannot go on).
void require_finite(const Model& m, const std::string& source, std::string_view consequence);
// The consequence for commands that quantize: integer weights have no NaN.
inline constexpr std::string_view kCannotQuantizeNonFinite =
    "a non-finite weight has no integer code: --allow-nonfinite lets only fp32 commands load it";

// A preset name (see presets.hpp) gives a config-only model; anything else is loaded.
Model load_or_preset(const std::string& path_or_preset);

// What a small manifest beside a checkpoint says about it: `<stem>.manifest.json` next to
// the file `<stem>.<ext>`, or `manifest.json` inside a checkpoint folder, with paths
// relative to the manifest's folder, every key optional:
//   {"tokenizer": "tok512.bin", "text": "tinystories-valid-sample.txt"}
// tokenizer: the model's llama2.c tokenizer; text: text of the model's domain, one story
// per line (deploy's default calibration and held-out text). Paths come back resolved.
struct Manifest {
  std::string path;       // the manifest file; empty when the checkpoint has none
  std::string tokenizer;  // empty when not named
  std::string text;
};
// Throws fpgallm::InputError naming the manifest when it is malformed or names a file that
// does not exist, and as load() does when `checkpoint` does not exist.
Manifest manifest_for(const std::string& checkpoint);

// The tokenizer to use with m: the file given (checked against the model's vocabulary),
// else the one inside the checkpoint, else the one its manifest names, else
// "tokenizer.bin" beside it.
Tokenizer tokenizer_for(const Model& m, const std::string& tokenizer_path);
// Token ids of one story of a text file (bos where the vocabulary adds one; special tokens
// written in it are text): the model's byte-level BPE vocabulary unless tokenizer_path is
// given, else the llama2.c tokenizer tokenizer_for() finds.
using StoryEncoder = std::function<std::vector<int>(const std::string&)>;
StoryEncoder story_encoder(const Model& m, const std::string& tokenizer_path);
StoryEncoder story_encoder(const Tokenizer& tok);
// A tokenizer on its own, without a model: a llama2.c tokenizer.bin (every token in it), the
// tokenizer.ggml.* metadata of a .gguf, or tokenizer.bin inside a safetensors folder.
Tokenizer load_tokenizer(const std::string& path);

Model load_llama2c(const std::string& path);
void save_llama2c(const Model& m, const std::string& path);
Model load_gguf(const std::string& path);
Model load_safetensors_dir(const std::string& dir);

}  // namespace model
