#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/sampler.hpp"
#include "engine/transformer.hpp"
#include "model/bpe_tokenizer.hpp"
#include "model/tokenizer.hpp"

namespace engine {

struct Generation {
  std::vector<int> tokens;  // prompt (with BOS) followed by the generated tokens
  std::string text;         // decoded generated text (prompt included, as llama2.c prints it)
  int prompt_tokens = 0;
  double seconds_after_first = 0;  // wall time of all steps but the first
};

// llama2.c's generate loop: feeds the prompt, then samples until `steps` positions have
// been processed or BOS is produced. on_piece receives each printable piece as it comes.
Generation generate(Transformer& t, const model::Tokenizer& tok, Sampler& sampler,
                    const std::string& prompt, int steps,
                    const std::function<void(const std::string&)>& on_piece = {});

// The same loop for a byte-level BPE vocabulary: `prompt` is already encoded (chat template
// and bos included); stops after `steps` positions or at an end-of-generation token. The
// text holds the generated tokens' bytes (special tokens left out) as valid UTF-8 (U+FFFD
// for a byte of an unfinished character); on_piece gets each token's raw bytes.
Generation generate(Transformer& t, const model::BpeTokenizer& tok, Sampler& sampler, const std::vector<int>& prompt,
                    int steps, const std::function<void(const std::string&)>& on_piece = {});

}  // namespace engine
