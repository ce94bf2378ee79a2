// One design, two descriptions (issue 29, item 7): the designs `fpgallm plan` picks, costed
// on the kernel path and on the per-operation path, agree within 10% once the ideal-unit
// assumptions (arch::IdealUnits) are applied to the kernel path, and the breakdown of the
// difference adds up.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dse/dse.hpp"
#include "hw/device.hpp"
#include "model/model.hpp"
#include "perf/two_paths.hpp"
#include "testing.hpp"

namespace {

struct Case {
  std::string model, device;
  int context = 0, prompt = 128;  // context 0: the model's
};

// What `fpgallm plan MODEL --device DEV [--context L] [--prompt P]` picks (int8, decode-tps).
struct Planned {
  arch::Design design;
  perf::Workloads workloads;
  const hw::Device* device = nullptr;
};

Planned plan(const Case& k) {
  const model::Model m = model::load_or_preset(k.model);
  dse::Request req;
  req.config = m.config;
  if (req.config.name.empty()) req.config.name = k.model;
  req.precision = graph::parse_scheme("int8");
  req.scenario.prompt = k.prompt;
  req.scenario.context = k.context > 0 ? k.context : m.config.seq_len;
  const hw::Device& dev = hw::find_device(k.device);
  Planned p{{}, perf::lower(req.config, req.precision, req.scenario), &dev};
  const dse::DeviceResult r = dse::explore_device(dev, req, dse::Objective::decode_tps, p.workloads);
  EXPECT_TRUE(r.fits()) << k.model << " on " << k.device;
  if (r.fits()) p.design = r.best().design;
  return p;
}

// Presets x cards, the bundled stories260K at its widest prefill (a prompt of its whole
// context), and larger models on both HBM cards.
std::vector<Case> cases() {
  const std::string s260k = testing_support::stories260k();
  return {{"llama2-7b", "u280", 512, 128}, {"stories110m", "u55c", 0, 128}, {s260k, "u55c", 512, 512},
          {"llama2-13b", "u55c", 0, 128},  {"stories110m", "u280", 0, 256}};
}

std::string label(const Case& k) { return k.model + " on " + k.device; }

TEST(TwoPaths, PlannedDesignsAgreeUnderIdealUnits) {
  for (const Case& k : cases()) {
    const Planned p = plan(k);
    if (!p.device) continue;
    const perf::TwoPaths t = perf::compare_paths(p.design, *p.device, p.workloads);
    EXPECT_TRUE(t.on_instruction_list) << label(k);
    for (const auto* ph : {&t.decode, &t.prefill}) {
      const char* phase = ph == &t.decode ? "decode" : "prefill";
      EXPECT_GT(ph->per_operation_s, 0) << label(k) << " " << phase;
      EXPECT_NEAR(ph->ideal_kernel_s / ph->per_operation_s, 1.0, 0.10)
          << label(k) << " " << phase << ": ideal kernel " << ph->ideal_kernel_s << " s, per-operation "
          << ph->per_operation_s << " s (kernel " << ph->kernel_s << " s)";
    }
  }
}

TEST(TwoPaths, BreakdownSumsToTheDifference) {
  for (const Case& k : cases()) {
    const Planned p = plan(k);
    if (!p.device) continue;
    const perf::TwoPaths t = perf::compare_paths(p.design, *p.device, p.workloads);
    // Both times are the predictions plan and validate make of this design.
    const perf::Prediction kernel = perf::predict(p.design, *p.device, p.workloads);
    const perf::Prediction per_op = perf::predict(p.design, *p.device, p.workloads, perf::constants(),
                                                  perf::Hardware::published_accelerator);
    EXPECT_EQ(t.decode.kernel_s, kernel.decode_step_s) << label(k);
    EXPECT_EQ(t.decode.per_operation_s, per_op.decode_step_s) << label(k);
    EXPECT_EQ(t.prefill.kernel_s, kernel.prefill_s) << label(k);
    EXPECT_EQ(t.prefill.per_operation_s, per_op.prefill_s) << label(k);
    for (const auto* ph : {&t.decode, &t.prefill}) {
      ASSERT_FALSE(ph->parts.empty()) << label(k);
      const double difference = ph->kernel_s - ph->per_operation_s;
      double sum = 0, seconds = 0;
      for (const perf::PathDifference& part : ph->parts) {
        sum += part.fraction;
        if (part.assumption != "rest") seconds += part.fraction * difference;
      }
      EXPECT_NEAR(sum, 1.0, 1e-9) << label(k);
      // The assumptions' parts are what they take off the kernel path; the rest is what
      // separates the ideal kernel path from the per-operation one.
      EXPECT_NEAR(ph->kernel_s - seconds, ph->ideal_kernel_s, 1e-9 * ph->kernel_s) << label(k);
      EXPECT_EQ(ph->parts.back().assumption, "rest");
      EXPECT_NEAR(ph->parts.back().fraction * difference, ph->ideal_kernel_s - ph->per_operation_s,
                  1e-9 * ph->kernel_s);
    }
  }
}

TEST(TwoPaths, NoAssumptionLeavesTheKernelPath) {
  const Planned p = plan(cases().front());
  ASSERT_NE(p.device, nullptr);
  arch::IdealUnits none;
  none.attention_on_matrix_unit = false;
  none.classifier_last_token_only = false;
  none.matmul_stages_overlapped = false;
  none.vector_work_as_operators = false;
  none.kv_in_first_free_memory = false;
  none.kv_over_all_kv_channels = false;
  none.fixed_costs_per_operation = false;
  const perf::TwoPaths t = perf::compare_paths(p.design, *p.device, p.workloads, none);
  EXPECT_EQ(t.decode.ideal_kernel_s, t.decode.kernel_s);
  ASSERT_EQ(t.decode.parts.size(), 1u);
  EXPECT_EQ(t.decode.parts.front().assumption, "rest");
  EXPECT_DOUBLE_EQ(t.decode.parts.front().fraction, 1.0);
}

// KV cache over all the design's KV channels, by hand: at decode with every other
// assumption applied, the attention instruction of a layer reads 2 x context x kv_dim KV
// bytes (int8) and is bound by the KV stream where the matrix unit's MACs take less; the
// assumption moves it from two bundles at one channel's rate to kv_channels channels.
TEST(TwoPaths, KvChannelsShareByHand) {
  const Planned p = plan(cases().front());  // llama2-7b, u280, context 512
  ASSERT_NE(p.device, nullptr);
  arch::IdealUnits before;  // everything but the KV channels
  before.kv_over_all_kv_channels = false;
  const perf::TwoPaths a = perf::compare_paths(p.design, *p.device, p.workloads, before);
  const perf::TwoPaths b = perf::compare_paths(p.design, *p.device, p.workloads);
  const arch::Design& d = p.design;
  const model::Config& c = p.workloads.decode.config;
  // The KV cache in the first memory with room after the weights: HBM2 of the u280.
  const hw::MemoryPool& hbm = p.device->memory.front();
  ASSERT_EQ(hbm.kind, "HBM2");
  const double f = d.clock_mhz * 1e6, eta = perf::constants().memory_efficiency.value;
  const double channel = std::min(*hbm.bandwidth_gbps * 1e9 / *hbm.channels, d.memory.port_bits / 8.0 * f) * eta;  // B/s
  const int kv_ports = std::min(int(*hbm.channels), d.memory.kv_channels > 0 ? d.memory.kv_channels : d.memory.weight_channels);
  const double kv_bytes = 2.0 * 512 * (c.dim / c.n_heads) * c.n_kv_heads;  // K and V, int8
  const double macs = 32.0 * (std::ceil(512.0 / d.matrix_unit.rows) * std::ceil(128.0 / d.matrix_unit.cols) +
                              std::ceil(128.0 / d.matrix_unit.rows) * std::ceil(512.0 / d.matrix_unit.cols)) / f;
  ASSERT_EQ(c.dim / c.n_heads, 128);
  const double two_bundles = std::max(macs, kv_bytes / (2 * channel));
  const double all_ports = std::max(macs, kv_bytes / (kv_ports * channel));
  EXPECT_NEAR(a.decode.ideal_kernel_s - b.decode.ideal_kernel_s, c.n_layers * (two_bundles - all_ports),
              1e-9 * a.decode.kernel_s);
}

}  // namespace
