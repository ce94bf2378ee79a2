// Batched decode of many sequences (issue 33 item 4, the server's step): N sequences, each
// with its own KV cache, decoded greedily for S positions, one forward() per sequence and
// position against one Transformer::forward_batch per position (the products over the N
// sequences as one GEMM). Prints tokens per wall and per CPU second of each and whether the
// greedy tokens are the same.
//
// Usage: bench_batch_decode [--preset NAME | --model PATH] [--sequences N] [--steps S]
//        (defaults: the synthesized stories110m, 16 sequences, 32 positions; OMP_NUM_THREADS
//        sets the threads)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampler.hpp"
#include "engine/transformer.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "model/synth.hpp"

int main(int argc, char** argv) {
  std::string preset = "stories110m", path;
  int n = 16, steps = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--preset") preset = argv[i + 1];
    else if (a == "--model") path = argv[i + 1];
    else if (a == "--sequences") n = std::atoi(argv[i + 1]);
    else if (a == "--steps") steps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_batch_decode: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (n < 1 || steps < 1) {
    std::fprintf(stderr, "bench_batch_decode: --sequences and --steps must be positive\n");
    return 2;
  }
  model::Model m;
  if (!path.empty()) {
    m = model::load(path);
  } else {
    const auto c = model::find_preset(preset);
    if (!c) {
      std::fprintf(stderr, "bench_batch_decode: unknown preset %s\n", preset.c_str());
      return 2;
    }
    m = model::synthesize(*c, 0);
  }
  steps = std::min(steps, m.config.seq_len);
  const int vocab = m.config.vocab_size;
  std::vector<std::vector<int>> out[2];
  double wall[2], cpu[2];
  for (int batched = 0; batched < 2; ++batched) {
    std::vector<std::unique_ptr<engine::Transformer>> own;
    std::vector<engine::Transformer*> ts;
    for (int s = 0; s < n; ++s) {
      own.push_back(std::make_unique<engine::Transformer>(m));
      ts.push_back(own.back().get());
    }
    std::vector<int> tokens(static_cast<std::size_t>(n)), positions(static_cast<std::size_t>(n));
    for (int s = 0; s < n; ++s) tokens[s] = (1 + 37 * s) % vocab;
    out[batched].assign(static_cast<std::size_t>(n), {});
    std::vector<const float*> logits(static_cast<std::size_t>(n));
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    for (int pos = 0; pos < steps; ++pos) {
      for (int s = 0; s < n; ++s) positions[s] = pos;
      if (batched) {
        engine::Transformer::forward_batch(ts, tokens, positions, logits);
      } else {
        for (int s = 0; s < n; ++s) logits[s] = ts[s]->forward(tokens[s], pos);
      }
      for (int s = 0; s < n; ++s) {
        tokens[s] = engine::argmax(logits[s], vocab);
        out[batched][s].push_back(tokens[s]);
      }
    }
    cpu[batched] = double(std::clock() - c0) / CLOCKS_PER_SEC;
    wall[batched] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double tokens = double(n) * steps;
  std::printf("%s, %d sequences x %d positions\n", m.config.name.c_str(), n, steps);
  std::printf("forward() each:  %.1f tokens/s wall, %.1f per CPU s\n", tokens / wall[0], tokens / cpu[0]);
  std::printf("forward_batch(): %.1f tokens/s wall, %.1f per CPU s (%.2fx / %.2fx)\n", tokens / wall[1], tokens / cpu[1],
              wall[0] / wall[1], cpu[0] / cpu[1]);
  std::printf("same greedy tokens: %s\n", out[0] == out[1] ? "yes" : "no");
}
