#include "model/tokenizer.hpp"

#include <cctype>
#include <cstdio>
#include <fmt/format.h>

#include "util/error.hpp"
#include "util/mapped_file.hpp"

namespace model {

Tokenizer::Tokenizer(std::vector<std::string> pieces, std::vector<float> scores)
    : pieces_(std::move(pieces)), scores_(std::move(scores)) {
  if (scores_.size() != pieces_.size()) throw std::invalid_argument("pieces and scores differ in length");
  index_.reserve(pieces_.size());
  for (std::size_t i = 0; i < pieces_.size(); ++i) index_.emplace(pieces_[i], static_cast<int>(i));
  int byte0 = lookup("<0x00>");
  if (byte0 >= 0) byte_token_base_ = byte0;
  has_byte_tokens_ = byte_token_base_ + 255 < vocab_size();
}

Tokenizer Tokenizer::load_llama2c(const std::string& path, int vocab_size) {
  fpgallm::MappedFile file(path);
  fpgallm::ByteReader in(file.bytes(), path);
  if (vocab_size < 0) in.fail("vocabulary size must not be negative");
  auto max_len = in.read<std::int32_t>("max_token_length");
  if (max_len <= 0 || max_len > 4096) in.fail(fmt::format("implausible max_token_length {}", max_len));
  std::vector<std::string> pieces;
  std::vector<float> scores;
  pieces.reserve(static_cast<std::size_t>(vocab_size));
  scores.reserve(static_cast<std::size_t>(vocab_size));
  for (int i = 0; vocab_size == 0 ? in.remaining() > 0 : i < vocab_size; ++i) {
    if (in.remaining() == 0)
      in.fail(fmt::format("has {} tokens but the model's vocabulary has {}", i, vocab_size));
    scores.push_back(in.read<float>("token score"));
    auto len = in.read<std::int32_t>("token length");
    if (len < 0 || len > max_len)
      in.fail(fmt::format("token {} has length {} (max_token_length {})", i, len, max_len));
    pieces.push_back(in.read_string(static_cast<std::size_t>(len), "token bytes"));
  }
  if (pieces.empty()) in.fail("holds no tokens");
  if (in.remaining() != 0)
    in.fail(fmt::format("has more tokens than the model's vocabulary of {} ({} bytes left over)",
                        vocab_size, in.remaining()));
  return Tokenizer(std::move(pieces), std::move(scores));
}

void Tokenizer::save_llama2c(const std::string& path) const {
  std::string out;
  std::int32_t max_len = 0;
  for (auto& p : pieces_) max_len = std::max<std::int32_t>(max_len, static_cast<std::int32_t>(p.size()));
  out.append(reinterpret_cast<const char*>(&max_len), 4);
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    out.append(reinterpret_cast<const char*>(&scores_[i]), 4);
    auto len = static_cast<std::int32_t>(pieces_[i].size());
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += pieces_[i];
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw fpgallm::InputError(path, "cannot write");
  std::fwrite(out.data(), 1, out.size(), f);
  std::fclose(f);
}

int Tokenizer::lookup(std::string_view s) const {
  auto it = index_.find(std::string(s));
  return it == index_.end() ? -1 : it->second;
}

std::vector<int> Tokenizer::encode(std::string_view text, bool bos, bool eos) const {
  std::vector<int> tokens;
  tokens.reserve(text.size() + 3);
  const int vocab = vocab_size();
  if (vocab == 0) return tokens;
  if (bos && kBos < vocab) tokens.push_back(kBos);
  if (!text.empty()) {
    int space = lookup(" ");
    if (space >= 0) tokens.push_back(space);
  }
  // Split into UTF-8 code points; each is a token if the vocabulary has it, else bytes.
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t len = 1;
    while (i + len < text.size() && len < 4 &&
           (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80)
      ++len;
    int id = lookup(text.substr(i, len));
    if (id >= 0) {
      tokens.push_back(id);
    } else {
      // Byte fallback; a vocabulary without byte tokens maps the byte to id 0 (<unk>).
      for (std::size_t k = 0; k < len; ++k)
        tokens.push_back(has_byte_tokens_ ? static_cast<unsigned char>(text[i + k]) + byte_token_base_ : 0);
    }
    i += len;
  }
  // Repeatedly merge the adjacent pair whose merged piece has the highest score; the
  // earliest such pair wins ties.
  std::string merged;
  while (true) {
    float best_score = -1e10f;
    int best_id = -1;
    std::size_t best_at = 0;
    for (std::size_t k = 0; k + 1 < tokens.size(); ++k) {
      merged = pieces_[static_cast<std::size_t>(tokens[k])];
      merged += pieces_[static_cast<std::size_t>(tokens[k + 1])];
      int id = lookup(merged);
      if (id >= 0 && scores_[static_cast<std::size_t>(id)] > best_score) {
        best_score = scores_[static_cast<std::size_t>(id)];
        best_id = id;
        best_at = k;
      }
    }
    if (best_id < 0) break;
    tokens[best_at] = best_id;
    tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  if (eos && kEos < vocab) tokens.push_back(kEos);
  return tokens;
}

std::string Tokenizer::decode(int prev, int token) const {
  std::string_view p = pieces_.at(static_cast<std::size_t>(token));
  if (prev == kBos && !p.empty() && p[0] == ' ') p.remove_prefix(1);
  unsigned byte = 0;
  if (p.size() == 6 && std::sscanf(std::string(p).c_str(), "<0x%02X>", &byte) == 1)
    return std::string(1, static_cast<char>(byte));
  return std::string(p);
}

std::string Tokenizer::printable(int prev, int token) const {
  std::string s = decode(prev, token);
  if (s.size() == 1) {
    auto c = static_cast<unsigned char>(s[0]);
    if (!(std::isprint(c) || std::isspace(c))) return "";
  }
  return s;
}

}  // namespace model
