// Training and quantization-aware training of Qwen2 (q/k/v biases) against independent
// references: the fp32 inference engine for the forward pass, central finite differences in
// double precision for every tensor's gradient (the biases included), and the quantization
// module's export. Synthesized models of tests/small_qwen.hpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "calib/calib.hpp"
#include "engine/perplexity.hpp"
#include "engine/transformer.hpp"
#include "model/model.hpp"
#include "model/synth.hpp"
#include "small_qwen.hpp"
#include "testing.hpp"
#include "train/llama.hpp"
#include "train/qat.hpp"
#include "train/trainer.hpp"

#include "train_testing.hpp"

namespace {

// A Qwen2 of small_qwen_config with biases of distinct values (synthesize makes them 0).
model::Model qwen2(int vocab = 256, int seq_len = 64) {
  model::Config c = testing_support::small_qwen_config(model::Arch::qwen2);
  c.vocab_size = vocab;
  c.seq_len = seq_len;
  model::Model m = model::synthesize(c, 5);
  for (std::size_t l = 0; l < m.weights.layers.size(); ++l) {
    auto& w = m.weights.layers[l];
    for (std::size_t i = 0; i < w.bq.size(); ++i) w.bq[i] = 0.2f * float(int(i % 5) - 2) + 0.05f * float(l);
    for (std::size_t i = 0; i < w.bk.size(); ++i) w.bk[i] = -0.15f * float(int(i % 3) - 1);
    for (std::size_t i = 0; i < w.bv.size(); ++i) w.bv[i] = 0.1f * float(int(i % 7) - 3);
  }
  return m;
}

using train_testing::fixed_batch;

TEST(QwenTraining, ForwardWithBiasesMatchesTheInferenceEngine) {
  const model::Model m = qwen2();
  const train::Batch b = fixed_batch(2, 10, m.config.vocab_size, 7);
  train::Llama<double> net(m.config);
  train::RefMatmul<double> mm;
  net.loss(train::from_weights<double>(m.weights), b, mm);
  double worst = 0, range = 0;
  for (int s = 0; s < b.batch; ++s) {
    engine::Transformer t(m);
    for (int pos = 0; pos < b.seq; ++pos) {
      const float* logits = t.forward(b.tokens[static_cast<std::size_t>(s) * (b.seq + 1) + pos], pos);
      const double* mine = &net.logits()[(static_cast<std::size_t>(s) * b.seq + pos) * m.config.vocab_size];
      for (int v = 0; v < m.config.vocab_size; ++v) {
        worst = std::max(worst, std::abs(mine[v] - logits[v]));
        range = std::max(range, std::abs(static_cast<double>(logits[v])));
      }
    }
  }
  // Without the q biases the engine's logits move by far more than that: the training
  // forward applies them as the engine does.
  model::Model plain = m;
  for (auto& w : plain.weights.layers) std::fill(w.bq.begin(), w.bq.end(), 0.0f);
  engine::Transformer t0(plain), t1(m);
  double moved = 0;
  for (int pos = 0; pos < b.seq; ++pos) {
    const float* a = t0.forward(b.tokens[static_cast<std::size_t>(pos)], pos);
    const std::vector<float> av(a, a + m.config.vocab_size);
    const float* c = t1.forward(b.tokens[static_cast<std::size_t>(pos)], pos);
    for (int v = 0; v < m.config.vocab_size; ++v) moved = std::max(moved, std::abs(static_cast<double>(av[static_cast<std::size_t>(v)] - c[v])));
  }
  std::printf("qwen2 training forward vs engine: worst %.3g (logit range %.3g); the q biases move logits by %.3g\n", worst,
              range, moved);
  EXPECT_LT(worst, 1e-4 * range);  // fp32 engine against a double forward
  EXPECT_GT(moved, 100 * worst);
}

// Every tensor's largest-gradient element against a central difference (h = 1e-5, double).
TEST(QwenTraining, EveryGradientIncludingTheBiasesAgreesWithFiniteDifferences) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const model::Model m = qwen2();
  const train::Batch b = fixed_batch(2, 5, m.config.vocab_size, 11);
  train::Llama<double> net(m.config);
  train::RefMatmul<double> mm;
  auto p = train::from_weights<double>(m.weights);
  train::Params<double> g;
  net.loss_and_grad(p, b, mm, g);
  const double h = 1e-5;
  double worst = 0;
  int biases = 0;
  auto pt = p.tensors();
  auto gt = g.tensors();
  ASSERT_EQ(pt.size(), gt.size());
  for (std::size_t i = 0; i < pt.size(); ++i) {
    auto& w = *pt[i].data;
    const auto& gv = *gt[i].data;
    ASSERT_EQ(w.size(), gv.size()) << pt[i].name;
    const std::size_t j = static_cast<std::size_t>(
        std::max_element(gv.begin(), gv.end(), [](double x, double y) { return std::abs(x) < std::abs(y); }) - gv.begin());
    const double numeric = train_testing::central_difference(net, p, b, mm, w, j, h);
    const double err = std::abs(gv[j] - numeric) / std::max({std::abs(gv[j]), std::abs(numeric), 1e-6});
    worst = std::max(worst, err);
    biases += pt[i].name.find(".b") != std::string::npos;
    EXPECT_LE(err, 1e-5) << pt[i].name << "[" << j << "] analytic " << gv[j] << " numeric " << numeric;
    EXPECT_GT(std::abs(numeric), 0.0) << pt[i].name;
  }
  omp_set_num_threads(threads);
  std::printf("qwen2 gradient check: %zu tensors (%d biases), worst relative error %.3g\n", pt.size(), biases, worst);
  EXPECT_EQ(biases, 3 * m.config.n_layers);
}

// QAT of the Qwen2 (w4a8 g32, learned scales) on the sample's text: the biases train and go
// into the file as they are (fp32), and the exported model's codes and scales are the ones
// the last forward pass used. (Whether QAT lowers the loss is measured on stories260K: a
// random model quantizes with a KL of 3e-4, which 12 steps do not lower.)
TEST(QwenTraining, QuantizationAwareTrainingExportsTheTrainedBiases) {
  model::Model m = qwen2(512, 256);  // the sample's tokenizer (tok512)
  const model::Model start = m;
  const model::Tokenizer tok = model::load_tokenizer(testing_support::tok512());
  const std::string text = testing_support::sample_lines(8);
  const train::TextData data = train::split_text(tok, text, 32, "sample");
  const quant::Plan plan = quant::uniform_plan(m.config, quant::Scheme::w4a8, 32);
  train::TrainOptions o = train::qat_options(plan, 12);
  o.batch = 4, o.seq = 32, o.eval_every = 12, o.heldout_tokens = 256;
  o.adamw.lr = 3e-3;
  const train::TrainResult r = train::fine_tune(m, data, o);
  ASSERT_TRUE(r.scales);
  EXPECT_NE(m.weights.layers[1].bv, start.weights.layers[1].bv);
  const quant::QuantModel qm = train::export_quantized(m, plan, *r.scales);
  EXPECT_EQ(qm.bq.at(0), m.weights.layers[0].bq);
  EXPECT_EQ(qm.bv.at(1), m.weights.layers[1].bv);
  train::Params<float> fake;
  train::fake_quantize_weights(train::from_weights<float>(m.weights), m.config, plan, fake, &*r.scales);
  EXPECT_EQ(qm.linear(1, model::Linear::wv).dequantized(), fake.layers[1].wv);
  EXPECT_EQ(qm.linear(-1, model::Linear::cls).dequantized(), fake.classifier);
  EXPECT_EQ(fake.layers[1].bv, m.weights.layers[1].bv);
}

}  // namespace
