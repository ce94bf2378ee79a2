// Quantization-aware training against independent references: the quantization module's
// own quantize_model for the fake-quantized weights, the quantized reference engine
// (calib::SimulatedTransformer) for the rounded forward pass, central finite differences
// in double precision for the distillation gradient, and hand-computed learning rates.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "calib/calib.hpp"
#include "calib/simulated.hpp"
#include "engine/accel.hpp"
#include "engine/perplexity.hpp"
#include "model/gguf.hpp"
#include "model/model.hpp"
#include "quant/quant.hpp"
#include "accel/accel_testing.hpp"
#include "testing.hpp"
#include "train/llama.hpp"
#include "train/qat.hpp"
#include "train/trainer.hpp"

namespace {

const model::Model& stories() {
  static const model::Model m = model::load(testing_support::stories260k());
  return m;
}

std::vector<const std::vector<float>*> linears_of(const train::Params<float>& p) {
  std::vector<const std::vector<float>*> out;
  for (const auto& l : p.layers)
    for (const auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3}) out.push_back(w);
  out.push_back(&p.classifier);
  return out;
}

TEST(QatWeights, FakeQuantizedWeightsAreTheExportedOnesBitForBit) {
  const auto& m = stories();
  const auto master = train::from_weights<float>(m.weights);
  for (auto [scheme, group] : {std::pair{quant::Scheme::w4a8, 32}, {quant::Scheme::w4a16, 64}, {quant::Scheme::w8a8, 32}}) {
    const quant::Plan plan = quant::uniform_plan(m.config, scheme, group);
    train::Params<float> fake;
    train::fake_quantize_weights(master, m.config, plan, fake);
    const quant::QuantModel qm = quant::quantize_model(m, plan);
    // Plan::layers order: 7 per block in kBlockLinears order (wq wk wv wo w1 w2 w3), then the classifier.
    const auto mine = linears_of(fake);
    ASSERT_EQ(mine.size(), qm.linears.size());
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const auto want = qm.linears[i].dequantized();
      ASSERT_EQ(mine[i]->size(), want.size()) << i;
      EXPECT_EQ(std::memcmp(mine[i]->data(), want.data(), want.size() * sizeof(float)), 0)
          << quant::to_string(scheme) << " linear " << i;
    }
    EXPECT_EQ(fake.token_embedding, master.token_embedding);
    EXPECT_EQ(fake.layers[1].ffn_norm, master.layers[1].ffn_norm);
  }
}

TEST(QatWeights, SharedClassifierGradientReachesTheEmbedding) {
  train::Params<float> fake_grad, grad;
  fake_grad.token_embedding = {1, 2, 3, 4};
  fake_grad.classifier = {10, 20, 30, 40};
  fake_grad.final_norm = {5};
  grad.token_embedding.resize(4);
  grad.final_norm.resize(1);
  train::fold_gradient(fake_grad, grad);
  EXPECT_EQ(grad.token_embedding, (std::vector<float>{11, 22, 33, 44}));
  EXPECT_TRUE(grad.classifier.empty());
  grad.classifier.resize(4);
  train::fold_gradient(fake_grad, grad);
  EXPECT_EQ(grad.token_embedding, fake_grad.token_embedding);
  EXPECT_EQ(grad.classifier, fake_grad.classifier);
}

// Learned scales (LSQ): the forward pass's weights are, bit for bit, the exported file's,
// for RTN's scales (then also quantize_model's) and for scales moved off max |w| / 7.
TEST(QatScales, ForwardWeightsAreTheExportedOnesBitForBit) {
  const auto& m = stories();
  const auto master = train::from_weights<float>(m.weights);
  const quant::Plan plan = quant::uniform_plan(m.config, quant::Scheme::w4a8, 32);
  train::GroupScales scales = train::GroupScales::round_to_nearest(master, m.config, plan);
  train::Params<float> fake, rtn;
  train::fake_quantize_weights(master, m.config, plan, fake, &scales);
  train::fake_quantize_weights(master, m.config, plan, rtn);
  const auto a = linears_of(fake), b = linears_of(rtn);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(*a[i], *b[i]) << "linear " << i;
  // Every third group's scale 0.7x (codes saturate), every fifth 1.3x (no code reaches 7).
  std::size_t n = 0;
  for (auto& t : scales.log_scale)
    for (float& v : t) {
      if (n % 3 == 0) v += std::log(0.7f);
      else if (n % 5 == 0) v += std::log(1.3f);
      ++n;
    }
  train::fake_quantize_weights(master, m.config, plan, fake, &scales);
  const quant::QuantModel qm = train::export_quantized(m, plan, scales);
  const std::string path = testing_support::scratch_dir("qat_scales") + "/lsq.gguf";
  quant::save_gguf(qm, path);
  const quant::QuantModel back = quant::load_gguf(path);
  const auto mine = linears_of(fake);
  int moved = 0;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const auto want = back.linears[i].dequantized();
    ASSERT_EQ(mine[i]->size(), want.size()) << i;
    EXPECT_EQ(std::memcmp(mine[i]->data(), want.data(), want.size() * sizeof(float)), 0) << "linear " << i;
    EXPECT_EQ(back.linears[i].int4.scale, scales.fp16_bits(i)) << "linear " << i;
    moved += *mine[i] != *b[i];
  }
  EXPECT_EQ(moved, static_cast<int>(mine.size()));
}

// LSQ's gradient of the log scales against what it must do on loss ||q s - w||^2: with
// every scale twice max |w| / 7 (coarse steps, nothing saturates) each group's gradient is
// positive ((2/s) sum (q s - w)^2); with a third of it, negative (each group's largest
// weight saturates, and pulls harder than the rounding errors inside); the weights whose
// code saturates (|w| > 7.5 s) get no gradient, and the others keep theirs.
TEST(QatScales, GradientShrinksCoarseScalesAndGrowsSaturatedOnes) {
  const auto& m = stories();
  const auto master = train::from_weights<float>(m.weights);
  const quant::Plan plan = quant::uniform_plan(m.config, quant::Scheme::w4a8, 32);
  for (const double factor : {2.0, 1.0 / 3.0}) {
    train::GroupScales scales = train::GroupScales::round_to_nearest(master, m.config, plan);
    for (auto& t : scales.log_scale)
      for (float& v : t) v += static_cast<float>(std::log(factor));
    train::Params<float> fake;
    train::fake_quantize_weights(master, m.config, plan, fake, &scales);
    train::Params<float> grad = fake;
    std::vector<std::vector<float>*> g;
    for (auto& l : grad.layers)
      for (auto* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3}) g.push_back(t);
    g.push_back(&grad.classifier);
    train::Params<float> shared = master;
    shared.classifier = master.token_embedding;  // stories260K shares its classifier
    const auto w = linears_of(shared), fq = linears_of(fake);
    std::vector<std::vector<bool>> saturates(g.size());
    std::size_t n_saturated = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const auto shape = model::linear_shape(m.config, plan.layers[i].which);
      const auto bits = scales.fp16_bits(i);
      for (std::size_t j = 0; j < g[i]->size(); ++j) {
        (*g[i])[j] = 2 * ((*fq[i])[j] - (*w[i])[j]);  // d/d(q s) of (q s - w)^2
        const std::size_t group = j / static_cast<std::size_t>(shape.cols) * static_cast<std::size_t>((shape.cols + 31) / 32) +
                                  j % static_cast<std::size_t>(shape.cols) / 32;
        const double s = model::gguf::fp16_to_float(bits[group]);
        saturates[i].push_back(std::fabs(static_cast<double>((*w[i])[j])) > 7.5 * s);
        n_saturated += saturates[i].back();
      }
    }
    const train::Params<float> before = grad;
    train::GroupScales sg;
    train::scale_gradient(master, m.config, plan, scales, grad, sg);
    std::size_t positive = 0, negative = 0, groups = 0, wrong = 0;
    for (const auto& t : sg.log_scale)
      for (const float v : t) positive += v > 0, negative += v < 0, ++groups;
    const auto gb = linears_of(before);
    for (std::size_t i = 0; i < g.size(); ++i)
      for (std::size_t j = 0; j < g[i]->size(); ++j)
        wrong += saturates[i][j] ? (*g[i])[j] != 0.0f : (*g[i])[j] != (*gb[i])[j];
    std::printf("scales x%.3g: %zu of %zu group gradients positive, %zu negative; %zu weights saturate\n", factor,
                positive, groups, negative, n_saturated);
    EXPECT_EQ(factor > 1 ? positive : negative, groups);
    EXPECT_EQ(wrong, 0u);
    if (factor > 1) EXPECT_EQ(n_saturated, 0u);
    else EXPECT_GE(n_saturated, groups);
  }
}

TEST(QatActivations, Int8RoundingIsTheQuantizersCodesTimesScale) {
  std::vector<float> x = {0.5f, -1.25f, 3.0f, 0.0f, 2.0f, -0.003f, 7.5f, 1e-3f};
  const auto round = train::activation_rounding(quant::ActFormat::int8_dynamic);
  std::vector<float> got = x;
  round(got.data(), 2, 4);
  for (int r = 0; r < 2; ++r) {
    std::vector<std::int8_t> q(4);
    const float s = quant::quantize_activation_dynamic({x.data() + r * 4, 4}, q);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(got[static_cast<std::size_t>(r * 4 + j)], static_cast<float>(q[static_cast<std::size_t>(j)]) * s);
  }
  EXPECT_FALSE(train::activation_rounding(quant::ActFormat::f32));
  EXPECT_THROW(train::activation_rounding(quant::ActFormat::int8_static), std::invalid_argument);
  std::vector<float> h = {1.0f / 3.0f, 65504.0f, 1e-8f};
  train::activation_rounding(quant::ActFormat::f16)(h.data(), 1, 3);
  EXPECT_EQ(h[0], 0.333251953125f);  // the nearest fp16: 0x3555
  EXPECT_EQ(h[1], 65504.0f);
  EXPECT_EQ(h[2], 0.0f);  // below half the smallest fp16 subnormal (2^-25)
}


TEST(QatForward, FollowsTheQuantizedReferenceEngine) {
  // The training forward on fake-quantized weights and rounded inputs computes what the
  // quantized reference runs, with fp32 sums in another order.
  const auto& m = stories();
  const int V = m.config.vocab_size;
  const std::vector<int> tokens = {1, 403, 407, 261, 378, 292, 261, 299, 3, 312, 331, 278, 265, 407, 304, 400, 300};
  for (auto scheme : {quant::Scheme::w4a8, quant::Scheme::w4a16, quant::Scheme::w8a8}) {
    const quant::Plan plan = quant::uniform_plan(m.config, scheme, 32);
    const quant::QuantModel qm = quant::quantize_model(m, plan);
    calib::SimulatedTransformer sim(m, qm.plan, qm.linears);
    engine::Transformer fp32(m);
    train::Llama<float> net(m.config);
    net.round_linear_inputs = train::activation_rounding(plan.layers.front().act);
    train::Params<float> fake;
    train::fake_quantize_weights(train::from_weights<float>(m.weights), m.config, plan, fake);
    train::Batch b{1, static_cast<int>(tokens.size()) - 1, tokens};
    train::RefMatmul<float> mm;
    net.loss(fake, b, mm);
    double worst_qat = 0, worst_fp32 = 0;
    std::vector<double> errs;
    for (int pos = 0; pos < b.seq; ++pos) {
      const float* mine = &net.logits()[static_cast<std::size_t>(pos) * V];
      const float* want = sim.forward(tokens[static_cast<std::size_t>(pos)], pos);
      std::vector<float> want_copy(want, want + V);
      const float* plain = fp32.forward(tokens[static_cast<std::size_t>(pos)], pos);
      errs.push_back(rel_err(mine, want_copy.data(), V));
      worst_qat = std::max(worst_qat, errs.back());
      worst_fp32 = std::max(worst_fp32, rel_err(plain, want_copy.data(), V));
    }
    std::nth_element(errs.begin(), errs.begin() + static_cast<std::ptrdiff_t>(errs.size() / 2), errs.end());
    const double median = errs[errs.size() / 2];
    std::printf("%s: training forward vs quantized reference: median %.3g, worst %.3g; fp32 vs quantized reference %.3g\n",
                quant::to_string(scheme), median, worst_qat, worst_fp32);
    // Most positions agree to fp32 rounding (int8) or one fp16 rounding step (2^-11). An
    // input within an ulp of a rounding boundary takes the neighbouring code in one of the
    // two sums (as between vector-lane counts, Accel.LaneCountChangesLogitsOnlyWithinTheBound)
    // and moves the later logits by up to a few percent: still a tenth of fp32's distance.
    EXPECT_LT(median, 1e-3) << quant::to_string(scheme);
    EXPECT_LT(worst_qat * 10, worst_fp32) << quant::to_string(scheme);
  }
}

TEST(QatDistillation, KlGradientAgreesWithFiniteDifferences) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto& m = stories();
  train::Rng rng(3);
  train::Batch b{1, 6, {}};
  for (int i = 0; i < 7; ++i) b.tokens.push_back(static_cast<int>(rng.below(static_cast<std::uint64_t>(m.config.vocab_size))));
  train::RefMatmul<double> mm;
  // The teacher: the model with its first block's wq scaled, so that the targets differ.
  auto teacher_p = train::from_weights<double>(m.weights);
  for (auto& v : teacher_p.layers[0].wq) v *= 1.5;
  train::Llama<double> teacher(m.config), net(m.config);
  teacher.loss(teacher_p, b, mm);
  const std::vector<double> targets = teacher.probs();
  auto p = train::from_weights<double>(m.weights);
  train::Params<double> g;
  const double kl = net.loss_and_grad(p, b, mm, g, &targets);
  EXPECT_GT(kl, 0);
  const auto kl_of = [&] {
    net.loss(p, b, mm);
    return net.kl_divergence(targets);
  };
  EXPECT_NEAR(kl_of(), kl, 1e-12);
  const double h = 1e-5;
  double worst = 0;
  auto pt = p.tensors();
  auto gt = g.tensors();
  for (std::size_t i = 0; i < pt.size(); ++i) {
    auto& w = *pt[i].data;
    const auto& gv = *gt[i].data;
    const std::size_t j = static_cast<std::size_t>(std::max_element(gv.begin(), gv.end(), [](double x, double y) {
                                                     return std::abs(x) < std::abs(y);
                                                   }) - gv.begin());
    const double saved = w[j];
    w[j] = saved + h;
    const double up = kl_of();
    w[j] = saved - h;
    const double down = kl_of();
    w[j] = saved;
    const double numeric = (up - down) / (2 * h);
    const double err = std::abs(gv[j] - numeric) / std::max({std::abs(gv[j]), std::abs(numeric), 1e-5});
    worst = std::max(worst, err);
    EXPECT_LE(err, 1e-4) << pt[i].name << "[" << j << "] analytic " << gv[j] << " numeric " << numeric;
  }
  omp_set_num_threads(threads);
  std::printf("KL gradient check: %zu tensors, worst relative error %.3g\n", pt.size(), worst);
}

TEST(LearningRate, WarmUpThenCosineToATenth) {
  using train::LrSchedule;
  EXPECT_DOUBLE_EQ(train::learning_rate(LrSchedule::constant, 1e-3, 7, 100, 0), 1e-3);
  EXPECT_DOUBLE_EQ(train::learning_rate(LrSchedule::constant, 1e-3, 5, 100, 10), 5e-4);
  EXPECT_DOUBLE_EQ(train::learning_rate(LrSchedule::cosine, 1e-3, 10, 110, 10), 1e-3);
  EXPECT_DOUBLE_EQ(train::learning_rate(LrSchedule::cosine, 1e-3, 60, 110, 10), 1e-4 + 0.5 * 9e-4);
  EXPECT_DOUBLE_EQ(train::learning_rate(LrSchedule::cosine, 1e-3, 110, 110, 10), 1e-4);
  EXPECT_NEAR(train::learning_rate(LrSchedule::cosine, 2.0, 1, 1, 0), 0.2, 1e-15);
}

struct Tuned {
  model::Model model;
  quant::Plan plan;
  calib::Split split;
};

// 24 distillation steps of w4a8 g32 QAT on the sample's training half.
const Tuned& qat_tuned() {
  static const Tuned t = [] {
    const auto& m = stories();
    const model::Tokenizer tok = model::load_tokenizer(testing_support::tok512());
    const std::string text = engine::read_text_file(testing_support::sample_text());
    const train::TextData data = train::split_text(tok, text, 32, "sample");
    train::TrainOptions o;
    o.steps = 24, o.batch = 8, o.seq = 32, o.eval_every = 24, o.heldout_tokens = 512;
    o.adamw.lr = 1e-3, o.adamw.weight_decay = 0;
    o.schedule = train::LrSchedule::cosine;
    o.qat = quant::uniform_plan(m.config, quant::Scheme::w4a8, 32);
    o.distill = true;
    Tuned out{m, *o.qat, calib::split_text(tok, text, "sample")};
    const auto r = train::fine_tune(out.model, data, o);
    EXPECT_LT(r.curve.back().heldout_loss, r.curve.front().heldout_loss);
    return out;
  }();
  return t;
}

TEST(QatTraining, FewStepsLowerTheExportedModelsHeldOutPerplexity) {
  // The exported model's perplexity on the held-out half (the split quantize and deploy
  // score) is lower than round-to-nearest's of the starting model.
  const Tuned& t = qat_tuned();
  const auto rtn = calib::evaluate(quant::quantize_model(stories(), t.plan), t.split.held_out);
  const auto qat = calib::evaluate(quant::quantize_model(t.model, t.plan), t.split.held_out);
  std::printf("w4a8 g32 held-out perplexity: RTN %.4f, after 24 QAT steps %.4f (%zu tokens)\n", rtn.perplexity,
              qat.perplexity, qat.tokens);
  EXPECT_LT(qat.perplexity, rtn.perplexity);
}

TEST(QatTraining, ExportedModelRunsOnTheAcceleratorAsTheReferenceEngineDoes) {
  // Issue 30 must-show 5. The accelerator's greedy tokens, fed to the quantized reference
  // engine: the reference picks the same token at all but a few steps. The integer products
  // are bit-exact (AccelKernels.IntegerProductsEqualTheQuantizationReference); the vector
  // unit's fp32 sums run in another order, and an activation within an ulp of an int8
  // rounding boundary then takes the neighbouring code. Measured here: the logits agree to
  // 1e-7 until the first such flip (position 5), which moves all later logits by 1-3% of
  // their range through the cached keys and values; the choices differ at 2 of 96 steps,
  // where the reference's top two logits are that close.
  const Tuned& t = qat_tuned();
  const quant::QuantModel qm = quant::quantize_model(t.model, t.plan);
  const model::Model base = qm.dequantized_model();
  arch::Design d;
  d.matrix_unit.weight_bits = 4;
  d.kv_bits = 32;  // the plan keeps the KV cache in fp32
  engine::AccelTransformer acc(base, qm, d);
  calib::SimulatedTransformer ref(base, qm.plan, qm.linears);
  const int V = base.config.vocab_size;
  int token = 1, same = 0, near_ties = 0;
  double worst = 0;
  const int steps = 96;
  for (int pos = 0; pos < steps; ++pos) {
    const float* la = acc.forward(token, pos);
    const std::vector<float> a(la, la + V);
    const float* lr = ref.forward(token, pos);
    worst = std::max(worst, rel_err(a.data(), lr, V));
    const int pick = static_cast<int>(std::max_element(a.begin(), a.end()) - a.begin());
    const int want = static_cast<int>(std::max_element(lr, lr + V) - lr);
    double range = 0;
    for (int j = 0; j < V; ++j) range = std::max(range, std::fabs(double(lr[j])));
    if (pick == want) {
      ++same;
    } else {
      ++near_ties;
      std::printf("position %d: accelerator %d, reference %d, reference margin %.3g of the range\n", pos, pick, want,
                  (lr[want] - lr[pick]) / range);
    }
    token = pick;
  }
  std::printf("QAT w4a8 on the accelerator: %d of %d greedy steps the reference's choice; worst logit relative "
              "difference %.3g\n", same, steps, worst);
  EXPECT_LE(near_ties * 20, steps);
}

}  // namespace
