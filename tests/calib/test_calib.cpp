// Calibration split, simulated quantization in the engine, SmoothQuant equivalence.
#include <gtest/gtest.h>

#include <cmath>

#include "calib/calib.hpp"
#include "calib/simulated.hpp"
#include "engine/perplexity.hpp"
#include "model/model.hpp"
#include "testing.hpp"
#include "util/error.hpp"

namespace {

using namespace quant;

struct Bundled {
  model::Model m = model::load(testing_support::stories260k());
  model::Tokenizer tok = model::tokenizer_for(m, testing_support::tok512());
};
const Bundled& bundled() {
  static const Bundled b;
  return b;
}

const std::vector<int> kTokens = {1, 403, 407, 261, 378, 275, 350, 266, 261, 370, 423, 264, 305, 384, 46, 400};

std::vector<std::vector<float>> logits_of(engine::Transformer& t) {
  std::vector<std::vector<float>> out;
  for (std::size_t i = 0; i < kTokens.size(); ++i) {
    const float* l = t.forward(kTokens[i], static_cast<int>(i));
    out.emplace_back(l, l + t.config().vocab_size);
  }
  return out;
}

double nmse(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double e = 0, r = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < a[i].size(); ++j) {
      e += (a[i][j] - b[i][j]) * (a[i][j] - b[i][j]);
      r += static_cast<double>(b[i][j]) * b[i][j];
    }
  return e / r;
}

TEST(Split, HalvesAreDisjointAndDuplicatesDropped) {
  const auto& b = bundled();
  const std::string text = engine::read_text_file(testing_support::sample_text());
  const auto s = calib::split_text(b.tok, text, "sample");
  const auto stories = engine::split_stories(text);
  EXPECT_EQ(s.calibration_stories, stories.size() / 2);
  EXPECT_EQ(s.calibration_stories + s.held_out_stories + s.dropped_duplicates, stories.size());
  for (const auto& h : s.held_out)
    for (const auto& c : s.calibration) EXPECT_NE(h, c);
  // A story repeated across the halves is dropped from the held-out half.
  const std::string dup = stories[0] + "\n" + stories[1] + "\n" + stories[0] + "\n" + stories[2] + "\n";
  const auto d = calib::split_text(b.tok, dup, "dup");
  EXPECT_EQ(d.calibration_stories, 2u);
  EXPECT_EQ(d.dropped_duplicates, 1u);
  EXPECT_EQ(d.held_out_stories, 1u);
}

TEST(Split, TooShortIsAnInputError) {
  const auto& b = bundled();
  EXPECT_THROW(calib::split_text(b.tok, "Once upon a time there was a cat.\n", "one"), fpgallm::InputError);
  EXPECT_THROW(calib::split_text(b.tok, "Hi.\nBye.\n", "short"), fpgallm::InputError);
}

TEST(Simulated, Fp32PlanIsTheReferenceBitForBit) {
  const auto& b = bundled();
  engine::Transformer ref(b.m);
  const Plan p = uniform_plan(b.m.config, Scheme::fp32, 32);
  const std::vector<QuantLinear> none(p.layers.size());
  calib::SimulatedTransformer sim(b.m, p, none);
  EXPECT_EQ(logits_of(sim), logits_of(ref));
}

TEST(Simulated, SchemesStayCloseToTheReference) {
  const auto& b = bundled();
  engine::Transformer ref(b.m);
  const auto want = logits_of(ref);
  struct Case {
    Scheme s;
    bool kv8;
    double budget;
  };
  for (const Case& c : {Case{Scheme::w8a8, false, 3e-3}, Case{Scheme::w8a8, true, 3e-3}, Case{Scheme::w4a16, false, 6e-2},
                        Case{Scheme::w4a8, false, 6e-2}, Case{Scheme::mixed, false, 1e-5}}) {
    Plan p = uniform_plan(b.m.config, c.s, 32);
    p.kv8 = c.kv8;
    const QuantModel qm = quantize_model(b.m, p);
    const model::Model base = qm.dequantized_model();
    calib::SimulatedTransformer sim(base, qm.plan, qm.linears);
    const double e = nmse(logits_of(sim), want);
    EXPECT_LT(e, c.budget) << to_string(c.s) << (c.kv8 ? " kv8" : "");
    EXPECT_GT(e, 0.0) << to_string(c.s);
  }
}

TEST(Simulated, StaticScalesComeFromCalibration) {
  const auto& b = bundled();
  const std::vector<std::vector<int>> seqs = {kTokens};
  const ActStats st = calib::collect_stats(b.m, seqs);
  EXPECT_EQ(st.tokens, kTokens.size() - 1);
  Plan p = uniform_plan(b.m.config, Scheme::w8a8_static, 32);
  calib::apply_static_scales(p, st);
  for (const auto& l : p.layers) {
    EXPECT_GT(l.act_scale, 0.0f);
    EXPECT_EQ(l.act_scale, st.amax(l.layer, l.which) / 127.0f);
  }
  // wq, wk and wv read one vector: one scale.
  EXPECT_EQ(p.at(0, model::Linear::wq).act_scale, p.at(0, model::Linear::wv).act_scale);
}

TEST(Smooth, PreservesTheModelsFunction) {
  const auto& b = bundled();
  const std::vector<std::vector<int>> seqs = {kTokens};
  ActStats st = calib::collect_stats(b.m, seqs);
  model::Model smoothed = b.m;
  smooth(smoothed, st, 0.5f);
  EXPECT_NE(smoothed.weights.layers[0].attn_norm, b.m.weights.layers[0].attn_norm);
  engine::Transformer a(b.m), s(smoothed);
  EXPECT_LT(nmse(logits_of(s), logits_of(a)), 1e-9);
}

}  // namespace
