// `fpgallm plan` says where its two costing paths differ (issue 29, item 7): a short block
// when the kernel path and the per-operation path differ by more than 10%, and the key
// two_paths in --json.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "testing.hpp"

namespace {

using testing_support::run_fpgallm;

// A time as the plan block prints it (4 significant digits, %g style).
std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g ms", ms);
  return buf;
}

TEST(PlanTwoPaths, PrintsTheSplitAndCarriesItInJson) {
  const auto text = run_fpgallm("plan llama2-7b --device u280 --context 512");
  ASSERT_EQ(text.status, 0) << text.err;
  const auto at = text.out.find("two costing paths (decode step): kernel ");
  ASSERT_NE(at, std::string::npos) << text.out;
  const std::string line = text.out.substr(at, text.out.find('\n', at) - at);
  EXPECT_NE(line.find("per-operation"), std::string::npos) << line;
  EXPECT_NE(line.find("difference from: attention on the vector unit (64 elements per cycle) +"), std::string::npos) << line;
  EXPECT_NE(text.out.find("under ideal units (perf::compare_paths) the kernel path gives"), std::string::npos);

  const auto json = run_fpgallm("plan llama2-7b --device u280 --context 512 --json");
  ASSERT_EQ(json.status, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  ASSERT_TRUE(j.contains("two_paths")) << json.out.substr(0, 400);
  const auto& t = j["two_paths"];
  EXPECT_TRUE(t["on_instruction_list"].get<bool>());
  EXPECT_TRUE(t["ideal_units"]["attention_on_matrix_unit"].get<bool>());
  for (const char* phase : {"decode", "prefill"}) {
    const auto& ph = t[phase];
    EXPECT_GT(ph["kernel_s"].get<double>(), 0);
    EXPECT_GT(ph["per_operation_s"].get<double>(), 0);
    double sum = 0;
    for (const auto& part : ph["parts"]) sum += part["fraction"].get<double>();
    EXPECT_NEAR(sum, 1.0, 1e-9) << phase;
  }
  // The text's decode figures are the JSON's.
  const double kernel_ms = 1e3 * t["decode"]["kernel_s"].get<double>();
  EXPECT_NE(line.find(fmt_ms(kernel_ms)), std::string::npos) << line;
}

}  // namespace
