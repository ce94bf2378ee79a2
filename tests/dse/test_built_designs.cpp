// Every design the search returns (plan, explore and deploy all take theirs from
// dse::explore_device) is a shape fpgallm builds (arch/instances.hpp). That those designs
// run in the C simulation and emit on their own shapes: tests/dse/built (nosan).
#include <gtest/gtest.h>

#include <string>

#include "arch/instances.hpp"
#include "dse/dse.hpp"
#include "hw/device.hpp"
#include "model/presets.hpp"
#include "perf/perf.hpp"
#include "searched.hpp"

namespace {

using dse_testing::searched;

TEST(BuiltDesigns, TheSearchProposesOnlyBuiltShapes) {
  int designs = 0;
  for (const char* name : {"stories260k", "stories15m", "stories42m", "stories110m", "llama2-7b", "gpt2-medium"}) {
    const model::Config c = *model::find_preset(name);
    for (const hw::Device& dev : hw::devices()) {
      if (dev.kind != hw::Kind::fpga) continue;
      for (int batch : {1, 16})
        for (dse::Objective obj : {dse::Objective::decode_tps, dse::Objective::prefill_latency}) {
          for (const dse::Candidate& cand : searched(c, dev, batch, obj)) {
            ++designs;
            const auto p = arch::instance_problems(cand.design);
            EXPECT_TRUE(p.empty()) << name << " on " << dev.id << ": " << p.front();
          }
        }
    }
  }
  EXPECT_GT(designs, 1000);
}

}  // namespace
