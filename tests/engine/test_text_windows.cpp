// `eval --window N`: llama.cpp's perplexity protocol (llama-perplexity -c N,
// examples/perplexity/perplexity.cpp of ../shared/vendor's snapshot). The windows are cut
// from the text's tokens as that code cuts them, and their perplexity is checked against a
// transcription of its scoring run on forward() token by token in double precision; the
// command line prints it and refuses what llama-perplexity refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/simulated.hpp"
#include "engine/perplexity.hpp"
#include "model/model.hpp"
#include "model/synth.hpp"
#include "quant/quant.hpp"
#include "small_qwen.hpp"
#include "testing.hpp"

namespace {

const model::Model& stories() {
  static const model::Model m = model::load(testing_support::stories260k());
  return m;
}

const model::Tokenizer& tok512() {
  static const model::Tokenizer t = model::Tokenizer::load_llama2c(testing_support::tok512(), 512);
  return t;
}

// The sample text's first `lines` lines, newlines kept (llama-perplexity reads the file whole).
std::string first_lines(int lines) {
  const std::string all = engine::read_text_file(testing_support::sample_text());
  std::size_t at = 0;
  for (int i = 0; i < lines && at != std::string::npos; ++i) at = all.find('\n', at + 1);
  return all.substr(0, at == std::string::npos ? all.size() : at + 1);
}

// perplexity() in examples/perplexity/perplexity.cpp, transcribed: chunk i is tokens
// [i*n_ctx, (i+1)*n_ctx) with its first token set to BOS; the logits at positions
// first = n_ctx/2 .. n_ctx-2 score the token after each; nll in double, the perplexity
// exp(mean). Here each chunk runs on a fresh forward() pass, one token at a time.
double llama_cpp_perplexity(const model::Model& m, const std::vector<int>& tokens, int n_ctx, int bos,
                            std::size_t* count) {
  const int n_chunk = int(tokens.size()) / n_ctx, first = n_ctx / 2, vocab = m.config.vocab_size;
  double nll = 0;
  *count = 0;
  for (int i = 0; i < n_chunk; ++i) {
    engine::Transformer t(m);
    t.set_batched(false);
    for (int j = 0; j < n_ctx - 1; ++j) {
      const int token = j == 0 ? bos : tokens[std::size_t(i * n_ctx + j)];
      const float* logits = t.forward(token, j);
      if (j < first) continue;
      double max_logit = logits[0];
      for (int v = 1; v < vocab; ++v) max_logit = std::max(max_logit, double(logits[v]));
      double sum = 0;
      for (int v = 0; v < vocab; ++v) sum += std::exp(double(logits[v]) - max_logit);
      nll += std::log(sum) + max_logit - logits[tokens[std::size_t(i * n_ctx + j + 1)]];
      ++*count;
    }
  }
  return std::exp(nll / double(*count));
}

}  // namespace

// Several windows in one pass (the products over all their rows, attention within each)
// against each window alone; test_block_engine.cpp's bound between batched passes.
TEST(TextWindows, WindowsInOnePassEqualEachAlone) {
  model::Model qwen3 = model::synthesize(testing_support::small_qwen_config(model::Arch::qwen3), 31);
  testing_support::distinct_head_norm_gains(qwen3);
  for (const model::Model* m : {&stories(), static_cast<const model::Model*>(&qwen3)}) {
    const int vocab = m->config.vocab_size, windows = 3, length = 20, from = 7;
    std::vector<int> tokens(std::size_t(windows) * length);
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = int((i * 7919 + 13) % std::size_t(vocab));
    engine::Transformer all(*m);
    ASSERT_TRUE(all.plain_batched());
    const float* got = all.forward_windows(tokens, windows, length, from);
    for (int w = 0; w < windows; ++w) {
      engine::Transformer alone(*m);
      const float* want = alone.forward_block({tokens.data() + std::size_t(w) * length, std::size_t(length)}, 0, from);
      for (int i = 0; i < length - from; ++i)
        EXPECT_LT(testing_support::relative_l2(got + (std::size_t(w) * (length - from) + i) * vocab, want + std::size_t(i) * vocab, vocab),
                  2e-5)
            << m->config.name << " window " << w << " row " << i;
    }
    EXPECT_THROW(all.forward_windows(tokens, windows, length, length), std::invalid_argument);
    const std::vector<int> past(std::size_t(m->config.seq_len + 1), 1);
    EXPECT_THROW(all.forward_windows(past, 1, m->config.seq_len + 1, 0), std::out_of_range);
  }
}

TEST(TextWindows, CutAsLlamaPerplexityCutsTheText) {
  const std::string text = first_lines(3);
  const std::vector<int> tokens = tok512().encode(text, true, false);
  const engine::TextWindows w = engine::text_windows(model::story_encoder(tok512()), text, 64);
  EXPECT_EQ(w.text_tokens, tokens.size());
  ASSERT_EQ(w.windows.size(), tokens.size() / 64);
  ASSERT_GE(w.windows.size(), 3u);
  EXPECT_EQ(w.score_from, 32u);
  for (std::size_t i = 0; i < w.windows.size(); ++i) {
    ASSERT_EQ(w.windows[i].size(), 64u);
    EXPECT_EQ(w.windows[i][0], 1) << "window " << i << " starts with BOS";
    for (std::size_t j = 1; j < 64; ++j) ASSERT_EQ(w.windows[i][j], tokens[i * 64 + j]) << i << " " << j;
  }
  EXPECT_THROW(engine::text_windows(model::story_encoder(tok512()), text, 2), std::invalid_argument);
}

TEST(TextWindows, PerplexityIsLlamaCppsScoringOfTheSecondHalves) {
  const std::string text = first_lines(4);
  const std::vector<int> tokens = tok512().encode(text, true, false);
  for (int window : {64, 37}) {  // an odd window: first = 18, 18 positions scored of 37
    std::size_t count = 0;
    const double want = llama_cpp_perplexity(stories(), tokens, window, 1, &count);
    const engine::TextWindows w = engine::text_windows(model::story_encoder(tok512()), text, window);
    for (bool batched : {true, false}) {
      engine::Transformer t(stories());
      t.set_batched(batched);
      const engine::Perplexity got = engine::perplexity(t, w.windows, {}, w.score_from);
      EXPECT_EQ(got.tokens, count) << window;
      EXPECT_EQ(got.sequences, w.windows.size());
      // Batched against token by token: issue 33's 1e-6 relative.
      EXPECT_NEAR(got.perplexity, want, 1e-6 * want) << "window " << window << " batched " << batched;
    }
  }
}

// The quantized reference keeps its per-token bits over windows too (its own block pass,
// not forward_windows, which runs the fp32 reference's products).
TEST(TextWindows, QuantizedReferenceWindowsHaveThePerTokenBits) {
  const std::string text = first_lines(3);
  const engine::TextWindows w = engine::text_windows(model::story_encoder(tok512()), text, 64);
  const quant::QuantModel qm = quant::quantize_model(stories(), quant::uniform_plan(stories().config, quant::Scheme::w8a8, 32));
  calib::SimulatedTransformer batched(stories(), qm.plan, qm.linears), token(stories(), qm.plan, qm.linears);
  token.set_batched(false);
  ASSERT_FALSE(batched.plain_batched());
  const auto a = engine::perplexity(batched, w.windows, {}, w.score_from);
  const auto b = engine::perplexity(token, w.windows, {}, w.score_from);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.perplexity, b.perplexity);
}

TEST(TextWindows, EvalPrintsTheProtocolAndRefusesWhatItCannotScore) {
  using testing_support::run_fpgallm;
  const std::string model = " " + testing_support::stories260k() + " -z " + testing_support::tok512();
  const auto ok = run_fpgallm("eval" + model + " --text " + testing_support::sample_text() + " --window 128 --json");
  ASSERT_EQ(ok.status, 0) << ok.err;
  const auto j = nlohmann::json::parse(ok.out);
  EXPECT_EQ(j.at("window"), 128);
  EXPECT_EQ(j.at("tokens").get<std::size_t>(), j.at("sequences").get<std::size_t>() * 63);

  const std::string scratch = testing_support::scratch_dir("text-windows");
  const std::string short_text = scratch + "/short.txt";
  testing_support::write_bytes(short_text, "Once upon a time there was a cat.\n");
  struct Case {
    std::string args, names;
  };
  for (const Case& c : std::vector<Case>{
           {" --text " + short_text + " --window 64", short_text},              // fewer than two windows
           {" --text " + testing_support::sample_text() + " --window 4096", "--window"},  // past the context (512)
           {" --text " + testing_support::sample_text() + " --window 2", "--window"},
           {" --text " + testing_support::sample_text() + " --window 64 --schemes w8a8", "--window"},
       }) {
    const auto r = run_fpgallm("eval" + model + c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}
