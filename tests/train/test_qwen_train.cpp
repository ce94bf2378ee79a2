// Training and quantization-aware training of Qwen2 (q/k/v biases) and Qwen3 (per-head q/k
// norms, heads wider than dim / heads) against independent references: the fp32 inference
// engine for the forward pass, central finite differences in double precision for every
// tensor's gradient (the biases and head norm gains included), and the quantization module's
// export. Synthesized models of tests/small_qwen.hpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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

// A Qwen3 of small_qwen_config with distinct per-head norm gains (synthesize makes them 1).
model::Model qwen3(int vocab = 256, int seq_len = 64) {
  model::Config c = testing_support::small_qwen_config(model::Arch::qwen3);
  c.vocab_size = vocab;
  c.seq_len = seq_len;
  model::Model m = model::synthesize(c, 6);
  testing_support::distinct_head_norm_gains(m);
  return m;
}

using train_testing::fixed_batch;

// The largest difference between the double training forward's logits and the fp32
// engine's on the batch, and the engine's logit range.
struct Agreement {
  double worst = 0, range = 0;
};

Agreement forward_vs_engine(const model::Model& m, const train::Batch& b) {
  train::Llama<double> net(m.config);
  train::RefMatmul<double> mm;
  net.loss(train::from_weights<double>(m.weights), b, mm);
  Agreement a;
  for (int s = 0; s < b.batch; ++s) {
    engine::Transformer t(m);
    for (int pos = 0; pos < b.seq; ++pos) {
      const float* logits = t.forward(b.tokens[static_cast<std::size_t>(s) * (b.seq + 1) + pos], pos);
      const double* mine = &net.logits()[(static_cast<std::size_t>(s) * b.seq + pos) * m.config.vocab_size];
      for (int v = 0; v < m.config.vocab_size; ++v) {
        a.worst = std::max(a.worst, std::abs(mine[v] - logits[v]));
        a.range = std::max(a.range, std::abs(static_cast<double>(logits[v])));
      }
    }
  }
  return a;
}

// The largest difference between the engine's logits of `a` and of `b` on the batch's first
// sequence.
double engine_logits_moved(const model::Model& a, const model::Model& b, const train::Batch& batch) {
  engine::Transformer t0(a), t1(b);
  double moved = 0;
  for (int pos = 0; pos < batch.seq; ++pos) {
    const float* x = t0.forward(batch.tokens[static_cast<std::size_t>(pos)], pos);
    const std::vector<float> xv(x, x + a.config.vocab_size);
    const float* y = t1.forward(batch.tokens[static_cast<std::size_t>(pos)], pos);
    for (int v = 0; v < a.config.vocab_size; ++v)
      moved = std::max(moved, std::abs(static_cast<double>(xv[static_cast<std::size_t>(v)] - y[v])));
  }
  return moved;
}

TEST(QwenTraining, ForwardWithBiasesMatchesTheInferenceEngine) {
  const model::Model m = qwen2();
  const train::Batch b = fixed_batch(2, 10, m.config.vocab_size, 7);
  const Agreement a = forward_vs_engine(m, b);
  // Without the q biases the engine's logits move by far more than that: the training
  // forward applies them as the engine does.
  model::Model plain = m;
  for (auto& w : plain.weights.layers) std::fill(w.bq.begin(), w.bq.end(), 0.0f);
  const double moved = engine_logits_moved(plain, m, b);
  std::printf("qwen2 training forward vs engine: worst %.3g (logit range %.3g); the q biases move logits by %.3g\n",
              a.worst, a.range, moved);
  EXPECT_LT(a.worst, 1e-4 * a.range);  // fp32 engine against a double forward
  EXPECT_GT(moved, 100 * a.worst);
}

TEST(QwenTraining, ForwardWithHeadNormsMatchesTheInferenceEngine) {
  const model::Model m = qwen3();
  ASSERT_NE(m.config.n_heads * m.config.head_dim(), m.config.dim);  // q wider than the model
  const train::Batch b = fixed_batch(2, 10, m.config.vocab_size, 7);
  const Agreement a = forward_vs_engine(m, b);
  // With unit k gains the engine's logits move by far more than that: the training forward
  // applies each gain element as the engine does.
  model::Model plain = m;
  for (auto& w : plain.weights.layers) std::fill(w.k_norm.begin(), w.k_norm.end(), 1.0f);
  const double moved = engine_logits_moved(plain, m, b);
  std::printf("qwen3 training forward vs engine: worst %.3g (logit range %.3g); the k norm gains move logits by %.3g\n",
              a.worst, a.range, moved);
  EXPECT_LT(a.worst, 1e-4 * a.range);  // fp32 engine against a double forward
  EXPECT_GT(moved, 100 * a.worst);
}

// Every tensor's largest-gradient element, and every element of the tensors whose name ends
// in one of `every_element_of`, against a central difference (h = 1e-5, double) of m's loss;
// the names of the tensors checked.
std::vector<std::string> check_gradients(const model::Model& m, const char* label,
                                         const std::vector<std::string>& every_element_of = {}) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const train::Batch b = fixed_batch(2, 5, m.config.vocab_size, 11);
  train::Llama<double> net(m.config);
  train::RefMatmul<double> mm;
  auto p = train::from_weights<double>(m.weights);
  train::Params<double> g;
  net.loss_and_grad(p, b, mm, g);
  const double h = 1e-5;
  double worst = 0;
  std::vector<std::string> names;
  std::size_t elements = 0;
  auto pt = p.tensors();
  auto gt = g.tensors();
  EXPECT_EQ(pt.size(), gt.size());
  for (std::size_t i = 0; i < std::min(pt.size(), gt.size()); ++i) {
    auto& w = *pt[i].data;
    const auto& gv = *gt[i].data;
    EXPECT_EQ(w.size(), gv.size()) << pt[i].name;
    if (w.size() != gv.size()) continue;
    const bool every = std::any_of(every_element_of.begin(), every_element_of.end(),
                                   [&](const std::string& e) { return pt[i].name.ends_with(e); });
    std::vector<std::size_t> at;
    if (every) {
      for (std::size_t j = 0; j < gv.size(); ++j) at.push_back(j);
    } else {
      at.push_back(static_cast<std::size_t>(
          std::max_element(gv.begin(), gv.end(), [](double x, double y) { return std::abs(x) < std::abs(y); }) - gv.begin()));
    }
    for (const std::size_t j : at) {
      const double numeric = train_testing::central_difference(net, p, b, mm, w, j, h);
      const double err = std::abs(gv[j] - numeric) / std::max({std::abs(gv[j]), std::abs(numeric), 1e-6});
      worst = std::max(worst, err);
      EXPECT_LE(err, 1e-5) << pt[i].name << "[" << j << "] analytic " << gv[j] << " numeric " << numeric;
      EXPECT_GT(std::abs(numeric), 0.0) << pt[i].name << "[" << j << "]";
    }
    elements += at.size();
    names.push_back(pt[i].name);
  }
  omp_set_num_threads(threads);
  std::printf("%s gradient check: %zu tensors, %zu elements, worst relative error %.3g\n", label, names.size(), elements, worst);
  return names;
}

int count_containing(const std::vector<std::string>& names, const std::string& part) {
  return static_cast<int>(std::count_if(names.begin(), names.end(), [&](const std::string& n) { return n.find(part) != std::string::npos; }));
}

TEST(QwenTraining, EveryGradientIncludingTheBiasesAgreesWithFiniteDifferences) {
  const model::Model m = qwen2();
  EXPECT_EQ(count_containing(check_gradients(m, "qwen2"), ".b"), 3 * m.config.n_layers);
}

// Every element of every q and k norm gain (head_dim each), besides each tensor's largest.
TEST(QwenTraining, EveryGradientIncludingTheHeadNormGainsAgreesWithFiniteDifferences) {
  const model::Model m = qwen3();
  const std::vector<std::string> names = check_gradients(m, "qwen3", {".q_norm", ".k_norm"});
  EXPECT_EQ(count_containing(names, ".q_norm"), m.config.n_layers);
  EXPECT_EQ(count_containing(names, ".k_norm"), m.config.n_layers);
}

// `steps` of QAT (train::qat_options of `plan`) of m on the sample's first 8 stories, batches
// of 4 x 32 tokens at peak rate 3e-3.
train::TrainResult qat_on_sample(model::Model& m, const quant::Plan& plan, int steps) {
  const model::Tokenizer tok = model::load_tokenizer(testing_support::tok512());
  const train::TextData data = train::split_text(tok, testing_support::sample_lines(8), 32, "sample");
  train::TrainOptions o = train::qat_options(plan, steps);
  o.batch = 4, o.seq = 32, o.eval_every = steps, o.heldout_tokens = 256;
  o.adamw.lr = 3e-3;
  return train::fine_tune(m, data, o);
}

// QAT of the Qwen2 (w4a8 g32, learned scales) on the sample's text: the biases train and go
// into the file as they are (fp32), and the exported model's codes and scales are the ones
// the last forward pass used. (Whether QAT lowers the loss is measured on stories260K: a
// random model quantizes with a KL of 3e-4, which 12 steps do not lower.)
TEST(QwenTraining, QuantizationAwareTrainingExportsTheTrainedBiases) {
  model::Model m = qwen2(512, 256);  // the sample's tokenizer (tok512)
  const model::Model start = m;
  const quant::Plan plan = quant::uniform_plan(m.config, quant::Scheme::w4a8, 32);
  const train::TrainResult r = qat_on_sample(m, plan, 12);
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

// QAT of the Qwen3 (w4a8 g32, learned scales): the q/k norm gains train (fp32, no weight
// decay), fake quantization keeps them as they are, and export_quantized carries the trained
// values; the linear layers' codes and scales are the ones the last forward pass used.
TEST(QwenTraining, QuantizationAwareTrainingExportsTheTrainedHeadNorms) {
  model::Model m = qwen3(512, 256);  // the sample's tokenizer (tok512)
  const model::Model start = m;
  const quant::Plan plan = quant::uniform_plan(m.config, quant::Scheme::w4a8, 32);
  const train::TrainResult r = qat_on_sample(m, plan, 6);
  ASSERT_TRUE(r.scales);
  for (int l = 0; l < m.config.n_layers; ++l) {
    const auto& w = m.weights.layers[static_cast<std::size_t>(l)];
    EXPECT_NE(w.q_norm, start.weights.layers[static_cast<std::size_t>(l)].q_norm) << l;
    EXPECT_NE(w.k_norm, start.weights.layers[static_cast<std::size_t>(l)].k_norm) << l;
  }
  const quant::QuantModel qm = train::export_quantized(m, plan, *r.scales);
  ASSERT_EQ(qm.q_norm.size(), static_cast<std::size_t>(m.config.n_layers));
  EXPECT_EQ(qm.q_norm.at(0), m.weights.layers[0].q_norm);
  EXPECT_EQ(qm.k_norm.at(1), m.weights.layers[1].k_norm);
  train::Params<float> fake;
  train::fake_quantize_weights(train::from_weights<float>(m.weights), m.config, plan, fake, &*r.scales);
  EXPECT_EQ(qm.linear(1, model::Linear::wq).dequantized(), fake.layers[1].wq);
  EXPECT_EQ(qm.linear(-1, model::Linear::cls).dequantized(), fake.classifier);
  EXPECT_EQ(fake.layers[1].q_norm, m.weights.layers[1].q_norm);
  EXPECT_EQ(fake.layers[0].k_norm, m.weights.layers[0].k_norm);
}

}  // namespace
