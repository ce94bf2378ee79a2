#include "model/tokenizer.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fmt/format.h>

#include "util/error.hpp"
#include "util/mapped_file.hpp"
#include "util/paths.hpp"

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
  fpgallm::write_file_atomic(path, out);
}

int Tokenizer::lookup(std::string_view s) const {
  auto it = index_.find(s);
  return it == index_.end() ? -1 : it->second;
}

// Repeatedly merges the adjacent pair whose merged piece has the highest score, the
// leftmost of equal scores first, as llama2.c's encode does by rescanning; here with a
// priority queue over a linked list of symbols (the sentencepiece/llama.cpp scheme), so
// n symbols take O(n log n). A queued pair is stale once either side has changed.
void Tokenizer::merge_pairs(std::vector<int>& tokens) const {
  const std::size_t n = tokens.size();
  if (n < 2) return;
  struct Candidate {
    float score;
    std::uint32_t left, right;  // positions in the original symbol sequence
    int left_id, right_id, merged_id;
  };
  // Highest score first; of equal scores, the leftmost.
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::vector<int> id = tokens;
  std::vector<std::uint32_t> next(n), prev(n);
  constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  for (std::size_t k = 0; k < n; ++k) {
    next[k] = k + 1 < n ? static_cast<std::uint32_t>(k + 1) : kNone;
    prev[k] = k > 0 ? static_cast<std::uint32_t>(k - 1) : kNone;
  }
  std::vector<Candidate> heap;
  heap.reserve(n);
  std::string merged;
  auto consider = [&](std::uint32_t l, std::uint32_t r) {
    if (l == kNone || r == kNone) return;
    merged = pieces_[static_cast<std::size_t>(id[l])];
    merged += pieces_[static_cast<std::size_t>(id[r])];
    const int m = lookup(merged);
    // The rescanning loop starts from a score of -1e10 and needs a strictly greater one.
    if (m < 0 || !(scores_[static_cast<std::size_t>(m)] > -1e10f)) return;
    heap.push_back({scores_[static_cast<std::size_t>(m)], l, r, id[l], id[r], m});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (std::uint32_t k = 0; k + 1 < n; ++k) consider(k, k + 1);
  std::vector<bool> gone(n, false);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    if (gone[c.left] || gone[c.right] || next[c.left] != c.right || id[c.left] != c.left_id ||
        id[c.right] != c.right_id)
      continue;
    id[c.left] = c.merged_id;
    gone[c.right] = true;
    next[c.left] = next[c.right];
    if (next[c.right] != kNone) prev[next[c.right]] = c.left;
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }
  tokens.clear();
  for (std::uint32_t k = 0; k != kNone && k < n; k = next[k]) tokens.push_back(id[k]);
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
  merge_pairs(tokens);
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
