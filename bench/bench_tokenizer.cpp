// Tokenizer encode time on one long line (issue 19: a 1 MB single line in under 2 s; the
// rescanning merge it replaced took 4/14/56 s on 16/32/64 KB). The text is the bundled
// sample stories joined into one line and repeated to the size; the ratio between sizes
// shows the O(n log n) growth (x4 bytes -> a little over x4 time).
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

#include "model/model.hpp"
#include "util/paths.hpp"

namespace {

std::string one_line(std::size_t bytes) {
  std::ifstream in(fpgallm::source_dir() + "/models/tinystories-valid-sample.txt", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string stories = ss.str();
  for (char& c : stories)
    if (c == '\n' || c == '\r') c = ' ';
  std::string text;
  while (text.size() < bytes) text += stories;
  text.resize(bytes);
  return text;
}

void BM_EncodeOneLine(benchmark::State& state) {
  const auto tok = model::Tokenizer::load_llama2c(fpgallm::source_dir() + "/models/tok512.bin", 512);
  const std::string text = one_line(static_cast<std::size_t>(state.range(0)));
  std::size_t tokens = 0;
  for (auto _ : state) {
    const auto ids = tok.encode(text, true, false);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes_per_s"] =
      benchmark::Counter(static_cast<double>(text.size()) * state.iterations(), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_EncodeOneLine)->Arg(64 << 10)->Arg(256 << 10)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
