#include <cstdio>

#include "cli/command.hpp"
#include "cli/accel_backend.hpp"
#include "cli/quant_eval.hpp"
#include "engine/perplexity.hpp"
#include "model/model.hpp"
#include "quant/quant.hpp"
#include "util/error.hpp"

namespace {

struct EvalArgs {
  std::string model, tokenizer, text, quant, schemes, backend = "ref", design;
  int group = 32;
  bool json = false, no_batch = false;
};

void eval(const EvalArgs& a) {
  model::Model m = model::load(a.model);
  const model::StoryEncoder encode = a.backend == "accel" ? model::StoryEncoder{} : model::story_encoder(m, a.tokenizer);
  // A file from `fpgallm quantize` on its own runs as the quantized model it describes.
  const bool self_quantized = a.quant.empty() && quant::is_quantized_gguf(a.model);
  const std::string qfile = self_quantized ? a.model : a.quant;
  if (a.backend == "accel") return cli::eval_accel(m, model::tokenizer_for(m, a.tokenizer), a.text, qfile, a.design, a.json);
  if (!a.design.empty()) throw fpgallm::InputError("--design", "a design is run by --backend accel");
  if (!a.quant.empty()) return cli::eval_quantized(m, encode, a.text, a.quant, a.json, !a.no_batch);
  if (!a.schemes.empty()) return cli::eval_schemes(m, encode, a.text, a.schemes, a.group, a.json);
  const std::string text = engine::read_text_file(a.text);
  auto sequences = engine::tokenize_stories(encode, engine::split_stories(text));
  std::unique_ptr<cli::LoadedQuant> own;
  std::unique_ptr<engine::Transformer> plain;
  if (self_quantized) own = cli::load_quant(m, qfile);
  else plain = std::make_unique<engine::Transformer>(m);
  engine::Transformer& t = own ? *own->transformer : *plain;
  if (a.no_batch) t.set_batched(false);
  cli::Progress progress("eval: tokens", a.json);
  engine::Perplexity p = engine::perplexity(t, sequences, [&](std::size_t d, std::size_t n) { progress.update(d, n); });
  progress.finish();
  if (a.json) {
    cli::print_json({{"model", a.model},
                     {"text", a.text},
                     {"backend", own ? "ref (simulated quantization)" : "ref"},
                     {"batched", t.block_batched()},
                     {"perplexity", p.perplexity},
                     {"perplexity_err", p.perplexity_err},
                     {"nll_mean", p.nll_mean},
                     {"tokens", p.tokens},
                     {"sequences", p.sequences}});
  } else {
    std::printf("perplexity %.4f +/- %.4f over %zu tokens (%zu stories), mean NLL %.5f nats\n", p.perplexity,
                p.perplexity_err, p.tokens, p.sequences, p.nll_mean);
  }
}

void setup(CLI::App& root) {
  auto a = std::make_shared<EvalArgs>();
  auto* cmd = root.add_subcommand("eval", "Perplexity of a model on a text file (one story per line)");
  cmd->add_option("model", a->model, "Checkpoint")->required();
  cmd->add_option("--text", a->text, "Text file, one story per line")->required();
  cmd->add_option("-z,--tokenizer", a->tokenizer, cli::kTokenizerHelp);
  cmd->add_option("--backend", a->backend, "ref: the fp32 engine (simulated quantization with --quant); accel: the "
                                          "accelerator's HLS kernels in C simulation (needs --quant)")
      ->check(CLI::IsMember({"ref", "accel"}));
  cmd->add_option("--design", a->design, cli::design_help());
  cmd->add_option("--quant", a->quant, "Quantized model (.gguf from fpgallm quantize), run by simulated quantization");
  cmd->add_option("--schemes", a->schemes, "Compare schemes (fp32,w8a8,w8a8-static,w8a8-smooth,w4a16,w4a8,mixed) "
                                           "calibrated on the first half of --text, on its held-out half")
      ->excludes("--quant");
  cmd->add_option("--group", a->group, "int4 group size for --schemes")->check(CLI::IsMember({32, 64, 128}));
  cmd->add_flag("--no-batch", a->no_batch, "Run the fp32 reference (and with --quant the quantized one) one token at a time "
                                          "instead of in blocks of positions, to compare the two");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { eval(*a); });
}

}  // namespace

FPGALLM_COMMAND("eval", setup);
