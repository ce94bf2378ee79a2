#include "model/bpe_tokenizer.hpp"

#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <queue>

#include "model/gguf.hpp"
#include "model/utf8.hpp"
#include "util/error.hpp"
#include "util/json_file.hpp"
#include "util/mapped_file.hpp"

namespace model {

namespace {

std::string utf8_of(std::uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs, surrogates or
// code points past U+10FFFF); 0 when the bytes there are not one.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others map
// to U+0100 upwards in byte order.
const std::array<std::string, 256>& byte_symbols() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    int next = 256;
    for (int b = 0; b < 256; ++b) t[static_cast<std::size_t>(b)] = utf8_of(static_cast<std::uint32_t>(printable(b) ? b : next++));
    return t;
  }();
  return table;
}

const std::unordered_map<std::string, unsigned char>& symbol_bytes() {
  static const std::unordered_map<std::string, unsigned char> table = [] {
    std::unordered_map<std::string, unsigned char> t;
    for (int b = 0; b < 256; ++b) t.emplace(byte_symbols()[static_cast<std::size_t>(b)], static_cast<unsigned char>(b));
    return t;
  }();
  return table;
}

// GPT-2's encoder.py pattern (also what a ByteLevel pre-tokenizer with use_regex applies).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// The Split patterns of the Llama 3 and Qwen2 tokenizer.json files (they differ in \p{N}{1,3}).
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kEndOfTurn[] = {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"};

}  // namespace

const std::string& bpe_byte_symbol(unsigned char b) { return byte_symbols()[b]; }

// Unicode's "maximal subpart" rule (chapter 3, U+FFFD substitution): an ill-formed
// sequence is the lead byte and the continuation bytes that could still have started a
// well-formed one; each such subpart becomes one U+FFFD.
std::string valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const std::size_t n = utf8_length(bytes, i);
    if (n == 0) {
      const auto c = static_cast<unsigned char>(bytes[i]);
      std::size_t want = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 1;
      std::size_t len = 1;
      for (; len < want && i + len < bytes.size(); ++len) {
        const auto b = static_cast<unsigned char>(bytes[i + len]);
        unsigned char lo = 0x80, hi = 0xBF;
        if (len == 1 && c == 0xE0) lo = 0xA0;
        if (len == 1 && c == 0xED) hi = 0x9F;
        if (len == 1 && c == 0xF0) lo = 0x90;
        if (len == 1 && c == 0xF4) hi = 0x8F;
        if (b < lo || b > hi) break;
      }
      out += "\xEF\xBF\xBD";
      i += len;
    } else {
      out.append(bytes, i, n);
      i += n;
    }
  }
  return out;
}

struct BpeTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

BpeTokenizer::~BpeTokenizer() = default;
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;

BpeTokenizer::BpeTokenizer(std::vector<std::string> tokens, const std::vector<std::string>& merges,
                           std::vector<std::string> pre_patterns, std::vector<Special> specials, std::string source)
    : tokens_(std::move(tokens)), patterns_(std::move(pre_patterns)), specials_(std::move(specials)), source_(std::move(source)) {
  auto fail = [&](const std::string& problem) { throw fpgallm::InputError(source_, problem); };
  if (tokens_.empty()) fail("the BPE vocabulary is empty");
  ids_.reserve(tokens_.size());
  for (std::size_t i = 0; i < tokens_.size(); ++i) ids_.emplace(tokens_[i], static_cast<int>(i));
  byte_ids_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    auto it = ids_.find(byte_symbols()[static_cast<std::size_t>(b)]);
    if (it == ids_.end()) fail(fmt::format("the byte-level vocabulary has no token for byte 0x{:02X}", b));
    byte_ids_[static_cast<std::size_t>(b)] = it->second;
  }
  merge_rank_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    const auto space = m.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == m.size() || m.find(' ', space + 1) != std::string::npos)
      fail(fmt::format("merge {} ('{}') is not two tokens separated by one space", rank, m));
    auto left = ids_.find(m.substr(0, space)), right = ids_.find(m.substr(space + 1));
    auto merged = ids_.find(m.substr(0, space) + m.substr(space + 1));
    if (left == ids_.end() || right == ids_.end() || merged == ids_.end())
      fail(fmt::format("merge {} ('{}') names a token the vocabulary lacks", rank, m));
    merge_rank_.emplace(m, static_cast<int>(rank));
  }
  for (const auto& s : specials_)
    if (s.id < 0 || s.id >= vocab_size() || s.text.empty()) fail(fmt::format("special token '{}' has id {} outside the vocabulary", s.text, s.id));
  std::stable_sort(specials_.begin(), specials_.end(), [](const Special& a, const Special& b) { return a.text.size() > b.text.size(); });
  for (const auto& p : patterns_) {
    int code = 0;
    PCRE2_SIZE offset = 0;
    auto r = std::make_unique<Regex>();
    r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr);
    if (!r->code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(code, message, sizeof message);
      fail(fmt::format("pre-tokenizer regex /{}/ does not compile at offset {}: {}", p, offset, reinterpret_cast<char*>(message)));
    }
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  // an interpreter fallback when JIT is unavailable
    regexes_.push_back(std::move(r));
  }
  for (const char* name : kEndOfTurn)
    if (auto id = special_id(name)) end_ids_.push_back(*id);
}

std::optional<int> BpeTokenizer::special_id(std::string_view text) const {
  for (const auto& s : specials_)
    if (s.text == text) return s.id;
  return std::nullopt;
}

bool BpeTokenizer::is_special(int id) const {
  return std::any_of(specials_.begin(), specials_.end(), [&](const Special& s) { return s.id == id; });
}

bool BpeTokenizer::is_end(int id) const {
  return (eos_ && id == *eos_) || std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
}

std::vector<std::string> BpeTokenizer::merges() const {
  // Ranks are positions in the source's list, where a repeated merge keeps its first.
  std::vector<std::string> by_rank;
  for (const auto& [pair, rank] : merge_rank_) {
    if (by_rank.size() <= static_cast<std::size_t>(rank)) by_rank.resize(static_cast<std::size_t>(rank) + 1);
    by_rank[static_cast<std::size_t>(rank)] = pair;
  }
  std::erase(by_rank, std::string());
  return by_rank;
}

std::string BpeTokenizer::gguf_pre() const {
  for (const char* name : {"qwen2", "llama-bpe", "gpt-2"})
    if (patterns_for_pre(name) == patterns_) return name;
  return "";
}

std::string BpeTokenizer::hf_json() const {
  using ojson = nlohmann::ordered_json;
  ojson vocab = ojson::object(), added = ojson::array();
  for (int id = 0; id < vocab_size(); ++id) {
    if (is_special(id))
      added.push_back({{"id", id}, {"content", token(id)}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", true}});
    else
      vocab[token(id)] = id;
  }
  const bool gpt2 = patterns_ == std::vector<std::string>{kGpt2Pattern};
  ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", gpt2}};
  ojson pre = byte_level;
  if (!gpt2) {
    pre = {{"type", "Sequence"}, {"pretokenizers", ojson::array()}};
    for (const auto& p : patterns_)
      pre["pretokenizers"].push_back({{"type", "Split"}, {"pattern", {{"Regex", p}}}, {"behavior", "Isolated"}, {"invert", false}});
    pre["pretokenizers"].push_back(byte_level);
  }
  ojson post = nullptr;
  if (bos_)
    post = {{"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", token(*bos_)}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"pair", ojson::array()},
            {"special_tokens", ojson::object()}};
  const ojson j = {{"version", "1.0"},
                   {"truncation", nullptr},
                   {"padding", nullptr},
                   {"added_tokens", added},
                   {"normalizer", nfc_ ? ojson{{"type", "NFC"}} : ojson(nullptr)},
                   {"pre_tokenizer", pre},
                   {"post_processor", post},
                   {"decoder", byte_level},
                   {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
                              {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false},
                              {"ignore_merges", ignore_merges_}, {"vocab", vocab}, {"merges", merges()}}}};
  try {
    return j.dump(1, ' ', false, nlohmann::json::error_handler_t::strict) + "\n";
  } catch (const nlohmann::json::type_error&) {
    throw fpgallm::InputError(source_, "a token of the vocabulary is not UTF-8, which tokenizer.json cannot hold");
  }
}

std::vector<std::string> BpeTokenizer::patterns_for_pre(const std::string& pre) {
  if (pre == "gpt2" || pre == "gpt-2" || pre == "default") return {kGpt2Pattern};
  if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3") return {kLlama3Pattern};
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") return {kQwen2Pattern};
  return {};
}

// One pre-token: its bytes as byte tokens, then the lowest-ranked adjacent pair merged
// first (leftmost among equal ranks), which is the order GPT-2's bpe() produces.
void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {  // a piece that is a whole token is that token (Llama 3's tokenizer.json)
    std::string symbols;
    for (char ch : piece) symbols += byte_symbols()[static_cast<unsigned char>(ch)];
    if (auto it = ids_.find(symbols); it != ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int id;
    int prev;
    int next;
  };
  std::vector<Symbol> syms;
  syms.reserve(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i)
    syms.push_back({byte_ids_[static_cast<unsigned char>(piece[i])], static_cast<int>(i) - 1,
                    i + 1 < piece.size() ? static_cast<int>(i) + 1 : -1});
  struct Candidate {
    int rank;
    int left;
    int left_id;
    int right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  std::string key;
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = syms[static_cast<std::size_t>(left)].next;
    if (right < 0) return;
    const int a = syms[static_cast<std::size_t>(left)].id, b = syms[static_cast<std::size_t>(right)].id;
    key.assign(tokens_[static_cast<std::size_t>(a)]).append(" ").append(tokens_[static_cast<std::size_t>(b)]);
    auto it = merge_rank_.find(key);
    if (it != merge_rank_.end()) queue.push({it->second, left, a, b});
  };
  for (int i = 0; i + 1 < static_cast<int>(syms.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = syms[static_cast<std::size_t>(c.left)];
    if (left.id != c.left_id || left.next < 0 || syms[static_cast<std::size_t>(left.next)].id != c.right_id) continue;  // stale
    const int right = left.next;
    left.id = ids_.at(tokens_[static_cast<std::size_t>(c.left_id)] + tokens_[static_cast<std::size_t>(c.right_id)]);
    left.next = syms[static_cast<std::size_t>(right)].next;
    if (left.next >= 0) syms[static_cast<std::size_t>(left.next)].prev = c.left;
    syms[static_cast<std::size_t>(right)].id = -1;  // removed
    consider(left.prev);
    consider(c.left);
  }
  for (int i = 0; i >= 0; i = syms[static_cast<std::size_t>(i)].next) out.push_back(syms[static_cast<std::size_t>(i)].id);
}

// The pre-tokens of valid UTF-8 text: each regex in turn splits the pieces of the one before,
// keeping the matches and the stretches between them (an HF Split with behavior Isolated).
void BpeTokenizer::pre_tokenize(std::string_view text, std::vector<std::string_view>& out) const {
  std::vector<std::string_view> split{text}, next;
  for (const auto& r : regexes_) {
    next.clear();
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(r->code, nullptr);
    for (auto s : split) {
      std::size_t at = 0;
      while (at < s.size()) {
        if (pcre2_match(r->code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), at, PCRE2_NO_UTF_CHECK, md, nullptr) < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const std::size_t begin = ov[0];
        std::size_t end = ov[1];
        if (begin > at) next.push_back(s.substr(at, begin - at));
        if (end == begin) end = begin + std::max<std::size_t>(1, utf8_length(s, begin));  // empty match: one character
        next.push_back(s.substr(begin, end - begin));
        at = end;
      }
      if (at < s.size()) next.push_back(s.substr(at));
    }
    pcre2_match_data_free(md);
    std::swap(split, next);
  }
  out.insert(out.end(), split.begin(), split.end());
}

void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<int>& out) const {
  std::vector<std::string_view> pieces;
  std::size_t i = 0;
  while (i < text.size()) {  // valid UTF-8 runs; an invalid byte is a piece alone
    std::size_t j = i;
    for (std::size_t n; j < text.size() && (n = utf8_length(text, j)) != 0;) j += n;
    pieces.clear();
    if (j > i) pre_tokenize(text.substr(i, j - i), pieces);
    if (j < text.size()) pieces.push_back(text.substr(j++, 1));
    for (auto p : pieces) encode_piece(p, out);
    i = j;
  }
}

std::vector<int> BpeTokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int> out;
  if (add_bos && bos_) out.push_back(*bos_);
  std::size_t start = 0, at = 0;
  while (parse_special && at < text.size()) {
    const Special* hit = nullptr;
    for (const auto& s : specials_)
      if (text.compare(at, s.text.size(), s.text) == 0) {
        hit = &s;
        break;
      }
    if (!hit) {
      ++at;
      continue;
    }
    encode_ordinary(normalized(text.substr(start, at - start)), out);
    out.push_back(hit->id);
    at += hit->text.size();
    start = at;
  }
  encode_ordinary(normalized(text.substr(start)), out);
  return out;
}

std::string BpeTokenizer::normalized(std::string_view text) const {
  if (!nfc_ || text.empty() || text.size() > (1u << 29)) return std::string(text);
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* nfc = unorm2_getNFCInstance(&status);
  std::vector<UChar> utf16(text.size() + 1);
  std::int32_t n16 = 0;
  // U_ILLEGAL_CHAR_FOUND on bytes that are not UTF-8: those are left as given.
  u_strFromUTF8(utf16.data(), static_cast<std::int32_t>(utf16.size()), &n16, text.data(),
                static_cast<std::int32_t>(text.size()), &status);
  if (U_FAILURE(status) || !nfc) return std::string(text);
  if (unorm2_isNormalized(nfc, utf16.data(), n16, &status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  // NFC of a string is at most three times its length in UTF-16 units (Unicode's stated bound).
  std::vector<UChar> out(static_cast<std::size_t>(n16) * 3 + 1);
  const std::int32_t m16 = unorm2_normalize(nfc, utf16.data(), n16, out.data(), static_cast<std::int32_t>(out.size()), &status);
  if (U_FAILURE(status)) return std::string(text);
  std::string utf8(static_cast<std::size_t>(m16) * 3, '\0');
  std::int32_t n8 = 0;
  u_strToUTF8(utf8.data(), static_cast<std::int32_t>(utf8.size()), &n8, out.data(), m16, &status);
  if (U_FAILURE(status)) return std::string(text);
  utf8.resize(static_cast<std::size_t>(n8));
  return utf8;
}

std::string BpeTokenizer::decode(int id) const {
  const std::string& t = token(id);
  if (is_special(id)) return t;
  std::string out;
  for (std::size_t i = 0; i < t.size();) {
    std::size_t n = utf8_length(t, i);
    if (n == 0) n = 1;
    auto it = symbol_bytes().find(t.substr(i, n));
    if (it != symbol_bytes().end()) out += static_cast<char>(it->second);
    else out.append(t, i, n);  // not a byte symbol (an added token's own text)
    i += n;
  }
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  for (int id : ids) out += decode(id);
  return out;
}

std::string BpeTokenizer::chat_prompt(std::string_view user, std::string_view system) const {
  if (special_id("<|im_start|>") && special_id("<|im_end|>")) {
    std::string p;
    if (!system.empty()) p += fmt::format("<|im_start|>system\n{}<|im_end|>\n", system);
    return p + fmt::format("<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n", user);
  }
  if (special_id("<|start_header_id|>") && special_id("<|eot_id|>")) {
    std::string p;  // <|begin_of_text|> is the bos that encode() adds
    if (!system.empty()) p += fmt::format("<|start_header_id|>system<|end_header_id|>\n\n{}<|eot_id|>", system);
    return p + fmt::format("<|start_header_id|>user<|end_header_id|>\n\n{}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", user);
  }
  return "";
}

namespace {

using nlohmann::json;

// The regexes of a tokenizer.json pre_tokenizer (Sequence, Split, ByteLevel).
void collect_patterns(const json& pre, std::vector<std::string>& out, const std::string& source, const std::string& name = "pre_tokenizer") {
  auto fail = [&](const std::string& problem) { throw fpgallm::InputError(source, problem); };
  if (pre.is_null()) return;
  if (!pre.is_object()) fail(fmt::format("{} is a {}, not an object", name, pre.type_name()));
  const std::string type = fpgallm::json_string(pre, "type", "", source, name + ".type");
  if (type == "Sequence") {
    auto it = pre.find("pretokenizers");
    if (it == pre.end() || !it->is_array()) fail("pre_tokenizer Sequence has no pretokenizers array");
    for (std::size_t i = 0; i < it->size(); ++i)
      collect_patterns((*it)[i], out, source, fmt::format("{}.pretokenizers[{}]", name, i));
  } else if (type == "Split") {
    if (fpgallm::json_string(pre, "behavior", "", source, name + ".behavior") != "Isolated" ||
        fpgallm::json_bool(pre, "invert", false, source, name + ".invert"))
      fail("pre_tokenizer Split: only behavior Isolated without invert is supported");
    const json& pattern = fpgallm::json_object(pre, "pattern", source, name + ".pattern");
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) out.push_back(pattern["Regex"].get<std::string>());
    else if (pattern.contains("String") && pattern["String"].is_string()) out.push_back("\\Q" + pattern["String"].get<std::string>() + "\\E");
    else fail("pre_tokenizer Split has no Regex or String pattern");
  } else if (type == "ByteLevel") {
    if (fpgallm::json_bool(pre, "add_prefix_space", false, source, name + ".add_prefix_space"))
      fail("pre_tokenizer ByteLevel with add_prefix_space is not supported");
    if (fpgallm::json_bool(pre, "use_regex", true, source, name + ".use_regex")) out.push_back(kGpt2Pattern);
  } else {
    fail(fmt::format("pre_tokenizer type '{}' is not supported (Sequence, Split, ByteLevel)", type));
  }
}

std::string read_text(const std::string& path) {
  fpgallm::MappedFile f(path);
  return std::string(reinterpret_cast<const char*>(f.data()), f.size());
}

}  // namespace

BpeTokenizer BpeTokenizer::from_hf_json(const std::string& path) {
  try {
    return from_hf_json_unchecked(path);
  } catch (const nlohmann::json::exception& e) {
    // A field of a type no check above expects: still the file's fault, named as such.
    throw fpgallm::InputError(path, std::string("a field has the wrong type (") + e.what() + ")");
  }
}

BpeTokenizer BpeTokenizer::from_hf_json_unchecked(const std::string& path) {
  auto fail = [&](const std::string& problem) { throw fpgallm::InputError(path, problem); };
  json j = fpgallm::parse_json_text(read_text(path), path);
  if (!j.is_object()) fail("is not a JSON object");
  const json& m = fpgallm::json_object(j, "model", path, "model");
  if (fpgallm::json_string(m, "type", "", path, "model.type") != "BPE") fail("model.type is not BPE");
  if (fpgallm::json_bool(m, "byte_fallback", false, path, "model.byte_fallback"))
    fail("model.byte_fallback (SentencePiece-style BPE) is not byte-level BPE");
  bool nfc = false;
  if (const json* n = fpgallm::json_field(j, "normalizer")) {
    if (!n->is_object()) fail(fmt::format("normalizer is a {}, not an object", n->type_name()));
    if (const std::string type = fpgallm::json_string(*n, "type", "?", path, "normalizer.type"); type != "NFC")
      fail(fmt::format("normalizer '{}' is not supported (NFC is)", type));
    nfc = true;
  }
  const json& vocab = fpgallm::json_object(m, "vocab", path, "model.vocab");
  if (vocab.empty()) fail("model.vocab is missing or empty");
  const json& added_tokens = fpgallm::json_array(j, "added_tokens", path, "added_tokens");
  const std::int64_t max_id = std::min<std::int64_t>(static_cast<std::int64_t>(vocab.size() + added_tokens.size()), 1 << 24);
  std::vector<std::string> tokens;
  auto place = [&](const std::string& text, const json& id_json) {
    if (!id_json.is_number_integer()) fail(fmt::format("token '{}' has a non-integer id", text));
    const auto id = id_json.get<std::int64_t>();
    // Ids are dense, so none can reach the number of tokens the file lists.
    if (id < 0 || id >= max_id) fail(fmt::format("token '{}' has id {} out of range (the file lists {} tokens)", text, id, max_id));
    if (tokens.size() <= static_cast<std::size_t>(id)) tokens.resize(static_cast<std::size_t>(id) + 1);
    if (!tokens[static_cast<std::size_t>(id)].empty() && tokens[static_cast<std::size_t>(id)] != text)
      fail(fmt::format("id {} is given to both '{}' and '{}'", id, tokens[static_cast<std::size_t>(id)], text));
    tokens[static_cast<std::size_t>(id)] = text;
  };
  for (auto it = vocab.begin(); it != vocab.end(); ++it) place(it.key(), it.value());
  std::vector<Special> specials;
  for (const auto& a : added_tokens) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string()) fail("added_tokens holds an entry without content");
      place(a["content"].get<std::string>(), a.contains("id") ? a["id"] : json());
      specials.push_back({a["content"].get<std::string>(), a["id"].get<int>()});
    }
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i].empty()) fail(fmt::format("no token has id {} (ids must be dense)", i));
  std::vector<std::string> merges;
  const json& mj = fpgallm::json_array(m, "merges", path, "model.merges");
  for (const auto& e : mj) {
    if (e.is_string()) merges.push_back(e.get<std::string>());
    else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string())
      merges.push_back(e[0].get<std::string>() + " " + e[1].get<std::string>());
    else fail("model.merges holds an entry that is neither \"a b\" nor [a, b]");
  }
  std::vector<std::string> patterns;
  collect_patterns(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json(), patterns, path);
  BpeTokenizer t(std::move(tokens), merges, std::move(patterns), std::move(specials), path);
  t.ignore_merges_ = fpgallm::json_bool(m, "ignore_merges", false, path, "model.ignore_merges");
  t.nfc_ = nfc;
  // A TemplateProcessing post-processor that starts with a special token adds it as bos.
  std::function<void(const json&)> find_bos = [&](const json& p) {
    if (!p.is_object()) return;
    const std::string type = fpgallm::json_string(p, "type", "", path, "post_processor.type");
    if (type == "Sequence")
      for (const auto& q : fpgallm::json_array(p, "processors", path, "post_processor.processors")) find_bos(q);
    if (type == "TemplateProcessing") {
      const json& single = fpgallm::json_array(p, "single", path, "post_processor.single");
      if (!single.empty() && single[0].is_object() && single[0].contains("SpecialToken"))
        if (auto id = t.special_id(fpgallm::json_string(single[0]["SpecialToken"], "id", "", path, "post_processor.single[0].SpecialToken.id")))
          t.set_bos(*id);
    }
  };
  find_bos(j.contains("post_processor") ? j["post_processor"] : json());
  return t;
}

std::optional<BpeTokenizer> BpeTokenizer::from_gguf(const gguf::Reader& r) {
  const gguf::Value* model = r.find("tokenizer.ggml.model");
  if (!model || model->type != gguf::ValueType::string || model->s[0] != "gpt2") return std::nullopt;
  std::vector<std::string> tokens = r.get_strings("tokenizer.ggml.tokens");
  std::vector<std::string> merges = r.get_strings("tokenizer.ggml.merges");
  const std::string pre = r.find("tokenizer.ggml.pre") ? r.get_string("tokenizer.ggml.pre") : "default";
  std::vector<std::string> patterns = patterns_for_pre(pre);
  if (patterns.empty()) r.fail(fmt::format("tokenizer.ggml.pre '{}' is not a pre-tokenizer fpgallm knows (gpt-2, llama-bpe, qwen2, deepseek-r1-qwen)", pre));
  std::vector<Special> specials;
  if (r.find("tokenizer.ggml.token_type")) {
    const auto types = r.get_ints("tokenizer.ggml.token_type");
    if (types.size() != tokens.size()) r.fail(fmt::format("tokenizer has {} tokens but {} token types", tokens.size(), types.size()));
    for (std::size_t i = 0; i < types.size(); ++i)
      if (types[i] == 3 || types[i] == 4) specials.push_back({tokens[i], static_cast<int>(i)});  // control, user-defined
  }
  BpeTokenizer t(std::move(tokens), merges, std::move(patterns), std::move(specials), r.source());
  t.ignore_merges_ = pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3";  // as llama.cpp does for Llama 3
  auto id_of = [&](const char* key) -> std::optional<int> {
    auto v = r.int_or_none(key);
    if (!v) return std::nullopt;
    if (*v < 0 || *v >= t.vocab_size()) r.fail(fmt::format("{} = {} is outside the vocabulary", key, *v));
    return static_cast<int>(*v);
  };
  t.set_eos(id_of("tokenizer.ggml.eos_token_id"));
  const bool add_bos = r.find("tokenizer.ggml.add_bos_token") && r.get_bool("tokenizer.ggml.add_bos_token");
  t.set_named_bos(id_of("tokenizer.ggml.bos_token_id"));
  if (add_bos) t.set_bos(t.named_bos_);
  t.set_pad(id_of("tokenizer.ggml.padding_token_id"));
  if (r.find("tokenizer.chat_template")) t.set_chat_template(r.get_string("tokenizer.chat_template"));
  return t;
}

}  // namespace model
