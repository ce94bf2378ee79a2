#pragma once
// The llama, qwen2 and qwen3 architectures in GGUF, as llama.cpp writes and reads them:
// metadata keys (general.architecture, <arch>.embedding_length, ...), tensor names
// (token_embd.weight, blk.N.attn_q.weight, ..., output.weight) and the vocabulary
// (tokenizer.ggml.*: SentencePiece "llama", or byte-level BPE "gpt2"). Llama's query and key
// rows are in interleaved-pair RoPE order, the same as llama2.c and the engine; llama.cpp
// keeps Qwen's in Hugging Face order, so those are permuted on the way in and out.
#include <optional>
#include <string>

#include "model/config.hpp"
#include "model/gguf.hpp"
#include "model/model.hpp"
#include "model/bpe_tokenizer.hpp"
#include "model/tokenizer.hpp"

namespace model {

// "blk.3.attn_q.weight"; the classifier is "output.weight" (layer ignored).
std::string gguf_tensor_name(int layer, Linear l);
// GGUF dims of a row-major [rows][cols] matrix: {cols, rows}.
std::vector<std::uint64_t> gguf_matrix_dims(MatrixShape s);

// llama.cpp's llama_ftype (general.file_type) of a file whose matrices are mostly of type t
// (0, all F32, for a type without one).
std::uint32_t llama_file_type(gguf::GgmlType t);

// general.architecture (c.arch: llama, qwen2, qwen3), general.name and that architecture's
// hyper-parameters (<arch>.context_length, ...) of c.
void put_llama_metadata(gguf::Writer& w, const Config& c);
// tokenizer.ggml.model = "llama", tokens ("▁" for space), scores, token_type, bos/eos/unk ids.
void put_tokenizer_metadata(gguf::Writer& w, const Tokenizer& t);
// tokenizer.ggml.model = "gpt2" as convert_hf_to_gguf.py writes it: the tokens padded to
// n_vocab with "[PAD<i>]" (type unused), token types (special tokens control), pre, merges,
// bos/eos/padding ids, add_bos_token and the chat template. Throws InputError naming the
// vocabulary's file (and `path`, the output) for a pre-tokenizer without a tokenizer.ggml.pre name.
void put_bpe_tokenizer_metadata(gguf::Writer& w, const BpeTokenizer& t, int n_vocab, const std::string& path);

// The model's shape from the metadata; the vocabulary size comes from token_embd.weight.
// Throws InputError naming the file for a missing key, another architecture or a shape
// that Config::invalid_reason() rejects.
Config llama_config_from_gguf(const gguf::Reader& r);
// The SentencePiece vocabulary in the metadata; nullopt when there is none or it is not a
// SentencePiece ("llama") vocabulary. Throws InputError when its size differs from vocab_size.
std::optional<Tokenizer> tokenizer_from_gguf(const gguf::Reader& r, int vocab_size);

// load_gguf (model.hpp) on an already parsed file.
Model load_gguf(const gguf::Reader& r);

// How save_gguf stores matrices; norms (1-D) are always F32, and a matrix whose rows are not
// a whole number of blocks of the chosen type is stored as F16 instead (as llama.cpp does).
// The vocabulary written is `tokenizer` when given, else the model's byte-level BPE one.
void save_gguf(const Model& m, const std::string& path, gguf::GgmlType matrix_type = gguf::GgmlType::f32,
               const Tokenizer* tokenizer = nullptr, std::uint32_t version = 3);

}  // namespace model
