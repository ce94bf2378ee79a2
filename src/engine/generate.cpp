#include "engine/generate.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "model/utf8.hpp"
#include "util/error.hpp"

namespace engine {

namespace {

// Where t runs blocks, the prompt's positions 1 .. prompt_tokens - 2 (whose logits are not
// sampled) as blocks, at the second step so that the first step stays the first token's
// alone; returns the position the token-by-token loop goes on from.
int prefill(Transformer& t, const std::vector<int>& tokens, int prompt_tokens) {
  const int end = prompt_tokens - 1;
  if (!t.block_batched() || end <= 2) return 1;
  for (int pos = 1; pos < end; pos += kBlockPositions) {
    const int n = std::min(kBlockPositions, end - pos);
    t.forward_block({tokens.data() + pos, static_cast<std::size_t>(n)}, pos, n - 1);
  }
  return end;
}

}  // namespace

Generation generate(Transformer& t, const model::Tokenizer& tok, Sampler& sampler,
                    const std::string& prompt, int steps,
                    const std::function<void(const std::string&)>& on_piece) {
  const auto& c = t.config();
  Generation g;
  g.tokens = tok.encode(prompt, true, false);
  g.prompt_tokens = static_cast<int>(g.tokens.size());
  if (steps <= 0 || steps > c.seq_len) steps = c.seq_len;
  // The stated maximum: a prompt fills at most `steps` positions (at most the model's context).
  if (g.prompt_tokens > steps)
    throw fpgallm::InputError("-i", fmt::format("the prompt is {} tokens (with BOS); at most {} fit: the number of "
                                                "steps (-n), at most the model's context of {}",
                                                g.prompt_tokens, steps, c.seq_len));
  std::vector<float> logits(static_cast<std::size_t>(c.vocab_size));
  int token = g.tokens[0];
  auto start = std::chrono::steady_clock::now();
  int resume = 1;
  for (int pos = 0; pos < steps; ++pos) {
    if (pos == 1) {
      start = std::chrono::steady_clock::now();
      resume = prefill(t, g.tokens, g.prompt_tokens);
    }
    const float* out = pos >= 1 && pos < resume ? nullptr : t.forward(token, pos);
    int next;
    if (pos + 1 < g.prompt_tokens) {
      next = g.tokens[static_cast<std::size_t>(pos) + 1];
    } else {
      std::copy(out, out + c.vocab_size, logits.begin());
      next = sampler.sample(logits.data());
      g.tokens.push_back(next);
    }
    if (next == model::Tokenizer::kBos) break;
    std::string piece = tok.printable(token, next);
    g.text += piece;
    if (on_piece) on_piece(piece);
    token = next;
  }
  g.seconds_after_first = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return g;
}

Generation generate(Transformer& t, const model::BpeTokenizer& tok, Sampler& sampler, const std::vector<int>& prompt,
                    int steps, const std::function<void(const std::string&)>& on_piece) {
  const auto& c = t.config();
  if (prompt.empty()) throw std::invalid_argument("the prompt encodes to no tokens");
  Generation g;
  g.tokens = prompt;
  g.prompt_tokens = static_cast<int>(prompt.size());
  if (steps <= 0 || steps > c.seq_len) steps = c.seq_len;
  if (g.prompt_tokens > steps)
    throw fpgallm::InputError("-i", fmt::format("the prompt is {} tokens; at most {} fit: the number of "
                                                "steps (-n), at most the model's context of {}",
                                                g.prompt_tokens, steps, c.seq_len));
  std::vector<float> logits(static_cast<std::size_t>(c.vocab_size));
  auto start = std::chrono::steady_clock::now();
  int resume = 1;
  for (int pos = 0; pos < steps; ++pos) {
    if (pos == 1) {
      start = std::chrono::steady_clock::now();
      resume = prefill(t, g.tokens, g.prompt_tokens);
    }
    if (pos >= 1 && pos < resume) continue;
    const float* out = t.forward(g.tokens[static_cast<std::size_t>(pos)], pos);
    if (pos + 1 < g.prompt_tokens) continue;
    std::copy(out, out + c.vocab_size, logits.begin());
    const int next = sampler.sample(logits.data());
    g.tokens.push_back(next);
    if (tok.is_end(next) || next >= tok.vocab_size()) break;
    if (tok.is_special(next)) continue;
    const std::string piece = tok.decode(next);
    g.text += piece;
    if (on_piece) on_piece(piece);
    if (static_cast<int>(g.tokens.size()) >= steps) break;
  }
  g.seconds_after_first = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  g.text = model::valid_utf8(g.text);
  return g;
}

}  // namespace engine
