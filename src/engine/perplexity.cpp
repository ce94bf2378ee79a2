#include "engine/perplexity.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>
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

// Runs a block of n positions of a sequence: the logits of its rows logits_from..n-1,
// [n - logits_from][vocab].
using BlockRunner =
    std::function<const float*(const std::vector<int>& seq, std::size_t i, int pos, std::size_t n, int logits_from)>;

// The negative log-likelihoods of scored positions, summed in the order they are scored.
class Scorer {
 public:
  Scorer(int vocab, std::size_t total, const std::function<void(std::size_t, std::size_t)>& progress)
      : vocab_(vocab), total_(total), progress_(progress) {}

  // rows of logits [rows][vocab] against targets[0..rows): each row's log-sum-exp on its own
  // (rows in parallel), then added in row order.
  void add(const float* logits, const int* targets, std::size_t rows) {
    nll_.resize(rows);
#pragma omp parallel for schedule(static) if (rows * static_cast<std::size_t>(vocab_) >= 1u << 16)
    for (std::size_t j = 0; j < rows; ++j) {
      const float* l = logits + j * static_cast<std::size_t>(vocab_);
      float max_l = l[0];
      for (int v = 1; v < vocab_; ++v) max_l = std::max(max_l, l[v]);
      double z = 0;
      for (int v = 0; v < vocab_; ++v) z += std::exp(static_cast<double>(l[v]) - max_l);
      nll_[j] = std::log(z) + max_l - l[targets[j]];
    }
    for (std::size_t j = 0; j < rows; ++j) {
      sum_ += nll_[j];
      sum_sq_ += nll_[j] * nll_[j];
      ++r_.tokens;
      if (progress_ && (r_.tokens % 256 == 0 || r_.tokens == total_)) progress_(r_.tokens, total_);
    }
  }
  void sequence_done() { ++r_.sequences; }

  Perplexity result() const {
    Perplexity r = r_;
    if (r.tokens == 0) return r;
    const double n = static_cast<double>(r.tokens);
    r.nll_mean = sum_ / n;
    const double var = n > 1 ? std::max(0.0, (sum_sq_ / n - r.nll_mean * r.nll_mean) * n / (n - 1)) : 0.0;
    r.nll_stderr = std::sqrt(var / n);
    r.perplexity = std::exp(r.nll_mean);
    r.perplexity_err = r.perplexity * r.nll_stderr;
    return r;
  }

 private:
  int vocab_;
  std::size_t total_;
  const std::function<void(std::size_t, std::size_t)>& progress_;
  Perplexity r_;
  double sum_ = 0, sum_sq_ = 0;
  std::vector<double> nll_;
};

std::size_t scored_positions(const std::vector<std::vector<int>>& sequences, std::size_t score_from) {
  std::size_t total = 0;
  for (const auto& s : sequences) total += s.size() > score_from + 1 ? s.size() - 1 - score_from : 0;
  return total;
}

// Scores every position i >= score_from of each sequence (its logits against token i+1);
// the positions before are run, their logits not computed.
Perplexity perplexity_of(const Transformer& t, const std::vector<std::vector<int>>& sequences, bool batched,
                         const BlockRunner& run_block, const std::function<void(std::size_t, std::size_t)>& progress,
                         std::size_t score_from = 0) {
  const int window = t.config().seq_len;
  Scorer scorer(t.config().vocab_size, scored_positions(sequences, score_from), progress);
  for (const auto& seq : sequences) {
    if (seq.size() < score_from + 2) continue;
    scorer.sequence_done();
    // Blocks of consecutive positions within one window of the context.
    const std::size_t inputs = seq.size() - 1;
    const std::size_t block = batched ? kBlockPositions : 1;
    for (std::size_t i = 0; i < inputs;) {
      const std::size_t pos = i % static_cast<std::size_t>(window);
      const std::size_t n = std::min({block, inputs - i, static_cast<std::size_t>(window) - pos});
      if (i + n <= score_from) {  // no scored row: its last row's logits, the cheapest call
        run_block(seq, i, static_cast<int>(pos), n, static_cast<int>(n - 1));
        i += n;
        continue;
      }
      const std::size_t skip = score_from > i ? score_from - i : 0;
      const float* out = run_block(seq, i, static_cast<int>(pos), n, static_cast<int>(skip));
      scorer.add(out, seq.data() + i + skip + 1, n - skip);
      i += n;
    }
  }
  return scorer.result();
}

// Rows of one forward_windows() call at most, and logits it may hold (floats).
constexpr std::size_t kWindowRows = 1024;
constexpr std::size_t kWindowLogits = std::size_t(1) << 25;

// text_windows()'s windows (sequences of one length, each fitting a block, scored from
// score_from > 0): as many at once as the context and the limits above allow, through
// forward_windows. Empty where that does not apply: the whole-story pass keeps its bits
// (the mixed search resumes it block by block and compares them).
std::optional<Perplexity> perplexity_of_windows(Transformer& t, const std::vector<std::vector<int>>& sequences,
                                                const std::function<void(std::size_t, std::size_t)>& progress,
                                                std::size_t score_from) {
  if (score_from == 0 || !t.plain_batched() || sequences.size() < 2) return std::nullopt;
  const std::size_t length = sequences[0].size();
  for (const auto& s : sequences)
    if (s.size() != length) return std::nullopt;
  const auto& c = t.config();
  if (length < score_from + 2 || length - 1 > static_cast<std::size_t>(kBlockPositions) ||
      length - 1 > static_cast<std::size_t>(c.seq_len))
    return std::nullopt;
  const std::size_t n = length - 1, kept = n - score_from, vocab = static_cast<std::size_t>(c.vocab_size);
  const std::size_t per_call = std::max<std::size_t>(
      1, std::min({static_cast<std::size_t>(c.seq_len) / n, kWindowRows / n, kWindowLogits / (kept * vocab)}));
  Scorer scorer(c.vocab_size, scored_positions(sequences, score_from), progress);
  std::vector<int> tokens, targets;
  for (std::size_t first = 0; first < sequences.size(); first += per_call) {
    const std::size_t w = std::min(per_call, sequences.size() - first);
    tokens.clear();
    targets.clear();
    for (std::size_t k = first; k < first + w; ++k) {
      tokens.insert(tokens.end(), sequences[k].begin(), sequences[k].begin() + static_cast<std::ptrdiff_t>(n));
      targets.insert(targets.end(), sequences[k].begin() + static_cast<std::ptrdiff_t>(score_from + 1), sequences[k].end());
      scorer.sequence_done();
    }
    const float* logits = t.forward_windows(tokens, static_cast<int>(w), static_cast<int>(n), static_cast<int>(score_from));
    scorer.add(logits, targets.data(), w * kept);
  }
  return scorer.result();
}

}  // namespace

Perplexity perplexity(Transformer& t, const std::vector<std::vector<int>>& sequences,
                      const std::function<void(std::size_t, std::size_t)>& progress, std::size_t score_from) {
  if (auto windows = perplexity_of_windows(t, sequences, progress, score_from)) return *windows;
  return perplexity_of(
      t, sequences, t.block_batched(),
      [&](const std::vector<int>& seq, std::size_t i, int pos, std::size_t n, int logits_from) {
        return n == 1 ? t.forward(seq[i], pos) : t.forward_block({seq.data() + i, n}, pos, logits_from);
      },
      progress, score_from);
}

TextWindows text_windows(const model::StoryEncoder& encode, const std::string& text, int window) {
  if (window < 3) throw std::invalid_argument("a window scores positions window/2 .. window-2: at least 3 tokens");
  const std::vector<int> bos = encode("");  // [BOS], or nothing where the vocabulary adds none
  const std::vector<int> tokens = encode(text);
  TextWindows w;
  w.text_tokens = tokens.size();
  w.score_from = static_cast<std::size_t>(window / 2);
  const auto n = static_cast<std::size_t>(window);
  for (std::size_t start = 0; start + n <= tokens.size(); start += n) {
    w.windows.emplace_back(tokens.begin() + static_cast<std::ptrdiff_t>(start),
                           tokens.begin() + static_cast<std::ptrdiff_t>(start + n));
    if (!bos.empty()) w.windows.back().front() = bos.front();
  }
  return w;
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
      [&](const std::vector<int>& seq, std::size_t i, int pos, std::size_t n, int) {
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
