#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "perf/perf.hpp"
#include "util/error.hpp"
#include "util/json_file.hpp"
#include "util/paths.hpp"

namespace perf {

std::vector<std::pair<std::string, const Constant*>> Constants::named() const {
  return {{"memory_efficiency", &memory_efficiency},
          {"axi_port_bytes", &axi_port_bytes},
          {"op_fixed_cycles", &op_fixed_cycles},
          {"host_transfer_s", &host_transfer_s},
          {"link_hop_s", &link_hop_s},
          {"link_gbps_default", &link_gbps_default},
          {"pcie_gbps_default", &pcie_gbps_default},
          {"onchip_usable_fraction", &onchip_usable_fraction},
          {"gpu_bandwidth_efficiency", &gpu_bandwidth_efficiency},
          {"gpu_compute_efficiency", &gpu_compute_efficiency},
          {"gpu_layer_overhead_eager_s", &gpu_layer_overhead_eager_s},
          {"gpu_layer_overhead_graphs_s", &gpu_layer_overhead_graphs_s},
          {"electricity_usd_per_kwh", &electricity_usd_per_kwh},
          {"amortization_years", &amortization_years}};
}

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
  }
  for (const char* fraction : {"memory_efficiency", "onchip_usable_fraction", "gpu_bandwidth_efficiency",
                               "gpu_compute_efficiency"}) {
    const double v = table[fraction]["value"].get<double>();
    if (v <= 0 || v > 1) throw fpgallm::InputError(path, fmt::format("constant '{}' = {} is not in (0, 1]", fraction, v));
  }
  return c;
}

const Constants& constants() {
  static const Constants c = load_constants(fpgallm::data_dir() + "/perf_model.json");
  return c;
}

}  // namespace perf
