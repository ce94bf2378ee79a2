// The int4 methods of `quantize` on stories260K: AWQ's folding keeps the fp32 model's
// function, the Hessians count the calibration tokens, and deploy's quantize step stops at
// the first scheme within budget (deploy/test_quantize_step.cpp: the order of methods).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "calib/calib.hpp"
#include "calib/simulated.hpp"
#include "deploy/deploy.hpp"
#include "engine/perplexity.hpp"
#include "model/model.hpp"
#include "model/synth.hpp"
#include "small_qwen.hpp"
#include "testing.hpp"

namespace {

using testing_support::run_fpgallm;

// The first `n` stories of the sample: half calibrate, half are held out.
std::string first_stories(std::size_t n) {
  const auto stories = engine::split_stories(engine::read_text_file(testing_support::sample_text()));
  std::string t;
  for (std::size_t i = 0; i < n && i < stories.size(); ++i) t += stories[i] + "\n";
  return t;
}

struct Stories260K {
  model::Model m = model::load(testing_support::stories260k());
  model::Tokenizer tok = model::load_tokenizer(testing_support::tok512());
};

quant::Hessians fp32_hessians(const model::Model& m, const std::vector<std::vector<int>>& seqs) {
  const quant::Plan fp32 = quant::uniform_plan(m.config, quant::Scheme::fp32, 32);
  const std::vector<quant::QuantLinear> none(fp32.layers.size());
  return calib::collect_hessians(m, fp32, none, seqs, calib::HessianTransformer::kAllLayers);
}

TEST(Hessians, CountTheTokensAndAreSymmetricWithTheSquaresOnTheDiagonal) {
  Stories260K s;
  const auto split = calib::split_text(s.tok, first_stories(4), "sample");
  const auto h = fp32_hessians(s.m, split.calibration);
  EXPECT_EQ(h.tokens, split.calibration_tokens);
  const auto& a = h.of(0, model::Linear::wq);
  const auto n = static_cast<std::size_t>(s.m.config.dim);
  ASSERT_EQ(a.size(), n * n);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_GT(a[i * n + i], 0.0);
    for (std::size_t j = 0; j < n; ++j) EXPECT_EQ(a[i * n + j], a[j * n + i]);
  }
  // Only the requested block when one is named.
  const quant::Plan fp32 = quant::uniform_plan(s.m.config, quant::Scheme::fp32, 32);
  const std::vector<quant::QuantLinear> none(fp32.layers.size());
  const auto h2 = calib::collect_hessians(s.m, fp32, none, split.calibration, 2);
  EXPECT_TRUE(h2.of(0, model::Linear::wq).empty());
  EXPECT_EQ(h2.of(2, model::Linear::w2), h.of(2, model::Linear::w2));
}

TEST(Awq, FoldingKeepsTheFp32ModelsLogitsAndNeverRaisesTheLayerError) {
  Stories260K s;
  const auto split = calib::split_text(s.tok, first_stories(4), "sample");
  model::Model scaled = s.m;
  const auto sites = quant::awq(scaled, fp32_hessians(s.m, split.calibration), 32);
  ASSERT_EQ(sites.size(), static_cast<std::size_t>(s.m.config.n_layers) * 4);
  int moved = 0;
  for (const auto& site : sites) {
    EXPECT_LE(site.error_awq, site.error_rtn) << site.layer << " " << site.site;
    moved += site.ratio > 0;
  }
  EXPECT_GT(moved, 0);
  engine::Transformer a(s.m), b(scaled);
  double worst = 0.0;
  const auto& seq = split.held_out.front();
  for (std::size_t pos = 0; pos + 1 < std::min<std::size_t>(seq.size(), 64); ++pos) {
    const float* la = a.forward(seq[pos], static_cast<int>(pos));
    const float* lb = b.forward(seq[pos], static_cast<int>(pos));
    for (int v = 0; v < s.m.config.vocab_size; ++v) worst = std::max(worst, static_cast<double>(std::fabs(la[v] - lb[v])));
  }
  // fp32 rounding of the scaled weights only: logits are O(10).
  EXPECT_LT(worst, 1e-3);
}

// Issue 30 item 5: the same methods on Qwen2 (q/k/v biases: AWQ's v->o scales divide bv with
// wv's rows) and Qwen3 (per-head q/k norms after the scaled projections). Synthesized models
// with the sample's vocabulary (tok512); inputs of the sample's first stories.
TEST(Awq, FoldingKeepsQwenLogitsAndGptqRunsOnQwen) {
  const model::Tokenizer tok = model::load_tokenizer(testing_support::tok512());
  for (auto arch : {model::Arch::qwen2, model::Arch::qwen3}) {
    model::Config c = testing_support::small_qwen_config(arch);
    c.vocab_size = 512;
    c.seq_len = 256;
    model::Model m = model::synthesize(c, 7);
    if (arch == model::Arch::qwen2)
      for (auto& l : m.weights.layers)
        for (std::size_t i = 0; i < l.bv.size(); ++i) l.bv[i] = 0.05f * float(int(i % 7) - 3);  // synthesize's are 0
    else
      testing_support::distinct_head_norm_gains(m);
    const std::string name = model::to_string(arch);
    const auto split = calib::split_text(tok, first_stories(4), "sample");
    model::Model scaled = m;
    const auto sites = quant::awq(scaled, fp32_hessians(m, split.calibration), 32);
    ASSERT_EQ(sites.size(), static_cast<std::size_t>(c.n_layers) * 4) << name;
    int moved = 0;
    for (const auto& site : sites) {
      EXPECT_LE(site.error_awq, site.error_rtn) << name << " " << site.layer << " " << site.site;
      moved += site.ratio > 0 && site.site == "v->o";
    }
    engine::Transformer a(m), b(scaled);
    double worst = 0.0, range = 0.0;
    const auto& seq = split.held_out.front();
    for (std::size_t pos = 0; pos + 1 < std::min<std::size_t>(seq.size(), 48); ++pos) {
      const float* la = a.forward(seq[pos], static_cast<int>(pos));
      const float* lb = b.forward(seq[pos], static_cast<int>(pos));
      for (int v = 0; v < c.vocab_size; ++v) {
        worst = std::max(worst, static_cast<double>(std::fabs(la[v] - lb[v])));
        range = std::max(range, static_cast<double>(std::fabs(la[v])));
      }
    }
    std::printf("%s: AWQ moved %d v->o sites; folded logits differ by %.3g (range %.3g)\n", name.c_str(), moved, worst, range);
    EXPECT_LT(worst, 1e-4 * range) << name;  // fp32 rounding of the scaled weights only
    // GPTQ end to end: the quantized model runs and scores the held-out half.
    calib::QuantizeOptions o;
    o.scheme = quant::Scheme::w4a8;
    o.method = quant::Method::gptq;
    const auto r = calib::quantize(m, tok, first_stories(4), "sample", o);
    EXPECT_EQ(r.calibration_passes, 1 + c.n_layers + 1) << name;
    EXPECT_TRUE(std::isfinite(r.perplexity) && r.perplexity > 1) << name;
    if (arch == model::Arch::qwen2) EXPECT_EQ(r.qm.bv.at(1), m.weights.layers[1].bv);  // biases stay fp32
    else EXPECT_EQ(r.qm.k_norm.at(1), m.weights.layers[1].k_norm);
  }
}

TEST(Deploy, QuantizeStepStopsAtTheFirstSchemeWithinBudget) {
  Stories260K s;
  const std::vector<deploy::SchemeChoice> schemes = {
      {quant::Scheme::w4a8, 32, {quant::Method::rtn, quant::Method::awq, quant::Method::gptq}}, {quant::Scheme::w8a8, 32}};
  const deploy::Quantized q = deploy::choose_quantization(s.m, s.tok, first_stories(4), "sample", 10.0, schemes);
  ASSERT_EQ(q.rows.size(), 1u);
  EXPECT_EQ(q.chosen.method, quant::Method::rtn);
  EXPECT_EQ(q.chosen.qm.plan.scheme, quant::Scheme::w4a8);
}

TEST(QuantizeCli, MethodErrorsNameTheOptionOneLineExit2) {
  const auto dir = testing_support::scratch_dir("qcli-method");
  testing_support::write_bytes(dir + "/six.txt", first_stories(6));
  const std::string base = "quantize " + testing_support::stories260k() + " -z " + testing_support::tok512() +
                           " --calib " + dir + "/six.txt -o " + dir + "/q.gguf ";
  for (const auto& [args, option] : std::vector<std::pair<std::string, std::string>>{
           {"--scheme w4a8 --method gptx", "--method"},
           {"--scheme w8a8 --method gptq", "--method"},
           {"--scheme w4a8 --method awq --act-order", "--act-order"}}) {
    auto r = run_fpgallm(base + args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(option), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir + "/q.gguf")) << args;
  }
}

TEST(QuantizeCli, GptqWritesAModelEvalScoresTheSame) {
  const auto dir = testing_support::scratch_dir("qcli-gptq");
  testing_support::write_bytes(dir + "/four.txt", first_stories(4));
  const std::string args = testing_support::stories260k() + " -z " + testing_support::tok512();
  auto q = run_fpgallm("quantize " + args + " --calib " + dir + "/four.txt --scheme w4a8 --method gptq --act-order "
                       "--search-scales -o " +
                       dir + "/q.gguf --json");
  ASSERT_EQ(q.status, 0) << q.err;
  const auto j = nlohmann::json::parse(q.out);
  EXPECT_EQ(j["method"], "gptq");
  EXPECT_EQ(j["act_order"], true);
  auto e = run_fpgallm("eval " + args + " --text " + dir + "/four.txt --quant " + dir + "/q.gguf --json");
  // w2 (172 columns) is stored as F32 values with its scales beside them (docs section 8).
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(e.out)["perplexity"].get<double>(), j["perplexity"].get<double>());
}

}  // namespace
