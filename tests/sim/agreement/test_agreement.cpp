// `plan` and `simulate` agree (issue 15): for every preset the instruction list can
// express, on the U280, U55C, U50 and U200 (DDR), the design `fpgallm plan` returns is
// simulated for prefill (128 tokens) and one decode step (at context 512, or the model's
// context when shorter), and each time is within 10% of the analytical prediction for the
// same design, precision and scenario. Both cost arch::Program with arch::unit_work; the
// simulator adds what only execution in time shows (the ramp of each weight stream, request
// latency after stalls, buffer space), so a larger gap means one of them has drifted.
//
// Qwen presets (q/k/v biases in the matmuls' store stage, per-head q/k norms, a free head
// width) are checked on two cards each, the smallest and the 7-8B of each family. MoE
// presets are excluded: arch::build_program has no experts, so the kernels cannot run
// them and `plan` costs them with the per-operation model only (its prediction notes say
// so). Encoders (BERT) are excluded too: `plan` plans inference of causal models (an
// encoder has no decode phase).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <nlohmann/json.hpp>

#include "arch/design.hpp"
#include "arch/units.hpp"
#include "graph/workload.hpp"
#include "hw/device.hpp"
#include "model/presets.hpp"
#include "perf/perf.hpp"
#include "sim/simulate.hpp"
#include "testing.hpp"

namespace {

struct Case {
  std::string preset, device;
  std::string scheme = "";  // --scheme of plan ("": its default)
};
// gtest prints the parameter in the test's listing (ctest shows it): the names, not bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.preset << " on " << c.device << (c.scheme.empty() ? "" : " at " + c.scheme);
}

class SimAgreement : public ::testing::TestWithParam<Case> {};

TEST_P(SimAgreement, PlanAndSimulateAgreeWithinTenPercent) {
  const Case& c = GetParam();
  const model::Config cfg = model::find_preset(c.preset).value();
  const int context = std::min(512, cfg.seq_len);
  const int prompt = std::min(128, cfg.seq_len);
  const auto dir = testing_support::scratch_dir("agree-" + c.preset + "-" + c.device + c.scheme);
  const auto plan = testing_support::run_fpgallm(
      "plan " + c.preset + " --device " + c.device + " --context " + std::to_string(context) + " --prompt " +
      std::to_string(prompt) + (c.scheme.empty() ? "" : " --scheme " + c.scheme) + " -o " + dir + "/design.json --json",
      300);
  if (plan.status != 0) {
    ASSERT_NE(plan.err.find("fits no design"), std::string::npos) << plan.err;
    GTEST_SKIP() << "no design fits: " << plan.err;
  }
  const auto j = nlohmann::json::parse(testing_support::read_bytes(dir + "/design.json"));
  const arch::Design d = arch::load(dir + "/design.json");
  const hw::Device& dev = hw::find_device(c.device);
  const graph::Precision precision = graph::parse_scheme(j.at("quant").get<std::string>());
  // A design whose prompt call runs one-token blocks (no larger block fits beside its decode
  // datapath) is 128 programs of a whole decode step each. The simulator lowers every
  // program's tasks before it runs them (about 125 MB per llama2-7b program), so such a
  // design's prefill is compared on a 16-token prompt.
  const int sim_prompt = arch::block_tokens(d) == 1 ? std::min(16, prompt) : prompt;
  perf::Scenario s;
  s.batch = 1;
  s.prompt = sim_prompt;
  s.context = context;
  const perf::Prediction p = perf::predict(d, dev, perf::lower(cfg, precision, s));

  sim::Options o;
  o.precision = [&](int layer, model::Linear which) {
    return arch::LinearPrecision{precision.bits_for(model::linear_name(layer, which)), precision.group_size};
  };
  o.prompt = sim_prompt;
  o.context = context;
  struct Phase {
    const char* name;
    arch::Stage stage;
    double analytical;
  };
  const std::vector<Phase> phases{{"prefill", arch::Stage::prefill, p.prefill_s},
                                  {"decode", arch::Stage::decode, p.decode_step_s}};
  for (const auto& ph : phases) {
    o.stage = ph.stage;
    const sim::Report r = sim::simulate(cfg, d, dev, o);
    const double ratio = r.seconds / ph.analytical;
    std::printf("| %s | %s | %s | %s | %.4g | %.4g | %.3f |\n", c.preset.c_str(), c.device.c_str(), d.name.c_str(),
                ph.name, ph.analytical * 1e3, r.seconds * 1e3, ratio);
    EXPECT_NEAR(ratio, 1.0, 0.10) << c.preset << " " << ph.name << " on " << c.device << " (" << d.name
                                  << "): simulated " << r.seconds << " s, analytical " << ph.analytical << " s";
  }
}

// The emitted project's schedule table (every loop of the kernel with trip count, II and
// depth; codegen::decode_schedule) totals within 2% of `fpgallm simulate` for one decode
// step of the same design at the same context (the design's), for the demo model and for
// llama2-7b on the designs `plan` writes for them on the U280 (issue 14).
void expect_schedule_matches_simulation(const std::string& model, const std::string& name) {
  const auto dir = testing_support::scratch_dir("schedule-" + name);
  const auto plan = testing_support::run_fpgallm("plan " + model + " --device u280 -o " + dir + "/design.json", 300);
  ASSERT_EQ(plan.status, 0) << plan.err;
  const auto emit = testing_support::run_fpgallm("emit " + model + " --design " + dir + "/design.json -o " + dir +
                                                 "/proj --golden-steps 1 --json", 300);
  ASSERT_EQ(emit.status, 0) << emit.err;
  const double schedule = nlohmann::json::parse(emit.out).at("schedule_cycles").get<double>();
  const auto sim = testing_support::run_fpgallm("simulate " + model + " --design " + dir + "/design.json --json", 300);
  ASSERT_EQ(sim.status, 0) << sim.err;
  const double simulated = nlohmann::json::parse(sim.out).at("cycles").get<double>();
  std::printf("%s: schedule %.0f cycles, simulate %.0f cycles, ratio %.4f\n", name.c_str(), schedule, simulated,
              schedule / simulated);
  EXPECT_NEAR(schedule / simulated, 1.0, 0.02) << name << ": schedule.md " << schedule << " cycles, simulate "
                                               << simulated << " cycles";
  // The table names the kernel's loops, each with its trip count, II and depth.
  const std::string table = testing_support::read_bytes(dir + "/proj/schedule.md");
  for (const char* loop : {"fetch instruction", "read_weight_channel", "gather_weight_steps", "matrix_vector_w8a8",
                           "store_rows", "attention: scores (q . k, max), loading", "write_result (logits)"})
    EXPECT_NE(table.find(loop), std::string::npos) << loop;
}

TEST(ScheduleAgreement, Stories260kScheduleMatchesSimulation) {
  expect_schedule_matches_simulation(testing_support::stories260k(), "stories260K");
}

TEST(ScheduleAgreement, Llama2_7bScheduleMatchesSimulation) { expect_schedule_matches_simulation("llama2-7b", "llama2-7b"); }

std::vector<Case> cases() {
  std::vector<Case> v;
  for (const auto& p : model::presets())
    if (p.config.causal() && !p.config.qkv_bias && !p.config.qk_norm && !p.config.moe())
      for (const char* dev : {"u280", "u55c", "u50", "u200"}) v.push_back({p.config.name, dev});
  for (const char* qwen : {"qwen2.5-0.5b", "qwen2.5-7b", "qwen3-0.6b", "qwen3-8b"})
    for (const char* dev : {"u280", "u55c"}) v.push_back({qwen, dev});
  // int4 weights: decode on the tiled unit (the emitted top's overlay::matmul_block).
  for (const char* preset : {"stories15m", "llama2-7b", "qwen2.5-0.5b"}) v.push_back({preset, "u280", "w4a8"});
  return v;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = info.param.preset + "_" + info.param.device + (info.param.scheme.empty() ? "" : "_" + info.param.scheme);
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Presets, SimAgreement, ::testing::ValuesIn(cases()), case_name);

}  // namespace
