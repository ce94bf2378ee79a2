#include "hw/power.hpp"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/paths.hpp"
#include "util/json_file.hpp"

namespace hw {

namespace {

PowerConstants read_constants() {
  const std::string path = fpgallm::data_dir() + "/devices.json";
  const nlohmann::json j = fpgallm::read_json_file(path, "the device table");
  if (!j.contains("power_model")) throw fpgallm::InputError(path, "no \"power_model\" section");
  const auto& pm = j["power_model"];
  auto fig = [&](const char* key) {
    auto it = pm.find(key);
    if (it == pm.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_number() || !(*it)[1].is_string() ||
        (*it)[1].get<std::string>().empty())
      throw fpgallm::InputError(path, std::string("power_model.") + key + ": expected [number, \"source\"]");
    return Figure{(*it)[0].get<double>(), (*it)[1].get<std::string>()};
  };
  PowerConstants c;
  c.static_fraction_of_tdp = fig("static_fraction_of_tdp");
  c.dsp_uw_per_mhz = fig("dsp_uw_per_mhz");
  c.bram36_uw_per_mhz = fig("bram36_uw_per_mhz");
  c.uram_uw_per_mhz = fig("uram_uw_per_mhz");
  c.lut_uw_per_mhz = fig("lut_uw_per_mhz");
  c.hbm_pj_per_bit = fig("hbm_pj_per_bit");
  c.ddr_pj_per_bit = fig("ddr_pj_per_bit");
  c.gddr_pj_per_bit = fig("gddr_pj_per_bit");
  return c;
}

double static_power(const Device& dev, std::vector<std::string>& assumptions) {
  const PowerConstants& c = power_constants();
  if (dev.static_w.has()) {
    assumptions.push_back(fmt::format("static {:.1f} W ({})", *dev.static_w, dev.static_w.source));
    return *dev.static_w;
  }
  if (!dev.tdp_w.has())
    throw fpgallm::InputError(dev.id, "has neither a static power nor a TDP figure in data/devices.json; cannot estimate power");
  const double w = *c.static_fraction_of_tdp * *dev.tdp_w;
  assumptions.push_back(fmt::format("static {:.1f} W = {:.2f} x TDP {:.0f} W ({}; TDP: {})", w, *c.static_fraction_of_tdp,
                                    *dev.tdp_w, c.static_fraction_of_tdp.source, dev.tdp_w.source));
  return w;
}

}  // namespace

const PowerConstants& power_constants() {
  static const PowerConstants c = read_constants();
  return c;
}

Power estimate_power(const arch::Design& d, const Device& dev, const Utilization& use, const Activity& a) {
  if (dev.kind != Kind::fpga) throw fpgallm::InputError(dev.id, "is a GPU; use estimate_board_power");
  const PowerConstants& c = power_constants();
  Power p;
  p.static_w = static_power(dev, p.assumptions);
  const double mhz = d.clock_mhz;
  const double toggle_scale = a.toggle_rate / 0.125;
  const double uw = 1e-6;
  // DSPs of the matrix unit follow the MAC activity; the vector unit's and attention's (it
  // runs on the vector lanes) the vector activity.
  double vector_dsp = 0;
  for (const auto& part : use.parts)
    if (part.name == "vector unit" || part.name == "attention") vector_dsp += part.use.dsp;
  const double mac_dsp = use.total.dsp - vector_dsp;
  p.dsp_w = (mac_dsp * a.mac_busy + vector_dsp * a.vector_busy) * *c.dsp_uw_per_mhz * mhz * uw;
  p.bram_w = (use.total.bram36 * *c.bram36_uw_per_mhz + use.total.uram * *c.uram_uw_per_mhz) * mhz * a.bram_busy * uw;
  p.logic_w = use.total.lut * *c.lut_uw_per_mhz * mhz * toggle_scale * uw;
  const bool hbm = !dev.memory.empty() && dev.memory.front().is_hbm();
  const Figure& pj = hbm ? c.hbm_pj_per_bit : c.ddr_pj_per_bit;
  p.memory_w = a.offchip_bytes_per_s * 8 * *pj * 1e-12;
  p.total_w = p.static_w + p.dsp_w + p.bram_w + p.logic_w + p.memory_w;
  p.assumptions.push_back(fmt::format("DSP {:.1f} uW/MHz ({}); {:.0f} MAC DSPs {:.0f}% busy, {:.0f} vector DSPs {:.0f}% busy at {:.0f} MHz",
                                      *c.dsp_uw_per_mhz, c.dsp_uw_per_mhz.source, mac_dsp, 100 * a.mac_busy, vector_dsp,
                                      100 * a.vector_busy, mhz));
  p.assumptions.push_back(fmt::format("BRAM36 {:.1f}, URAM {:.1f} uW/MHz ({}; {}), {:.0f}% busy", *c.bram36_uw_per_mhz,
                                      *c.uram_uw_per_mhz, c.bram36_uw_per_mhz.source, c.uram_uw_per_mhz.source,
                                      100 * a.bram_busy));
  p.assumptions.push_back(fmt::format("LUT {:.2f} uW/MHz at 12.5% toggle, scaled to {:.1f}% ({})", *c.lut_uw_per_mhz,
                                      100 * a.toggle_rate, c.lut_uw_per_mhz.source));
  p.assumptions.push_back(fmt::format("{} {:.1f} pJ/bit ({}) at {:.1f} GB/s", hbm ? "HBM" : "DDR", *pj, pj.source,
                                      a.offchip_bytes_per_s / 1e9));
  if (d.parallel.cards > 1) p.assumptions.push_back("watts are per card");
  return p;
}

Power estimate_board_power(const Device& dev, double busy) {
  Power p;
  p.static_w = static_power(dev, p.assumptions);
  if (!dev.tdp_w.has()) throw fpgallm::InputError(dev.id, "has no TDP figure in data/devices.json; cannot estimate power");
  busy = std::clamp(busy, 0.0, 1.0);
  const double dynamic = (*dev.tdp_w - p.static_w) * busy;
  p.logic_w = dynamic;
  p.total_w = p.static_w + dynamic;
  p.assumptions.push_back(fmt::format("dynamic = (TDP - static) x busy {:.2f}; memory traffic folded into the board figure", busy));
  return p;
}

void to_json(nlohmann::json& j, const Power& p) {
  j = nlohmann::json{{"static_w", p.static_w}, {"dsp_w", p.dsp_w},       {"bram_w", p.bram_w},
                     {"logic_w", p.logic_w},   {"memory_w", p.memory_w}, {"total_w", p.total_w},
                     {"assumptions", p.assumptions}};
}

}  // namespace hw
