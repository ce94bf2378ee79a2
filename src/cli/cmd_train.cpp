#include <sys/stat.h>

#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "util/output.hpp"
#include "engine/perplexity.hpp"
#include "model/model.hpp"
#include "model/save.hpp"
#include "train/trainer.hpp"
#include "util/error.hpp"

namespace {

struct TrainArgs {
  std::string model, data, tokenizer, out, backend = "ref";
  int steps = 200, batch = 8, seq = 64, eval_every = 25;
  std::size_t heldout_tokens = 0;
  double lr = 1e-5, weight_decay = 0.1, clip = 1.0, beta1 = 0.9, beta2 = 0.95;
  std::uint64_t seed = 1;
  bool json = false;
};

// In the input's format (llama2.c .bin, GGUF, or a safetensors folder), fp32 tensors; the
// tokenizer goes along where the format holds one.
void write_checkpoint(const model::Model& m, const model::Tokenizer& tok, const std::string& path) {
  model::save(m, path, m.source_format, "f32", &tok);
}

void run_train(const TrainArgs& a) {
  // The checkpoint goes in the input's format: a folder for a safetensors folder.
  struct stat st {};
  const bool folder = ::stat(a.model.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (!a.out.empty())
    fpgallm::check_output(a.out, folder ? fpgallm::OutputKind::folder : fpgallm::OutputKind::file,
                          {a.model, a.data, a.tokenizer});
  model::Model m = model::load(a.model);
  if (!m.has_weights()) throw fpgallm::InputError(a.model, "has no weights (a preset cannot be trained; use fpgallm synth)");
  if (m.config.arch != model::Arch::llama) throw fpgallm::InputError(a.model, "training supports llama-architecture models only");
  if (!m.weights.rope_freq_factors.empty() || m.config.head_size != 0)
    throw fpgallm::InputError(a.model, "training does not support RoPE scaling or a free head width yet");
  if (a.seq > m.config.seq_len)
    throw fpgallm::InputError("--seq", fmt::format("{} is longer than the model's context {}", a.seq, m.config.seq_len));
  const model::Tokenizer tok = model::tokenizer_for(m, a.tokenizer);
  const train::TextData data = train::split_text(tok, engine::read_text_file(a.data), a.seq, a.data);

  train::TrainOptions o;
  o.steps = a.steps, o.batch = a.batch, o.seq = a.seq, o.eval_every = a.eval_every, o.seed = a.seed;
  o.heldout_tokens = a.heldout_tokens;
  o.backend = train::backend_from_string(a.backend);
  o.adamw.lr = a.lr, o.adamw.weight_decay = a.weight_decay, o.adamw.clip_norm = a.clip;
  o.adamw.beta1 = a.beta1, o.adamw.beta2 = a.beta2;

  if (!a.json) {
    std::printf("training %s on %s: %zu train stories (%zu tokens), %zu held-out stories (%zu tokens)\n", a.model.c_str(),
                a.data.c_str(), data.train_stories, data.train.size(), data.heldout_stories, data.heldout.size());
    std::printf("backend %s, %d steps of batch %d x seq %d, AdamW lr %g betas (%g, %g) weight decay %g, clip %g, seed %llu\n",
                a.backend.c_str(), a.steps, a.batch, a.seq, a.lr, a.beta1, a.beta2, a.weight_decay, a.clip,
                static_cast<unsigned long long>(a.seed));
    std::printf("%6s  %10s  %12s  %9s\n", "step", "train loss", "held-out loss", "grad norm");
    std::fflush(stdout);
  }
  cli::Progress progress("train: steps", a.json);
  auto on_point = [&](const train::CurvePoint& p) {
    if (a.json) return;
    progress.finish();
    std::printf("%6d  %10.4f  %12.4f  %9.4f\n", p.step, p.train_loss, p.heldout_loss, p.grad_norm);
    std::fflush(stdout);
  };
  auto on_step = [&](int step, int steps) { progress.update(static_cast<std::size_t>(step), static_cast<std::size_t>(steps)); };
  const train::TrainResult r = train::fine_tune(m, data, o, on_point, on_step);
  progress.finish();
  if (!a.out.empty()) write_checkpoint(m, tok, a.out);

  const double first = r.curve.front().heldout_loss, last = r.curve.back().heldout_loss;
  if (a.json) {
    nlohmann::json curve = nlohmann::json::array();
    for (const auto& p : r.curve)
      curve.push_back({{"step", p.step}, {"train_loss", p.train_loss}, {"heldout_loss", p.heldout_loss}, {"grad_norm", p.grad_norm}});
    cli::print_json({{"model", a.model},
                     {"data", a.data},
                     {"backend", a.backend},
                     {"steps", a.steps},
                     {"batch", a.batch},
                     {"seq", a.seq},
                     {"lr", a.lr},
                     {"weight_decay", a.weight_decay},
                     {"clip_norm", a.clip},
                     {"seed", a.seed},
                     {"train_tokens", data.train.size()},
                     {"heldout_tokens", r.heldout_tokens},
                     {"heldout_loss_initial", first},
                     {"heldout_loss_final", last},
                     {"curve", curve},
                     {"seconds", r.seconds},
                     {"matmul_macs", r.macs},
                     {"output", a.out.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.out)}});
  } else {
    std::printf("held-out loss %.4f -> %.4f (%+.4f) over %zu tokens; %.1f s, %.3g matrix-product MACs through the %s backend\n",
                first, last, last - first, r.heldout_tokens, r.seconds, static_cast<double>(r.macs), a.backend.c_str());
    if (!a.out.empty()) std::printf("wrote %s\n", a.out.c_str());
  }
}

void setup(CLI::App& root) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = root.add_subcommand(
      "train",
      "Fine-tune a Llama-family model on a text file (one story per line; the first half trains, the second is held out)\n"
      "example: fpgallm train models/stories260K.bin --data models/tinystories-valid-sample.txt --steps 200 --backend accel -o tuned.bin");
  cmd->add_option("model", a->model, "Checkpoint: llama2.c .bin, .gguf or safetensors folder (from fpgallm synth to train from scratch)")->required();
  cmd->add_option("--data", a->data, "Text file, one story per line")->required();
  cmd->add_option("--steps", a->steps, "Optimizer steps (default 200)")->check(cli::kNonNegative);
  cmd->add_option("--batch", a->batch, "Sequences per step (default 8)")->check(CLI::Range(1, 4096));
  cmd->add_option("--seq", a->seq, "Tokens per sequence (default 64)")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--lr", a->lr, "AdamW learning rate (default 1e-5, constant: a fine-tuning rate; use ~1e-3 from synth weights)")->check(cli::kPositive);
  cmd->add_option("--weight-decay", a->weight_decay, "AdamW decoupled weight decay on matrices and embeddings (default 0.1)")->check(cli::kNonNegative);
  cmd->add_option("--clip", a->clip, "Global gradient-norm clip (default 1.0; 0 = off)")->check(cli::kNonNegative);
  cmd->add_option("--beta1", a->beta1, "AdamW beta1 (default 0.9)")->check(cli::between(0.0, 0.999999));
  cmd->add_option("--beta2", a->beta2, "AdamW beta2 (default 0.95)")->check(cli::between(0.0, 0.999999));
  cmd->add_option("--backend", a->backend, "Matrix products: ref (fp32) or accel (int8 matrix unit, int32 accumulation)")
      ->check(CLI::IsMember({"ref", "accel"}));
  cmd->add_option("--eval-every", a->eval_every, "Held-out loss every N steps (default 25)")->check(cli::kPositive);
  cmd->add_option("--heldout-tokens", a->heldout_tokens, "Evaluate on the first N held-out tokens (default 0 = all)");
  cmd->add_option("--seed", a->seed, "Seed of the batch sampler (default 1)");
  cmd->add_option("-z,--tokenizer", a->tokenizer, cli::kTokenizerHelp);
  cmd->add_option("-o,--output", a->out, "Write the trained checkpoint here, in the input's format (llama2.c .bin, .gguf, safetensors folder)");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { run_train(*a); });
}

}  // namespace

FPGALLM_COMMAND("train", setup);
