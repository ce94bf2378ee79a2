#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/perplexity.hpp"
#include "train/qat.hpp"
#include "util/error.hpp"

namespace train {

std::uint64_t Rng::next() {
  std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

TextData split_text(const model::Tokenizer& tok, const std::string& text, int seq, const std::string& source) {
  const auto stories = engine::split_stories(text);
  if (stories.size() < 2) throw fpgallm::InputError(source, "needs at least two stories (one per line) to hold one out");
  const std::size_t n_train = engine::held_out_begin(stories.size());
  TextData d;
  d.train_stories = n_train;
  d.heldout_stories = stories.size() - n_train;
  for (std::size_t i = 0; i < stories.size(); ++i) {
    auto ids = tok.encode(stories[i], true, false);
    auto& dst = i < n_train ? d.train : d.heldout;
    dst.insert(dst.end(), ids.begin(), ids.end());
  }
  const std::size_t need = static_cast<std::size_t>(seq) + 1;
  if (d.train.size() < need || d.heldout.size() < need)
    throw fpgallm::InputError(source, "each half of the stories must hold at least seq + 1 = " + std::to_string(need) +
                                          " tokens (train " + std::to_string(d.train.size()) + ", held-out " +
                                          std::to_string(d.heldout.size()) + ")");
  return d;
}

Batch sample_batch(const std::vector<int>& stream, int batch, int seq, Rng& rng) {
  Batch b{batch, seq, {}};
  b.tokens.reserve(static_cast<std::size_t>(batch) * (seq + 1));
  const std::size_t starts = stream.size() - static_cast<std::size_t>(seq);  // stream.size() >= seq + 1
  for (int s = 0; s < batch; ++s) {
    const std::size_t at = rng.below(starts);
    b.tokens.insert(b.tokens.end(), stream.begin() + static_cast<std::ptrdiff_t>(at),
                    stream.begin() + static_cast<std::ptrdiff_t>(at + seq + 1));
  }
  return b;
}

Batch generate_batch(engine::Transformer& model, int bos, int batch, int seq, Rng& rng) {
  const int V = model.config().vocab_size;
  Batch b{batch, seq, {}};
  b.tokens.reserve(static_cast<std::size_t>(batch) * (seq + 1));
  std::vector<double> p(static_cast<std::size_t>(V));
  for (int s = 0; s < batch; ++s) {
    int token = bos;
    b.tokens.push_back(token);
    for (int pos = 0; pos < seq; ++pos) {
      const float* z = model.forward(token, pos);
      const double mx = *std::max_element(z, z + V);
      double sum = 0;
      for (int j = 0; j < V; ++j) sum += (p[static_cast<std::size_t>(j)] = std::exp(static_cast<double>(z[j]) - mx));
      // Inverse CDF at a uniform draw of 53 bits.
      double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53 * sum;
      token = V - 1;
      for (int j = 0; j < V; ++j)
        if ((u -= p[static_cast<std::size_t>(j)]) < 0) {
          token = j;
          break;
        }
      b.tokens.push_back(token);
    }
  }
  return b;
}

std::vector<Batch> window_batches(const std::vector<int>& stream, int batch, int seq) {
  std::vector<Batch> out;
  Batch cur{0, seq, {}};
  for (std::size_t at = 0; at + seq + 1 <= stream.size(); at += static_cast<std::size_t>(seq)) {
    cur.tokens.insert(cur.tokens.end(), stream.begin() + static_cast<std::ptrdiff_t>(at),
                      stream.begin() + static_cast<std::ptrdiff_t>(at + seq + 1));
    if (++cur.batch == batch) {
      out.push_back(std::move(cur));
      cur = Batch{0, seq, {}};
    }
  }
  if (cur.batch > 0) out.push_back(std::move(cur));
  return out;
}

double heldout_loss(Llama<float>& net, const Params<float>& p, const std::vector<Batch>& windows) {
  RefMatmul<float> mm;
  double sum = 0;
  std::size_t n = 0;
  for (const auto& b : windows) {
    sum += net.loss(p, b, mm) * b.batch;
    n += static_cast<std::size_t>(b.batch);
  }
  return n ? sum / static_cast<double>(n) : 0.0;
}

LrSchedule lr_schedule_from_string(const std::string& s) {
  if (s == "constant") return LrSchedule::constant;
  if (s == "cosine") return LrSchedule::cosine;
  throw std::invalid_argument("unknown learning-rate schedule '" + s + "' (constant or cosine)");
}

const char* to_string(LrSchedule s) { return s == LrSchedule::constant ? "constant" : "cosine"; }

double learning_rate(LrSchedule s, double lr, int step, int steps, int warmup) {
  if (step <= warmup) return lr * step / warmup;
  if (s == LrSchedule::constant || steps <= warmup) return lr;
  const double progress = static_cast<double>(step - warmup) / static_cast<double>(steps - warmup);
  const double floor = lr / 10;
  return floor + 0.5 * (lr - floor) * (1 + std::cos(std::acos(-1.0) * progress));
}

TrainOptions qat_options(const quant::Plan& plan, int steps) {
  TrainOptions o;
  o.steps = steps;
  o.qat = plan;
  o.distill = true;
  o.adamw.lr = 3e-4;
  o.adamw.weight_decay = 0;
  o.schedule = LrSchedule::cosine;
  o.learn_scales = std::any_of(plan.layers.begin(), plan.layers.end(),
                               [](const quant::LayerPlan& lp) { return lp.weight == quant::WeightFormat::int4; });
  return o;
}

TrainResult fine_tune(model::Model& m, const TextData& data, const TrainOptions& o,
                      const std::function<void(const CurvePoint&)>& on_point,
                      const std::function<void(int, int)>& on_step) {
  const auto t0 = std::chrono::steady_clock::now();
  Params<float> p = from_weights<float>(m.weights);
  Params<float> grad = zeros_like(p);
  AdamW<float> opt(p, o.adamw);
  Llama<float> net(m.config), eval_net(m.config), teacher(m.config);
  auto mm = make_matmul(o.backend);
  // QAT: the forward pass (training and held-out) on fake-quantized weights and rounded inputs.
  Params<float> fake, fake_grad;
  if (o.qat) {
    const auto& lp = o.qat->layers.front();
    net.round_linear_inputs = activation_rounding(lp.act);
    eval_net.round_linear_inputs = net.round_linear_inputs;
  }
  if (o.learn_scales && !o.qat) throw std::invalid_argument("learned scales need a quantization plan");
  std::optional<GroupScales> scales;
  if (o.learn_scales) scales = o.scales ? *o.scales : GroupScales::round_to_nearest(p, m.config, *o.qat);
  const auto forward_params = [&]() -> const Params<float>& {
    if (!o.qat) return p;
    fake_quantize_weights(p, m.config, *o.qat, fake, scales ? &*scales : nullptr);
    return fake;
  };
  std::optional<ScaleAdam> scale_opt;
  GroupScales scale_grad;
  if (scales) scale_opt.emplace(*scales, o.adamw.beta1, o.adamw.beta2);
  const Params<float> start = !o.distill ? Params<float>{} : o.teacher ? from_weights<float>(*o.teacher) : p;
  RefMatmul<float> teacher_mm;
  // Held-out windows of the training length, 16 per forward pass whatever the training batch.
  std::vector<int> heldout = data.heldout;
  if (o.heldout_tokens > 0 && heldout.size() > o.heldout_tokens + 1) heldout.resize(o.heldout_tokens + 1);
  const auto windows = window_batches(heldout, 16, o.seq);
  Rng rng(o.seed);

  TrainResult r;
  for (const auto& w : windows) r.heldout_tokens += static_cast<std::size_t>(w.batch) * w.seq;
  CurvePoint first;
  first.heldout_loss = heldout_loss(eval_net, forward_params(), windows);
  {
    // The training loss of one batch, as the steps measure it.
    const Batch b = sample_batch(data.train, o.batch, o.seq, rng);
    RefMatmul<float> ref;
    first.train_loss = eval_net.loss(forward_params(), b, ref);
    if (o.distill) {
      teacher.loss(start, b, teacher_mm);
      first.train_loss = eval_net.kl_divergence(teacher.probs());
    }
  }
  r.curve.push_back(first);
  if (on_point) on_point(first);

  double since_sum = 0;
  int since_n = 0;
  double last_norm = 0;
  std::optional<engine::Transformer> sampler;
  if (o.generated) sampler.emplace(m);  // m keeps the starting weights until the end
  for (int step = 1; step <= o.steps; ++step) {
    const Batch b = o.generated ? generate_batch(*sampler, data.train.front(), o.batch, o.seq, rng)
                                : sample_batch(data.train, o.batch, o.seq, rng);
    const std::vector<float>* targets = nullptr;
    if (o.distill) {
      teacher.loss(start, b, teacher_mm);
      targets = &teacher.probs();
    }
    if (o.qat) {
      since_sum += net.loss_and_grad(forward_params(), b, *mm, fake_grad, targets);
      if (scales) scale_gradient(p, m.config, *o.qat, *scales, fake_grad, scale_grad);
      fold_gradient(fake_grad, grad);
    } else {
      since_sum += net.loss_and_grad(p, b, *mm, grad, targets);
    }
    ++since_n;
    const double lr = learning_rate(o.schedule, o.adamw.lr, step, o.steps, o.warmup);
    opt.set_lr(lr);
    last_norm = opt.step(p, grad);
    if (scales) scale_opt->step(*scales, scale_grad, o.scale_lr * lr / o.adamw.lr);
    if (on_step) on_step(step, o.steps);
    if (step % o.eval_every == 0 || step == o.steps) {
      CurvePoint pt{step, since_sum / since_n, heldout_loss(eval_net, forward_params(), windows), last_norm};
      since_sum = 0, since_n = 0;
      r.curve.push_back(pt);
      if (on_point) on_point(pt);
    }
  }
  to_weights(p, m.weights);
  r.scales = std::move(scales);
  r.macs = mm->macs();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace train
