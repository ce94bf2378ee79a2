#pragma once
// Byte-pair tokenizer of the llama2.c / SentencePiece kind: a scored vocabulary, greedy
// highest-score merges, byte-fallback tokens "<0xXX>" for bytes not in the vocabulary.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace model {

class Tokenizer {
 public:
  static constexpr int kBos = 1;
  static constexpr int kEos = 2;

  Tokenizer() = default;
  Tokenizer(std::vector<std::string> pieces, std::vector<float> scores);

  // llama2.c tokenizer.bin: int32 max_token_length, then per token: f32 score, i32 len, bytes.
  // The vocabulary size is not stored: given (the model's), it is checked; 0 reads every
  // token up to the end of the file.
  static Tokenizer load_llama2c(const std::string& path, int vocab_size);
  void save_llama2c(const std::string& path) const;

  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  const std::string& piece(int id) const { return pieces_.at(static_cast<std::size_t>(id)); }
  float score(int id) const { return scores_.at(static_cast<std::size_t>(id)); }
  const std::vector<std::string>& pieces() const { return pieces_; }
  const std::vector<float>& scores() const { return scores_; }

  // SentencePiece-style: a leading space is added to non-empty text.
  std::vector<int> encode(std::string_view text, bool bos, bool eos) const;
  // The text of `token` following `prev` (the space after BOS is dropped, byte tokens
  // become their byte).
  std::string decode(int prev, int token) const;
  // As decode, but returns "" for pieces that are a single unprintable byte (what a
  // terminal should not receive).
  std::string printable(int prev, int token) const;

 private:
  int lookup(std::string_view s) const;
  void merge_pairs(std::vector<int>& tokens) const;
  struct PieceHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int, PieceHash, std::equal_to<>> index_;
  int byte_token_base_ = 3;  // id of "<0x00>"
  bool has_byte_tokens_ = false;  // all 256 byte tokens exist from byte_token_base_
};

}  // namespace model
