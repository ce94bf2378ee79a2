// The fp32 engine against independent references: a plain transcription of llama2.c's
// run.c arithmetic (sequential float sums) for the greedy tokens, and a double-precision
// forward for the logits.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/generate.hpp"
#include "engine/perplexity.hpp"
#include "model/model.hpp"
#include "testing.hpp"

namespace {

// Straight-line forward pass in type T, llama2.c's order of operations.
template <typename T>
class NaiveForward {
 public:
  explicit NaiveForward(const model::Model& m) : m_(m), c_(m.config) {
    kc_.assign(std::size_t(c_.n_layers) * c_.seq_len * c_.kv_dim(), 0);
    vc_ = kc_;
  }
  std::vector<T> forward(int token, int pos) {
    const int dim = c_.dim, hs = c_.head_dim(), kv_dim = c_.kv_dim(), hidden = c_.hidden_dim;
    const int kv_mul = c_.n_heads / c_.n_kv_heads;
    std::vector<T> x(dim), xb(dim), xb2(dim), hb(hidden), hb2(hidden), q(dim), att(pos + 1);
    for (int i = 0; i < dim; ++i) x[i] = m_.weights.token_embedding[std::size_t(token) * dim + i];
    auto mm = [](std::vector<T>& out, const std::vector<T>& in, const std::vector<float>& w, int n, int d, T* dst = nullptr) {
      for (int i = 0; i < d; ++i) {
        T val = 0;
        for (int j = 0; j < n; ++j) val += T(w[std::size_t(i) * n + j]) * in[j];
        (dst ? dst[i] : out[i]) = val;
      }
    };
    auto rms = [&](std::vector<T>& o, const std::vector<T>& in, const std::vector<float>& w) {
      T ss = 0;
      for (int j = 0; j < dim; ++j) ss += in[j] * in[j];
      ss /= dim;
      ss += T(c_.norm_eps);
      ss = T(1) / std::sqrt(ss);
      for (int j = 0; j < dim; ++j) o[j] = T(w[j]) * (ss * in[j]);
    };
    for (int l = 0; l < c_.n_layers; ++l) {
      const auto& lw = m_.weights.layers[l];
      rms(xb, x, lw.attn_norm);
      T* k = kc_.data() + (std::size_t(l) * c_.seq_len + pos) * kv_dim;
      T* v = vc_.data() + (std::size_t(l) * c_.seq_len + pos) * kv_dim;
      std::vector<T> dummy;
      mm(q, xb, lw.wq, dim, dim);
      mm(dummy, xb, lw.wk, dim, kv_dim, k);
      mm(dummy, xb, lw.wv, dim, kv_dim, v);
      for (int i = 0; i < dim; i += 2) {
        int hd = i % hs;
        T freq = T(1) / std::pow(T(c_.rope_theta), T(hd) / T(hs));
        T val = T(pos) * freq, fcr = std::cos(val), fci = std::sin(val);
        for (int r = 0; r < (i < kv_dim ? 2 : 1); ++r) {
          T* vec = r == 0 ? q.data() : k;
          T v0 = vec[i], v1 = vec[i + 1];
          vec[i] = v0 * fcr - v1 * fci;
          vec[i + 1] = v0 * fci + v1 * fcr;
        }
      }
      for (int h = 0; h < c_.n_heads; ++h) {
        const int off = (h / kv_mul) * hs;
        for (int t = 0; t <= pos; ++t) {
          T s = 0;
          for (int i = 0; i < hs; ++i) s += q[h * hs + i] * kc_[(std::size_t(l) * c_.seq_len + t) * kv_dim + off + i];
          att[t] = s / std::sqrt(T(hs));
        }
        T mx = att[0];
        for (int t = 1; t <= pos; ++t) mx = std::max(mx, att[t]);
        T sum = 0;
        for (int t = 0; t <= pos; ++t) sum += att[t] = std::exp(att[t] - mx);
        for (int t = 0; t <= pos; ++t) att[t] /= sum;
        for (int i = 0; i < hs; ++i) xb[h * hs + i] = 0;
        for (int t = 0; t <= pos; ++t)
          for (int i = 0; i < hs; ++i) xb[h * hs + i] += att[t] * vc_[(std::size_t(l) * c_.seq_len + t) * kv_dim + off + i];
      }
      mm(xb2, xb, lw.wo, dim, dim);
      for (int i = 0; i < dim; ++i) x[i] += xb2[i];
      rms(xb, x, lw.ffn_norm);
      mm(hb, xb, lw.w1, dim, hidden);
      mm(hb2, xb, lw.w3, dim, hidden);
      for (int i = 0; i < hidden; ++i) hb[i] = hb[i] * (T(1) / (T(1) + std::exp(-hb[i]))) * hb2[i];
      mm(xb, hb, lw.w2, hidden, dim);
      for (int i = 0; i < dim; ++i) x[i] += xb[i];
    }
    rms(x, x, m_.weights.final_norm);
    std::vector<T> logits(c_.vocab_size);
    mm(logits, x, m_.weights.classifier_or_embedding(), dim, c_.vocab_size);
    return logits;
  }

 private:
  const model::Model& m_;
  const model::Config& c_;
  std::vector<T> kc_, vc_;
};

class ReferenceEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new model::Model(model::load(testing_support::stories260k()));
    tok_ = new model::Tokenizer(model::Tokenizer::load_llama2c(testing_support::tok512(), 512));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tok_;
  }
  static model::Model* model_;
  static model::Tokenizer* tok_;
};
model::Model* ReferenceEngine::model_ = nullptr;
model::Tokenizer* ReferenceEngine::tok_ = nullptr;

TEST_F(ReferenceEngine, GreedyStoryBeginsAsPublished) {
  engine::Transformer t(*model_);
  engine::Sampler s(512, 0.0f, 0.9f, 1);
  auto g = engine::generate(t, *tok_, s, "", 200);
  EXPECT_EQ(g.text.rfind("Once upon a time, there was a little girl named Lily. She loved to play outside in the park.", 0), 0u)
      << g.text;
  EXPECT_EQ(g.tokens.size(), 201u);
}

TEST_F(ReferenceEngine, Greedy200TokensMatchLlama2cArithmetic) {
  engine::Transformer t(*model_);
  engine::Sampler s(512, 0.0f, 0.9f, 1);
  auto g = engine::generate(t, *tok_, s, "", 200);
  NaiveForward<float> naive(*model_);
  int token = model::Tokenizer::kBos;
  for (int pos = 0; pos < 200; ++pos) {
    auto logits = naive.forward(token, pos);
    int next = engine::argmax(logits.data(), 512);
    ASSERT_EQ(next, g.tokens[pos + 1]) << "first difference at position " << pos + 1;
    token = next;
  }
}

TEST_F(ReferenceEngine, LogitsAgreeWithDoublePrecision) {
  engine::Transformer t(*model_);
  NaiveForward<double> ref(*model_);
  auto tokens = tok_->encode("Once upon a time, there was a cat who liked to sing.", true, false);
  double worst = 0;
  for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
    const float* got = t.forward(tokens[pos], int(pos));
    auto want = ref.forward(tokens[pos], int(pos));
    double num = 0, den = 0;
    for (int v = 0; v < 512; ++v) {
      num += (got[v] - want[v]) * (got[v] - want[v]);
      den += want[v] * want[v];
    }
    worst = std::max(worst, std::sqrt(num / den));
  }
  EXPECT_LT(worst, 1e-5) << "relative L2 error of fp32 logits against double";
}

// The batched pass (matrix-matrix, blocks of positions) against the same double-precision
// forward and the same bound as the token-by-token pass above; blocks of 1, 7 and 30
// positions, each after the previous one, so that later blocks attend to keys an earlier
// block (or a single token) wrote.
TEST_F(ReferenceEngine, BlockLogitsAgreeWithDoublePrecision) {
  engine::Transformer t(*model_);
  ASSERT_TRUE(t.block_batched());
  NaiveForward<double> ref(*model_);
  auto tokens = tok_->encode("Once upon a time, there was a cat who liked to sing. One day, the cat saw a big red ball "
                             "in the garden and wanted to play with it.", true, false);
  ASSERT_GE(tokens.size(), 39u);
  double worst = 0;
  int pos = 0;
  for (int n : {1, 7, 1, 30}) {
    const float* got = t.forward_block({tokens.data() + pos, std::size_t(n)}, pos);
    for (int i = 0; i < n; ++i) {
      auto want = ref.forward(tokens[pos + i], pos + i);
      double num = 0, den = 0;
      for (int v = 0; v < 512; ++v) {
        const double d = got[i * 512 + v] - want[v];
        num += d * d;
        den += want[v] * want[v];
      }
      worst = std::max(worst, std::sqrt(num / den));
    }
    pos += n;
  }
  EXPECT_LT(worst, 1e-5) << "relative L2 error of batched fp32 logits against double";
}

TEST_F(ReferenceEngine, PerplexityOfSampleText) {
  engine::Transformer t(*model_);
  auto seqs = engine::tokenize_stories(*tok_, engine::split_stories(engine::read_text_file(testing_support::sample_text())));
  auto p = engine::perplexity(t, seqs);
  EXPECT_GT(p.tokens, 10000u);
  // A trained 260K-parameter TinyStories model: far better than uniform (512) and than
  // unigram statistics, worse than a large model.
  EXPECT_GT(p.perplexity, 2.0);
  EXPECT_LT(p.perplexity, 10.0);
}

TEST(Sampler, TemperatureSamplingIsSeededAndInRange) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.5f};
  std::vector<int> a, b;
  engine::Sampler s1(4, 1.0f, 0.9f, 7), s2(4, 1.0f, 0.9f, 7);
  for (int i = 0; i < 50; ++i) {
    auto l1 = logits, l2 = logits;
    a.push_back(s1.sample(l1.data()));
    b.push_back(s2.sample(l2.data()));
  }
  EXPECT_EQ(a, b);
  for (int v : a) EXPECT_TRUE(v >= 0 && v < 4);
}

TEST(Sampler, TopPExcludesTheTail) {
  // Probabilities ~ (0.5, 0.3, 0.15, 0.05): with top-p 0.7 only tokens 0 and 1 may appear.
  std::vector<float> base = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  engine::Sampler s(4, 1.0f, 0.7f, 3);
  int counts[4] = {0, 0, 0, 0};
  for (int i = 0; i < 2000; ++i) {
    auto l = base;
    counts[s.sample(l.data())]++;
  }
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_GT(counts[0], counts[1]);
}

}  // namespace
