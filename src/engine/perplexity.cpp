#include "engine/perplexity.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

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
  return tokenize_stories(model::story_encoder(tok), stories);
}

std::vector<std::vector<int>> tokenize_stories(const model::StoryEncoder& encode, const std::vector<std::string>& stories) {
  std::vector<std::vector<int>> out;
  out.reserve(stories.size());
  for (const auto& s : stories) out.push_back(encode(s));
  return out;
}

namespace {

// Runs a block of n positions of a sequence: its logits [n][vocab].
using BlockRunner = std::function<const float*(const std::vector<int>& seq, std::size_t i, int pos, std::size_t n)>;

Perplexity perplexity_of(const Transformer& t, const std::vector<std::vector<int>>& sequences, bool batched,
                         const BlockRunner& run_block, const std::function<void(std::size_t, std::size_t)>& progress) {
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
    const std::size_t block = batched ? kBlockPositions : 1;
    for (std::size_t i = 0; i < inputs;) {
      const std::size_t pos = i % static_cast<std::size_t>(window);
      const std::size_t n = std::min({block, inputs - i, static_cast<std::size_t>(window) - pos});
      const float* out = run_block(seq, i, static_cast<int>(pos), n);
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

}  // namespace

Perplexity perplexity(Transformer& t, const std::vector<std::vector<int>>& sequences,
                      const std::function<void(std::size_t, std::size_t)>& progress) {
  return perplexity_of(
      t, sequences, t.block_batched(),
      [&](const std::vector<int>& seq, std::size_t i, int pos, std::size_t n) {
        return n == 1 ? t.forward(seq[i], pos) : t.forward_block({seq.data() + i, n}, pos);
      },
      progress);
}

Perplexity perplexity_from(Transformer& t, const std::vector<std::vector<int>>& sequences, int first_layer,
                           const BlockInputs* from, BlockInputs* record,
                           const std::function<void(std::size_t, std::size_t)>& progress) {
  if (!t.block_batched()) throw std::logic_error("perplexity_from: the pass does not run batched");
  const auto& c = t.config();
  if (first_layer < 0 || first_layer > c.n_layers) throw std::invalid_argument("perplexity_from: no such block");
  const auto dim = static_cast<std::size_t>(c.dim);
  const auto blocks = static_cast<std::size_t>(c.n_layers) + 1;
  std::size_t rows = 0;
  for (const auto& s : sequences) rows += s.size() > 1 ? s.size() - 1 : 0;
  const std::vector<float>* start = nullptr;
  if (first_layer > 0) {
    if (!from || from->layer.size() != blocks || !from->layer[static_cast<std::size_t>(first_layer)])
      throw std::invalid_argument("perplexity_from: the residual stream entering block " + std::to_string(first_layer) +
                                  " was not recorded");
    start = from->layer[static_cast<std::size_t>(first_layer)].get();
    if (start->size() != rows * dim)
      throw std::invalid_argument("perplexity_from: the recorded residual stream is of other sequences");
  }
  std::vector<std::vector<float>> kept;
  if (record) {
    kept.resize(blocks);
    for (std::size_t l = static_cast<std::size_t>(first_layer); l < blocks; ++l) kept[l].reserve(rows * dim);
  }
  std::size_t at = 0;  // rows run so far
  const Perplexity p = perplexity_of(
      t, sequences, true,
      [&](const std::vector<int>& seq, std::size_t i, int pos, std::size_t n) {
        Transformer::BlockInputFn keep;
        if (record)
          keep = [&](int layer, const float* x) {
            auto& v = kept[static_cast<std::size_t>(layer)];
            v.insert(v.end(), x, x + n * dim);
          };
        const float* logits =
            t.forward_block_from(first_layer, start ? start->data() + at * dim : nullptr, {seq.data() + i, n}, pos, keep);
        at += n;
        return logits;
      },
      progress);
  if (record) {
    record->layer.assign(blocks, nullptr);
    for (std::size_t l = 0; l < blocks; ++l)
      record->layer[l] = static_cast<int>(l) < first_layer
                             ? (from ? from->layer[l] : nullptr)
                             : std::make_shared<const std::vector<float>>(std::move(kept[l]));
  }
  return p;
}

std::string read_text_file(const std::string& path) {
  std::string s = fpgallm::read_regular_file(path);
  fpgallm::require_utf8_text(s, path);
  if (s.find_first_not_of(" \t\r\n") == std::string::npos) throw fpgallm::InputError(path, "text file is empty");
  return s;
}

}  // namespace engine
