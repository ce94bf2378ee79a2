// fpgallm quantize / eval --quant / run --quant as a user runs them.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/perplexity.hpp"
#include "testing.hpp"

namespace {

using testing_support::run_fpgallm;

std::string model_args() { return testing_support::stories260k() + " -z " + testing_support::tok512(); }

// The first six stories of the sample: three calibrate, three are held out.
std::string small_text(const std::string& dir) {
  const auto stories = engine::split_stories(engine::read_text_file(testing_support::sample_text()));
  std::string t;
  for (std::size_t i = 0; i < 6; ++i) t += stories[i] + "\n";
  const std::string path = dir + "/small.txt";
  testing_support::write_bytes(path, t);
  return path;
}

TEST(QuantizeCli, W8A8WritesAModelThatEvalAndRunLoad) {
  const auto dir = testing_support::scratch_dir("qcli-w8");
  const auto text = small_text(dir);
  auto r = run_fpgallm("quantize " + model_args() + " --calib " + text + " --scheme w8a8 --kv8 -o " + dir +
                       "/q.gguf --plan-json " + dir + "/plan.json --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_LT(j["rel_increase"].get<double>(), 0.01);
  EXPECT_EQ(j["plan"]["kv_cache"], "int8");
  EXPECT_TRUE(std::filesystem::exists(dir + "/plan.json"));
  // eval on the calibration file reports the held-out half, with the same figure.
  auto e = run_fpgallm("eval " + model_args() + " --text " + text + " --quant " + dir + "/q.gguf --json");
  ASSERT_EQ(e.status, 0) << e.err;
  const auto ej = nlohmann::json::parse(e.out);
  EXPECT_EQ(ej["part"], "held-out");
  EXPECT_DOUBLE_EQ(ej["perplexity"].get<double>(), j["perplexity"].get<double>());
  auto g = run_fpgallm("run " + model_args() + " --quant " + dir + "/q.gguf -t 0 -n 40");
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_NE(g.out.find("Once upon a time"), std::string::npos) << g.out;
}

TEST(QuantizeCli, BadInputOneLineExit2NoFile) {
  const auto dir = testing_support::scratch_dir("qcli-bad");
  testing_support::write_bytes(dir + "/empty.txt", "\n\n");
  testing_support::write_bytes(dir + "/one.txt", "Once upon a time there was a cat.\n");
  const auto text = small_text(dir);
  const std::string out = dir + "/out.gguf";
  for (const std::string& args :
       {"--calib " + dir + "/empty.txt", "--calib " + dir + "/one.txt", "--calib " + text + " --scheme w3a3",
        "--calib " + text + " --scheme mixed --budget abc", "--calib " + dir + "/missing.txt"}) {
    auto r = run_fpgallm("quantize " + model_args() + " " + args + " -o " + out);
    EXPECT_EQ(r.status, 2) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
}

}  // namespace
