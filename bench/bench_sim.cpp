// Speed of the cycle simulator: one decode token and a 512-token prefill of llama2-7b on
// an Alveo U280 overlay (the design below, written out so that the benchmark does not
// depend on the planner's choice). Targets (issue 6): decode < 1 s, prefill < 10 s.
#include <benchmark/benchmark.h>

#include "arch/design.hpp"
#include "hw/device.hpp"
#include "model/presets.hpp"
#include "sim/simulate.hpp"
#include "util/paths.hpp"

namespace {

// A fixed 64x64 overlay on the U280 (written out, so it does not depend on the planner).
arch::Design u280_overlay() { return arch::load(fpgallm::data_dir() + "/designs/u280-overlay-64x64.json"); }

void run(benchmark::State& state, arch::Stage stage) {
  const model::Config cfg = model::find_preset("llama2-7b").value();
  const arch::Design d = u280_overlay();
  const hw::Device& dev = hw::find_device("u280");
  sim::Options o;
  o.stage = stage;
  o.prompt = 512;
  o.context = 512;
  std::int64_t tasks = 0;
  double cycles = 0;
  for (auto _ : state) {
    const sim::Report r = sim::simulate(cfg, d, dev, o);
    tasks = r.tasks;
    cycles = r.cycles;
    benchmark::DoNotOptimize(r.cycles);
  }
  state.counters["tasks"] = double(tasks);
  state.counters["simulated_cycles"] = cycles;
  state.counters["tasks_per_s"] = benchmark::Counter(double(tasks) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_SimDecodeLlama2_7B(benchmark::State& state) { run(state, arch::Stage::decode); }
void BM_SimPrefill512Llama2_7B(benchmark::State& state) { run(state, arch::Stage::prefill); }

BENCHMARK(BM_SimDecodeLlama2_7B)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimPrefill512Llama2_7B)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
