// The designs the search returns for the models that fit in C simulation run there and
// emit, on their own shapes (the cheap half, that every searched design is a built shape,
// is tests/dse/test_built_designs.cpp).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "arch/instances.hpp"
#include "codegen/codegen.hpp"
#include "dse/dse.hpp"
#include "engine/accel.hpp"
#include "graph/workload.hpp"
#include "hw/device.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "model/synth.hpp"
#include "perf/perf.hpp"
#include "quant/quant.hpp"
#include "testing.hpp"
#include "../searched.hpp"

namespace {

using dse_testing::searched;

const model::Model& small_model(const std::string& which) {
  static std::map<std::string, model::Model> cache;
  auto it = cache.find(which);
  if (it == cache.end()) {
    model::Model m = which == "stories260K" ? model::load(testing_support::stories260k())
                                            : model::synthesize(*model::find_preset(which), 1);
    it = cache.emplace(which, std::move(m)).first;
  }
  return it->second;
}

// The plan's top design (and the next ranked ones with other units, up to three) of each small
// model on cards of each memory kind runs in the C simulation, with logits bit-identical to
// those of the same model on another matrix-unit shape with the same vector unit (integer
// results do not depend on the matrix shape), and emits.
TEST(BuiltDesignsRun, PlannedDesignsRunInTheCSimulationAndEmit) {
  for (const std::string which : {"stories260K", "stories15m", "stories42m"}) {
    const model::Model& m = small_model(which);
    const quant::QuantModel qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
    std::set<std::tuple<int, int, int, int, int>> seen;
    // Zynq PS DDR on the ZCU102: the KV260 fits no design of these kernels (their vector
    // unit at 8 lanes alone takes about 1,200 DSPs and 120k LUTs: hw/unit_resources.cpp).
    for (const char* device : {"u280", "u200", "zcu102", "v80"}) {
      const auto candidates = searched(m.config, hw::find_device(device), 1, dse::Objective::decode_tps);
      ASSERT_FALSE(candidates.empty()) << which << " on " << device;
      int run = 0;
      for (std::size_t i = 0; i < candidates.size() && run < 3; ++i) {
        arch::Design d = candidates[i].design;
        const auto shape = std::make_tuple(d.matrix_unit.rows, d.matrix_unit.cols, d.tiling.tile_rows,
                                           d.tiling.tile_cols, d.vector_unit.lanes);
        if (!seen.insert(shape).second && i > 0) continue;
        ++run;
        SCOPED_TRACE(which + " on " + device + ": " + d.name);
        ASSERT_TRUE(engine::accel_problems(qm, d).empty()) << engine::accel_problems(qm, d).front();
        arch::Design other = d;
        other.matrix_unit.rows = d.matrix_unit.rows == 8 ? 16 : 8;
        other.matrix_unit.cols = 64;
        other.tiling.tile_rows = 64;
        other.tiling.tile_cols = 128;
        other.style = arch::Style::overlay;
        ASSERT_TRUE(engine::accel_problems(qm, other).empty()) << engine::accel_problems(qm, other).front();
        d.context = other.context = std::min(d.context, 16);
        engine::AccelTransformer a(m, qm, d), b(m, qm, other);
        for (int pos = 0; pos < 2; ++pos) {
          const float* la = a.forward(pos + 1, pos);
          const float* lb = b.forward(pos + 1, pos);
          ASSERT_EQ(std::memcmp(la, lb, sizeof(float) * std::size_t(m.config.vocab_size)), 0) << "position " << pos;
        }
        if (i == 0) {
          const std::string dir = testing_support::scratch_dir("built_" + which + "_" + device) + "/proj";
          codegen::emit(m, qm, d, dir, codegen::EmitOptions{1});
          const std::string cfg = testing_support::read_bytes(dir + "/src/fpgallm_config.hpp");
          EXPECT_NE(cfg.find("MatrixVectorConfig<" + std::to_string(d.matrix_unit.rows) + ", " +
                             std::to_string(d.matrix_unit.cols) + ","),
                    std::string::npos);
          std::filesystem::remove_all(dir);
        }
      }
    }
  }
}

}  // namespace

// As a user would: synthesize stories15m, plan it for the U280, emit the planned design and
// run the project's own C simulation against its golden vectors.
TEST(BuiltDesignsRun, PlannedStories15mProjectPassesItsTestbench) {
  using testing_support::run_fpgallm;
  const std::string dir = testing_support::scratch_dir("built_15m_csim");
  ASSERT_EQ(run_fpgallm("synth --preset stories15m --seed 7 -o " + dir + "/m.bin").status, 0);
  const auto plan = run_fpgallm("plan " + dir + "/m.bin --device u280 -o " + dir + "/d.json");
  ASSERT_EQ(plan.status, 0) << plan.err;
  const auto emit = run_fpgallm("emit " + dir + "/m.bin --design " + dir + "/d.json -o " + dir + "/proj --golden-steps 1",
                                300);
  ASSERT_EQ(emit.status, 0) << emit.err;
  const std::string log = dir + "/csim.log";
  const int status =
      std::system(("make -s -C " + dir + "/proj csim CXXFLAGS='-std=c++14 -O1' >" + log + " 2>&1").c_str());
  const std::string out = testing_support::read_bytes(log);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("one layer (block 0): 288 values bit-exact"), std::string::npos) << out;
  EXPECT_NE(out.find("decode step 0 logits: 32000 values bit-exact"), std::string::npos) << out;  // steps count from 0
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
}
