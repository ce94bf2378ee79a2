// Decode speed of the fp32 reference engine against the machine's memory bandwidth.
//
// Decode at batch 1 reads every weight once per token, so its bound is the rate at which
// the machine streams memory. This program measures, in one run and for each thread count:
//   - read bandwidth: a sum over a buffer much larger than the last-level cache (the access
//     pattern of a matrix-vector product), and a STREAM triad a = b + s*c (24 bytes/element,
//     write-allocate traffic not counted, as STREAM reports it);
//   - decode tokens/s of engine::Transformer on a synthesized model (stories110m by default,
//     the weights `fpgallm synth --preset stories110m` writes), greedy, positions 0..N-1;
//   - effective weight-streaming GB/s = (bytes of all matrices read per token) * tokens/s,
//     and its ratio to the measured read bandwidth.
// Every figure is the best of --repeats runs (the machines are shared and noisy).
//
// Usage: bench_engine [--preset NAME | --model PATH] [--tokens N] [--threads 1,4,...]
//                     [--buffer-mb MB] [--repeats R] [--json]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/transformer.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "model/synth.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Options {
  std::string preset = "stories110m";
  std::string model_path;
  int tokens = 32;
  std::vector<int> threads;
  std::size_t buffer_mb = 1024;
  int repeats = 3;
  bool json = false;
};

// Sum of a large buffer with eight independent partial sums per thread (vectorizes like
// the engine's dot product). Returns GB/s.
__attribute__((target_clones("avx2", "default"))) double read_bandwidth(const float* a, std::size_t n, int threads,
                                                                        int repeats, float* sink) {
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    float total = 0;
    auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma omp for schedule(static)
      for (std::size_t i = 0; i < n; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] += a[i + k];
      total += ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
    const double s = seconds_since(t0);
    *sink += total;
    best = std::max(best, n * sizeof(float) / s / 1e9);
  }
  return best;
}

// STREAM triad a = b + s*c; GB/s counting 3 arrays of 4-byte elements.
double triad_bandwidth(float* a, const float* b, const float* c, std::size_t n, int threads, int repeats) {
  double best = 0;
  const float s = 3.0f;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
    best = std::max(best, 3.0 * n * sizeof(float) / seconds_since(t0) / 1e9);
  }
  return best;
}

// Bytes of weights a decode step reads: every matrix (and the classifier) once.
double weight_bytes_per_token(const model::Model& m) {
  const auto& c = m.config;
  double elems = 0;
  for (model::Linear l : model::kBlockLinears) {
    auto s = model::linear_shape(c, l);
    elems += double(s.rows) * s.cols * c.n_layers;
  }
  auto cls = model::linear_shape(c, model::Linear::cls);
  elems += double(cls.rows) * cls.cols;
  return elems * sizeof(float);
}

struct DecodeResult {
  double tokens_per_s = 0;
  std::vector<int> tokens;
};

DecodeResult decode(const model::Model& m, int n_tokens, int threads, int repeats) {
  omp_set_num_threads(threads);
  DecodeResult best;
  for (int r = 0; r < repeats; ++r) {
    engine::Transformer t(m);
    std::vector<int> tokens;
    int token = 1;
    t.forward(token, 0);  // first step warms caches and page tables; not timed
    auto t0 = Clock::now();
    for (int pos = 1; pos <= n_tokens; ++pos) {
      const float* logits = t.forward(token, pos);
      token = static_cast<int>(std::max_element(logits, logits + m.config.vocab_size) - logits);
      tokens.push_back(token);
    }
    const double tps = n_tokens / seconds_since(t0);
    if (tps > best.tokens_per_s) best = {tps, tokens};
  }
  return best;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_engine: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--preset") o.preset = next();
    else if (a == "--model") o.model_path = next();
    else if (a == "--tokens") o.tokens = std::atoi(next().c_str());
    else if (a == "--threads") o.threads = parse_list(next());
    else if (a == "--buffer-mb") o.buffer_mb = static_cast<std::size_t>(std::atol(next().c_str()));
    else if (a == "--repeats") o.repeats = std::atoi(next().c_str());
    else if (a == "--json") o.json = true;
    else {
      std::fprintf(stderr,
                   "usage: bench_engine [--preset NAME | --model PATH] [--tokens N] [--threads 1,4] [--buffer-mb MB] "
                   "[--repeats R] [--json]\n");
      return 2;
    }
  }
  const int max_threads = omp_get_max_threads();
  if (o.threads.empty()) o.threads = max_threads > 1 ? std::vector<int>{1, max_threads} : std::vector<int>{1};

  model::Model m;
  if (!o.model_path.empty()) {
    m = model::load(o.model_path);
  } else {
    auto c = model::find_preset(o.preset);
    if (!c) {
      std::fprintf(stderr, "bench_engine: unknown preset %s\n", o.preset.c_str());
      return 2;
    }
    std::fprintf(stderr, "synthesizing %s (seed 0) ...\n", o.preset.c_str());
    m = model::synthesize(*c, 0);
  }
  const double bytes_per_token = weight_bytes_per_token(m);

  const std::size_t n = o.buffer_mb * (1u << 20) / sizeof(float) / 8 * 8;
  std::unique_ptr<float[]> a(new float[n]), b(new float[n / 3]), c(new float[n / 3]), d(new float[n / 3]);
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n; ++i) a[i] = 1.0f;  // first touch by the threads that read it
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n / 3; ++i) b[i] = c[i] = d[i] = 1.0f;

  nlohmann::json rows = nlohmann::json::array();
  float sink = 0;
  for (int threads : o.threads) {
    const double read = read_bandwidth(a.get(), n, threads, o.repeats, &sink);
    const double triad = triad_bandwidth(b.get(), c.get(), d.get(), n / 3, threads, o.repeats);
    const DecodeResult dr = decode(m, o.tokens, threads, o.repeats);
    const double stream_gbs = bytes_per_token * dr.tokens_per_s / 1e9;
    rows.push_back({{"threads", threads},
                    {"read_gb_s", read},
                    {"triad_gb_s", triad},
                    {"tokens_per_s", dr.tokens_per_s},
                    {"weight_gb_s", stream_gbs},
                    {"fraction_of_read", stream_gbs / read}});
  }
  nlohmann::json out = {{"model", m.config.name},
                        {"weight_bytes_per_token", bytes_per_token},
                        {"tokens", o.tokens},
                        {"repeats", o.repeats},
                        {"buffer_mb", o.buffer_mb},
                        {"max_threads", max_threads},
                        {"rows", rows},
                        {"checksum", sink}};
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("model %s: %.1f MB of fp32 matrices read per token; %d decode steps, best of %d\n", m.config.name.c_str(),
              bytes_per_token / 1e6, o.tokens, o.repeats);
  std::printf("%7s %12s %12s %10s %14s %10s\n", "threads", "read GB/s", "triad GB/s", "tok/s", "weights GB/s", "of read");
  for (const auto& r : rows)
    std::printf("%7d %12.2f %12.2f %10.2f %14.2f %9.0f%%\n", r["threads"].get<int>(), r["read_gb_s"].get<double>(),
                r["triad_gb_s"].get<double>(), r["tokens_per_s"].get<double>(), r["weight_gb_s"].get<double>(),
                100 * r["fraction_of_read"].get<double>());
  return 0;
}
