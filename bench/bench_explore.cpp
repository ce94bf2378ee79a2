// fpgallm explore over every device of data/devices.json: the design-space search for each
// FPGA card plus the GPU baselines. Issue 5 asks for under 5 s per model on this machine;
// issue 27 for llama2-7b in at most 0.5 CPU s and every decoder preset (explore
// --all-presets) in at most 10 CPU s.
#include <benchmark/benchmark.h>

#include "dse/dse.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "util/paths.hpp"

namespace {

// What `fpgallm explore MODEL --devices all` asks for: int8, batch 1, prompt 128, the model's context.
dse::Request request(const model::Config& config) {
  dse::Request req;
  req.config = config;
  req.precision = graph::parse_scheme("int8");
  req.scenario.context = config.seq_len;
  req.operation_lists = false;  // as the command without --svg: the kept designs' totals alone
  return req;
}

std::vector<const hw::Device*> all_devices() {
  std::vector<const hw::Device*> devices;
  for (const auto& d : hw::devices()) devices.push_back(&d);
  return devices;
}

void explore_all(benchmark::State& state, const std::string& model_name) {
  const dse::Request req = request(model::load_or_preset(model_name).config);
  const auto devices = all_devices();
  for (auto _ : state) {
    const dse::Exploration e = dse::explore(devices, req, dse::Objective::decode_tps);
    benchmark::DoNotOptimize(e.devices.data());
  }
  state.counters["devices"] = double(devices.size());
}

void BM_ExploreLlama2_7b(benchmark::State& state) { explore_all(state, "llama2-7b"); }
void BM_ExploreStories260K(benchmark::State& state) { explore_all(state, fpgallm::source_dir() + "/models/stories260K.bin"); }

// `fpgallm explore --all-presets --devices all`: every decoder preset, one exploration each.
void BM_ExploreAllPresets(benchmark::State& state) {
  std::vector<dse::Request> requests;
  for (const auto& p : model::presets())
    if (p.config.causal()) requests.push_back(request(p.config));
  const auto devices = all_devices();
  for (auto _ : state)
    for (const auto& req : requests) {
      const dse::Exploration e = dse::explore(devices, req, dse::Objective::decode_tps);
      benchmark::DoNotOptimize(e.devices.data());
    }
  state.counters["models"] = double(requests.size());
  state.counters["devices"] = double(devices.size());
}

}  // namespace

BENCHMARK(BM_ExploreLlama2_7b)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ExploreStories260K)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ExploreAllPresets)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_MAIN();
