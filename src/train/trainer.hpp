#pragma once
// Fine-tuning (or training from synth weights) on a text file: stories split in two halves
// (train on the first, held-out loss on the second), random windows of the training
// stream, AdamW on fp32 master weights, the chosen matrix-product backend.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/transformer.hpp"
#include "model/model.hpp"
#include "quant/quant.hpp"
#include "train/llama.hpp"
#include "train/matmul.hpp"
#include "train/optimizer.hpp"
#include "train/qat.hpp"

namespace train {

struct TextData {
  std::vector<int> train;     // BOS-prefixed stories of the first half, concatenated
  std::vector<int> heldout;   // the same for the second half
  std::size_t train_stories = 0, heldout_stories = 0;
};

// One story per non-empty line; the first ceil(n/2) stories train, the rest are held out.
// Throws fpgallm::InputError(source, ...) when either half is too short for one window
// of seq + 1 tokens.
TextData split_text(const model::Tokenizer& tok, const std::string& text, int seq, const std::string& source);

// Deterministic generator (splitmix64) so that runs repeat across compilers.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next();
  std::uint64_t below(std::uint64_t n) { return next() % n; }

 private:
  std::uint64_t s_;
};

// `batch` windows of seq + 1 consecutive tokens at random offsets of `stream`.
Batch sample_batch(const std::vector<int>& stream, int batch, int seq, Rng& rng);
// `batch` sequences of seq + 1 tokens that `model` samples (softmax at temperature 1, from
// BOS at position 0): training data drawn from the model itself (data-free distillation,
// Liu et al., "LLM-QAT", 2023).
Batch generate_batch(engine::Transformer& model, int bos, int batch, int seq, Rng& rng);
// Consecutive non-overlapping windows of seq + 1 tokens (stride seq) covering `stream`,
// grouped `batch` at a time (the last group may be smaller); a tail shorter than a window
// is dropped.
std::vector<Batch> window_batches(const std::vector<int>& stream, int batch, int seq);

enum class LrSchedule { constant, cosine };
LrSchedule lr_schedule_from_string(const std::string& s);  // "constant" | "cosine"; throws std::invalid_argument
const char* to_string(LrSchedule s);
// The learning rate of step (1-based) of `steps`: linear warm-up from lr / warmup over the
// first `warmup` steps, then constant, or a cosine from lr down to lr / 10 at the last step
// (llama2.c's train.py schedule).
double learning_rate(LrSchedule s, double lr, int step, int steps, int warmup);

struct TrainOptions {
  int steps = 200;
  int batch = 8;
  int seq = 64;
  Backend backend = Backend::ref;
  std::uint64_t seed = 1;
  int eval_every = 25;   // held-out loss every this many steps (and at 0 and the end)
  std::size_t heldout_tokens = 0;  // evaluate on the first this many held-out tokens (0 = all)
  AdamWOptions adamw;    // adamw.lr is the peak rate of the schedule
  LrSchedule schedule = LrSchedule::constant;
  int warmup = 0;
  // Quantization-aware training (train/qat.hpp) under this plan: the held-out loss is then
  // the quantized model's. Products in fp32 on the rounded values (backend ref).
  std::optional<quant::Plan> qat;
  // The loss: KL divergence against the starting model's fp32 probabilities on the same
  // batch (distillation) instead of cross-entropy against the text.
  bool distill = false;
  // Training batches sampled from the starting model (generate_batch) instead of windows of
  // the text's training half; the held-out loss stays on the text.
  bool generated = false;
  // QAT with learned int4 group scales (LSQ, train/qat.hpp), starting from `scales` when
  // given, else from round to nearest's (max |w| / 7); their Adam runs at scale_lr (on log
  // scales) on the same schedule as the weights.
  bool learn_scales = false;
  std::optional<GroupScales> scales;
  double scale_lr = 1e-3;
  // The distillation target; the starting weights when not given (QAT from another
  // method's weights distills from the fp32 model these were made from).
  std::optional<model::Weights> teacher;
};

// QAT under `plan` for `steps` steps with the schedule `fpgallm train --qat` defaults to:
// distillation, AdamW peak rate 3e-4 on a cosine, no weight decay (docs/training.md;
// decay would pull the master weights away from the model being matched), and learned
// int4 group scales when the plan has int4 layers (docs/quantization.md 11.1).
TrainOptions qat_options(const quant::Plan& plan, int steps);

struct CurvePoint {
  int step = 0;                 // optimizer steps taken
  double train_loss = 0;        // mean batch loss over the steps since the previous point
  double heldout_loss = 0;      // fp32 reference forward on the held-out windows
  double grad_norm = 0;         // last gradient norm before clipping
};

struct TrainResult {
  std::vector<CurvePoint> curve;
  double seconds = 0;
  std::uint64_t macs = 0;       // multiply-accumulates through the training backend
  std::size_t heldout_tokens = 0;
  std::optional<GroupScales> scales;  // the learned scales (o.learn_scales)
};

// Trains m.weights in place.
TrainResult fine_tune(model::Model& m, const TextData& data, const TrainOptions& o,
                      const std::function<void(const CurvePoint&)>& on_point = {},
                      const std::function<void(int step, int steps)>& on_step = {});

// Mean next-token loss of params on the windows (fp32 reference products).
double heldout_loss(Llama<float>& net, const Params<float>& p, const std::vector<Batch>& windows);

}  // namespace train
