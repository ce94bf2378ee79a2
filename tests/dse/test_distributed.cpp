// Distributed exploration without MPI: the partition is deterministic and balanced, and
// exploring the parts separately, shipping them through serialize/deserialize and merging
// gives the same exploration (and the same printed JSON) as one process.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "dse/distributed.hpp"
#include "model/presets.hpp"

namespace {

TEST(DseDistributed, PartitionByHand) {
  // Longest first: 5 to part 0, then the ones fill part 1 until it passes part 0.
  EXPECT_EQ(dse::partition({5, 1, 1, 1, 1, 1}, 2), (std::vector<int>{0, 1, 1, 1, 1, 1}));
  // Equal costs: round robin in index order.
  EXPECT_EQ(dse::partition({1, 1, 1, 1, 1}, 3), (std::vector<int>{0, 1, 2, 0, 1}));
  // More parts than items: the extra parts stay empty.
  EXPECT_EQ(dse::partition({2, 3}, 4), (std::vector<int>{1, 0}));
  EXPECT_EQ(dse::items_of({1, 0, 1}, 1), (std::vector<int>{0, 2}));
  EXPECT_THROW(dse::partition({1}, 0), std::invalid_argument);
}

TEST(DseDistributed, PartitionIsBalancedAndCoversEveryItemOnce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(1, 100);
  for (int parts : {1, 2, 3, 4, 7}) {
    std::vector<double> costs(97);
    for (double& c : costs) c = cost(rng);
    const auto owners = dse::partition(costs, parts);
    EXPECT_EQ(owners, dse::partition(costs, parts));  // deterministic
    std::vector<double> load(parts, 0);
    std::size_t covered = 0;
    for (int p = 0; p < parts; ++p) {
      for (int i : dse::items_of(owners, p)) load[p] += costs[i];
      covered += dse::items_of(owners, p).size();
    }
    EXPECT_EQ(covered, costs.size());
    const double biggest = *std::max_element(costs.begin(), costs.end());
    EXPECT_LE(*std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end()), biggest);
  }
}

struct Sweep {
  std::vector<dse::Request> requests;            // one per model
  std::vector<const hw::Device*> devices;
  int items() const { return int(requests.size() * devices.size()); }
};

Sweep small_sweep() {
  Sweep s;
  for (const char* name : {"stories260k", "llama2-7b"}) {
    dse::Request r;
    r.config = *model::find_preset(name);
    r.config.name = name;
    r.precision = graph::parse_scheme("int8");
    r.scenario.context = 512;
    r.max_cards = 4;
    s.requests.push_back(r);
  }
  for (const char* id : {"u50", "u280", "kv260", "a100-80gb", "l4"}) s.devices.push_back(&hw::find_device(id));
  return s;
}

TEST(DseDistributed, MergedPartsEqualTheWholeExploration) {
  const Sweep s = small_sweep();
  const auto obj = dse::Objective::decode_tps;
  std::vector<dse::Exploration> whole;
  for (const auto& r : s.requests) whole.push_back(dse::explore(s.devices, r, obj));
  // Each item explored once, as the rank that owns it would.
  std::vector<dse::DeviceResult> explored;
  std::vector<double> costs;
  for (const auto& r : s.requests) {
    const auto w = perf::lower(r.config, r.precision, r.scenario);
    for (const auto* d : s.devices) {
      explored.push_back(dse::explore_device(*d, r, obj, w));
      costs.push_back(dse::item_cost(r, w, *d));
    }
  }
  for (int parts : {1, 2, 4}) {
    const auto owners = dse::partition(costs, parts);
    std::vector<std::vector<dse::Item>> shipped;
    for (int p = 0; p < parts; ++p) {
      std::vector<dse::Item> mine;
      for (int i : dse::items_of(owners, p)) mine.push_back({i, explored[i], 0.0});
      shipped.push_back(dse::deserialize(dse::serialize(mine, true)));
    }
    const auto merged = dse::merge(shipped, s.items());
    for (std::size_t m = 0; m < s.requests.size(); ++m) {
      std::vector<dse::DeviceResult> results;
      for (std::size_t d = 0; d < s.devices.size(); ++d) results.push_back(merged[m * s.devices.size() + d].result);
      const dse::Exploration e = dse::combine(results, s.requests[m], obj);
      EXPECT_EQ(nlohmann::json(e).dump(), nlohmann::json(whole[m]).dump()) << parts << " parts, model " << m;
      // The best designs' per-operation figures survive the trip bit for bit.
      for (std::size_t d = 0; d < e.devices.size(); ++d) {
        if (!e.devices[d].fits()) continue;
        const auto &a = e.devices[d].best().prediction, &b = whole[m].devices[d].best().prediction;
        ASSERT_EQ(a.decode.ops.size(), b.decode.ops.size());
        for (std::size_t o = 0; o < a.decode.ops.size(); ++o) EXPECT_EQ(a.decode.ops[o].time_s, b.decode.ops[o].time_s);
      }
    }
  }
}

TEST(DseDistributed, MergeRefusesMissingOrDuplicateItemsAndForeignBytes) {
  dse::Item a{0, {}, 0}, b{1, {}, 0};
  EXPECT_EQ(dse::merge({{b}, {a}}, 2).at(1).index, 1);
  EXPECT_THROW(dse::merge({{a}}, 2), std::invalid_argument);
  EXPECT_THROW(dse::merge({{a}, {a, b}}, 2), std::invalid_argument);
  EXPECT_THROW(dse::merge({{a, b}}, 1), std::invalid_argument);
  EXPECT_THROW(dse::deserialize("not cbor"), std::invalid_argument);
  EXPECT_TRUE(dse::deserialize(dse::serialize({}, false)).empty());
}

}  // namespace
