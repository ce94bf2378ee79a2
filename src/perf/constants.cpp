#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "perf/perf.hpp"
#include "util/error.hpp"
#include "util/json_file.hpp"
#include "util/paths.hpp"

namespace perf {

const char* to_string(GpuStack s) {
  switch (s) {
    case GpuStack::eager: return "eager";
    case GpuStack::graphs: return "graphs";
    case GpuStack::compiled: return "compiled";
    case GpuStack::llamacpp: return "llamacpp";
  }
  return "?";
}

std::vector<GpuStack> gpu_stacks() { return {GpuStack::eager, GpuStack::graphs, GpuStack::compiled, GpuStack::llamacpp}; }

const GpuStackConstants& Constants::stack(GpuStack s) const {
  switch (s) {
    case GpuStack::eager: return gpu_eager;
    case GpuStack::graphs: return gpu_graphs;
    case GpuStack::compiled: return gpu_compiled;
    case GpuStack::llamacpp: return gpu_llamacpp;
  }
  return gpu_eager;
}

std::vector<std::pair<std::string, const Constant*>> Constants::named() const {
  return {{"memory_efficiency", &memory_efficiency},
          {"issue_cycles", &issue_cycles},
          {"dma_setup_cycles", &dma_setup_cycles},
          {"cu_barrier_cycles", &cu_barrier_cycles},
          {"vector_pipeline_cycles", &vector_pipeline_cycles},
          {"host_transfer_s", &host_transfer_s},
          {"kernel_launch_s", &kernel_launch_s},
          {"link_hop_s", &link_hop_s},
          {"link_gbps_default", &link_gbps_default},
          {"pcie_gbps_default", &pcie_gbps_default},
          {"onchip_usable_fraction", &onchip_usable_fraction},
          {"host_cpu_efficiency", &host_cpu_efficiency},
          {"server_cpu_gflops", &server_cpu_gflops},
          {"server_memory_gbps", &server_memory_gbps},
          {"gpu_compute_efficiency", &gpu_compute_efficiency},
          {"gpu_eager_layer_overhead_s", &gpu_eager.layer_overhead_s},
          {"gpu_eager_bandwidth_efficiency", &gpu_eager.bandwidth_efficiency},
          {"gpu_graphs_layer_overhead_s", &gpu_graphs.layer_overhead_s},
          {"gpu_graphs_bandwidth_efficiency", &gpu_graphs.bandwidth_efficiency},
          {"gpu_compiled_layer_overhead_s", &gpu_compiled.layer_overhead_s},
          {"gpu_compiled_bandwidth_efficiency", &gpu_compiled.bandwidth_efficiency},
          {"gpu_llamacpp_layer_overhead_s", &gpu_llamacpp.layer_overhead_s},
          {"gpu_llamacpp_bandwidth_efficiency", &gpu_llamacpp.bandwidth_efficiency},
          {"electricity_usd_per_kwh", &electricity_usd_per_kwh},
          {"amortization_years", &amortization_years}};
}

namespace {

// The first-access latencies the simulator also uses (one number in one place).
void load_memory_latencies(Constants& c, const std::string& path) {
  const nlohmann::json j = fpgallm::read_json_file(path, "the simulator constants");
  auto read = [&](const char* kind, Constant& out) {
    try {
      const auto& e = j.at("memory_latency_ns").at(kind);
      out.value = e.at("value").get<double>();
      out.unit = "ns";
      out.source = "data/sim_model.json memory_latency_ns." + std::string(kind) + ": " + e.at("source").get<std::string>();
    } catch (const nlohmann::json::exception&) {
      throw fpgallm::InputError(path, fmt::format("memory_latency_ns.{} needs a numeric value and a source", kind));
    }
    if (!(out.value >= 0)) throw fpgallm::InputError(path, fmt::format("memory_latency_ns.{} is negative", kind));
  };
  read("HBM", c.hbm_first_access_ns);
  read("DDR", c.ddr_first_access_ns);
}

ConstantFit read_fit(const std::string& path, const std::string& name, const nlohmann::json& f) {
  ConstantFit out;
  try {
    out.min = f.at("min").get<double>();
    out.max = f.at("max").get<double>();
    out.step = f.at("step").get<double>();
    out.derivation = f.at("derivation").get<double>();
    out.derivation_source = f.at("derivation_source").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    throw fpgallm::InputError(path, fmt::format("constant '{}': \"fit\" needs numeric min, max, step, derivation and a "
                                                "derivation_source", name));
  }
  if (!(out.min >= 0 && out.step > 0 && out.max >= out.min && (out.max - out.min) / out.step <= 1000) ||
      out.derivation_source.empty())
    throw fpgallm::InputError(path, fmt::format("constant '{}': \"fit\" grid [{}, {}] step {} is not a grid of at most "
                                                "1000 steps from 0 up", name, out.min, out.max, out.step));
  return out;
}

}  // namespace

Constants load_constants(const std::string& path) {
  const nlohmann::json j = fpgallm::read_json_file(path, "the performance-model constants");
  Constants c;
  if (!j.contains("constants") || !j["constants"].is_object())
    throw fpgallm::InputError(path, "no \"constants\" object");
  const auto& table = j["constants"];
  for (auto& [name, ptr] : c.named()) {
    if (!table.contains(name)) throw fpgallm::InputError(path, fmt::format("constant '{}' is missing", name));
    const auto& e = table[name];
    auto* slot = const_cast<Constant*>(ptr);
    if (!e.contains("value") || !e["value"].is_number() || !e.contains("source") || !e["source"].is_string() ||
        e["source"].get<std::string>().empty())
      throw fpgallm::InputError(path, fmt::format("constant '{}' needs a numeric value and a source", name));
    slot->value = e["value"].get<double>();
    slot->unit = e.value("unit", "");
    slot->source = e["source"].get<std::string>();
    if (!(slot->value >= 0)) throw fpgallm::InputError(path, fmt::format("constant '{}' is negative", name));
    if (e.contains("fit")) slot->fit = read_fit(path, name, e["fit"]);
    else if (slot->source.rfind("FIT", 0) == 0)
      throw fpgallm::InputError(path, fmt::format("constant '{}' is marked FIT but has no \"fit\" (grid and derivation)", name));
  }
  for (const char* fraction :
       {"memory_efficiency", "onchip_usable_fraction", "host_cpu_efficiency", "gpu_compute_efficiency",
        "gpu_eager_bandwidth_efficiency", "gpu_graphs_bandwidth_efficiency", "gpu_compiled_bandwidth_efficiency",
        "gpu_llamacpp_bandwidth_efficiency"}) {
    const double v = table[fraction]["value"].get<double>();
    if (v <= 0 || v > 1) throw fpgallm::InputError(path, fmt::format("constant '{}' = {} is not in (0, 1]", fraction, v));
  }
  const std::string dir = path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  load_memory_latencies(c, dir + "sim_model.json");
  return c;
}

const Constants& constants() {
  static const Constants c = load_constants(fpgallm::data_dir() + "/perf_model.json");
  return c;
}

double instruction_overhead_cycles(const arch::Design& d, int channels, const Constants& c) {
  return c.issue_cycles.value + c.dma_setup_cycles.value * std::max(0, channels) +
         (d.compute_units > 1 ? c.cu_barrier_cycles.value : 0.0);
}

GpuStack gpu_stack_from_text(const std::string& text, bool* named) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return std::tolower(ch); });
  auto has = [&](const char* word) { return t.find(word) != std::string::npos; };
  GpuStack s = GpuStack::eager;
  bool found = true;
  if (has("llama.cpp") || has("llamacpp") || has("ggml") || has("ollama"))
    s = GpuStack::llamacpp;
  else if (has("gpt-fast") || has("gpt_fast") || has("torch.compile") || has("inductor"))
    s = GpuStack::compiled;
  else if (has("vllm") || has("tensorrt") || has("trt-llm") || has("trtllm") || has("mlc") || has("sglang") ||
           has("cuda graph") || has("exllama") || has("faster-transformer") || has("fastertransformer"))
    s = GpuStack::graphs;
  else if (has("pytorch") || has("hugging") || has("transformers") || has("hf ") || has("megatron") || has("eager") ||
           has("deepspeed"))
    s = GpuStack::eager;
  else
    found = false;
  if (named) *named = found;
  return s;
}

}  // namespace perf
