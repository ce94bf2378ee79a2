#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "util/output.hpp"
#include "calib/calib.hpp"
#include "engine/perplexity.hpp"
#include "model/model.hpp"
#include "model/save.hpp"
#include "quant/quant.hpp"
#include "train/trainer.hpp"
#include "util/error.hpp"

namespace {

struct TrainArgs {
  // lr, weight_decay and schedule: empty/NaN until given; the defaults depend on --qat.
  std::string model, data, tokenizer, out, backend = "ref", schedule, qat, loss, method;
  int steps = 200, batch = 8, seq = 64, eval_every = 25, warmup = 0, group = 0;  // group 0: --qat's default, 32
  std::size_t heldout_tokens = 0;
  double lr = std::nan(""), weight_decay = std::nan(""), clip = 1.0, beta1 = 0.9, beta2 = 0.95, scale_lr = std::nan("");
  std::uint64_t seed = 1;
  bool json = false, generated = false, search_scales = false, fixed_scales = false;
};

// In the input's format (llama2.c .bin, GGUF, or a safetensors folder), fp32 tensors; the
// tokenizer goes along where the format holds one.
void write_checkpoint(const model::Model& m, const model::Tokenizer& tok, const std::string& path) {
  model::save(m, path, m.source_format, "f32", &tok);
}

// Fine-tuning: a small constant rate with weight decay; QAT: train::qat_options'.
TrainArgs with_defaults(TrainArgs a) {
  const bool qat = !a.qat.empty();
  const train::TrainOptions q = train::qat_options({}, 0);
  if (std::isnan(a.lr)) a.lr = qat ? q.adamw.lr : 1e-5;
  if (std::isnan(a.weight_decay)) a.weight_decay = qat ? q.adamw.weight_decay : 0.1;
  if (a.schedule.empty()) a.schedule = train::to_string(qat ? q.schedule : train::LrSchedule::constant);
  if (std::isnan(a.scale_lr)) a.scale_lr = q.scale_lr;
  return a;
}

void run_train(const TrainArgs& given) {
  const TrainArgs a = with_defaults(given);
  // The checkpoint goes in the input's format: a folder for a safetensors folder.
  struct stat st {};
  const bool folder = ::stat(a.model.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (!a.out.empty())
    fpgallm::check_output(a.out, folder && a.qat.empty() ? fpgallm::OutputKind::folder : fpgallm::OutputKind::file,
                          {a.model, a.data, a.tokenizer});
  model::Model m = model::load(a.model);
  if (!m.has_weights()) throw fpgallm::InputError(a.model, "has no weights (a preset cannot be trained; use fpgallm synth)");
  if (!m.config.llama_family()) throw fpgallm::InputError(a.model, "training supports llama, qwen2 and qwen3 models only");
  if (!m.weights.rope_freq_factors.empty()) throw fpgallm::InputError(a.model, "training does not support RoPE scaling yet");
  if (a.seq > m.config.seq_len)
    throw fpgallm::InputError("--seq", fmt::format("{} is longer than the model's context {}", a.seq, m.config.seq_len));
  const model::Tokenizer tok = model::tokenizer_for(m, a.tokenizer);
  const std::string text = engine::read_text_file(a.data);
  const train::TextData data = train::split_text(tok, text, a.seq, a.data);

  train::TrainOptions o;
  o.steps = a.steps, o.batch = a.batch, o.seq = a.seq, o.eval_every = a.eval_every, o.seed = a.seed;
  o.heldout_tokens = a.heldout_tokens;
  o.backend = train::backend_from_string(a.backend);
  o.adamw.lr = a.lr, o.adamw.weight_decay = a.weight_decay, o.adamw.clip_norm = a.clip;
  o.adamw.beta1 = a.beta1, o.adamw.beta2 = a.beta2;
  o.schedule = train::lr_schedule_from_string(a.schedule);
  o.warmup = a.warmup;
  if (a.warmup > a.steps)
    throw fpgallm::InputError("--warmup", fmt::format("{} steps is more than --steps {}", a.warmup, a.steps));
  if (a.qat.empty() && a.group != 0) throw fpgallm::InputError("--group", "is --qat's int4 group size: use it with --qat");
  const int group = a.group != 0 ? a.group : 32;
  if (!a.qat.empty()) {
    const quant::Scheme scheme = quant::scheme_from_string(a.qat);
    if (o.backend != train::Backend::ref)
      throw fpgallm::InputError("--backend", "--qat runs its products in fp32 on the rounded values: use --backend ref");
    o.qat = quant::uniform_plan(m.config, scheme, group);
  }
  const bool int4 = a.qat == "w4a8" || a.qat == "w4a16";
  for (const auto& [given, name] : {std::pair{!a.method.empty(), "--method"}, std::pair{a.search_scales, "--search-scales"},
                                    std::pair{a.fixed_scales, "--fixed-scales"},
                                    std::pair{!std::isnan(given.scale_lr), "--scale-lr"}})
    if (given && !int4) throw fpgallm::InputError(name, "applies to --qat w4a8 or w4a16 (int4 group scales)");
  if (!std::isnan(given.scale_lr) && a.fixed_scales)
    throw fpgallm::InputError("--scale-lr", "is the rate of the learned scales: not with --fixed-scales");
  const quant::Method start_method = a.method.empty() ? quant::Method::rtn : quant::method_from_string(a.method);
  if (start_method == quant::Method::rtn && a.search_scales && a.fixed_scales)
    throw fpgallm::InputError("--search-scales", "keeps the weights and only picks scales: not with --fixed-scales and --method rtn");
  o.scale_lr = a.scale_lr;
  o.generated = a.generated;
  if (a.generated && a.loss == "text")
    throw fpgallm::InputError("--generated", "the model's own samples have no text to predict: use it with --loss distill");
  o.distill = a.generated || (a.loss.empty() ? (a.qat.empty() ? "text" : "distill") : a.loss) == "distill";
  // The starting model (the quantized file's fp32 reference) and the halves it is scored on,
  // checked before the training.
  const std::optional<model::Model> original = o.qat ? std::optional(m) : std::nullopt;
  const std::optional<calib::Split> split = o.qat ? std::optional(calib::split_text(tok, text, a.data)) : std::nullopt;
  // QAT from another method's result: its dequantized weights (classifier untied, as the file
  // stores it) are the master weights where the method changes them (awq, gptq), its scales
  // the first learned ones; the fp32 model stays the distillation target.
  std::optional<calib::QuantizeResult> start;
  if (o.qat && (start_method != quant::Method::rtn || a.search_scales)) {
    calib::QuantizeOptions qo;
    qo.scheme = o.qat->scheme, qo.group = group, qo.method = start_method, qo.search_scales = a.search_scales;
    cli::Progress quantizing("train: quantize the start", a.json);
    start = calib::quantize(m, tok, text, a.data, qo, [&](const std::string&, std::size_t done, std::size_t total) {
      quantizing.update(done, total);
    });
    quantizing.finish();
    if (start_method != quant::Method::rtn) {  // awq folds, gptq moves the weights; rtn only picks scales
      o.teacher = m.weights;
      const model::Model dq = start->qm.dequantized_model();
      m.config = dq.config;
      m.weights = dq.weights;
    }
  }
  o.learn_scales = o.qat && train::qat_options(*o.qat, a.steps).learn_scales && !a.fixed_scales;
  if (o.learn_scales && start) o.scales = train::GroupScales::of(*o.qat, start->qm.linears);

  if (!a.json) {
    std::printf("training %s on %s: %zu train stories (%zu tokens), %zu held-out stories (%zu tokens)\n", a.model.c_str(),
                a.data.c_str(), data.train_stories, data.train.size(), data.heldout_stories, data.heldout.size());
    std::printf("backend %s, %d steps of batch %d x seq %d, AdamW lr %g (%s, %d warm-up) betas (%g, %g) weight decay %g, clip %g, seed %llu\n",
                a.backend.c_str(), a.steps, a.batch, a.seq, a.lr, a.schedule.c_str(), a.warmup, a.beta1, a.beta2,
                a.weight_decay, a.clip, static_cast<unsigned long long>(a.seed));
    std::printf("loss: %s, on %s\n", o.distill ? "KL divergence against the starting model's fp32 probabilities" : "cross-entropy",
                o.generated ? "sequences the starting model samples" : "windows of the training half");
    if (o.qat)
      std::printf("quantization-aware: forward on %s weights (group %d) and activations; losses are the quantized model's\n",
                  a.qat.c_str(), group);
    if (start)
      std::printf("starting from %s%s: held-out perplexity %.4f (%+.2f%%)\n", quant::to_string(start_method),
                  a.search_scales ? " --search-scales" : "", start->perplexity, 100 * start->rel_increase);
    if (o.learn_scales) std::printf("learned group scales (LSQ), Adam on log scales at peak rate %g\n", a.scale_lr);
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
  nlohmann::json exported;
  if (o.qat) {
    // The trained master weights quantized by the plan the forward pass trained on, scored
    // as quantize scores: on the held-out half of the same text against the starting fp32.
    quant::QuantModel qm = r.scales ? train::export_quantized(m, *o.qat, *r.scales) : quant::quantize_model(m, *o.qat);
    qm.calibration_file = a.data;
    qm.calibration_fnv1a = quant::fnv1a64(text);
    if (!a.out.empty()) {
      const bool bpe = m.bpe_tokenizer && a.tokenizer.empty();
      quant::save_gguf(qm, a.out, bpe ? nullptr : &tok, bpe ? m.bpe_tokenizer.get() : nullptr);
    }
    engine::Transformer reference(*original);
    const engine::Perplexity fp = engine::perplexity(reference, split->held_out);
    const engine::Perplexity qp = calib::evaluate(qm, split->held_out);
    exported = {{"scheme", a.qat},
                {"group", group},
                {"start_method", quant::to_string(start_method)},
                {"search_scales", a.search_scales},
                {"learn_scales", o.learn_scales},
                {"start_perplexity", start ? nlohmann::json(start->perplexity) : nlohmann::json(nullptr)},
                {"held_out_tokens", qp.tokens},
                {"fp32_perplexity", fp.perplexity},
                {"fp32_perplexity_err", fp.perplexity_err},
                {"perplexity", qp.perplexity},
                {"perplexity_err", qp.perplexity_err},
                {"rel_increase", qp.perplexity / fp.perplexity - 1},
                {"linear_weight_bytes", qm.linear_weight_bytes()}};
  } else if (!a.out.empty()) {
    write_checkpoint(m, tok, a.out);
  }

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
                     {"lr_schedule", a.schedule},
                     {"warmup", a.warmup},
                     {"loss", o.distill ? "distill" : "text"},
                     {"generated", o.generated},
                     {"qat", exported.is_null() ? nlohmann::json(nullptr) : exported},
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
    if (!exported.is_null())
      std::printf("%s g%d: held-out perplexity %.4f +/- %.4f, fp32 %.4f +/- %.4f (%+.2f%%) over %zu tokens, %llu linear weight bytes\n",
                  a.qat.c_str(), group, exported["perplexity"].get<double>(), exported["perplexity_err"].get<double>(),
                  exported["fp32_perplexity"].get<double>(), exported["fp32_perplexity_err"].get<double>(),
                  100 * exported["rel_increase"].get<double>(), exported["held_out_tokens"].get<std::size_t>(),
                  static_cast<unsigned long long>(exported["linear_weight_bytes"].get<std::uint64_t>()));
    if (!a.out.empty()) std::printf("wrote %s%s\n", a.out.c_str(), o.qat ? " (quantized GGUF, as fpgallm quantize writes)" : "");
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
  cmd->add_option("--lr", a->lr, "AdamW (peak) learning rate (default 1e-5, a fine-tuning rate; 3e-4 with --qat; use ~1e-3 from synth weights)")->check(cli::kPositive);
  cmd->add_option("--weight-decay", a->weight_decay, "AdamW decoupled weight decay on matrices and embeddings (default 0.1; 0 with --qat)")->check(cli::kNonNegative);
  cmd->add_option("--clip", a->clip, "Global gradient-norm clip (default 1.0; 0 = off)")->check(cli::kNonNegative);
  cmd->add_option("--beta1", a->beta1, "AdamW beta1 (default 0.9)")->check(cli::between(0.0, 0.999999));
  cmd->add_option("--beta2", a->beta2, "AdamW beta2 (default 0.95)")->check(cli::between(0.0, 0.999999));
  cmd->add_option("--backend", a->backend, "Matrix products: ref (fp32) or accel (int8 matrix unit, int32 accumulation)")
      ->check(CLI::IsMember({"ref", "accel"}));
  cmd->add_option("--eval-every", a->eval_every, "Held-out loss every N steps (default 25)")->check(cli::kPositive);
  cmd->add_option("--heldout-tokens", a->heldout_tokens, "Evaluate on the first N held-out tokens (default 0 = all)");
  cmd->add_option("--seed", a->seed, "Seed of the batch sampler (default 1)");
  cmd->add_option("-z,--tokenizer", a->tokenizer, cli::kTokenizerHelp);
  cmd->add_option("--lr-schedule", a->schedule, "constant, or cosine from --lr down to --lr / 10 (default constant; cosine with --qat)")
      ->check(CLI::IsMember({"constant", "cosine"}));
  cmd->add_option("--warmup", a->warmup, "Steps of linear learning-rate warm-up (default 0)")->check(cli::kNonNegative);
  cmd->add_option("--qat", a->qat,
                  "Quantization-aware training for this scheme (w8a8, w4a8, w4a16): forward on the fake-quantized model, "
                  "straight-through gradients; -o writes the quantized GGUF")
      ->check(CLI::IsMember({"w8a8", "w4a8", "w4a16"}));
  cmd->add_option("--group", a->group, "int4 group size of --qat (default 32)")->check(CLI::IsMember({32, 64, 128}));
  cmd->add_option("--loss", a->loss, "text (cross-entropy) or distill (KL against the starting fp32 model; the default with --qat)")
      ->check(CLI::IsMember({"text", "distill"}));
  cmd->add_flag("--generated", a->generated,
               "Train on sequences the starting model samples (temperature 1, from BOS; data-free distillation as in "
               "LLM-QAT) instead of the text's training half, which then only gives the held-out loss");
  cmd->add_option("-o,--output", a->out,
                  "Write the trained checkpoint here, in the input's format (llama2.c .bin, .gguf, safetensors folder); with --qat, "
                  "the quantized GGUF");
  cmd->add_option("--method", a->method,
                  "--qat w4a8/w4a16: start from the weights and scales `quantize --method` chooses (rtn, awq, gptq, awq+gptq; "
                  "default rtn); the fp32 model stays the distillation target");
  cmd->add_flag("--search-scales", a->search_scales, "--qat w4a8/w4a16: start from searched group scales, as quantize --search-scales");
  cmd->add_flag("--fixed-scales", a->fixed_scales,
                "--qat w4a8/w4a16: int4 group scales max |w| / 7 at every step, instead of learned with the weights "
                "(LSQ) and exported");
  cmd->add_option("--scale-lr", a->scale_lr, "Adam peak rate of the learned int4 group scales, on log scales (default 1e-3)")->check(cli::kPositive);
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { run_train(*a); });
}

}  // namespace

FPGALLM_COMMAND("train", setup);
