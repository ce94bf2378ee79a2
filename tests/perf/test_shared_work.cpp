// What the design search computes once for many designs gives what predict() gives, bit for
// bit: the instruction lists a Workloads keeps (perf::WorkloadCache), the totals-only
// prediction (perf::Detail::totals) with resource counts given, and perf::memory_fit.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hw/resources.hpp"
#include "model/presets.hpp"
#include "perf/perf.hpp"

namespace {

arch::Design overlay(const std::string& device, int rows, int cols, int cards, arch::Split split) {
  arch::Design d;
  d.name = device + "-shared-work";
  d.device = device;
  d.clock_mhz = 225;
  d.matrix_unit.rows = rows;
  d.matrix_unit.cols = cols;
  d.matrix_unit.pipeline_depth = arch::hls_matrix_unit_depth(cols);
  d.vector_unit.lanes = 16;
  d.tiling.tile_rows = 64;
  d.tiling.tile_cols = 128;
  d.buffers.weight_bytes = 2 * 64 * 128;
  d.buffers.activation_bytes = 1 << 20;
  d.memory.weight_channels = 24;
  d.memory.kv_channels = 8;
  d.memory.activation_channels = 0;
  d.parallel.cards = cards;
  d.parallel.split = split;
  d.context = 512;
  return d;
}

// Designs that take each path of the model: the instruction list on one card and over a
// tensor or pipeline split, the per-operation model (a kernel gap), a model that does not fit.
std::vector<arch::Design> designs() {
  std::vector<arch::Design> out = {overlay("u280", 16, 64, 1, arch::Split::none),
                                   overlay("u280", 8, 32, 2, arch::Split::tensor),
                                   overlay("u280", 8, 32, 4, arch::Split::pipeline)};
  arch::Design gap = overlay("u280", 16, 64, 1, arch::Split::none);
  gap.compute_units = 2;
  out.push_back(gap);
  arch::Design other_tiles = overlay("u280", 16, 64, 1, arch::Split::none);
  other_tiles.tiling.tile_rows = 128;
  other_tiles.tiling.tile_cols = 256;
  other_tiles.buffers.weight_bytes = 2 * 128 * 256;
  out.push_back(other_tiles);
  return out;
}

std::string full(const perf::Prediction& p) { return nlohmann::json(p).dump(); }

bool on_the_instruction_list(const perf::Prediction& p) {
  for (const auto& n : p.notes)
    if (n.rfind("costed on the instruction list", 0) == 0) return true;
  return false;
}

TEST(SharedWork, CachedInstructionListsPredictWhatFreshOnesDo) {
  int listed = 0, split = 0;
  for (const char* preset : {"stories15m", "llama2-7b"}) {
    const model::Config c = *model::find_preset(preset);
    const perf::Workloads w = perf::lower(c, graph::parse_scheme("int8"), {1, 96, std::min(512, c.seq_len)});
    ASSERT_TRUE(w.cache);
    perf::Workloads fresh = w;
    for (const arch::Design& d : designs()) {
      const hw::Device& dev = hw::find_device(d.device);
      fresh.cache = nullptr;  // every list built anew for this design alone
      const perf::Prediction p = perf::predict(d, dev, fresh);
      const std::string expected = full(p);
      EXPECT_EQ(full(perf::predict(d, dev, w)), expected) << preset << " " << d.parallel.cards;
      EXPECT_EQ(full(perf::predict(d, dev, w)), expected) << preset << " " << d.parallel.cards << ", from the cache";
      listed += on_the_instruction_list(p);
      split += on_the_instruction_list(p) && d.parallel.cards > 1;
    }
  }
  EXPECT_GE(listed, 6);
  EXPECT_GE(split, 2);
}

TEST(SharedWork, TotalsAloneAreTheFullPredictionsFigures) {
  for (const char* preset : {"stories15m", "llama2-7b"}) {
    const model::Config c = *model::find_preset(preset);
    const perf::Workloads w = perf::lower(c, graph::parse_scheme("int8"), {1, 96, std::min(512, c.seq_len)});
    for (const arch::Design& d : designs()) {
      const hw::Device& dev = hw::find_device(d.device);
      const perf::Prediction p = perf::predict(d, dev, w);
      const hw::Utilization counts = hw::estimate_resources(d, dev, {&w.decode.config, false});
      const perf::Prediction t = perf::predict(d, dev, w, counts, perf::Detail::totals);
      EXPECT_EQ(perf::summary_json(t).dump(), perf::summary_json(p).dump()) << preset << " " << d.parallel.cards;
      EXPECT_TRUE(t.prefill.ops.empty() && t.decode.ops.empty());
      EXPECT_EQ(nlohmann::json(t.decode_transfers).dump(), nlohmann::json(p.decode_transfers).dump());
      EXPECT_EQ(full(perf::predict(d, dev, w, counts, perf::Detail::ops)), full(p)) << preset << " " << d.parallel.cards;
      const perf::MemoryFit m = perf::memory_fit(d, dev, w);
      EXPECT_EQ(m.fits, p.fits_memory);
      EXPECT_EQ(m.placement, p.placement);
    }
  }
}

TEST(SharedWork, MemoryFitSaysWhatDoesNotFit) {
  const perf::Workloads w = perf::lower(*model::find_preset("llama2-70b"), graph::parse_scheme("int8"), {1, 64, 4096});
  const arch::Design d = overlay("u280", 16, 64, 1, arch::Split::none);
  const perf::Prediction p = perf::predict(d, hw::find_device("u280"), w);
  const perf::MemoryFit m = perf::memory_fit(d, hw::find_device("u280"), w);
  ASSERT_FALSE(p.fits_memory);
  EXPECT_FALSE(m.fits);
  EXPECT_EQ(m.placement, p.placement);
}

}  // namespace
