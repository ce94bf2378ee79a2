// --predict-card's figures against `fpgallm simulate`, and `fpgallm bench-serve` against a
// server's own counters.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "serve/bench_serve.hpp"
#include "server_process.hpp"
#include "testing.hpp"

using nlohmann::json;
using serve_test::ServerProcess;
using testing_support::run_fpgallm;

namespace {

double metric(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\n" + name + " ([0-9.e+-]+)\n"))) return -1;
  return std::stod(m[1]);
}

// The bundled model's design for an Alveo U280, from `fpgallm plan`.
std::string u280_design() {
  static const std::string path = [] {
    const std::string p = testing_support::scratch_dir("bench_serve") + "/design.json";
    const auto r = run_fpgallm("plan " + testing_support::stories260k() + " --device u280 -o " + p);
    EXPECT_EQ(r.status, 0) << r.err;
    return p;
  }();
  return path;
}

std::string prompt_file() {
  const std::string p = testing_support::scratch_dir("bench_serve_prompts") + "/prompts.txt";
  testing_support::write_bytes(p, "Once upon a time\n\nThe little dog\r\nLily wanted to\n");
  return p;
}

}  // namespace

// Numpy's default percentiles (linear between order statistics), worked by hand.
TEST(BenchServe, PercentilesInterpolateBetweenOrderStatistics) {
  const serve::Distribution d = serve::distribution({10, 1, 9, 2, 8, 3, 7, 4, 6, 5});
  EXPECT_EQ(d.count, 10);
  EXPECT_DOUBLE_EQ(d.mean, 5.5);
  EXPECT_DOUBLE_EQ(d.p50, 5.5);   // between the 5th and 6th of 10
  EXPECT_DOUBLE_EQ(d.p90, 9.1);   // 0.9 x 9 = 8.1: 9 + 0.1 x (10 - 9)
  EXPECT_DOUBLE_EQ(d.p99, 9.91);  // 0.99 x 9 = 8.91
  EXPECT_DOUBLE_EQ(d.max, 10);
  EXPECT_EQ(serve::distribution({}).count, 0);
  EXPECT_DOUBLE_EQ(serve::distribution({3}).p99, 3);
}

// One request at a time (--max-batch 1): each of its positions is one kernel call at its
// context, so its card seconds are the sum of `fpgallm simulate --context c` over c = 1 ..
// the positions it computed, and its joules lie between the card's static power and its
// TDP times those seconds.
TEST(ServeCard, ARequestCostsTheSimulatedDecodeStepsOfItsPositions) {
  const std::string design = u280_design();
  ServerProcess s(testing_support::stories260k() + " --max-batch 1 --predict-card --design " + design);
  auto r = s.client().Post("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":6,"temperature":0})",
                           "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  const int positions = j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>() - 1;
  double want = 0;
  for (int c = 1; c <= positions; ++c) {
    const auto sim = run_fpgallm("simulate " + testing_support::stories260k() + " --design " + design +
                                 " --context " + std::to_string(c) + " --json");
    ASSERT_EQ(sim.status, 0) << sim.err;
    want += json::parse(sim.out)["seconds"].get<double>();
  }
  const json& card = j["fpgallm"]["card"];
  EXPECT_NEAR(card["seconds"].get<double>(), want, 1e-12 + 1e-9 * want);
  // data/devices.json: the U280's TDP 215 W; the power model's floor is its static 10%.
  const double watts = card["joules"].get<double>() / card["seconds"].get<double>();
  EXPECT_GT(watts, 21.5 * (1 - 1e-9));
  EXPECT_LT(watts, 215.0);
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NEAR(metric(m->body, "fpgallm_card_busy_seconds_total"), want, 1e-12 + 1e-9 * want);
  EXPECT_EQ(metric(m->body, "fpgallm_card_queries_total"), 1);
  EXPECT_NEAR(metric(m->body, "fpgallm_card_queries_per_second"), 1 / want, 1e-6 / want);
  EXPECT_EQ(s.stop(), 0);
}

// bench-serve's counts equal the server's: requests completed, prompt and output tokens,
// and the card's busy seconds and joules over the run.
TEST(BenchServe, CountsWhatTheServerCounts) {
  ServerProcess s(testing_support::stories260k() + " --max-batch 4 --predict-card --design " + u280_design());
  const std::string url = "http://127.0.0.1:" + std::to_string(s.port());
  const auto r = run_fpgallm("bench-serve " + url + " --prompts " + prompt_file() + " -c 4 -n 12 --max-tokens 9 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["model"], "stories260K");
  EXPECT_EQ(j["sent"], 12);
  EXPECT_EQ(j["completed"], 12);
  EXPECT_EQ(j["failed"], 0) << j["failures"].dump();
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(j["output_tokens"].get<double>(), metric(m->body, "fpgallm_generated_tokens_total"));
  EXPECT_EQ(j["prompt_tokens"].get<double>(), metric(m->body, "fpgallm_prompt_tokens_total"));
  EXPECT_NEAR(j["card"]["busy_seconds"].get<double>(), metric(m->body, "fpgallm_card_busy_seconds_total"), 1e-9);
  EXPECT_NEAR(j["card"]["joules"].get<double>(), metric(m->body, "fpgallm_card_joules_total"), 1e-9);
  for (const char* d : {"time_to_first_token_seconds", "time_per_output_token_seconds", "request_seconds"}) {
    const json& x = j[d];
    EXPECT_GT(x["count"].get<int>(), 0) << d;
    EXPECT_LE(x["p50"].get<double>(), x["p90"].get<double>()) << d;
    EXPECT_LE(x["p90"].get<double>(), x["p99"].get<double>()) << d;
    EXPECT_LE(x["p99"].get<double>(), x["max"].get<double>()) << d;
  }
  EXPECT_LE(j["time_to_first_token_seconds"]["max"].get<double>(), j["request_seconds"]["max"].get<double>());
  EXPECT_EQ(s.stop(), 0);
}

// Requests the server refuses are counted as failures with its message, not hidden.
TEST(BenchServe, RefusedRequestsAreFailuresWithTheServersMessage) {
  ServerProcess s(testing_support::stories260k());
  const std::string url = "http://127.0.0.1:" + std::to_string(s.port());
  const auto r = run_fpgallm("bench-serve " + url + " --prompts " + prompt_file() + " -n 3 --model nope --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["completed"], 0);
  EXPECT_EQ(j["failed"], 3);
  EXPECT_NE(j["failures"][0].get<std::string>().find("HTTP 404"), std::string::npos) << j["failures"].dump();
  EXPECT_NE(j["failures"][0].get<std::string>().find("nope"), std::string::npos) << j["failures"].dump();
  EXPECT_EQ(s.stop(), 0);
}

TEST(BenchServe, BadInputIsOneLineNamingTheUrlOrOptionExitTwo) {
  const std::string prompts = prompt_file();
  const std::string empty = testing_support::scratch_dir("bench_serve_empty") + "/empty.txt";
  testing_support::write_bytes(empty, "\n\n");
  struct Case {
    std::string args, names;
  };
  const std::vector<Case> cases = {
      {"https://127.0.0.1:1 --prompts " + prompts, "https://127.0.0.1:1"},
      {"ftp://x --prompts " + prompts, "ftp://x"},
      {"http:// --prompts " + prompts, "http://"},
      {"http://127.0.0.1:99999 --prompts " + prompts, "http://127.0.0.1:99999"},
      {"http://127.0.0.1:12a --prompts " + prompts, "http://127.0.0.1:12a"},
      {"http://[::1 --prompts " + prompts, "http://[::1"},
      // Port 1 on loopback: nothing listens there, so the server cannot be reached.
      {"http://127.0.0.1:1 --prompts " + prompts, "http://127.0.0.1:1"},
      {"http://127.0.0.1:1 --prompts /nonexistent/prompts.txt", "/nonexistent/prompts.txt"},
      {"http://127.0.0.1:1 --prompts " + empty, empty},
      {"http://127.0.0.1:1 --prompts " + prompts + " -c 0", "--concurrency"},
      {"http://127.0.0.1:1 --prompts " + prompts + " --rate -1", "--rate"},
      {"http://127.0.0.1:1 --prompts " + prompts + " --temperature 3", "--temperature"},
  };
  for (const auto& c : cases) {
    const auto r = run_fpgallm("bench-serve " + c.args, 30);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
}

TEST(ServeCard, BadInputIsOneLineNamingTheOptionOrFileExitTwo) {
  const std::string dir = testing_support::scratch_dir("serve_card_bad");
  nlohmann::json other = nlohmann::json::parse(testing_support::read_bytes(u280_design()));
  other["device"] = "no-such-card";
  testing_support::write_bytes(dir + "/unknown_device.json", other.dump());
  other.erase("device");
  testing_support::write_bytes(dir + "/no_device.json", other.dump());
  const std::string model = testing_support::stories260k();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--predict-card", "--predict-card"},
      {"--predict-card --design /nonexistent/design.json", "/nonexistent/design.json"},
      {"--predict-card --design " + dir + "/no_device.json", dir + "/no_device.json"},
      {"--predict-card --design " + dir + "/unknown_device.json", dir + "/unknown_device.json: its device 'no-such-card'"},
      {"--design " + u280_design(), "--design"},
  };
  for (const auto& [args, names] : cases) {
    const auto r = run_fpgallm("serve " + model + " --port 0 " + args, 30);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(names), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  }
}
