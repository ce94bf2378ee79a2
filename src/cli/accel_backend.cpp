#include "cli/accel_backend.hpp"

#include <cmath>
#include <cstdio>

#include "arch/design.hpp"
#include "calib/calib.hpp"
#include "cli/command.hpp"
#include "engine/perplexity.hpp"
#include "util/error.hpp"

namespace cli {

std::unique_ptr<engine::AccelTransformer> make_accel(const LoadedQuant* q, const std::string& design_file) {
  if (!q)
    throw fpgallm::InputError("--backend accel",
                              "the accelerator runs a quantized model: give --quant QFILE (from fpgallm quantize)");
  const arch::Design d = design_file.empty() ? arch::Design{} : arch::load(design_file);
  const std::string source = design_file.empty() ? "default design" : design_file;
  if (auto p = engine::accel_problems(q->qm, d); !p.empty()) throw fpgallm::InputError(source, p.front());
  return std::make_unique<engine::AccelTransformer>(q->base, q->qm, d);
}

void eval_accel(const model::Model& m, const model::Tokenizer& tok, const std::string& text_file,
                const std::string& qfile, const std::string& design_file, bool json) {
  if (qfile.empty()) make_accel(nullptr, design_file);  // throws the missing --quant message
  auto q = load_quant(m, qfile);
  auto accel = make_accel(q.get(), design_file);
  const std::string text = engine::read_text_file(text_file);
  const bool calibration_text = q->qm.calibration_fnv1a != 0 && quant::fnv1a64(text) == q->qm.calibration_fnv1a;
  const auto seqs = calibration_text ? calib::split_text(tok, text, text_file).held_out
                                     : engine::tokenize_stories(tok, engine::split_stories(text));
  cli::Progress ps("eval: simulated quantization tokens", json);
  const auto sim = engine::perplexity(*q->transformer, seqs, [&](std::size_t d, std::size_t n) { ps.update(d, n); });
  ps.finish();
  cli::Progress pa("eval: accelerator tokens", json);
  const auto acc = engine::perplexity(*accel, seqs, [&](std::size_t d, std::size_t n) { pa.update(d, n); });
  pa.finish();
  const double rel = (acc.perplexity - sim.perplexity) / sim.perplexity;
  if (json) {
    print_json({{"model", m.source_path},
                {"quant", qfile},
                {"design", design_file.empty() ? "default" : design_file},
                {"text", text_file},
                {"part", calibration_text ? "held-out" : "all"},
                {"backend", "accel"},
                {"perplexity", acc.perplexity},
                {"perplexity_err", acc.perplexity_err},
                {"nll_mean", acc.nll_mean},
                {"simulated_perplexity", sim.perplexity},
                {"simulated_nll_mean", sim.nll_mean},
                {"rel_diff_vs_simulated", rel},
                {"tokens", acc.tokens},
                {"sequences", acc.sequences}});
  } else {
    std::printf("%s on the accelerator (C simulation): perplexity %.6f +/- %.4f over %zu tokens (%zu stories, %s)\n",
                qfile.c_str(), acc.perplexity, acc.perplexity_err, acc.tokens, acc.sequences,
                calibration_text ? "held-out half" : "whole file");
    std::printf("simulated quantization of the same plan: %.6f; relative difference %.3g\n", sim.perplexity, rel);
  }
}

}  // namespace cli
