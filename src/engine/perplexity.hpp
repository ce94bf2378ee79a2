#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/transformer.hpp"
#include "model/model.hpp"
#include "model/tokenizer.hpp"

namespace engine {

struct Perplexity {
  double perplexity = 0;
  double nll_mean = 0;     // mean negative log-likelihood per predicted token (nats)
  double nll_stderr = 0;   // standard error of that mean
  double perplexity_err = 0;  // perplexity * nll_stderr (first-order uncertainty)
  std::size_t tokens = 0;  // predicted tokens
  std::size_t sequences = 0;
};

// One story per non-empty line, in file order.
std::vector<std::string> split_stories(const std::string& text);
// Where the held-out stories of a text of n stories begin: the first n / 2 calibrate or
// train, the rest (one more when n is odd) are held out. quantize, deploy and train split
// the same text the same way.
inline std::size_t held_out_begin(std::size_t n_stories) { return n_stories / 2; }

// Each story is tokenized with BOS; every token after BOS is predicted from its prefix.
// A story longer than the model's context is evaluated in consecutive windows.
std::vector<std::vector<int>> tokenize_stories(const model::Tokenizer& tok, const std::vector<std::string>& stories);
std::vector<std::vector<int>> tokenize_stories(const model::StoryEncoder& encode, const std::vector<std::string>& stories);

// Every position i >= score_from of each sequence is scored: its logits against token i+1.
// The positions before it are run (they are the context) but their logits not computed.
Perplexity perplexity(Transformer& t, const std::vector<std::vector<int>>& sequences,
                      const std::function<void(std::size_t done, std::size_t total)>& progress = {},
                      std::size_t score_from = 0);

// llama.cpp's perplexity protocol (llama-perplexity -c WINDOW; examples/perplexity/
// perplexity.cpp, perplexity()): the whole text tokenized once (BOS first where the
// vocabulary adds one), cut into floor(tokens / window) windows of `window` consecutive
// tokens, the first token of each replaced by BOS; perplexity(t, windows, progress,
// score_from) then scores positions window/2 .. window-2 of each window, as llama.cpp does.
struct TextWindows {
  std::vector<std::vector<int>> windows;
  std::size_t score_from = 0;
  std::size_t text_tokens = 0;  // the whole text's tokens (the windows take the first windows x window)
};
TextWindows text_windows(const model::StoryEncoder& encode, const std::string& text, int window);

// The residual stream entering each block (index n_layers: entering the final norm) at
// every position of a perplexity_from() pass, in its order. Shared: a pass resumed from
// another's holds the other's earlier blocks without copying them.
struct BlockInputs {
  std::vector<std::shared_ptr<const std::vector<float>>> layer;  // [n_layers + 1][positions * dim]
};
// perplexity() of `t` (batched), each block of positions started at block first_layer from
// the stream `from` holds there (0: from the embeddings, `from` unused). Where `from` was
// recorded on the same sequences by a pass whose blocks before first_layer compute what t's
// do, the result equals perplexity(t)'s bit for bit (a block of one position runs
// forward_block_from, whose one row has forward()'s bits): the mixed search measures a plan
// that differs from another only from block first_layer on without running the blocks before.
// `record`, given, receives the stream entering each block: from `from` before first_layer
// (null without it), from this pass after.
Perplexity perplexity_from(Transformer& t, const std::vector<std::vector<int>>& sequences, int first_layer,
                           const BlockInputs* from, BlockInputs* record,
                           const std::function<void(std::size_t done, std::size_t total)>& progress = {});

// Reads a text file whole; throws InputError naming it when missing, not a regular file,
// empty, not UTF-8, or holding a NUL byte.
std::string read_text_file(const std::string& path);

}  // namespace engine
