// The units on the SLRs (hw/placement.hpp) and the buffers in the banks (hw/memory_map.hpp):
// what is placed never exceeds an SLR's share or a boundary's SLLs, a design that fits the
// device but not its SLRs does not fit and the search never returns one, and the bank map
// holds every buffer at the bandwidth the schedule assumes, or says which does not.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "dse/dse.hpp"
#include "hw/memory_map.hpp"
#include "hw/placement.hpp"
#include "hw/resources.hpp"
#include "model/presets.hpp"
#include "perf/perf.hpp"

namespace {

hw::Resources dsp(double n) {
  hw::Resources r;
  r.dsp = n;
  return r;
}

dse::Request request(const model::Config& c, int context) {
  dse::Request r;
  r.config = c;
  r.precision = graph::parse_scheme("int8");
  r.scenario.context = context;
  r.scenario.prompt = 128;
  r.max_cards = 1;
  return r;
}

// The design the search picks for llama2-7b (int8, context 4096) on `dev`.
dse::DeviceResult explore_7b(const hw::Device& dev) {
  const model::Config c = *model::find_preset("llama2-7b");
  return dse::explore_device(dev, request(c, 4096), dse::Objective::decode_tps,
                             perf::lower(c, graph::parse_scheme("int8"), {1, 128, 4096}));
}

}  // namespace

TEST(Placement, PlannedDesignSpansSlrsWithinEveryLimit) {
  const hw::Device& dev = hw::find_device("u280");
  const model::Config c = *model::find_preset("llama2-7b");
  const auto r = explore_7b(dev);
  ASSERT_TRUE(r.fits());
  const arch::Design& d = r.best().design;
  const hw::Utilization u = hw::estimate_resources(d, dev, {&c});
  const hw::SlrPlacement pl = hw::place_units(u.parts, dev, d);
  ASSERT_TRUE(pl.per_slr);
  EXPECT_TRUE(pl.fits) << pl.problems.front();
  EXPECT_GT(pl.spanned(), 1);  // its vector datapath alone holds more DSPs than one SLR allows
  // Every slice of every unit placed once, and no SLR over what it allows.
  std::map<std::string, int> slices;
  hw::Resources total;
  for (const auto& s : pl.shares) {
    slices[s.part] += s.slices;
    EXPECT_LE(s.slices, s.of) << s.part;
    total += s.use;
  }
  for (const auto& s : pl.shares) EXPECT_EQ(slices[s.part], s.of) << s.part;
  EXPECT_NEAR(total.dsp, u.total.dsp, 1e-6);
  EXPECT_NEAR(total.lut, u.total.lut, 1e-3);
  for (const auto& s : pl.slrs) {
    EXPECT_LE(s.used.dsp, s.allowed.dsp + 1e-6) << s.index;
    EXPECT_LE(s.used.lut, s.allowed.lut + 1e-6) << s.index;
    EXPECT_LE(s.used.ff, s.allowed.ff + 1e-6) << s.index;
    EXPECT_LE(s.used.bram36, s.allowed.bram36 + 1e-6) << s.index;
  }
  ASSERT_FALSE(pl.crossings.empty());
  for (const auto& x : pl.crossings) {
    EXPECT_EQ(x.available, 23040);
    EXPECT_LE(x.wires, x.available) << x.lower;
  }
}

TEST(Placement, FitsTheDeviceButNotItsSlrs) {
  // A whole unit of 2,500 DSPs: under the U280's 6,797 allowed, over any one SLR's (2,189 in
  // SLR0, 2,304 in SLR1 and SLR2).
  const hw::Device& dev = hw::find_device("u280");
  arch::Design d;
  hw::Part big{"controller", dsp(2500), "", "", {}};
  const hw::SlrPlacement pl = hw::place_units({big}, dev, d);
  EXPECT_FALSE(pl.fits);
  ASSERT_FALSE(pl.problems.empty());
  EXPECT_EQ(pl.problems.front().rfind("SLR0: DSP 2500 of", 0), 0u) << pl.problems.front();
  // The same DSPs as a sliced unit (PE rows) spread over the SLRs and fit.
  hw::Part rows{"matrix unit", dsp(2500), "", "", {}};
  d.matrix_unit.rows = 100;
  EXPECT_TRUE(hw::place_units({rows}, dev, d).fits);
  // A boundary with fewer SLLs than the rows crossing it does not fit.
  hw::Device few = dev;
  few.sll_per_boundary.value = 100;
  const hw::SlrPlacement crossed = hw::place_units({rows}, few, d);
  EXPECT_FALSE(crossed.fits);
  EXPECT_NE(crossed.problems.back().find("SLR0-SLR1 boundary"), std::string::npos) << crossed.problems.back();
}

TEST(Placement, SearchReturnsOnlyDesignsThatFitTheirSlrs) {
  // A U280 whose SLRs each allow a tenth of their DSPs, the card's total unchanged: every
  // design fits the card's total and none its SLRs; the search says so in one line.
  hw::Device thin = hw::find_device("u280");
  for (auto& s : thin.slrs) s.available.dsp.value = *s.available.dsp / 10;
  const auto none = explore_7b(thin);
  EXPECT_FALSE(none.fits());
  ASSERT_FALSE(none.why_not.empty());
  EXPECT_NE(none.why_not.front().find(": SLR"), std::string::npos) << none.why_not.front();
  EXPECT_EQ(none.why_not.front().find('\n'), std::string::npos);
  // The design the search picks on the U280 puts 14,496 signals on the SLR0-SLR1 boundary.
  // With 12,000 SLLs per boundary it picks another, and keeps only designs whose crossings fit.
  const auto full = explore_7b(hw::find_device("u280"));
  ASSERT_TRUE(full.fits());
  hw::Device narrow = hw::find_device("u280");
  narrow.sll_per_boundary.value = 12000;
  const auto r = explore_7b(narrow);
  ASSERT_TRUE(r.fits()) << r.why_not.front();
  EXPECT_FALSE(r.best().design == full.best().design);
  for (const auto& cand : r.ranked) {
    const model::Config c = *model::find_preset("llama2-7b");
    const hw::Utilization u = hw::estimate_resources(cand.design, narrow, {&c, false});
    EXPECT_TRUE(u.slr_problems.empty()) << cand.design.name << ": " << u.slr_problems.front();
  }
}

TEST(MemoryMap, Llama2_7bOnTheU280HoldsEveryBufferAndCanFail) {
  const hw::Device& dev = hw::find_device("u280");
  const model::Config c = *model::find_preset("llama2-7b");
  const auto r = explore_7b(dev);
  ASSERT_TRUE(r.fits());
  const arch::Design& d = r.best().design;
  const auto map = perf::bank_map(d, dev, c);
  ASSERT_TRUE(map.has_value());
  EXPECT_TRUE(map->fits) << map->problems.front();
  const double eta = perf::constants().memory_efficiency.value;
  for (const auto& b : map->buffers) EXPECT_TRUE(b.mapped) << b.buffer.port;
  // The KV cache: 32 layers x 4096 positions x 4096 int8 per port = 2^29 bytes, two
  // pseudo-channels' worth; with every pseudo-channel holding a weight channel, it lies in DDR4.
  const hw::MappedBuffer* kv = map->find("kv_k");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->buffer.bytes, 536870912);
  EXPECT_EQ(kv->banks.kind, "DDR");
  EXPECT_NE(map->find("kv_v")->banks.first, kv->banks.first);  // a bank each
  // Moved to one pseudo-channel, as emit mapped it before: too small, and the check says so.
  hw::MemoryMap moved = *map;
  for (auto& b : moved.buffers)
    if (b.buffer.port == "kv_k") b.banks = {0, "HBM", 31, 31};
  const auto problems = hw::check_map(moved, dev, d, eta);
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems.front().rfind("kv_k: 536.9 MB in HBM[31] (268.4 MB)", 0), 0u) << problems.front();
  // A port asked for more than its banks deliver.
  hw::MemoryMap fast = *map;
  for (auto& b : fast.buffers)
    if (b.buffer.port == "kv_v") b.buffer.bytes_per_s = 100e9;
  const auto slow = hw::check_map(fast, dev, d, eta);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_NE(slow.front().find("kv_v: the schedule assumes 100.00 GB/s"), std::string::npos) << slow.front();
}
