#pragma once
// Byte-level BPE (GPT-2's scheme, used by Qwen2/Qwen3, DeepSeek-R1-Distill and Llama 3):
// text is split by the pre-tokenizer regexes (PCRE2, Unicode properties), each piece's
// UTF-8 bytes become GPT-2's printable byte symbols, and the ranked merges are applied
// lowest rank first (a priority queue over adjacent pairs: O(n log n) per piece). Special
// tokens (added tokens) are matched in the text before the regexes run.
//
// Read from a Hugging Face tokenizer.json (model.type "BPE", vocab, merges, pre_tokenizer
// Split/ByteLevel patterns, added_tokens) or from GGUF metadata (tokenizer.ggml.model
// "gpt2", tokens, merges, token_type, tokenizer.ggml.pre naming the regex set).
// Text that is not valid UTF-8: each invalid byte is a piece of its own.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace model {
namespace gguf {
class Reader;
}

class BpeTokenizer {
 public:
  struct Special {
    std::string text;
    int id;
  };
  BpeTokenizer(std::vector<std::string> tokens, const std::vector<std::string>& merges,
               std::vector<std::string> pre_patterns, std::vector<Special> specials, std::string source);
  ~BpeTokenizer();
  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) = delete;

  // tokenizer.json of a Hugging Face folder; InputError naming the file on anything wrong.
  static BpeTokenizer from_hf_json(const std::string& path);
  // nullopt when the file's vocabulary is not byte-level BPE (tokenizer.ggml.model != gpt2).
  static std::optional<BpeTokenizer> from_gguf(const gguf::Reader& r);
  // The regexes of a GGUF tokenizer.ggml.pre name, as llama.cpp applies them; empty when unknown.
  static std::vector<std::string> patterns_for_pre(const std::string& pre);

  int vocab_size() const { return static_cast<int>(tokens_.size()); }
  const std::string& token(int id) const { return tokens_.at(static_cast<std::size_t>(id)); }
  const std::vector<std::string>& pre_patterns() const { return patterns_; }
  std::optional<int> bos() const { return bos_; }
  void set_bos(std::optional<int> id) { bos_ = id; }
  std::optional<int> eos() const { return eos_; }
  void set_eos(std::optional<int> id) { eos_ = id; }
  // Ids that end a generation: eos and the end-of-turn specials the vocabulary has.
  bool is_end(int id) const;
  bool is_special(int id) const;
  std::optional<int> special_id(std::string_view text) const;
  bool normalizes_nfc() const { return nfc_; }
  // The file it was read from (a tokenizer.json or a GGUF).
  const std::string& source() const { return source_; }
  // What a GGUF file of this vocabulary carries besides the tokens (llama.cpp's
  // convert_hf_to_gguf.py writes the same): the merges in rank order ("left right"), the
  // tokenizer.ggml.pre name of its pre-tokenizer ("" when it is none fpgallm knows), the bos
  // id the source names even when encode does not add it (config.json bos_token_id), the
  // padding id and the chat template (tokenizer_config.json, or the GGUF's own keys).
  std::vector<std::string> merges() const;
  std::string gguf_pre() const;
  // A Hugging Face tokenizer.json that reads back as this vocabulary (tokens, merges,
  // added tokens, pre-tokenizer, NFC, bos post-processor).
  std::string hf_json() const;
  std::optional<int> named_bos() const { return named_bos_ ? named_bos_ : bos_; }
  void set_named_bos(std::optional<int> id) { named_bos_ = id; }
  std::optional<int> pad() const { return pad_; }
  void set_pad(std::optional<int> id) { pad_ = id; }
  const std::string& chat_template() const { return chat_template_; }
  void set_chat_template(std::string t) { chat_template_ = std::move(t); }

  // Special tokens in text are their ids when parse_special (as Hugging Face's tokenizers
  // and llama.cpp's prompts take them), else their text is encoded as any other; bos is
  // prepended when the vocabulary has one and add_bos. The text between special tokens is
  // put in NFC first when the tokenizer.json names that normalizer (valid UTF-8 only: other
  // bytes are encoded as given).
  std::vector<int> encode(std::string_view text, bool add_bos = false, bool parse_special = true) const;
  // The bytes of one token (special tokens: their text).
  std::string decode(int id) const;
  std::string decode(const std::vector<int>& ids) const;

  // The prompt of a one-turn chat in the template the vocabulary's specials name: ChatML
  // (<|im_start|>, Qwen) or Llama 3 (<|start_header_id|>); "" when neither is present.
  std::string chat_prompt(std::string_view user, std::string_view system = {}) const;

 private:
  static BpeTokenizer from_hf_json_unchecked(const std::string& path);
  void encode_piece(std::string_view piece, std::vector<int>& out) const;
  void pre_tokenize(std::string_view text, std::vector<std::string_view>& out) const;
  void encode_ordinary(std::string_view text, std::vector<int>& out) const;
  std::string normalized(std::string_view text) const;
  struct Regex;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int> ids_;
  std::unordered_map<std::string, int> merge_rank_;  // "left right" -> rank
  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Regex>> regexes_;
  std::vector<Special> specials_;  // longest first
  std::vector<int> byte_ids_;      // token of each single byte; -1 when missing
  std::optional<int> bos_, eos_, named_bos_, pad_;
  std::string chat_template_;
  std::vector<int> end_ids_;
  bool ignore_merges_ = false;  // a pre-token that is in the vocabulary is not split
  bool nfc_ = false;            // tokenizer.json normalizer NFC
  std::string source_;
};

// GPT-2's bytes_to_unicode: byte b as the UTF-8 of its printable stand-in code point.
const std::string& bpe_byte_symbol(unsigned char b);

}  // namespace model
