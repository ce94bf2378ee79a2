#include <cstdio>
#include <fmt/format.h>

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
  int window = 0;  // 0: whole stories
  bool json = false, no_batch = false;
};

void eval(const EvalArgs& a) {
  model::Model m = model::load(a.model);
  const model::StoryEncoder encode = a.backend == "accel" ? model::StoryEncoder{} : model::story_encoder(m, a.tokenizer);
  // A file from `fpgallm quantize` on its own runs as the quantized model it describes.
  const bool self_quantized = a.quant.empty() && quant::is_quantized_gguf(a.model);
  const std::string qfile = self_quantized ? a.model : a.quant;
  if (a.window > 0 && (a.backend == "accel" || !a.quant.empty() || !a.schemes.empty()))
    throw fpgallm::InputError("--window", "scores the model given (fp32, or a quantized file on its own) on the reference "
                                          "engine; not with --quant, --schemes or --backend accel");
  if (a.backend == "accel") return cli::eval_accel(m, model::tokenizer_for(m, a.tokenizer), a.text, qfile, a.design, a.json);
  if (!a.design.empty()) throw fpgallm::InputError("--design", "a design is run by --backend accel");
  if (!a.quant.empty()) return cli::eval_quantized(m, encode, a.text, a.quant, a.json, !a.no_batch);
  if (!a.schemes.empty()) return cli::eval_schemes(m, encode, a.text, a.schemes, a.group, a.json);
  const std::string text = engine::read_text_file(a.text);
  std::vector<std::vector<int>> sequences;
  std::size_t score_from = 0;
  if (a.window > 0) {
    if (a.window > m.config.seq_len)
      throw fpgallm::InputError("--window", fmt::format("{} is longer than the model's context {}", a.window, m.config.seq_len));
    engine::TextWindows w = engine::text_windows(encode, text, a.window);
    if (w.windows.size() < 2)  // llama-perplexity's own minimum
      throw fpgallm::InputError(a.text, fmt::format("tokenizes to {} tokens, fewer than two windows of {} (--window)",
                                                    w.text_tokens, a.window));
    sequences = std::move(w.windows);
    score_from = w.score_from;
  } else {
    sequences = engine::tokenize_stories(encode, engine::split_stories(text));
  }
  std::unique_ptr<cli::LoadedQuant> own;
  std::unique_ptr<engine::Transformer> plain;
  if (self_quantized) own = cli::load_quant(m, qfile);
  else plain = std::make_unique<engine::Transformer>(m);
  engine::Transformer& t = own ? *own->transformer : *plain;
  if (a.no_batch) t.set_batched(false);
  cli::Progress progress("eval: tokens", a.json);
  engine::Perplexity p =
      engine::perplexity(t, sequences, [&](std::size_t d, std::size_t n) { progress.update(d, n); }, score_from);
  progress.finish();
  if (a.json) {
    nlohmann::json j = {{"model", a.model},
                        {"text", a.text},
                        {"backend", own ? "ref (simulated quantization)" : "ref"},
                        {"batched", t.block_batched()},
                        {"perplexity", p.perplexity},
                        {"perplexity_err", p.perplexity_err},
                        {"nll_mean", p.nll_mean},
                        {"tokens", p.tokens},
                        {"sequences", p.sequences}};
    if (a.window > 0) j["window"] = a.window;
    cli::print_json(j);
  } else if (a.window > 0) {
    std::printf("perplexity %.4f +/- %.4f over %zu tokens (%zu windows of %d, llama-perplexity's protocol), mean NLL "
                "%.5f nats\n",
                p.perplexity, p.perplexity_err, p.tokens, p.sequences, a.window, p.nll_mean);
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
  cmd->add_option("--window", a->window,
                  "Score as llama.cpp's llama-perplexity -c N does instead of story by story: the whole text "
                  "tokenized once, cut into windows of N tokens that each start with BOS, the second half of each "
                  "scored")
      ->check(CLI::Range(3, 1 << 20));
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { eval(*a); });
}

}  // namespace

FPGALLM_COMMAND("eval", setup);
