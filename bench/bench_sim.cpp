// Speed of the cycle simulator: one decode token and a 512-token prefill of llama2-7b on
// an Alveo U280 overlay (the design below, written out so that the benchmark does not
// depend on the planner's choice). Targets (issue 6): decode < 1 s, prefill < 10 s.
#include <benchmark/benchmark.h>

#include "arch/design.hpp"
#include "hw/device.hpp"
#include "model/presets.hpp"
#include "sim/simulate.hpp"

namespace {

arch::Design u280_overlay() {
  arch::Design d;
  d.name = "bench-u280";
  d.device = "u280";
  d.clock_mhz = 300;
  d.matrix_unit.rows = 64;
  d.matrix_unit.cols = 64;
  d.vector_unit.lanes = 32;
  d.tiling = {128, 256, 64};
  d.buffers.weight_bytes = 4 * 128 * 256;
  d.buffers.activation_bytes = 1 << 20;
  d.memory.weight_channels = 24;
  d.memory.kv_channels = 8;
  d.memory.activation_channels = 0;
  d.context = 1024;
  return d;
}

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
