// Performance model: hand-computed cases (a bandwidth-bound GEMV, a compute-bound GEMM),
// physical bounds on every prediction, GPU baselines, and the validation error bound.
#include <gtest/gtest.h>

#include <cmath>

#include "hw/device.hpp"
#include "model/presets.hpp"
#include "perf/perf.hpp"
#include "perf/validate.hpp"
#include "testing.hpp"
#include "util/paths.hpp"

namespace {

// A workload with one linear layer of `rows` x `cols` int8 weights over `tokens` tokens.
perf::Workloads one_matmul(int tokens, int rows, int cols) {
  perf::Workloads w;
  model::Config c = *model::find_preset("stories260k");
  for (graph::Workload* wl : {&w.prefill, &w.decode}) {
    wl->config = c;
    wl->shape.batch = 1;
    graph::Op op;
    op.name = "blk.0.w1";
    op.kind = graph::OpKind::matmul;
    op.m = tokens;
    op.n = rows;
    op.k = cols;
    op.weight_bits = 8;
    op.act_bits = 8;
    op.flops = 2.0 * tokens * rows * cols;
    op.weight_bytes = double(rows) * cols;
    op.activation_bytes = double(tokens) * (rows + cols);
    wl->ops.push_back(op);
  }
  w.prefill.shape.phase = graph::Phase::prefill;
  w.prefill.shape.prompt = tokens;
  w.decode.shape.phase = graph::Phase::decode;
  w.scenario.prompt = tokens;
  return w;
}

arch::Design design(int rows, int cols, int prefill_block) {
  arch::Design d;
  d.name = "test";
  d.device = "u280";
  d.clock_mhz = 300;
  d.matrix_unit.rows = rows;
  d.matrix_unit.cols = cols;
  d.matrix_unit.pipeline_depth = 10;
  d.tiling.tile_rows = rows * 2;
  d.tiling.tile_cols = cols * 2;
  d.tiling.prefill_block = prefill_block;
  d.buffers.weight_bytes = 2LL * d.tiling.tile_rows * d.tiling.tile_cols;
  d.buffers.activation_bytes = 1 << 20;
  d.memory.weight_channels = 32;
  d.memory.kv_channels = 0;
  d.memory.activation_channels = 0;
  return d;
}

TEST(Perf, BandwidthBoundGemvByHand) {
  // 4096 x 4096 int8 weights, one token, 64 x 128 MACs at 300 MHz on the U280's HBM2.
  const auto& c = perf::constants();
  const hw::Device& u280 = hw::find_device("u280");
  const perf::Prediction p = perf::predict(design(64, 128, 64), u280, one_matmul(1, 4096, 4096));
  const auto& op = p.decode.ops.at(0);
  const double compute = (4096 / 64) * (4096 / 128) / 300e6;                   // 2048 cycles
  const double bw = c.memory_efficiency.value * std::min(460e9, 32 * 64 * 300e6);  // 414 GB/s
  const double memory = 4096.0 * 4096 / bw;
  EXPECT_NEAR(op.compute_s, compute, 1e-12);
  EXPECT_NEAR(op.memory_s, memory, 1e-12);
  EXPECT_EQ(op.bound, perf::Bound::memory);
  EXPECT_NEAR(op.time_s, memory + (c.op_fixed_cycles.value + 10) / 300e6, 1e-12);
  EXPECT_NEAR(p.decode_step_s, op.time_s + p.decode.host_s, 1e-12);
}

TEST(Perf, ComputeBoundGemmByHand) {
  // 512 tokens through 4096 x 4096 weights fetched once (prefill block 512), 32 x 128 MACs.
  const auto& c = perf::constants();
  const hw::Device& u280 = hw::find_device("u280");
  const perf::Prediction p = perf::predict(design(32, 128, 512), u280, one_matmul(512, 4096, 4096));
  const auto& op = p.prefill.ops.at(0);
  const double cycles = 512.0 * (4096 / 32) * (4096 / 128);
  EXPECT_NEAR(op.compute_s, cycles / 300e6, 1e-12);
  EXPECT_EQ(op.bound, perf::Bound::compute);
  EXPECT_NEAR(op.time_s, cycles / 300e6 + (c.op_fixed_cycles.value + 10) / 300e6, 1e-12);
  // Achieved rate equals the array's peak apart from the fixed latency.
  EXPECT_LE(op.flops / op.time_s, perf::peak_ops_per_s(design(32, 128, 512)));
  EXPECT_GT(op.flops / op.time_s, 0.99 * perf::peak_ops_per_s(design(32, 128, 512)));
  // Weights re-fetched per 64-token block cost 8 passes of traffic instead of 1.
  const perf::Prediction q = perf::predict(design(32, 128, 64), u280, one_matmul(512, 4096, 4096));
  EXPECT_NEAR(q.prefill.ops.at(0).offchip_bytes, 8.0 * 4096 * 4096 + 512.0 * (4096 + 4096), 1);  // + activations over the 1 MB buffer
}

// Every operation of a prediction respects the card's arithmetic and bandwidth peaks.
void expect_within_bounds(const perf::Prediction& p) {
  for (const perf::PhaseTime* ph : {&p.prefill, &p.decode}) {
    EXPECT_GT(ph->seconds, 0);
    for (const auto& o : ph->ops) {
      ASSERT_GT(o.time_s, 0) << o.name;
      EXPECT_LE(o.offchip_bytes / o.time_s, p.peak_bytes_per_s / p.cards * (1 + 1e-9)) << p.target << " " << o.name;
      if (o.kind == graph::OpKind::matmul || o.kind == graph::OpKind::classifier)
        EXPECT_LE(o.flops / o.time_s, p.peak_ops_per_s / p.cards * 1.001) << p.target << " " << o.name;
    }
  }
  // Whole phases: no faster than streaming the weights once at the peak bandwidth.
  if (p.placement.find("on chip") == std::string::npos || p.kind == hw::Kind::gpu)
    EXPECT_GE(p.decode_step_s, 0.99 * p.weight_bytes / p.peak_bytes_per_s) << p.target;
}

TEST(Perf, PublishedDesignsStayWithinBounds) {
  for (const char* id : {"flightllm_fpga24", "dfx_micro22", "streamtensor_micro25", "li_date25_kv260"}) {
    const std::string path = fpgallm::data_dir() + "/published/" + id + ".json";
    const arch::Design d = arch::load(path);
    const model::Config cfg = *model::find_preset(std::string(id).find("dfx") == 0 || std::string(id).find("stream") == 0
                                                      ? "gpt2-medium"
                                                      : "llama2-7b");
    for (int batch : {1, 8}) {
      perf::Scenario s;
      s.batch = batch;
      s.prompt = 64;
      s.context = 512;
      const perf::Prediction p =
          perf::predict(d, hw::find_device(d.device), perf::lower(cfg, graph::parse_scheme("w4a8"), s));
      expect_within_bounds(p);
      EXPECT_FALSE(p.assumptions.empty());
    }
  }
}

TEST(Perf, GpuDecodeIsBandwidthBoundAndCarriesAssumptions) {
  const model::Config cfg = *model::find_preset("llama2-7b");
  perf::Scenario s;
  s.context = 1024;
  const auto w = perf::lower(cfg, graph::parse_scheme("fp16"), s);
  const hw::Device& a100 = hw::find_device("a100-80gb");
  const perf::Prediction p = perf::predict_gpu(a100, w);
  expect_within_bounds(p);
  // fp16 LLaMA2-7B streams 13.5 GB per token: at 70% of 2039 GB/s that is about 9.4 ms.
  EXPECT_NEAR(p.decode.memory_s, p.weight_bytes / (0.7 * 2039e9), 0.1 * p.decode.memory_s);
  EXPECT_GT(p.decode_tokens_per_s, 60);
  EXPECT_LT(p.decode_tokens_per_s, 110);
  bool has_efficiency = false;
  for (const auto& a : p.assumptions) has_efficiency = has_efficiency || a.name == "gpu_bandwidth_efficiency";
  EXPECT_TRUE(has_efficiency);
  // Two GPUs: faster, but not twice (the all-reduces and the fixed overheads stay).
  const perf::Prediction two = perf::predict_gpu(a100, w, 2);
  EXPECT_GT(two.decode_tokens_per_s, p.decode_tokens_per_s);
  EXPECT_LT(two.decode_tokens_per_s, 2 * p.decode_tokens_per_s);
}

TEST(Perf, DecodeSlowsWithContext) {
  const arch::Design d = arch::load(fpgallm::data_dir() + "/published/flightllm_fpga24.json");
  const auto t = perf::decode_curve(d, hw::find_device("u280"), *model::find_preset("llama2-7b"),
                                    graph::parse_scheme("w4a8-g128"), perf::Scenario{}, {128, 1024, 4096});
  ASSERT_EQ(t.size(), 3u);
  EXPECT_LT(t[0], t[1]);
  EXPECT_LT(t[1], t[2]);
}

TEST(Perf, TensorParallelSplitsWorkAndAddsLinkTime) {
  arch::Design d = arch::load(fpgallm::data_dir() + "/published/dfx_micro22.json");
  perf::Scenario s;
  const auto w = perf::lower(*model::find_preset("gpt2-medium"), graph::parse_scheme("fp16"), s);
  const perf::Prediction one = perf::predict(d, hw::find_device("u280"), w);
  d.parallel.cards = 4;
  d.parallel.split = arch::Split::tensor;
  const perf::Prediction four = perf::predict(d, hw::find_device("u280"), w);
  EXPECT_GT(four.decode.link_s, 0);
  EXPECT_LT(four.decode_step_s, one.decode_step_s);
  EXPECT_GT(four.decode_step_s, one.decode_step_s / 4);
}

TEST(Perf, ValidationMedianErrorWithinBound) {
  const perf::Validation v = perf::validate(fpgallm::data_dir() + "/published_results.csv", fpgallm::data_dir() + "/published");
  int fpga = 0, gpu = 0;
  for (const auto& r : v.rows) (r.kind == "fpga" ? fpga : gpu)++;
  EXPECT_GE(fpga, 20);
  EXPECT_GE(gpu, 10);
  EXPECT_LE(v.median_abs_error_fpga, 0.25);
  EXPECT_LE(v.median_abs_error_gpu, 0.25);
  EXPECT_FALSE(v.skipped.empty());
  for (const auto& s : v.skipped) EXPECT_FALSE(s.reason.empty());
}

TEST(Perf, MedianOfAbsoluteErrors) {
  EXPECT_DOUBLE_EQ(perf::median_abs({0.1, -0.3, 0.2}), 0.2);
  EXPECT_DOUBLE_EQ(perf::median_abs({0.1, -0.4, 0.2, -0.3}), 0.25);
}

TEST(Perf, ValidateCommandPrintsMedianLast) {
  const auto r = testing_support::run_fpgallm("validate --results " + fpgallm::data_dir() + "/published_results.csv");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto last = r.out.rfind("median |error| over all");
  ASSERT_NE(last, std::string::npos);
  EXPECT_EQ(r.out.find('\n', last), r.out.size() - 1);
  const auto bad = testing_support::run_fpgallm("validate --results /nonexistent.csv");
  EXPECT_EQ(bad.status, 2);
}

}  // namespace
