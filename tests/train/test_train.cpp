// The training forward/backward against independent references: the fp32 inference engine
// for the forward pass, central finite differences in double precision for every parameter
// tensor's gradient, exact integer arithmetic for the int8 matrix unit, and hand-computed
// AdamW steps.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/transformer.hpp"
#include "model/model.hpp"
#include "testing.hpp"
#include "train/llama.hpp"
#include "train/matmul.hpp"
#include "train/optimizer.hpp"
#include "train/params.hpp"
#include "train/trainer.hpp"

#include "train_testing.hpp"

namespace {

const model::Model& stories() {
  static const model::Model m = model::load(testing_support::stories260k());
  return m;
}

using train_testing::fixed_batch;

TEST(TrainForward, LogitsMatchTheInferenceEngine) {
  const auto& m = stories();
  const train::Batch b = fixed_batch(2, 12, m.config.vocab_size, 7);
  train::Llama<double> net(m.config);
  train::RefMatmul<double> mm;
  const auto p = train::from_weights<double>(m.weights);
  net.loss(p, b, mm);
  double worst = 0;
  for (int s = 0; s < b.batch; ++s) {
    engine::Transformer t(m);
    for (int pos = 0; pos < b.seq; ++pos) {
      const float* logits = t.forward(b.tokens[static_cast<std::size_t>(s) * (b.seq + 1) + pos], pos);
      const double* mine = &net.logits()[(static_cast<std::size_t>(s) * b.seq + pos) * m.config.vocab_size];
      for (int v = 0; v < m.config.vocab_size; ++v) worst = std::max(worst, std::abs(mine[v] - logits[v]));
    }
  }
  // fp32 engine against a double forward: logits are O(10), fp32 rounding over 5 layers.
  EXPECT_LT(worst, 1e-3);
}

TEST(TrainForward, LossIsMeanCrossEntropyOfTheLogits) {
  const auto& m = stories();
  const train::Batch b = fixed_batch(1, 6, m.config.vocab_size, 3);
  train::Llama<double> net(m.config);
  train::RefMatmul<double> mm;
  const double loss = net.loss(train::from_weights<double>(m.weights), b, mm);
  double sum = 0;
  const int V = m.config.vocab_size;
  for (int t = 0; t < b.seq; ++t) {
    const double* z = &net.logits()[static_cast<std::size_t>(t) * V];
    double mx = *std::max_element(z, z + V), se = 0;
    for (int v = 0; v < V; ++v) se += std::exp(z[v] - mx);
    sum += std::log(se) + mx - z[b.tokens[static_cast<std::size_t>(t) + 1]];
  }
  EXPECT_NEAR(loss, sum / b.seq, 1e-12);
}

// Every parameter tensor of stories260K: analytic gradient against a central difference
// (h = 1e-5, double precision) at the largest-gradient elements and at random ones.
TEST(GradientCheck, EveryTensorOfStories260KAgreesWithFiniteDifferences) {
  // Tiny products: one thread avoids paying for thread start-up ~400 times.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto& m = stories();
  const train::Batch b = fixed_batch(2, 5, m.config.vocab_size, 11);
  train::Llama<double> net(m.config);
  train::RefMatmul<double> mm;
  auto p = train::from_weights<double>(m.weights);
  train::Params<double> g;
  net.loss_and_grad(p, b, mm, g);
  auto pt = p.tensors();
  auto gt = g.tensors();
  ASSERT_EQ(pt.size(), 2u + 9u * static_cast<std::size_t>(m.config.n_layers));  // shared classifier
  train::Rng rng(5);
  const double h = 1e-5;
  int checked = 0;
  double worst = 0;
  std::string worst_at;
  for (std::size_t i = 0; i < pt.size(); ++i) {
    auto& w = *pt[i].data;
    const auto& gv = *gt[i].data;
    std::vector<std::size_t> idx(gv.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + 2, idx.end(),
                      [&](std::size_t x, std::size_t y) { return std::abs(gv[x]) > std::abs(gv[y]); });
    std::vector<std::size_t> pick(idx.begin(), idx.begin() + 2);
    for (int r = 0; r < 2; ++r) pick.push_back(static_cast<std::size_t>(rng.below(gv.size())));
    for (std::size_t j : pick) {
      const double numeric = train_testing::central_difference(net, p, b, mm, w, j, h);
      const double analytic = gv[j];
      // Relative error; the denominator has a floor of 1e-5 so that elements whose
      // gradient is nearly zero are held to an absolute 1e-9 (finite-difference rounding
      // alone is ~1e-16 * loss / h ~ 1e-11).
      const double err = std::abs(analytic - numeric) / std::max({std::abs(analytic), std::abs(numeric), 1e-5});
      if (err > worst) {
        worst = err;
        char buf[160];
        std::snprintf(buf, sizeof buf, "%s[%zu] analytic %.9g numeric %.9g", pt[i].name.c_str(), j, analytic, numeric);
        worst_at = buf;
      }
      EXPECT_LE(err, 1e-4) << pt[i].name << "[" << j << "] analytic " << analytic << " numeric " << numeric;
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(pt.size()) * 4);
  omp_set_num_threads(threads);
  std::printf("gradient check: %d elements of %zu tensors, worst relative error %.3g at %s\n", checked, pt.size(),
              worst, worst_at.c_str());
}

TEST(GradientCheck, SeparateClassifierGetsItsOwnGradient) {
  // stories260K with an unshared copy of its embedding as the classifier: the classifier
  // gradient plus the embedding gradient equals the shared model's embedding gradient.
  model::Model m = stories();
  m.weights.classifier = m.weights.token_embedding;
  m.config.shared_classifier = false;
  const train::Batch b = fixed_batch(1, 4, m.config.vocab_size, 2);
  train::RefMatmul<double> mm;
  train::Llama<double> net(m.config);
  train::Params<double> gs, gu;
  net.loss_and_grad(train::from_weights<double>(stories().weights), b, mm, gs);
  net.loss_and_grad(train::from_weights<double>(m.weights), b, mm, gu);
  ASSERT_FALSE(gu.classifier.empty());
  double worst = 0;
  for (std::size_t j = 0; j < gs.token_embedding.size(); ++j)
    worst = std::max(worst, std::abs(gs.token_embedding[j] - (gu.token_embedding[j] + gu.classifier[j])));
  EXPECT_LT(worst, 1e-12);
}

TEST(Int8Matmul, EqualsExactIntegerProductOfTheQuantizedOperands) {
  // op(A) = A^T (stored [k][m]), op(B) = B ([k][n]); reference computed independently in
  // double from the quantized codes and scales.
  const int m = 5, n = 7, k = 33;
  train::Rng rng(9);
  auto uni = [&] { return static_cast<float>(rng.below(2001)) / 1000.0f - 1.0f; };
  std::vector<float> at(static_cast<std::size_t>(k) * m), b(static_cast<std::size_t>(k) * n), c(static_cast<std::size_t>(m) * n);
  for (auto& v : at) v = uni();
  for (auto& v : b) v = 3.0f * uni();
  train::Gemm<float> g;
  g.m = m, g.n = n, g.k = k;
  g.a = at.data(), g.lda = m, g.trans_a = true;
  g.b = b.data(), g.ldb = n;
  g.c = c.data(), g.ldc = n;
  train::Int8Matmul mm;
  mm.gemm(g);
  for (int i = 0; i < m; ++i) {
    double amax = 0;
    for (int p = 0; p < k; ++p) amax = std::max(amax, std::abs(double(at[p * m + i])));
    const float sa = static_cast<float>(amax) / 127.0f;
    for (int j = 0; j < n; ++j) {
      double bmax = 0;
      for (int p = 0; p < k; ++p) bmax = std::max(bmax, std::abs(double(b[p * n + j])));
      const float sb = static_cast<float>(bmax) / 127.0f;
      long acc = 0;
      for (int p = 0; p < k; ++p) {
        const long qa = std::lround(std::nearbyint(at[p * m + i] * (1.0f / sa)));
        const long qb = std::lround(std::nearbyint(b[p * n + j] * (1.0f / sb)));
        acc += qa * qb;
      }
      const float expect = (static_cast<float>(acc) * sb) * sa;
      EXPECT_EQ(c[i * n + j], expect) << i << "," << j;
    }
  }
  EXPECT_EQ(mm.macs(), static_cast<std::uint64_t>(m) * n * k);
}

TEST(Int8Matmul, QuantizerFollowsTheContract) {
  const float x[4] = {1.27f, -0.005f, 0.015f, -1.27f};
  std::int8_t q[4];
  float s;
  train::quantize_rows_int8(x, 1, 4, q, &s);
  EXPECT_FLOAT_EQ(s, 1.27f / 127.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[3], -127);
  EXPECT_EQ(q[1], 0);   // -0.5 rounds to even (0)
  EXPECT_EQ(q[2], 2);   // 1.5 rounds to even (2)
  const float zero[3] = {0, 0, 0};
  train::quantize_rows_int8(zero, 1, 3, q, &s);
  EXPECT_EQ(s, 0.0f);
  EXPECT_EQ(q[0], 0);
}

struct GradError {
  double loss = 0;
  double all = 0;            // relative L2 error over all gradients together
  double worst = 0;          // the worst tensor's relative L2 error
  double cosine = 0;         // cosine similarity of all gradients flattened
  std::string worst_name;
};

GradError accel_vs_ref(int block) {
  const auto& m = stories();
  const auto tok = model::tokenizer_for(m, testing_support::tok512());
  const auto data = train::split_text(tok, testing_support::read_bytes(testing_support::sample_text()), 64, "sample");
  train::Rng rng(21);
  const train::Batch b = train::sample_batch(data.train, 8, 64, rng);
  train::Llama<float> net(m.config);
  const auto p = train::from_weights<float>(m.weights);
  train::Params<float> gr, ga;
  train::RefMatmul<float> ref;
  train::Int8Matmul acc(block);
  const double lr = net.loss_and_grad(p, b, ref, gr);
  GradError e;
  e.loss = net.loss_and_grad(p, b, acc, ga);
  EXPECT_NEAR(e.loss, lr, 0.01 * lr);
  auto tr = gr.tensors(), ta = ga.tensors();
  double all_num = 0, all_den = 0, dot = 0, aa = 0;
  for (std::size_t i = 0; i < tr.size(); ++i) {
    double num = 0, den = 0;
    for (std::size_t j = 0; j < tr[i].data->size(); ++j) {
      const double d = double((*ta[i].data)[j]) - double((*tr[i].data)[j]);
      dot += double((*ta[i].data)[j]) * double((*tr[i].data)[j]);
      aa += double((*ta[i].data)[j]) * double((*ta[i].data)[j]);
      num += d * d;
      den += double((*tr[i].data)[j]) * double((*tr[i].data)[j]);
    }
    all_num += num, all_den += den;
    const double rel = std::sqrt(num / den);
    if (rel > e.worst) e.worst = rel, e.worst_name = tr[i].name;
  }
  e.all = std::sqrt(all_num / all_den);
  e.cosine = dot / std::sqrt(aa * all_den);
  std::printf("accel (block %d) vs ref gradients on a batch of 8 x 64 sample-text tokens: loss %.5f vs %.5f; "
              "relative L2 error all %.4f (cosine %.4f), worst tensor %s %.4f\n",
              block, e.loss, lr, e.all, e.cosine, e.worst_name.c_str(), e.worst);
  return e;
}

// The accel backend's gradients against the fp32 reference, as relative L2 errors
// ||g_accel - g_ref|| / ||g_ref||; the bounds are the ones docs/training.md states.
TEST(BackendAgreement, AccelGradientsWithinDocumentedBound) {
  const GradError e = accel_vs_ref(train::Int8Matmul::kTrainingBlock);
  EXPECT_LT(e.all, 0.20);
  EXPECT_LT(e.worst, 0.40) << e.worst_name;
  EXPECT_GT(e.cosine, 0.98);
}

TEST(AdamW, FirstStepsMatchHandComputation) {
  // One scalar matrix parameter w = 1 with gradient 0.5, lr 0.1, betas (0.9, 0.95), eps 0,
  // weight decay 0.1, no clipping. Step 1: m = 0.05, v = 0.0125, mhat = 0.5, vhat = 0.25,
  // update = 0.5 / 0.5 + 0.1 * 1 = 1.1 -> w = 1 - 0.11 = 0.89.
  train::Params<double> p;
  p.token_embedding = {1.0};
  p.final_norm = {2.0};
  train::AdamWOptions o;
  o.lr = 0.1, o.eps = 0, o.weight_decay = 0.1, o.clip_norm = 0;
  train::AdamW<double> opt(p, o);
  train::Params<double> g = p;
  g.token_embedding = {0.5};
  g.final_norm = {-0.25};
  opt.step(p, g);
  EXPECT_NEAR(p.token_embedding[0], 0.89, 1e-15);
  EXPECT_NEAR(p.final_norm[0], 2.1, 1e-15);  // norm gain: no decay, update -1 -> 2 + 0.1
  // Step 2 with gradient 0.5 again: m = 0.095, v = 0.024375; mhat = 0.095 / 0.19 = 0.5,
  // vhat = 0.024375 / 0.0975 = 0.25 -> update 1 + 0.1 * 0.89 = 1.089 -> w = 0.89 - 0.1089.
  g.token_embedding = {0.5};
  g.final_norm = {-0.25};
  opt.step(p, g);
  EXPECT_NEAR(p.token_embedding[0], 0.89 - 0.1089, 1e-14);
}

TEST(AdamW, ClipsToTheGlobalNorm) {
  train::Params<double> p;
  p.token_embedding = {0.0, 0.0};
  train::AdamWOptions o;
  o.clip_norm = 1.0;
  train::AdamW<double> opt(p, o);
  train::Params<double> g = p;
  g.token_embedding = {3.0, 4.0};
  EXPECT_DOUBLE_EQ(opt.step(p, g), 5.0);
  EXPECT_NEAR(g.token_embedding[0], 0.6, 1e-15);
  EXPECT_NEAR(g.token_embedding[1], 0.8, 1e-15);
}

TEST(TrainData, SplitsByStoryAndWindowsTheHeldOutHalf) {
  const std::vector<int> stream = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const auto w = train::window_batches(stream, 2, 3);  // windows at 0, 3, 6 (4 tokens each)
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].batch, 2);
  EXPECT_EQ(w[1].batch, 1);
  EXPECT_EQ(w[1].tokens, (std::vector<int>{7, 8, 9, 10}));
  train::Rng rng(1);
  const auto b = train::sample_batch(stream, 3, 4, rng);
  ASSERT_EQ(b.tokens.size(), 15u);
  for (int s = 0; s < 3; ++s)
    for (int t = 1; t < 5; ++t) EXPECT_EQ(b.tokens[s * 5 + t], b.tokens[s * 5 + t - 1] + 1);
}

}  // namespace
