#pragma once
// A batch of `batch` rows of seq + 1 uniformly random tokens below `vocab`, the same for
// the same seed: the train tests' fixed input.
#include <cstdint>

#include "train/trainer.hpp"

namespace train_testing {

inline train::Batch fixed_batch(int batch, int seq, int vocab, std::uint64_t seed) {
  train::Rng rng(seed);
  train::Batch b{batch, seq, {}};
  for (int i = 0; i < batch * (seq + 1); ++i) b.tokens.push_back(static_cast<int>(rng.below(static_cast<std::uint64_t>(vocab))));
  return b;
}

}  // namespace train_testing
