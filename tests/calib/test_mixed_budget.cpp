// The mixed-precision plan meets its budget on the held-out text (verified by the search,
// checked here independently by eval --quant), with fewer bytes than uniform int8.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/perplexity.hpp"
#include "testing.hpp"

namespace {

using testing_support::run_fpgallm;

// ~100 perplexity evaluations: skipped under AddressSanitizer (too slow there).
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_UNDER_SANITIZERS() GTEST_SKIP() << "too slow under sanitizers"
#else
#define SKIP_UNDER_SANITIZERS() (void)0
#endif

// Four stories of the sample: two calibrate, two are held out.
std::string args_for(const std::string& dir, int sensitivity_tokens) {
  const auto stories = engine::split_stories(engine::read_text_file(testing_support::sample_text()));
  std::string t;
  for (std::size_t i = 0; i < 4; ++i) t += stories[i] + "\n";
  testing_support::write_bytes(dir + "/small.txt", t);
  return testing_support::stories260k() + " -z " + testing_support::tok512() + " --calib " + dir +
         "/small.txt --json --sensitivity-tokens " + std::to_string(sensitivity_tokens) + " ";
}

TEST(MixedBudget, OnePercentIsMetWithFewerBytesThanInt8) {
  SKIP_UNDER_SANITIZERS();
  const auto dir = testing_support::scratch_dir("qcli-mixed");
  const std::string args = args_for(dir, 128);
  auto mixed = run_fpgallm("quantize " + args + "--scheme mixed --budget 1% -o " + dir + "/mixed.gguf --sensitivity-json " +
                           dir + "/sens.json", 600);
  ASSERT_EQ(mixed.status, 0) << mixed.err;
  auto int8 = run_fpgallm("quantize " + args + "--scheme w8a8 -o " + dir + "/w8.gguf", 300);
  ASSERT_EQ(int8.status, 0) << int8.err;
  const auto m = nlohmann::json::parse(mixed.out), i = nlohmann::json::parse(int8.out);
  EXPECT_TRUE(m["search"]["budget_met"].get<bool>());
  EXPECT_LE(m["rel_increase"].get<double>(), 0.01);
  EXPECT_LT(m["linear_weight_bytes"].get<std::uint64_t>(), i["linear_weight_bytes"].get<std::uint64_t>());
  const auto sens = nlohmann::json::parse(testing_support::read_bytes(dir + "/sens.json"));
  EXPECT_EQ(sens["rows"].size(), (5u * 7 + 1) * 2);  // every layer x int8, int4-g32
  EXPECT_EQ(sens["candidates"], nlohmann::json::array({"int8", "int4-g32"}));
  // Independent check of the budget: the file evaluated on the held-out half.
  auto e = run_fpgallm("eval " + testing_support::stories260k() + " -z " + testing_support::tok512() + " --text " + dir +
                       "/small.txt --quant " + dir + "/mixed.gguf --json");
  ASSERT_EQ(e.status, 0) << e.err;
  const auto ej = nlohmann::json::parse(e.out);
  EXPECT_EQ(ej["part"], "held-out");
  EXPECT_LE(ej["rel_increase"].get<double>(), 0.01);
}

TEST(MixedBudget, ImpossibleBudgetSaysSoAndWritesNoModel) {
  SKIP_UNDER_SANITIZERS();
  const auto dir = testing_support::scratch_dir("qcli-impossible");
  const std::string args = args_for(dir, 32);
  // A budget that cannot be met (a 20% improvement over fp32): one line, exit 2, no model file, the best plan written.
  auto imp = run_fpgallm("quantize " + args + "--scheme mixed --budget -20 -o " + dir + "/imp.gguf --plan-json " + dir +
                         "/imp.json", 600);
  EXPECT_EQ(imp.status, 2) << imp.err;
  EXPECT_NE(imp.err.find("cannot be met"), std::string::npos) << imp.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/imp.gguf"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/imp.json"));
}

}  // namespace
