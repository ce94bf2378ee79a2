// The resource counts the design search reads for many designs (ResourceOptions::describe
// false, hw::resource_view) are the described model's, number for number.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arch/design.hpp"
#include "hw/device.hpp"
#include "hw/resources.hpp"
#include "model/presets.hpp"

namespace {

// Every number of a utilization: each part's counts, the total, the lines, whether it fits.
nlohmann::json counts(const hw::Utilization& u) {
  nlohmann::json j = u;
  for (auto& p : j["parts"]) {
    p.erase("terms");
    p.erase("formula");
  }
  j.erase("assumptions");
  return j;
}

arch::Design base() {
  arch::Design d;
  d.matrix_unit.rows = 16;
  d.matrix_unit.cols = 64;
  d.vector_unit.lanes = 32;
  d.memory.weight_channels = 12;
  d.memory.kv_channels = 4;
  return d;
}

std::vector<arch::Design> variants() {
  std::vector<arch::Design> out = {base()};
  auto add = [&](auto change) {
    arch::Design d = base();
    change(d);
    out.push_back(d);
  };
  add([](arch::Design& d) { d.compute_units = 3; });
  add([](arch::Design& d) { d.parallel.cards = 2; });
  add([](arch::Design& d) { d.kv_bits = 16; });
  add([](arch::Design& d) { d.vector_unit.shared = true; });
  add([](arch::Design& d) { d.vector_unit.format = arch::VectorFormat::fp16; });
  add([](arch::Design& d) {
    d.matrix_unit.weight_bits = 16;
    d.matrix_unit.act_bits = 16;
  });
  add([](arch::Design& d) { d.matrix_unit.impl = arch::MatrixUnitImpl::rtl; });
  return out;
}

TEST(ResourceCounts, CountsAloneEqualTheDescribedModel) {
  const model::Config m = *model::find_preset("llama2-7b");
  int checked = 0;
  for (const char* device : {"u280", "u250", "vck5000", "stratix10-nx", "zcu104"})
    for (const arch::Design& d : variants())
      for (const model::Config* sized : {&m, static_cast<const model::Config*>(nullptr)}) {
        const hw::Device& dev = hw::find_device(device);
        const hw::Utilization described = hw::estimate_resources(d, dev, {sized});
        const hw::Utilization alone = hw::estimate_resources(d, dev, {sized, false});
        EXPECT_EQ(counts(alone).dump(), counts(described).dump()) << device;
        if (d.matrix_unit.impl == arch::MatrixUnitImpl::hls) {
          EXPECT_TRUE(alone.assumptions.empty());
        }
        ++checked;
      }
  EXPECT_EQ(checked, 5 * 8 * 2);
}

TEST(ResourceCounts, WhatTheViewDropsChangesNoCount) {
  const model::Config m = *model::find_preset("llama2-7b");
  const hw::Device& dev = hw::find_device("u280");
  // A decode-only int8 top (one-token blocks) builds no tiled unit: the tiles change nothing.
  arch::Design a = base();
  a.tiling.prefill_block = 1;
  arch::Design b = a;
  b.name = "other";
  b.tiling.tile_rows = 256;
  b.tiling.tile_cols = 512;
  b.buffers.weight_bytes = 2 * 256 * 512;
  EXPECT_TRUE(hw::resource_view(a) == hw::resource_view(b));
  EXPECT_EQ(nlohmann::json(hw::estimate_resources(a, dev, {&m})).dump(),
            nlohmann::json(hw::estimate_resources(b, dev, {&m})).dump());
  // With prompt blocks the tiled unit's buffers follow the tiles: the view keeps them.
  {
    arch::Design pa = a, pb = b;
    pa.tiling.prefill_block = pb.tiling.prefill_block = 16;
    EXPECT_FALSE(hw::resource_view(pa) == hw::resource_view(pb));
    EXPECT_NE(nlohmann::json(hw::estimate_resources(pa, dev, {&m})).dump(),
              nlohmann::json(hw::estimate_resources(pb, dev, {&m})).dump());
  }
  // The RTL unit's counts follow the tiling: its view keeps it.
  a.matrix_unit.impl = b.matrix_unit.impl = arch::MatrixUnitImpl::rtl;
  EXPECT_FALSE(hw::resource_view(a) == hw::resource_view(b));
  EXPECT_NE(nlohmann::json(hw::estimate_resources(a, dev, {&m})).dump(),
            nlohmann::json(hw::estimate_resources(b, dev, {&m})).dump());
  // What it keeps changes the counts.
  arch::Design c = base();
  c.memory.weight_channels = 13;
  EXPECT_FALSE(hw::resource_view(c) == hw::resource_view(base()));
}

}  // namespace
