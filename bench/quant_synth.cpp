// Quantization of a larger model with random weights (fpgallm synth): weight bytes and the
// time each scheme takes (calibration on random tokens, SmoothQuant, quantization, GGUF
// write). Perplexity is meaningless for random weights and is not measured.
// Usage: quant_synth MODEL [CALIB_TOKENS] > table.md
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "calib/calib.hpp"
#include "model/model.hpp"
#include "quant/quant.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [CALIB_TOKENS]\n", argv[0]);
    return 2;
  }
  using clock = std::chrono::steady_clock;
  const model::Model m = model::load(argv[1]);
  const std::size_t n_tokens = argc > 2 ? std::stoul(argv[2]) : 64;
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> tok(3, m.config.vocab_size - 1);
  std::vector<int> seq = {1};
  while (seq.size() < n_tokens + 1) seq.push_back(tok(rng));
  const std::vector<std::vector<int>> calib_seqs = {seq};

  auto t0 = clock::now();
  const quant::ActStats stats = calib::collect_stats(m, calib_seqs);
  const double calib_s = std::chrono::duration<double>(clock::now() - t0).count();
  std::printf("model %s (%lld parameters), calibration %zu random tokens: %.2f s\n\n", argv[1],
              static_cast<long long>(m.config.n_params()), n_tokens, calib_s);
  std::printf("| scheme | linear weight bytes | vs fp32 | quantize s | GGUF write s | file bytes |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  struct Row {
    const char* name;
    quant::Scheme scheme;
    int group;
  };
  const auto fp32_bytes = quant::linear_weight_bytes(m.config, quant::uniform_plan(m.config, quant::Scheme::fp32, 32));
  const auto out = std::filesystem::temp_directory_path() / "fpgallm_quant_synth.gguf";
  for (const Row& r : {Row{"fp32", quant::Scheme::fp32, 32}, Row{"w8a8", quant::Scheme::w8a8, 32},
                       Row{"w8a8-static", quant::Scheme::w8a8_static, 32}, Row{"w8a8-smooth", quant::Scheme::w8a8_smooth, 32},
                       Row{"w4a16 g32", quant::Scheme::w4a16, 32}, Row{"w4a16 g128", quant::Scheme::w4a16, 128},
                       Row{"w4a8 g32", quant::Scheme::w4a8, 32}}) {
    const auto t1 = clock::now();
    model::Model work = m;
    quant::ActStats st = stats;
    quant::Plan plan = quant::uniform_plan(m.config, r.scheme, r.group);
    if (r.scheme == quant::Scheme::w8a8_smooth) {
      quant::smooth(work, st, 0.5f);
      plan.smooth_alpha = 0.5f;
    }
    calib::apply_static_scales(plan, st);
    const quant::QuantModel qm = quant::quantize_model(work, plan);
    const double q_s = std::chrono::duration<double>(clock::now() - t1).count();
    const auto t2 = clock::now();
    quant::save_gguf(qm, out.string());
    const double w_s = std::chrono::duration<double>(clock::now() - t2).count();
    const auto bytes = qm.linear_weight_bytes();
    std::printf("| %s | %llu | %.2fx | %.2f | %.2f | %llu |\n", r.name, static_cast<unsigned long long>(bytes),
                static_cast<double>(fp32_bytes) / static_cast<double>(bytes), q_s, w_s,
                static_cast<unsigned long long>(std::filesystem::file_size(out)));
  }
  std::filesystem::remove(out);
  return 0;
}
