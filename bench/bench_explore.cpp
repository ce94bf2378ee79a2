// fpgallm explore over every device of data/devices.json: the design-space search for each
// FPGA card plus the GPU baselines. Issue 5 asks for under 5 s per model on this machine.
#include <benchmark/benchmark.h>

#include "dse/dse.hpp"
#include "model/model.hpp"
#include "util/paths.hpp"

namespace {

void explore_all(benchmark::State& state, const std::string& model_name) {
  const model::Model m = model::load_or_preset(model_name);
  dse::Request req;
  req.config = m.config;
  req.precision = graph::parse_scheme("int8");
  req.scenario.context = m.config.seq_len;
  std::vector<const hw::Device*> devices;
  for (const auto& d : hw::devices()) devices.push_back(&d);
  for (auto _ : state) {
    const dse::Exploration e = dse::explore(devices, req, dse::Objective::decode_tps);
    benchmark::DoNotOptimize(e.devices.data());
  }
  state.counters["devices"] = double(devices.size());
}

void BM_ExploreLlama2_7b(benchmark::State& state) { explore_all(state, "llama2-7b"); }
void BM_ExploreStories260K(benchmark::State& state) { explore_all(state, fpgallm::source_dir() + "/models/stories260K.bin"); }

}  // namespace

BENCHMARK(BM_ExploreLlama2_7b)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ExploreStories260K)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
