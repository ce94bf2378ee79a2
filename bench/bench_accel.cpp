// Decode speed of the accelerator backend's C simulation (the HLS kernels compiled with
// g++, engine::AccelTransformer) beside the reference engine running the same quantized
// model (calib::SimulatedTransformer, what `fpgallm run --quant` runs: quant::linear_w8a8,
// the integer reference of the kernels) and beside the fp32 engine, on the same machine in
// the same run, and their ratios.
//
// Model: the synthesized stories110m (`fpgallm synth --preset stories110m`: deterministic
// random weights, model::synthesize), quantized W8A8 (int8 per-channel weights, int8
// dynamic activations; quant::quantize_model), with the int8 KV cache when the design
// stores 8-bit KV (the default). The quantized reference and the accelerator run that one
// QuantModel. Every engine decodes positions 0..N-1 of the same token sequence (the fp32
// engine's greedy continuation of BOS), so they do the same work per token; the engines take
// turns within each of --repeats rounds and every figure is the best round (shared, noisy
// machines). Afterwards the accelerator's greedy tokens are compared with the W8A8
// reference's at every position.
//
// Usage: bench_accel [--preset NAME] [--tokens N] [--repeats R] [--design design.json]
//                    [--threads T] [--json]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arch/design.hpp"
#include "calib/simulated.hpp"
#include "engine/accel.hpp"
#include "engine/transformer.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "model/synth.hpp"
#include "quant/quant.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string preset = "stories110m";
  std::string design;
  int tokens = 32;
  int repeats = 3;
  int threads = 0;  // 0: OpenMP's default
  bool json = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_accel: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--preset") o.preset = next();
    else if (a == "--design") o.design = next();
    else if (a == "--tokens") o.tokens = std::atoi(next().c_str());
    else if (a == "--repeats") o.repeats = std::atoi(next().c_str());
    else if (a == "--threads") o.threads = std::atoi(next().c_str());
    else if (a == "--json") o.json = true;
    else {
      std::fprintf(stderr, "usage: bench_accel [--preset NAME] [--tokens N] [--repeats R] [--design FILE] [--threads T] [--json]\n");
      std::exit(2);
    }
  }
  return o;
}

// Seconds for positions 1..N-1 of seq (position 0 run first, untimed, as llama2.c reports).
double decode_seconds(engine::Transformer& t, const std::vector<int>& seq) {
  t.forward(seq[0], 0);
  const auto t0 = Clock::now();
  for (std::size_t pos = 1; pos < seq.size(); ++pos) t.forward(seq[pos], int(pos));
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Positions where the two engines' greedy tokens (argmax of the logits) agree.
int greedy_agreement(engine::Transformer& a, engine::Transformer& b, const std::vector<int>& seq, int vocab) {
  int same = 0;
  for (std::size_t pos = 0; pos < seq.size(); ++pos) {
    const float* la = a.forward(seq[pos], int(pos));
    const long ta = std::max_element(la, la + vocab) - la;
    const float* lb = b.forward(seq[pos], int(pos));
    same += ta == std::max_element(lb, lb + vocab) - lb;
  }
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.threads > 0) omp_set_num_threads(o.threads);
  auto config = model::find_preset(o.preset);
  if (!config) {
    std::fprintf(stderr, "bench_accel: unknown preset %s\n", o.preset.c_str());
    return 2;
  }
  std::fprintf(stderr, "synthesizing %s ...\n", o.preset.c_str());
  const model::Model m = model::synthesize(*config, 0);
  std::fprintf(stderr, "quantizing W8A8 ...\n");
  const auto t_q = Clock::now();
  arch::Design d;
  if (!o.design.empty()) d = arch::load(o.design);
  d.context = std::max(d.context, o.tokens);
  quant::Plan plan = quant::uniform_plan(m.config, quant::Scheme::w8a8, 32);
  plan.kv8 = d.kv_bits == 8;
  const quant::QuantModel qm = quant::quantize_model(m, plan);
  const double quant_s = std::chrono::duration<double>(Clock::now() - t_q).count();

  engine::Transformer ref(m);
  std::vector<int> seq = {1};
  for (int pos = 0; int(seq.size()) < o.tokens; ++pos) {
    const float* l = ref.forward(seq.back(), pos);
    seq.push_back(int(std::max_element(l, l + m.config.vocab_size) - l));
  }
  calib::SimulatedTransformer ref_quant(m, qm.plan, qm.linears);
  engine::AccelTransformer accel(m, qm, d);

  std::fprintf(stderr, "decoding %d tokens, best of %d ...\n", o.tokens, o.repeats);
  // The engines take turns within each repeat, so a busy spell of the machine slows all of
  // them rather than one; each figure is its best repeat.
  double ref_s = 1e300, ref_quant_s = 1e300, accel_s = 1e300;
  for (int r = 0; r < o.repeats; ++r) {
    ref_s = std::min(ref_s, decode_seconds(ref, seq));
    ref_quant_s = std::min(ref_quant_s, decode_seconds(ref_quant, seq));
    accel_s = std::min(accel_s, decode_seconds(accel, seq));
  }
  const double steps = double(seq.size() - 1);
  const double ref_tps = steps / ref_s, ref_quant_tps = steps / ref_quant_s, accel_tps = steps / accel_s;
  const double ratio = accel_tps / ref_quant_tps;
  // The accelerator does the reference's work: its greedy tokens follow the W8A8 reference's.
  const int agree = greedy_agreement(accel, ref_quant, seq, m.config.vocab_size);
  const int threads = omp_get_max_threads();
  if (o.json) {
    nlohmann::json j = {{"preset", o.preset},        {"tokens", o.tokens},       {"repeats", o.repeats},
                        {"threads", threads},        {"design", nlohmann::json(d)}, {"ref_tokens_per_s", ref_tps},
                        {"ref_quant_tokens_per_s", ref_quant_tps}, {"accel_tokens_per_s", accel_tps},
                        {"ratio", ratio},            {"ratio_fp32", accel_tps / ref_tps}, {"quantize_s", quant_s},
                        {"greedy_agreement", agree}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s, %d decode steps, %d thread(s), best of %d\n", o.preset.c_str(), o.tokens - 1, threads, o.repeats);
    std::printf("  fp32 reference engine          %8.2f tokens/s\n", ref_tps);
    std::printf("  reference engine, W8A8 model   %8.2f tokens/s   (simulated quantization, kv %s)\n", ref_quant_tps,
                plan.kv8 ? "int8" : "fp32");
    std::printf("  accel, W8A8 model (C sim)      %8.2f tokens/s   (matrix unit %dx%d, tiles %dx%d, %d lanes, kv %d bits)\n",
                accel_tps, d.matrix_unit.rows, d.matrix_unit.cols, d.tiling.tile_rows, d.tiling.tile_cols,
                d.vector_unit.lanes, d.kv_bits);
    std::printf("  ratio accel / W8A8 reference   %8.2f\n", ratio);
    std::printf("  ratio accel / fp32 reference   %8.2f\n", accel_tps / ref_tps);
    std::printf("  greedy tokens accel = W8A8 reference at %d of %zu positions\n", agree, seq.size());
  }
  return 0;
}
