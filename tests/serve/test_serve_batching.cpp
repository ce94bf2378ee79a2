// Continuous batching gives each request the tokens `fpgallm run` gives alone, and a
// replica that fails mid-stream loses no request.
#include <gtest/gtest.h>

#include <regex>
#include <thread>

#include "server_process.hpp"
#include "testing.hpp"

using nlohmann::json;
using serve_test::ServerProcess;

namespace {

const std::vector<std::string> kPrompts = {"Once upon a time", "Lily", "The cat", "Tom went", "One day", "A big dog",
                                           "She saw", "The sun"};

struct Case {
  std::string prompt;
  int max_tokens;
  double temperature;
  unsigned long long seed;
};

std::vector<Case> cases(int n, bool sampled) {
  std::vector<Case> out;
  for (int i = 0; i < n; ++i)
    out.push_back({kPrompts[std::size_t(i) % kPrompts.size()], 8 + (i * 7) % 25,
                   sampled && i % 2 ? 0.8 : 0.0, 100 + static_cast<unsigned long long>(i)});
  return out;
}

json body(const Case& c) {
  return {{"prompt", c.prompt}, {"max_tokens", c.max_tokens}, {"temperature", c.temperature}, {"top_p", 0.9}, {"seed", c.seed}};
}

// Each case's tokens from `fpgallm run` (prompt length from the server's usage).
std::vector<std::vector<int>> expected(const std::string& model_args, const std::vector<Case>& cs,
                                       const std::vector<int>& prompt_tokens) {
  std::vector<std::vector<int>> out;
  for (std::size_t i = 0; i < cs.size(); ++i)
    out.push_back(serve_test::run_tokens(model_args, cs[i].prompt, prompt_tokens[i], cs[i].max_tokens,
                                         cs[i].temperature, cs[i].seed));
  return out;
}

double metric(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\n" + name + " ([0-9.e+-]+)\n"))) return -1;
  return std::stod(m[1]);
}

void concurrent_equals_run(const std::string& model_args) {
  ServerProcess s(model_args + " --max-batch 16");
  const auto cs = cases(16, true);
  std::vector<json> responses(cs.size());
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < cs.size(); ++i)
    clients.emplace_back([&, i] {
      auto c = s.client();
      auto r = c.Post("/v1/completions", body(cs[i]).dump(), "application/json");
      if (r && r->status == 200) responses[i] = json::parse(r->body);
      else responses[i] = r ? json(r->body) : json(httplib::to_string(r.error()));
    });
  for (auto& t : clients) t.join();
  std::vector<int> prompt_tokens;
  for (auto& r : responses) {
    ASSERT_TRUE(r.is_object()) << "a request failed: " << r.dump();
    prompt_tokens.push_back(r["usage"]["prompt_tokens"]);
  }
  const auto want = expected(model_args, cs, prompt_tokens);
  for (std::size_t i = 0; i < cs.size(); ++i) {
    EXPECT_EQ(responses[i]["fpgallm"]["tokens"].get<std::vector<int>>(), want[i]) << "request " << i << ": " << cs[i].prompt;
    EXPECT_EQ(responses[i]["usage"]["completion_tokens"], static_cast<int>(want[i].size()));
  }
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(metric(m->body, "fpgallm_requests_completed_total"), 16);
  EXPECT_EQ(metric(m->body, "fpgallm_kv_pages_used"), 0) << "pages are freed when sequences leave";
  EXPECT_GT(metric(m->body, "fpgallm_kv_pages_total"), 0);
  EXPECT_EQ(s.stop(), 0);
}

}  // namespace

TEST(ServeBatching, SixteenConcurrentRequestsEqualRunOnRef) { concurrent_equals_run(testing_support::stories260k()); }

TEST(ServeBatching, SixteenConcurrentRequestsEqualRunOnAccel) {
  const auto dir = testing_support::scratch_dir("serve-accel");
  testing_support::write_bytes(dir + "/cal.txt", testing_support::read_bytes(testing_support::sample_text()).substr(0, 3000));
  auto q = testing_support::run_fpgallm("quantize " + testing_support::stories260k() + " --calib " + dir +
                                        "/cal.txt --scheme w8a8 -o " + dir + "/q.gguf");
  ASSERT_EQ(q.status, 0) << q.err;
  concurrent_equals_run(testing_support::stories260k() + " --backend accel --quant " + dir + "/q.gguf");
}

TEST(ServeBatching, AFewPagesServeManySequencesByPreemption) {
  // 6 pages of 8 positions for 4 slots: each sequence fits alone, not all four together,
  // so sequences wait for pages and give them back.
  const std::string model = testing_support::stories260k();
  ServerProcess s(model + " --max-batch 4 --kv-page 8 --kv-pages 6");
  const auto cs = cases(6, false);
  std::vector<json> responses(cs.size());
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < cs.size(); ++i)
    clients.emplace_back([&, i] {
      auto r = s.client().Post("/v1/completions", body(cs[i]).dump(), "application/json");
      if (r && r->status == 200) responses[i] = json::parse(r->body);
    });
  for (auto& t : clients) t.join();
  std::vector<int> prompt_tokens;
  for (auto& r : responses) {
    ASSERT_TRUE(r.is_object());
    prompt_tokens.push_back(r["usage"]["prompt_tokens"]);
  }
  const auto want = expected(model, cs, prompt_tokens);
  for (std::size_t i = 0; i < cs.size(); ++i) EXPECT_EQ(responses[i]["fpgallm"]["tokens"].get<std::vector<int>>(), want[i]);
}

class ServeFault : public ::testing::TestWithParam<const char*> {};

TEST_P(ServeFault, ThirtyTwoStreamsSurviveAFailingReplica) {
  const std::string model = testing_support::stories260k();
  const std::string kind = GetParam();
  ServerProcess s(model + " --replicas 3 --max-batch 4 --watchdog 1 --scrub-every 1 --inject-fault 1:" + kind + ":40");
  const auto cs = cases(32, true);
  std::vector<serve_test::Streamed> got(cs.size());
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < cs.size(); ++i)
    clients.emplace_back([&, i] { got[i] = serve_test::stream(s, "/v1/completions", body(cs[i])); });
  for (auto& t : clients) t.join();
  std::vector<int> prompt_tokens;
  int retried = 0;
  for (auto& g : got) {
    ASSERT_EQ(g.status, 200);
    ASSERT_TRUE(g.done);
    ASSERT_TRUE(g.last.contains("usage")) << g.last.dump();
    prompt_tokens.push_back(g.last["usage"]["prompt_tokens"]);
    retried += g.last["fpgallm"]["retries"].get<int>() > 0;
  }
  const auto want = expected(model, cs, prompt_tokens);
  for (std::size_t i = 0; i < cs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i]) << "stream " << i;
    EXPECT_EQ(got[i].last["fpgallm"]["tokens"].get<std::vector<int>>(), want[i]);
    EXPECT_EQ(got[i].last["choices"][0]["finish_reason"], want[i].back() == 1 ? "stop" : "length");
  }
  EXPECT_GT(retried, 0) << "the fault hit no request";
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(metric(m->body, "fpgallm_retries_total"), retried);
  EXPECT_EQ(metric(m->body, "fpgallm_replicas_healthy"), 2);
  auto h = s.client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(s.stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, ServeFault, ::testing::Values("crash", "hang", "flip"));
