#include "engine/perplexity.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "util/error.hpp"
#include "util/input_file.hpp"

namespace engine {

std::vector<std::string> split_stories(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) out.push_back(line);
  }
  return out;
}

std::vector<std::vector<int>> tokenize_stories(const model::Tokenizer& tok, const std::vector<std::string>& stories) {
  std::vector<std::vector<int>> out;
  out.reserve(stories.size());
  for (const auto& s : stories) out.push_back(tok.encode(s, true, false));
  return out;
}

Perplexity perplexity(Transformer& t, const std::vector<std::vector<int>>& sequences,
                      const std::function<void(std::size_t, std::size_t)>& progress) {
  const int vocab = t.config().vocab_size;
  const int window = t.config().seq_len;
  std::size_t total = 0;
  for (const auto& s : sequences) total += s.size() > 1 ? s.size() - 1 : 0;
  Perplexity r;
  double sum = 0, sum_sq = 0;
  for (const auto& seq : sequences) {
    if (seq.size() < 2) continue;
    ++r.sequences;
    // Blocks of consecutive positions within one window of the context.
    const std::size_t inputs = seq.size() - 1;
    const std::size_t block = t.block_batched() ? kBlockPositions : 1;
    for (std::size_t i = 0; i < inputs;) {
      const std::size_t pos = i % static_cast<std::size_t>(window);
      const std::size_t n = std::min({block, inputs - i, static_cast<std::size_t>(window) - pos});
      const float* out = n == 1 ? t.forward(seq[i], static_cast<int>(pos))
                                : t.forward_block({seq.data() + i, n}, static_cast<int>(pos));
      for (std::size_t j = 0; j < n; ++j) {
        const float* logits = out + j * static_cast<std::size_t>(vocab);
        float max_l = logits[0];
        for (int v = 1; v < vocab; ++v) max_l = std::max(max_l, logits[v]);
        double z = 0;
        for (int v = 0; v < vocab; ++v) z += std::exp(static_cast<double>(logits[v]) - max_l);
        const double nll = std::log(z) + max_l - logits[seq[i + j + 1]];
        sum += nll;
        sum_sq += nll * nll;
        ++r.tokens;
        if (progress && (r.tokens % 256 == 0 || r.tokens == total)) progress(r.tokens, total);
      }
      i += n;
    }
  }
  if (r.tokens == 0) return r;
  const double n = static_cast<double>(r.tokens);
  r.nll_mean = sum / n;
  const double var = n > 1 ? std::max(0.0, (sum_sq / n - r.nll_mean * r.nll_mean) * n / (n - 1)) : 0.0;
  r.nll_stderr = std::sqrt(var / n);
  r.perplexity = std::exp(r.nll_mean);
  r.perplexity_err = r.perplexity * r.nll_stderr;
  return r;
}

std::string read_text_file(const std::string& path) {
  std::string s = fpgallm::read_regular_file(path);
  fpgallm::require_utf8_text(s, path);
  if (s.find_first_not_of(" \t\r\n") == std::string::npos) throw fpgallm::InputError(path, "text file is empty");
  return s;
}

}  // namespace engine
