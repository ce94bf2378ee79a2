#pragma once
// What the train tests share: a fixed input batch and the central difference of the loss.
#include <cstddef>
#include <cstdint>

#include "train/trainer.hpp"

namespace train_testing {

// A batch of `batch` rows of seq + 1 uniformly random tokens below `vocab`, the same for
// the same seed.
inline train::Batch fixed_batch(int batch, int seq, int vocab, std::uint64_t seed) {
  train::Rng rng(seed);
  train::Batch b{batch, seq, {}};
  for (int i = 0; i < batch * (seq + 1); ++i) b.tokens.push_back(static_cast<int>(rng.below(static_cast<std::uint64_t>(vocab))));
  return b;
}

// (loss(w[j] + h) - loss(w[j] - h)) / 2h of net's loss on batch b, w[j] restored after.
template <class Net, class Params, class Matmul, class Values>
double central_difference(Net& net, const Params& p, const train::Batch& b, Matmul& mm, Values& w, std::size_t j,
                          double h) {
  const double saved = w[j];
  w[j] = saved + h;
  const double up = net.loss(p, b, mm);
  w[j] = saved - h;
  const double down = net.loss(p, b, mm);
  w[j] = saved;
  return (up - down) / (2 * h);
}

}  // namespace train_testing
