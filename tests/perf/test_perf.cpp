// Performance model: hand-computed cases (a bandwidth-bound GEMV, a compute-bound GEMM),
// physical bounds on every prediction, GPU baselines, and the validation error bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <iterator>

#include <nlohmann/json.hpp>

#include "hw/device.hpp"
#include "model/presets.hpp"
#include "perf/perf.hpp"
#include "perf/validate.hpp"
#include "testing.hpp"
#include "util/error.hpp"
#include "util/json_file.hpp"
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

// The per-operation model (published accelerators, and designs the instruction list cannot
// express) on a one-operation workload.
perf::Prediction per_operation(const arch::Design& d, const hw::Device& dev, const perf::Workloads& w) {
  return perf::predict(d, dev, w, perf::constants(), perf::Hardware::published_accelerator);
}

TEST(Perf, BandwidthBoundGemvByHand) {
  // 4096 x 4096 int8 weights, one token, 64 x 128 MACs at 300 MHz on the U280's HBM2.
  const auto& c = perf::constants();
  const hw::Device& u280 = hw::find_device("u280");
  const perf::Prediction p = per_operation(design(64, 128, 64), u280, one_matmul(1, 4096, 4096));
  const auto& op = p.decode.ops.at(0);
  const double compute = (4096 / 64) * (4096 / 128) / 300e6;                   // 2048 cycles
  const double bw = c.memory_efficiency.value * std::min(460e9, 32 * 64 * 300e6);  // 414 GB/s
  const double memory = 4096.0 * 4096 / bw;
  EXPECT_NEAR(op.compute_s, compute, 1e-12);
  EXPECT_NEAR(op.memory_s, memory, 1e-12);
  EXPECT_EQ(op.bound, perf::Bound::memory);
  // Fixed: issue + DMA set-up of the 32 weight channels + pipeline depth 10, and the HBM's
  // first access (data/sim_model.json).
  const double fixed = (c.issue_cycles.value + 32 * c.dma_setup_cycles.value + 10) / 300e6 + c.hbm_first_access_ns.value * 1e-9;
  EXPECT_NEAR(op.fixed_s, fixed, 1e-12);
  EXPECT_NEAR(op.time_s, memory + fixed, 1e-12);
  EXPECT_NEAR(p.decode_step_s, op.time_s + p.decode.host_s, 1e-12);
}

TEST(Perf, ComputeBoundGemmByHand) {
  // 512 tokens through 4096 x 4096 weights fetched once (prefill block 512), 32 x 128 MACs.
  const auto& c = perf::constants();
  const hw::Device& u280 = hw::find_device("u280");
  const perf::Prediction p = per_operation(design(32, 128, 512), u280, one_matmul(512, 4096, 4096));
  const auto& op = p.prefill.ops.at(0);
  const double cycles = 512.0 * (4096 / 32) * (4096 / 128);
  EXPECT_NEAR(op.compute_s, cycles / 300e6, 1e-12);
  EXPECT_EQ(op.bound, perf::Bound::compute);
  // 32 weight channels and the channel the activations spill through (4 MB > the 1 MB buffer).
  EXPECT_NEAR(op.time_s,
              cycles / 300e6 + (c.issue_cycles.value + 33 * c.dma_setup_cycles.value + 10) / 300e6 +
                  c.hbm_first_access_ns.value * 1e-9,
              1e-12);
  // Achieved rate equals the array's peak apart from the fixed latency.
  EXPECT_LE(op.flops / op.time_s, perf::peak_ops_per_s(design(32, 128, 512)));
  EXPECT_GT(op.flops / op.time_s, 0.99 * perf::peak_ops_per_s(design(32, 128, 512)));
  // Weights re-fetched per 64-token block cost 8 passes of traffic instead of 1.
  const perf::Prediction q = per_operation(design(32, 128, 64), u280, one_matmul(512, 4096, 4096));
  EXPECT_NEAR(q.prefill.ops.at(0).offchip_bytes, 8.0 * 4096 * 4096 + 512.0 * (4096 + 4096), 1);  // + activations over the 1 MB buffer
}

// Every operation of a prediction respects the card's arithmetic and bandwidth peaks.
void expect_within_bounds(const perf::Prediction& p) {
  for (const perf::PhaseTime* ph : {&p.prefill, &p.decode}) {
    EXPECT_GT(ph->seconds, 0);
    for (const auto& o : ph->ops) {
      ASSERT_GT(o.time_s, 0) << o.name;
      EXPECT_LE(o.offchip_bytes / o.time_s, p.peak_bytes_per_s / p.cards * (1 + 1e-9)) << p.target << " " << o.name;
      if (o.kind == graph::OpKind::matmul || o.kind == graph::OpKind::classifier) {
        EXPECT_LE(o.flops / o.time_s, p.peak_ops_per_s / p.cards * 1.001) << p.target << " " << o.name;
      }
    }
  }
  // Whole phases: no faster than streaming the weights once at the peak bandwidth.
  if (p.placement.find("on chip") == std::string::npos || p.kind == hw::Kind::gpu) {
    EXPECT_GE(p.decode_step_s, 0.99 * p.weight_bytes / p.peak_bytes_per_s) << p.target;
  }
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
  // fp16 LLaMA2-7B streams 13.5 GB per token: with the CUDA-graph stack's 80% of 2039 GB/s
  // that is about 8.3 ms, plus 32 layers x 15 us of launches: about 114 tokens/s.
  const double eff = perf::constants().gpu_graphs.bandwidth_efficiency.value;
  EXPECT_NEAR(p.decode.memory_s, p.weight_bytes / (eff * 2039e9), 0.1 * p.decode.memory_s);
  EXPECT_GT(p.decode_tokens_per_s, 90);
  EXPECT_LT(p.decode_tokens_per_s, 130);
  // Eager PyTorch: 350 us of dispatch per layer dominates (about 11 ms more per token).
  const perf::Prediction eager = perf::predict_gpu(a100, w, 1, perf::GpuStack::eager);
  EXPECT_NEAR(eager.decode.fixed_s, 32 * 350e-6, 1e-9);
  EXPECT_LT(eager.decode_tokens_per_s, 0.6 * p.decode_tokens_per_s);
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

// The executor's communication (issue 10, contract B) for stories260K (dim 64, 5 layers,
// vocab 512), worked out by hand. Tensor split, per card and token, ring algorithms:
//   sum all-reduce of 64 int32 = 256 bytes: 2 (N-1)/N x 256 sent, twice per layer;
//   max all-reduce of one fp32 scale = 4 bytes: 2 (N-1)/N x 4 sent, twice per layer;
//   all-gather of 512 fp32 logits = 2048 bytes: (N-1)/N x 2048 sent, once.
// N = 2: 5 x (2 x 256 + 2 x 4) + 1024 = 3624.  N = 4: 5 x (2 x 384 + 2 x 6) + 1536 = 5436.
// Pipeline split: each stage but the last sends x (64 fp32 = 256 bytes); the last sends the
// 2048 bytes of logits to card 0. Layers per card for N = 4: 1, 1, 1, 2.
TEST(Perf, CardTransfersByHand) {
  const model::Config cfg = *model::find_preset("stories260k");
  for (auto [cards, per_card] : {std::pair{2, 3624.0}, std::pair{4, 5436.0}}) {
    const auto t = perf::card_transfers(cfg, {cards, arch::Split::tensor}, 1, 1, true);
    EXPECT_EQ(t.size(), 5u * 4 + 1);
    const auto sent = perf::bytes_sent_per_card(t, cards);
    ASSERT_EQ(sent.size(), std::size_t(cards));
    for (double b : sent) EXPECT_DOUBLE_EQ(b, per_card) << cards << " cards";
  }
  // Static (or float) activation scales: no max all-reduce.
  EXPECT_DOUBLE_EQ(perf::bytes_sent_per_card(perf::card_transfers(cfg, {2, arch::Split::tensor}, 1, 1, false), 2)[0],
                   5 * 2 * 256.0 + 1024);
  // A prefill block of 16 tokens with the logits of all 16: sixteen times the volume.
  EXPECT_DOUBLE_EQ(perf::bytes_sent_per_card(perf::card_transfers(cfg, {2, arch::Split::tensor}, 16, 16, true), 2)[1],
                   16 * 3624.0);
  const auto p2 = perf::bytes_sent_per_card(perf::card_transfers(cfg, {2, arch::Split::pipeline}, 1, 1, true), 2);
  EXPECT_EQ(p2, (std::vector<double>{256, 2048}));
  const auto p4 = perf::bytes_sent_per_card(perf::card_transfers(cfg, {4, arch::Split::pipeline}, 1, 1, true), 4);
  EXPECT_EQ(p4, (std::vector<double>{256, 256, 256, 2048}));
  EXPECT_EQ(perf::pipeline_layers(5, 4, 3), (std::pair{3, 5}));
  EXPECT_EQ(perf::pipeline_layers(5, 2, 0), (std::pair{0, 2}));
  EXPECT_TRUE(perf::card_transfers(cfg, {1, arch::Split::none}, 1, 1, true).empty());
}

// The prediction carries those bytes per token and the link time of the ring steps:
// before wo, 2 steps of (1 us hop + 2 bytes / 12.5 GB/s); after it 2 steps of
// (1 us + 128 bytes / 12.5 GB/s) on the U280's QSFP28 link.
TEST(Perf, PredictionCountsTheExecutedCommunication) {
  const model::Config cfg = *model::find_preset("stories260k");
  arch::Design d = design(16, 32, 16);
  d.parallel = {2, arch::Split::tensor};
  const auto& c = perf::constants();
  const auto w = perf::lower(cfg, graph::parse_scheme("int8"), perf::Scenario{1, 16, 64});
  const perf::Prediction p = perf::predict(d, hw::find_device("u280"), w);
  EXPECT_EQ(p.link_bytes_per_token, (std::vector<double>{3624, 3624}));
  const double link = 12.5e9, hop = c.link_hop_s.value;
  bool seen = false;
  for (const auto& o : p.decode.ops)
    if (o.name == "blk.2.wo") {
      seen = true;
      EXPECT_NEAR(o.link_s, 2 * (hop + 2 / link) + 2 * (hop + 128 / link), 1e-15);
    } else if (o.name == "cls") {
      EXPECT_NEAR(o.link_s, hop + 1024 / link, 1e-15);
    }
  EXPECT_TRUE(seen);
  d.parallel = {4, arch::Split::pipeline};
  const perf::Prediction q = perf::predict(d, hw::find_device("u280"), w);
  EXPECT_EQ(q.link_bytes_per_token, (std::vector<double>{256, 256, 256, 2048}));
  EXPECT_NEAR(q.decode.link_s, 3 * (hop + 256 / link) + (hop + 2048 / link), 1e-15);
}

// The card runs a prompt as the emitted top's prompt call: prefill blocks of
// arch::block_tokens tokens (tiling.prefill_block, at most 64) on the tiled matrix unit.
// prefill_s costs that path and is the time to first token: a prefill_block of 128 costs as
// 64 does (the blocks the top, the backend and the simulator run), and each block reads every
// weight once: 100 tokens in 2 blocks move about twice the off-chip bytes of one decode step
// (the weights; the KV and parameter traffic is small here), where one decode call per
// prompt token would move 100 times them.
TEST(Perf, PromptIsTheTopsPromptCall) {
  const model::Config cfg = *model::find_preset("stories15m");
  const int prompt = 100;
  const auto lowered = perf::lower(cfg, graph::parse_scheme("int8"), perf::Scenario{1, prompt, prompt});
  const perf::Prediction p = perf::predict(design(16, 32, 64), hw::find_device("u280"), lowered);
  const perf::Prediction p128 = perf::predict(design(16, 32, 128), hw::find_device("u280"), lowered);
  EXPECT_DOUBLE_EQ(p.prefill_s, p128.prefill_s);
  EXPECT_DOUBLE_EQ(p.time_to_first_token_s(), p.prefill_s);
  EXPECT_NE(p.prefill_path.find("prompt call: 2 blocks of up to 64 tokens"), std::string::npos) << p.prefill_path;
  const double step_bytes = perf::predict(design(16, 32, 64), hw::find_device("u280"),
                                         perf::lower(cfg, graph::parse_scheme("int8"), perf::Scenario{1, 1, 1}))
                               .decode.offchip_bytes;
  EXPECT_GT(p.prefill.offchip_bytes, 2 * step_bytes * 0.99);
  EXPECT_LT(p.prefill.offchip_bytes, 2 * step_bytes * 1.1);
  // A design the kernels do not run has no emitted top: no prompt path is named.
  EXPECT_TRUE(perf::predict(design(16, 32, 64), hw::find_device("u280"), lowered, perf::constants(),
                            perf::Hardware::published_accelerator)
                  .prefill_path.empty());
}

// Calibrated (static) activation scales: the quantize takes no max_abs pass (the kernels'
// quantize_static), and a tensor split all-reduces no scale.
TEST(Perf, StaticScalesSkipTheMaxAbsPass) {
  const model::Config cfg = *model::find_preset("stories15m");
  arch::Design d = design(16, 32, 16);
  const auto& u280 = hw::find_device("u280");
  const perf::Scenario sc{1, 16, 64};
  const perf::Prediction dyn = perf::predict(d, u280, perf::lower(cfg, graph::parse_scheme("int8"), sc));
  const perf::Prediction fixed = perf::predict(d, u280, perf::lower(cfg, graph::parse_scheme("int8-static"), sc));
  auto op = [](const perf::Prediction& p, const std::string& name) {
    for (const auto& o : p.decode.ops)
      if (o.name == name) return o.time_s;
    ADD_FAILURE() << name;
    return 0.0;
  };
  EXPECT_LT(op(fixed, "blk.0.attn_norm.q"), op(dyn, "blk.0.attn_norm.q"));
  EXPECT_EQ(op(fixed, "blk.0.wq"), op(dyn, "blk.0.wq"));
  d.parallel = {2, arch::Split::tensor};
  auto reductions = [](const perf::Prediction& p) {
    int n = 0;
    for (const auto& t : p.decode_transfers) n += t.kind == perf::Collective::all_reduce_max;
    return n;
  };
  EXPECT_GT(reductions(perf::predict(d, u280, perf::lower(cfg, graph::parse_scheme("int8"), sc))), 0);
  EXPECT_EQ(reductions(perf::predict(d, u280, perf::lower(cfg, graph::parse_scheme("int8-static"), sc))), 0);
}

TEST(Perf, ValidationMedianErrorWithinBound) {
  const perf::Validation v = perf::validate(fpgallm::data_dir() + "/published_results.csv", fpgallm::data_dir() + "/published");
  int fpga = 0, gpu = 0;
  for (const auto& r : v.rows) (r.kind == "fpga" ? fpga : gpu)++;
  EXPECT_GE(fpga, 20);
  EXPECT_GE(gpu, 10);
  EXPECT_LE(v.median_abs_error_fpga, 0.12);
  EXPECT_LE(v.median_abs_error_gpu, 0.10);
  EXPECT_FALSE(v.skipped.empty());
  for (const auto& s : v.skipped) EXPECT_FALSE(s.reason.empty());
  // Every row beyond 40% is explained in the docs, under its line number.
  std::ifstream doc(testing_support::source_path("docs/performance-model.md"));
  const std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  const auto section = text.find("### Rows beyond 40%");
  ASSERT_NE(section, std::string::npos);
  const std::string explained = text.substr(section, text.find("\n## ", section) - section);
  for (const auto& r : v.rows) {
    if (std::fabs(r.error) <= 0.4) continue;
    EXPECT_NE(explained.find("line " + std::to_string(r.line) + " (" + r.kind), std::string::npos)
        << "line " << r.line << " " << r.kind << " " << r.source_id << ": " << 100 * r.error << "% not explained";
  }
  // So is every resource row beyond 40%, in the section on resource rows.
  const auto res_section = text.find("### Resource rows");
  ASSERT_NE(res_section, std::string::npos);
  const std::string res_explained = text.substr(res_section, text.find("\n## ", res_section) - res_section);
  EXPECT_FALSE(v.resources.empty());
  for (const auto& r : v.resources) {
    if (std::fabs(r.error) <= 0.4) continue;
    EXPECT_NE(res_explained.find("line " + std::to_string(r.line) + " (" + r.resource + ")"), std::string::npos)
        << "line " << r.line << " " << r.resource << " " << r.source_id << ": " << 100 * r.error << "% not explained";
  }
}

// Design format: what published accelerators build, charged as the hardware does.
TEST(DesignFormat, StoredWeightsSparsityPortsUnitsByHand) {
  const hw::Device& u280 = hw::find_device("u280");
  const auto& c = perf::constants();
  const auto w = one_matmul(1, 4096, 4096);
  // 4-bit weights kept 2 of every 4 with 2-bit position indices, fp16 scales per 128.
  arch::Design d = design(64, 128, 64);
  d.matrix_unit.weight_bits = 4;
  d.weights.bits = 4;
  d.weights.sparse_n = 2;
  d.weights.sparse_m = 4;
  d.weights.group_size = 128;
  ASSERT_TRUE(d.model_problems().empty());
  ASSERT_FALSE(d.kernel_gaps().empty());  // the kernels are dense
  const perf::Prediction p = perf::predict(d, u280, w);
  const auto& op = p.decode.ops.at(0);
  const double bytes = 4096.0 * 4096 * 0.5 * (4 + 2) / 8 + 4096.0 * 4096 / 128 * 2;
  EXPECT_NEAR(op.offchip_bytes, bytes, 1);
  EXPECT_NEAR(op.compute_s, (4096 / 64) * (4096 * 0.5 / 128) / 300e6, 1e-12);  // half the MAC steps
  bool noted = false;
  for (const auto& n : p.notes) noted = noted || n.find("kernels cannot run") != std::string::npos;
  EXPECT_TRUE(noted);
  // 128-bit ports: 32 x 16 B x 300 MHz = 153.6 GB/s, below the HBM's 460.
  arch::Design narrow = design(64, 128, 64);
  narrow.memory.port_bits = 128;
  const auto q = perf::predict(narrow, u280, w).decode.ops.at(0);
  EXPECT_NEAR(q.memory_s, 4096.0 * 4096 / (c.memory_efficiency.value * 32 * 16 * 300e6), 1e-12);
  EXPECT_NEAR(perf::port_limit(narrow, u280), 32 * 16 * 300e6, 1);
  // Three compute units split the output rows: a third of the MAC steps, one barrier per pass.
  arch::Design three = design(32, 128, 512);
  three.compute_units = 3;
  const auto big = one_matmul(512, 4096, 4096);
  const auto u = perf::predict(three, u280, big).prefill.ops.at(0);
  EXPECT_NEAR(u.compute_s, 512.0 * std::ceil(std::ceil(4096.0 / 3) / 32) * (4096 / 128) / 300e6, 1e-12);
  EXPECT_NEAR(u.fixed_s,
              (c.issue_cycles.value + 33 * c.dma_setup_cycles.value + c.cu_barrier_cycles.value + 10) / 300e6 +
                  c.hbm_first_access_ns.value * 1e-9,
              1e-12);
}

TEST(DesignFormat, OperatorsOnTheEmbeddedCpu) {
  // TeLLMe-style: the classifier on the KV260's Cortex-A53s reading the shared DDR4.
  const hw::Device& kv260 = hw::find_device("kv260");
  ASSERT_TRUE(kv260.embedded_host());
  const auto& c = perf::constants();
  perf::Scenario s;
  s.prompt = 8;
  s.context = 64;
  const auto w = perf::lower(*model::find_preset("stories110m"), graph::parse_scheme("int8"), s);
  arch::Design d = design(8, 64, 64);
  d.device = "kv260";
  d.memory.weight_channels = 4;
  d.memory.port_bits = 128;
  d.host_ops = {"classifier"};
  const perf::Prediction p = perf::predict(d, kv260, w);
  const graph::Op* cls = nullptr;
  for (const auto& op : w.decode.ops)
    if (op.kind == graph::OpKind::classifier) cls = &op;
  ASSERT_NE(cls, nullptr);
  bool found = false;
  for (const auto& o : p.decode.ops)
    if (o.kind == graph::OpKind::classifier) {
      found = true;
      EXPECT_TRUE(o.on_host);
      const double flops_s = cls->flops / (*kv260.host_cpu_gflops * 1e9 * c.host_cpu_efficiency.value);
      const double bytes_s = cls->bytes() / (c.memory_efficiency.value * 19.2e9);
      EXPECT_NEAR(o.time_s, std::max(flops_s, bytes_s) + 2 * c.host_transfer_s.value, 1e-12);
    }
  EXPECT_TRUE(found);
}

// A shipped published row with operators on the embedded CPU, by hand (issue 29, must-show
// 4): row 30 of data/published_results.csv, Li et al. (DATE'25), llama2-7b w4a8-g128 decode
// on the KV260, its design file (data/published/li_date25_kv260.json) with the norms and
// softmax left to the Cortex-A53 cores. The paper does not say it runs them there: the test
// checks the arithmetic, not the row. Each host operator costs
//   max(flops / (host GFLOP/s x host_cpu_efficiency), bytes / (DDR GB/s x memory_efficiency))
//   + 2 x host_transfer_s + its activations in and out / pcie_gbps
// and the decode step is the fabric's operators, those, and the token in and logits out.
TEST(DesignFormat, HostOperatorArithmeticByHand) {
  const nlohmann::json j = fpgallm::read_json_file(fpgallm::data_dir() + "/published/li_date25_kv260.json", "design");
  arch::Design d;
  arch::from_json(j, d);
  ASSERT_EQ(j.at("model").get<std::string>(), "llama2-7b");
  ASSERT_EQ(j.at("quant").get<std::string>(), "w4a8-g128");
  d.host_ops = {"norm", "softmax"};
  const hw::Device& kv260 = hw::find_device("kv260");
  const perf::Constants& c = perf::constants();
  perf::Scenario s;
  s.prompt = 1;
  s.context = d.context;
  const auto w = perf::lower(*model::find_preset("llama2-7b"), graph::parse_scheme("w4a8-g128"), s);
  const perf::Prediction p = perf::predict(d, kv260, w, c, perf::Hardware::published_accelerator);

  // The figures, each from its file with its source.
  ASSERT_TRUE(kv260.embedded_host());
  const double cpu_peak = 42.7e9;  // devices.json kv260 host_cpu_gflops: 4 A53 x 1.333 GHz x 8 FLOP/cycle
  EXPECT_EQ(*kv260.host_cpu_gflops, 42.7);
  EXPECT_EQ(kv260.host_cpu_gflops.source.rfind("DERIVED", 0), 0u) << kv260.host_cpu_gflops.source;
  const double cpu_efficiency = 0.5;  // perf_model.json host_cpu_efficiency, an ASSUMPTION
  EXPECT_EQ(c.host_cpu_efficiency.value, cpu_efficiency);
  EXPECT_EQ(c.host_cpu_efficiency.source.rfind("ASSUMPTION", 0), 0u);
  const double ddr = 19.2e9 * 0.9;  // the shared DDR4: 64 bit x 2400 MT/s / 8, x memory_efficiency 0.9
  EXPECT_EQ(kv260.memory.front().bandwidth_gbps.value, 19.2);
  EXPECT_EQ(c.memory_efficiency.value, 0.9);
  const double link = 19.2e9;  // devices.json kv260 pcie_gbps: fabric <-> PS through the DDR4
  EXPECT_EQ(*kv260.pcie_gbps, 19.2);
  const double transfer = 10e-6;  // perf_model.json host_transfer_s, an ASSUMPTION
  EXPECT_EQ(c.host_transfer_s.value, transfer);
  EXPECT_EQ(c.host_transfer_s.source.rfind("ASSUMPTION", 0), 0u);
  for (const char* name : {"host_cpu_gflops", "host_memory_bandwidth", "host_link_bandwidth"}) {
    const auto a = std::find_if(p.assumptions.begin(), p.assumptions.end(), [&](const auto& x) { return x.name == name; });
    ASSERT_NE(a, p.assumptions.end()) << name;
    EXPECT_FALSE(a->source.empty()) << name;
  }

  double by_hand = 0;
  int host_ops = 0;
  ASSERT_EQ(p.decode.ops.size(), w.decode.ops.size());
  for (std::size_t i = 0; i < w.decode.ops.size(); ++i) {
    const graph::Op& op = w.decode.ops[i];
    const perf::OpTime& o = p.decode.ops[i];
    ASSERT_EQ(o.name, op.name);
    if (op.kind != graph::OpKind::norm && op.kind != graph::OpKind::softmax) {
      EXPECT_FALSE(o.on_host) << op.name;
      by_hand += o.time_s;  // the fabric's operators: the per-operation model's own figure
      continue;
    }
    ++host_ops;
    EXPECT_TRUE(o.on_host) << op.name;
    const double cpu_s = op.flops / (cpu_peak * cpu_efficiency);     // flops / achieved host GFLOP/s
    const double memory_s = op.bytes() / ddr;                       // bytes / host memory bandwidth
    const double moved_s = op.activation_bytes / link;               // operands card -> host -> card
    const double op_s = std::max(cpu_s, memory_s) + 2 * transfer + moved_s;  // + one transfer each way
    EXPECT_NEAR(o.time_s, op_s, 1e-9 * op_s) << op.name;
    by_hand += op_s;
  }
  EXPECT_EQ(host_ops, 2 * 32 + 1 + 32);  // two norms a layer, the final norm, a softmax a layer
  // The token id in (4 bytes) and the logits out (32000 fp32) over the same link, a transfer each.
  const double host_s = 2 * transfer + (4.0 + 32000 * 4.0) / link;
  EXPECT_NEAR(p.decode.host_s, host_s, 1e-9 * host_s);
  by_hand += host_s;
  EXPECT_NEAR(p.decode_step_s, by_hand, 1e-9 * by_hand);
}

TEST(DesignFormat, WidthsTheKernelsDoNotImplementLoadAndPredict) {
  for (double bits : {1.58, 2.0, 3.0, 5.0, 6.0, 3.5}) {
    arch::Design d = design(64, 128, 64);
    d.weights.bits = bits;
    EXPECT_TRUE(d.model_problems().empty()) << bits;
    EXPECT_FALSE(d.problems().empty()) << bits;
    const auto op = perf::predict(d, hw::find_device("u280"), one_matmul(1, 4096, 4096)).decode.ops.at(0);
    EXPECT_NEAR(op.offchip_bytes, 4096.0 * 4096 * bits / 8 + 4096 * 4, 1) << bits;
  }
  arch::Design d = design(64, 128, 64);
  for (int a : {4, 8, 16}) {
    d.matrix_unit.act_bits = a;
    EXPECT_TRUE(d.model_problems().empty()) << a;
  }
  for (int kv : {2, 4, 8, 16}) {
    d.kv_bits = kv;
    EXPECT_TRUE(d.model_problems().empty()) << kv;
  }
  d.memory.port_bits = 300;
  EXPECT_FALSE(d.model_problems().empty());
}

TEST(Validate, NeverAbortsOnOneRowAndReadsNoBoundAsAMeasurement) {
  const std::string dir = testing_support::scratch_dir("validate_rows");
  const std::string csv = dir + "/rows.csv";
  const std::string header =
      "source_id,device,model,metric,value,batch,prompt_len,gen_len,gpu_baseline_device,gpu_baseline_value\n";
  {
    std::ofstream f(csv);
    f << header << "bad_design,Alveo U280,LLaMA2-7B,decode_tokens_per_s,50,1,,,,\n"
      << "ratio,Alveo U280,LLaMA2-7B,decode_tokens_per_s,1.67x faster,1,,,,\n"
      << "bound,Alveo U280,LLaMA2-7B,decode_tokens_per_s,< 10,1,,,,\n"
      << "good,Alveo U280,LLaMA2-7B,decode_tokens_per_s,50,1,,,A100 (vLLM FP16),100 tok/s\n"
      << "short,Alveo U280\n";
  }
  std::ofstream(dir + "/bad_design.json") << "{\"device\": \"u280\", \"matrix_unit\": {\"rows\": 3}, \"quant\": \"int8\"}";
  std::ofstream(dir + "/good.json") << "{\"device\": \"u280\", \"memory\": {\"port_bits\": 512}, \"assumptions\": {\"memory_convention\": \"device_channels\", \"memory_as_published\": \"HBM2\"}, \"quant\": \"int8\", \"clock_mhz\": 225}";
  // The aliases come from the --designs folder.
  std::ofstream(dir + "/models.json") << "{\"models\": [{\"contains\": [\"llama2-7b\"], \"preset\": \"llama2-7b\"}]}";
  const perf::Validation v = perf::validate(csv, dir);
  int fpga = 0, gpu = 0;
  for (const auto& r : v.rows) {
    EXPECT_EQ(r.source_id, "good");
    (r.kind == "fpga" ? fpga : gpu)++;
    if (r.kind == "gpu") {
      EXPECT_EQ(r.stack, "graphs");
      EXPECT_EQ(r.precision, "fp16");
    }
  }
  EXPECT_EQ(fpga, 1);
  EXPECT_EQ(gpu, 1);
  std::string reasons;
  for (const auto& s : v.skipped) reasons += s.source_id + ": " + s.reason + "\n";
  EXPECT_NE(reasons.find("bad_design: bad_design.json cannot be used"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("ratio: a bound or a ratio"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("bound: a bound or a ratio"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("short:"), std::string::npos) << reasons;
  // A CSV with a header and no rows is an input error.
  std::ofstream(dir + "/empty.csv") << header;
  EXPECT_THROW(perf::validate(dir + "/empty.csv", dir), fpgallm::InputError);
  const auto r = testing_support::run_fpgallm("validate --results " + dir + "/empty.csv");
  EXPECT_EQ(r.status, 2);
}

// Model names as papers write them, without an entry in models.json: the preset's name
// ignoring case and separators, or the family and a parameter count (hand-checked against
// data/presets.json: stories110m 110M, gpt2-medium 355M, llama2-7b 6.74B).
TEST(Validate, IdentifiesModelsNamedInFreeText) {
  EXPECT_EQ(perf::identify_model("Qwen2.5-7B-Instruct 7B"), "qwen2.5-7b");
  EXPECT_EQ(perf::identify_model("LLaMA2 7B ~7B"), "llama2-7b");
  EXPECT_EQ(perf::identify_model("Llama 3.1 8B"), "llama3.1-8b");
  EXPECT_EQ(perf::identify_model("Llama 2 110M 110M"), "stories110m");
  EXPECT_EQ(perf::identify_model("GPT2 355M"), "gpt2-medium");  // not gpt2 (124M)
  EXPECT_EQ(perf::identify_model("GPT2 124M"), "gpt2");
  EXPECT_EQ(perf::identify_model("LLaMA-7B 7B"), "llama2-7b");  // Llama 1 7B has Llama 2 7B's shape
  EXPECT_EQ(perf::identify_model("OPT-1.3B 1.3B"), "opt-1.3b");
  EXPECT_EQ(perf::identify_model("Mistral-7B-v0.1 7B"), "mistral-7b");
  EXPECT_EQ(perf::identify_model("Vicuna-7B 7B"), "llama2-7b");
  // "1B" is rounded to its last digit: Llama 3.2 1B has 1.24B parameters (within half a
  // billion), which 15% of 1B would refuse.
  EXPECT_EQ(perf::identify_model("Llama-3.2-1B 1B"), "llama3.2-1b");
  EXPECT_EQ(perf::identify_model("Llama 3.2 1.0B"), std::nullopt);  // 1.0B: 0.05B of rounding, 24% off
  // No preset of that family within what the count allows: not identified, never the nearest
  // other model.
  EXPECT_EQ(perf::identify_model("ChatGLM2-6B 6B"), std::nullopt);
  EXPECT_EQ(perf::identify_model("Llama 2 3B"), std::nullopt);
}

// Cells as papers write them: thousands separators, a card named by its family and part, a
// count of cards with a multiplication sign, metrics in words; a row that lacks what its
// metric needs is skipped with the reason.
TEST(Validate, ReadsCellsAsPapersWriteThem) {
  const std::string dir = testing_support::scratch_dir("validate_cells");
  const std::string csv = dir + "/rows.csv";
  {
    std::ofstream f(csv);
    // A spreadsheet's export: a byte-order mark, padded header names, CRLF line ends.
    f << "\xEF\xBB\xBFsource_id, device ,model,metric,value,batch,prompt_len,gen_len,LUT_used,DSP_used,"
         "gpu_baseline_device,gpu_baseline_value\r\n"
      << "nx,Intel Stratix 10 NX 2100,Llama-2-7B,tokens/s,\"1,024.5\",1,,,,,,\r\n"
      << "f1,AWS EC2 F1 (VU9P),GPT-2 XL 1.5B,TTFT (s),0.9,1,128,,\"177,000\",45.2K (38.6%),,\r\n"
      << "two,2 \u00d7 Alveo U280,LLaMA2-7B,decode_tokens_per_s,50,1,,,,,\"NVIDIA A100-SXM4-80GB (vLLM, FP16)\",100\r\n"
      << "e2e,Alveo U280,LLaMA2-7B,end_to_end_latency_ms,900,1,128,,,,,\r\n";
  }
  std::ofstream(dir + "/nx.json") << "{\"device\": \"s10nx\", \"memory\": {\"port_bits\": 512}, \"assumptions\": {\"memory_convention\": \"device_channels\", \"memory_as_published\": \"HBM2\"}, \"quant\": \"int8\", \"clock_mhz\": 400}";
  std::ofstream(dir + "/f1.json") << "{\"device\": \"aws-f1\", \"memory\": {\"port_bits\": 512}, \"assumptions\": {\"memory_convention\": \"device_channels\", \"memory_as_published\": \"DDR4\"}, \"quant\": \"fp16\", \"clock_mhz\": 250}";
  std::ofstream(dir + "/two.json") << "{\"device\": \"u280\", \"memory\": {\"port_bits\": 512}, \"assumptions\": {\"memory_convention\": \"device_channels\", \"memory_as_published\": \"HBM2\"}, \"quant\": \"int8\", \"clock_mhz\": 225}";
  std::ofstream(dir + "/e2e.json") << "{\"device\": \"u280\", \"memory\": {\"port_bits\": 512}, \"assumptions\": {\"memory_convention\": \"device_channels\", \"memory_as_published\": \"HBM2\"}, \"quant\": \"int8\", \"clock_mhz\": 225}";
  const perf::Validation v = perf::validate(csv, dir);
  std::map<std::string, perf::ValidationRow> rows;
  for (const auto& r : v.rows) rows[r.source_id + (r.kind == "gpu" ? "/gpu" : "")] = r;
  std::string reasons;
  for (const auto& s : v.skipped) reasons += s.source_id + ": " + s.reason + "\n";
  ASSERT_EQ(rows.count("nx"), 1u) << reasons;
  EXPECT_EQ(rows["nx"].device, "stratix10-nx");
  EXPECT_EQ(rows["nx"].metric, "decode_tokens_per_s");
  EXPECT_EQ(rows["nx"].measured, 1024.5);
  ASSERT_EQ(rows.count("f1"), 1u) << reasons;
  EXPECT_EQ(rows["f1"].device, "f1");
  EXPECT_EQ(rows["f1"].model, "gpt2-xl");
  EXPECT_EQ(rows["f1"].metric, "prefill_latency_ms");
  EXPECT_DOUBLE_EQ(rows["f1"].measured, 900);  // 0.9 s
  ASSERT_EQ(rows.count("two"), 1u) << reasons;
  EXPECT_EQ(rows["two"].cards, 2);
  ASSERT_EQ(rows.count("two/gpu"), 1u) << reasons;
  EXPECT_EQ(rows["two/gpu"].device, "a100-80gb");  // the SXM4 part number names the 80 GB A100
  EXPECT_EQ(rows.count("e2e"), 0u);
  EXPECT_NE(reasons.find("e2e: not predictable: end_to_end_latency_ms needs the row's generation length"),
            std::string::npos)
      << reasons;
  std::map<std::string, double> counts;
  for (const auto& r : v.resources) counts[r.resource] = r.measured;
  EXPECT_EQ(counts["LUT"], 177000);
  EXPECT_EQ(counts["DSP"], 45200);
  // A --designs folder that is not there is an input error, not every row skipped.
  EXPECT_THROW(perf::validate(csv, dir + "/no_such_folder"), fpgallm::InputError);
}

TEST(Validate, GpuStackFromText) {
  bool named = false;
  EXPECT_EQ(perf::gpu_stack_from_text("V100S (vLLM+SmoothQuant)", &named), perf::GpuStack::graphs);
  EXPECT_TRUE(named);
  EXPECT_EQ(perf::gpu_stack_from_text("A100, gpt-fast int8"), perf::GpuStack::compiled);
  EXPECT_EQ(perf::gpu_stack_from_text("RTX 4090 llama.cpp Q4_0"), perf::GpuStack::llamacpp);
  EXPECT_EQ(perf::gpu_stack_from_text("4x V100 32GB (Megatron-LM, FP16)"), perf::GpuStack::eager);
  EXPECT_EQ(perf::gpu_stack_from_text("A100 W8A8", &named), perf::GpuStack::eager);
  EXPECT_FALSE(named);
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

// Every constant data/perf_model.json marks fitted carries its leave-one-source-out error,
// and the figures stored there are the ones validate computes now (not a stale copy); the
// fit over the shipped rows returns the shipped value; a constant whose derivation does
// better on held-out sources than its fit would have been replaced by the derivation.
TEST(Perf, FittedConstantsCarryTheirCrossValidatedError) {
  const nlohmann::json j = fpgallm::read_json_file(fpgallm::data_dir() + "/perf_model.json", "constants");
  const perf::Validation v = perf::validate(fpgallm::data_dir() + "/published_results.csv", fpgallm::data_dir() + "/published");
  const perf::CrossValidation& cv = v.cross_validation;
  int fitted = 0;
  for (const auto& [name, e] : j.at("constants").items()) {
    const bool marked = e.at("source").get<std::string>().rfind("FIT", 0) == 0;
    EXPECT_EQ(marked, e.contains("fit")) << name << ": a FIT source and a \"fit\" object go together";
    if (!e.contains("fit")) continue;
    ++fitted;
    ASSERT_TRUE(e["fit"].contains("cross_validated")) << name << " has no cross-validated error beside it";
    const auto& stored = e["fit"]["cross_validated"];
    const auto it = std::find_if(cv.constants.begin(), cv.constants.end(), [&](const auto& k) { return k.name == name; });
    ASSERT_NE(it, cv.constants.end()) << name << " is not cross-validated by validate";
    EXPECT_NEAR(stored.at("median_abs_error_fpga").get<double>(), cv.median_abs_error_fpga, 5e-4) << name;
    EXPECT_NEAR(stored.at("median_abs_error_fpga_at_derivation").get<double>(), it->median_abs_error_fpga_at_derivation, 5e-4)
        << name;
    EXPECT_NEAR(stored.at("in_sample_median_abs_error_fpga").get<double>(), v.median_abs_error_fpga, 5e-4) << name;
    EXPECT_NEAR(it->fitted, e.at("value").get<double>(), 1e-9 + 1e-9 * std::fabs(it->fitted)) << name << ": the fit moved";
    EXPECT_GE(it->median_abs_error_fpga_at_derivation, cv.median_abs_error_fpga)
        << name << ": its derivation does better on held-out sources than its fit; ship the derivation";
    EXPECT_EQ(it->without.size(), cv.groups.size()) << name;
  }
  EXPECT_EQ(fitted, int(cv.constants.size()));
  EXPECT_GT(fitted, 0);
}

TEST(Perf, CrossValidatedMediansWithinBound) {
  const perf::Validation v = perf::validate(fpgallm::data_dir() + "/published_results.csv", fpgallm::data_dir() + "/published");
  EXPECT_LE(v.cross_validation.median_abs_error_fpga, 0.15);
  EXPECT_LE(v.cross_validation.median_abs_error_gpu, 0.10);
  EXPECT_GE(v.cross_validation.groups.size(), 5u);
  // Leave-one-design-out holds a rerun or a re-report out with its original source.
  EXPECT_LT(v.cross_validation_by_design.groups.size(), v.cross_validation.groups.size());
  for (const auto& r : v.rows) {
    EXPECT_GT(r.predicted_held_out, 0) << "line " << r.line;
    EXPECT_NEAR(r.error_held_out, r.predicted_held_out / r.measured - 1, 1e-9);
    if (r.kind == "gpu") {
      EXPECT_NEAR(r.error_held_out, r.error, 1e-9) << "line " << r.line << ": no GPU constant is fitted";
    }
  }
}

// A row measured on 1, 2 and 4 nodes is costed on the design split that many ways with the
// split's collectives: three different predictions, none of them the one-node figure times
// the node count (the split is not free).
TEST(Perf, RowsOnOneTwoAndFourNodesGetTheSplitsPrediction) {
  const std::string dir = testing_support::scratch_dir("validate_nodes");
  const std::string csv = dir + "/rows.csv";
  {
    std::ofstream f(csv);
    f << "source_id,device,model,metric,value,batch,prompt_len,gen_len\n";
    for (const char* device : {"Xilinx Alveo U280 (1 node)", "Xilinx Alveo U280, 2 nodes", "4 nodes of Xilinx Alveo U280"})
      f << "dfx," << '"' << device << '"' << ",GPT-2 345M,throughput_tokens_per_s,100,1,64,64\n";
  }
  std::ifstream in(fpgallm::data_dir() + "/published/dfx_micro22.json");
  std::ofstream(dir + "/dfx.json") << in.rdbuf();
  std::ifstream models(fpgallm::data_dir() + "/published/models.json");
  std::ofstream(dir + "/models.json") << models.rdbuf();
  const perf::Validation v = perf::validate(csv, dir);
  ASSERT_EQ(v.rows.size(), 3u);
  EXPECT_EQ(v.rows[0].cards, 1);
  EXPECT_EQ(v.rows[1].cards, 2);
  EXPECT_EQ(v.rows[2].cards, 4);
  EXPECT_LT(v.rows[0].predicted, v.rows[1].predicted);
  EXPECT_LT(v.rows[1].predicted, v.rows[2].predicted);
  EXPECT_LT(v.rows[1].predicted, 2 * v.rows[0].predicted);
  EXPECT_LT(v.rows[2].predicted, 4 * v.rows[0].predicted);
  // The shipped DFX rows on 1, 2 and 4 cards (lines 6-8) are the same three predictions.
  const perf::Validation shipped =
      perf::validate(fpgallm::data_dir() + "/published_results.csv", fpgallm::data_dir() + "/published");
  std::map<int, double> by_line;
  for (const auto& r : shipped.rows)
    if (r.kind == "fpga") by_line[r.line] = r.predicted;
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(by_line.at(6 + k), v.rows[k].predicted, 1e-9 * v.rows[k].predicted) << 6 + k;
}

// A published design file states how it counts its memory and how wide its off-chip ports
// are; one that does not is refused for its rows in one line naming the field to add.
TEST(Validate, RefusesADesignFileWithoutItsMemoryConventionOrPortWidth) {
  const std::string dir = testing_support::scratch_dir("validate_conventions");
  const std::string csv = dir + "/rows.csv";
  std::ofstream(csv) << "source_id,device,model,metric,value,batch,prompt_len,gen_len\n"
                     << "no_ports,Alveo U280,LLaMA2-7B,decode_tokens_per_s,50,1,,\n"
                     << "no_convention,Alveo U280,LLaMA2-7B,decode_tokens_per_s,50,1,,\n"
                     << "stated,Alveo U280,LLaMA2-7B,decode_tokens_per_s,50,1,,\n";
  const std::string said = R"("assumptions": {"memory_convention": "device_channels", "memory_as_published": "HBM2 460 GB/s"})";
  std::ofstream(dir + "/no_ports.json") << R"({"device": "u280", "quant": "int8", "memory": {"weight_channels": 32}, )" << said << "}";
  std::ofstream(dir + "/no_convention.json") << R"({"device": "u280", "quant": "int8", "memory": {"weight_channels": 32, "port_bits": 512}})";
  std::ofstream(dir + "/stated.json") << R"({"device": "u280", "quant": "int8", "memory": {"weight_channels": 32, "port_bits": 256}, )" << said << "}";
  std::ofstream(dir + "/models.json") << R"({"models": [{"contains": ["llama2-7b"], "preset": "llama2-7b"}]})";
  const perf::Validation v = perf::validate(csv, dir);
  ASSERT_EQ(v.rows.size(), 1u);
  EXPECT_EQ(v.rows[0].source_id, "stated");
  std::map<std::string, std::string> reason;
  for (const auto& s : v.skipped) reason[s.source_id] = s.reason;
  EXPECT_NE(reason["no_ports"].find("memory.port_bits is missing"), std::string::npos) << reason["no_ports"];
  EXPECT_NE(reason["no_convention"].find("assumptions.memory_convention is missing"), std::string::npos)
      << reason["no_convention"];
  EXPECT_NE(reason["no_convention"].find("u280 counts 32 HBM2 channels"), std::string::npos) << reason["no_convention"];
  for (const auto& [source, r] : reason) EXPECT_EQ(r.find('\n'), std::string::npos) << source;
  // Every shipped published design states them.
  const perf::Validation shipped =
      perf::validate(fpgallm::data_dir() + "/published_results.csv", fpgallm::data_dir() + "/published");
  for (const auto& s : shipped.skipped) EXPECT_EQ(s.reason.find("cannot be used"), std::string::npos) << s.reason;
}

// A GPU stack's efficiency is not carried from fp16 to int4: a 4-bit GPU row on a stack
// whose source measured 8- and 16-bit kernels says there is no sourced efficiency.
TEST(Validate, Int4OnAStackWithoutAnInt4SourceHasNoEfficiency) {
  const std::string dir = testing_support::scratch_dir("validate_int4");
  const std::string csv = dir + "/rows.csv";
  std::ofstream(csv) << "source_id,device,model,metric,value,batch,prompt_len,gen_len,gpu_baseline_device,gpu_baseline_value\n"
                     << "a,Alveo U280,LLaMA2-7B,decode_tokens_per_s,50,1,,,A100-80GB (gpt-fast int4),150\n"
                     << "b,Alveo U280,LLaMA2-7B,decode_tokens_per_s,50,1,,,A100-80GB (llama.cpp Q4_0 int4),120\n"
                     << "c,Alveo U280,LLaMA2-7B,decode_tokens_per_s,50,1,,,A100-80GB (gpt-fast fp16),100\n";
  std::ofstream(dir + "/models.json") << R"({"models": [{"contains": ["llama2-7b"], "preset": "llama2-7b"}]})";
  const perf::Validation v = perf::validate(csv, dir);
  std::map<std::string, std::string> gpu_rows, reasons;
  for (const auto& r : v.rows) gpu_rows[r.source_id] = r.stack;
  for (const auto& s : v.skipped)
    if (s.kind == "gpu") reasons[s.source_id] = s.reason;
  EXPECT_NE(reasons["a"].find("no sourced efficiency: the compiled stack at 4-bit weights"), std::string::npos) << reasons["a"];
  EXPECT_EQ(gpu_rows.count("a"), 0u);
  EXPECT_EQ(gpu_rows["b"], "llamacpp");
  EXPECT_EQ(gpu_rows["c"], "compiled");
}

// Leave-one-source-out on two sources, worked out by hand. Both measure one design (decode
// tok/s of LLaMA2-7B on a 32-channel U280 design, not host-launched, so kernel_launch_s stays
// at its derivation): source a as the model predicts it with dma_setup_cycles = 10 (P10),
// source b with 30 (P30). The decode time is linear in the constant, so a held out is fitted
// on b alone (30, b's exact value) and predicted as P30, b on a alone (10) as P10: errors
// P30/P10 - 1 and P10/P30 - 1, their median the mean of the two. In sample every value in
// [10, 30] fits both rows equally (the sum of their |log| errors is log(P10/P30) there); the
// tie goes to the derivation, 16.
TEST(Validate, LeaveOneSourceOutOnTwoSourcesByHand) {
  const std::string dir = testing_support::scratch_dir("validate_loso");
  const std::string design = R"({"device": "u280", "quant": "int8", "memory": {"weight_channels": 32, "port_bits": 512}, )"
                             R"("assumptions": {"memory_convention": "device_channels", "memory_as_published": "HBM2"}})";
  std::ofstream(dir + "/a.json") << design;
  std::ofstream(dir + "/b.json") << design;
  std::ofstream(dir + "/models.json") << R"({"models": [{"contains": ["llama2-7b"], "preset": "llama2-7b"}]})";
  const std::string header = "source_id,device,model,metric,value,batch,prompt_len,gen_len\n";
  auto row = [](const char* source, double value) {
    char cell[64];
    std::snprintf(cell, sizeof cell, "%.17g", value);
    return std::string(source) + ",Alveo U280,LLaMA2-7B,decode_tokens_per_s," + cell + ",1,,\n";
  };
  auto predicted_at = [&](double cycles) {
    perf::Constants c = perf::constants();
    c.dma_setup_cycles.value = cycles;
    std::ofstream(dir + "/one.csv") << header << row("a", 1);
    const perf::Validation v = perf::validate(dir + "/one.csv", dir, c);
    EXPECT_EQ(v.rows.size(), 1u);
    return v.rows.empty() ? 0.0 : v.rows[0].predicted;
  };
  const double p10 = predicted_at(10), p16 = predicted_at(16), p18 = predicted_at(18), p30 = predicted_at(30);
  ASSERT_GT(p10, p30);
  ASSERT_EQ(perf::constants().dma_setup_cycles.value, 18);
  std::ofstream(dir + "/two.csv") << header << row("a", p10) << row("b", p30);
  const perf::Validation v = perf::validate(dir + "/two.csv", dir);
  ASSERT_EQ(v.rows.size(), 2u);
  const double ea = p30 / p10 - 1, eb = p10 / p30 - 1;
  EXPECT_NEAR(v.rows[0].error_held_out, ea, 1e-9);
  EXPECT_NEAR(v.rows[1].error_held_out, eb, 1e-9);
  const perf::CrossValidation& cv = v.cross_validation;
  EXPECT_NEAR(cv.median_abs_error_fpga, (std::fabs(ea) + std::fabs(eb)) / 2, 1e-9);
  ASSERT_EQ(cv.per_group.size(), 2u);
  EXPECT_EQ(cv.per_group[0].name, "a");
  EXPECT_EQ(cv.per_group[0].fpga_rows, 1);
  EXPECT_NEAR(cv.per_group[0].median_abs_error_fpga, std::fabs(ea), 1e-9);
  EXPECT_EQ(cv.per_group[0].constants.at("dma_setup_cycles"), 30);
  EXPECT_EQ(cv.per_group[1].constants.at("dma_setup_cycles"), 10);
  for (const auto& h : cv.per_group)
    EXPECT_EQ(h.constants.at("kernel_launch_s"), perf::constants().kernel_launch_s.fit->derivation) << h.name;
  // In sample: the shipped constant (18) and the refit over both rows (16).
  EXPECT_NEAR(v.median_abs_error_fpga, (std::fabs(p18 / p10 - 1) + std::fabs(p18 / p30 - 1)) / 2, 1e-9);
  const auto dma = std::find_if(cv.constants.begin(), cv.constants.end(), [](const auto& k) { return k.name == "dma_setup_cycles"; });
  ASSERT_NE(dma, cv.constants.end());
  EXPECT_EQ(dma->shipped, 18);
  EXPECT_EQ(dma->fitted, 16);
  EXPECT_NEAR(cv.median_abs_error_fpga_refit, (std::fabs(p16 / p10 - 1) + std::fabs(p16 / p30 - 1)) / 2, 1e-9);
  // --json carries the same figures per source held out.
  nlohmann::json j;
  perf::to_json(j, v);
  const auto& held = j.at("leave_one_source_out").at("held_out");
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[1].at("name"), "b");
  EXPECT_EQ(held[1].at("fpga_rows"), 1);
  EXPECT_NEAR(held[1].at("median_abs_error_fpga").get<double>(), std::fabs(eb), 1e-9);
  EXPECT_EQ(held[1].at("fitted_without").at("dma_setup_cycles"), 10);
}
