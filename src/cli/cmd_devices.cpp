#include <cmath>
#include <cstdio>
#include <optional>

#include "arch/design.hpp"
#include "cli/command.hpp"
#include "hw/device.hpp"
#include "hw/power.hpp"
#include "hw/resources.hpp"
#include "report/format.hpp"
#include "util/error.hpp"

namespace {

struct DevicesArgs {
  std::string name;
  std::string design;
  bool json = false;
};

std::string num(const hw::Figure& f, const char* fmt = "%.0f") {
  if (!f.has()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, *f);
  return buf;
}

// A figure as people write it: whole numbers in full (1303680), others with %g.
std::string exact(const hw::Figure& f) {
  if (!f.has()) return "-";
  return *f == std::floor(*f) && std::fabs(*f) < 1e15 ? num(f, "%.0f") : num(f, "%g");
}

// Each pool on its own: "8 GB HBM2 460 GB/s, 32 GB DDR4 38 GB/s" (pools are never added
// together: a design puts weights, KV cache and activations in the pools separately).
std::string memory_summary(const hw::Device& d) {
  std::string s;
  for (const auto& m : d.memory) {
    if (!s.empty()) s += ", ";
    s += (m.capacity_gb.has() ? num(m.capacity_gb, "%g") + " GB " : "? GB ") + m.kind;
    if (m.bandwidth_gbps.has()) s += " " + num(m.bandwidth_gbps) + " GB/s";
  }
  return s.empty() ? "-" : s;
}

std::string compute_summary(const hw::Device& d) {
  if (d.kind == hw::Kind::gpu) {
    std::string s = d.peak_int8_tops.has() ? num(d.peak_int8_tops, "%g") + " int8 TOPS" : "";
    if (d.peak_fp16_tflops.has()) s += (s.empty() ? "" : ", ") + num(d.peak_fp16_tflops, "%g") + " fp16 TF";
    return s.empty() ? "-" : s;
  }
  if (!d.fabric.dsp.has()) return d.peak_int8_tops.has() ? num(d.peak_int8_tops, "%g") + " int8 TOPS (vendor)" : "-";
  return report::count(*d.fabric.dsp) + " " + (d.dsp_type.has() ? *d.dsp_type : std::string("DSP"));
}

void print_table() {
  std::printf("%-13s %-4s %-38s %6s %-26s %6s %8s  %s\n", "id", "kind", "name", "LUT", "compute", "TDP W", "price $",
              "memory (each pool: capacity, type, bandwidth)");
  for (const auto& d : hw::devices()) {
    std::printf("%-13s %-4s %-38s %6s %-26s %6s %8s  %s\n", d.id.c_str(), hw::to_string(d.kind), d.name.c_str(),
                d.fabric.lut.has() ? report::count(*d.fabric.lut).c_str() : "-", compute_summary(d).c_str(),
                num(d.tdp_w).c_str(), num(d.price_usd).c_str(), memory_summary(d).c_str());
  }
  std::printf("\nEvery figure has a source: `fpgallm devices ID` shows them; '-' = not found in a source (never guessed).\n");
}

void print_figure(const char* label, const hw::Figure& f, const char* unit = "") {
  if (f.has())
    std::printf("  %-24s %-14s %s\n", label, (exact(f) + unit).c_str(), f.source.c_str());
  else if (!f.source.empty())
    std::printf("  %-24s %-14s %s\n", label, "-", f.source.c_str());
}

void print_text(const char* label, const hw::Text& t) {
  if (t.has()) std::printf("  %-24s %-14s %s\n", label, t.value->c_str(), t.source.c_str());
}

void print_device(const hw::Device& d) {
  std::printf("%s (%s, %s)\n", d.name.c_str(), d.id.c_str(), hw::to_string(d.kind));
  print_text("chip", d.chip);
  print_figure("process nm", d.process_nm);
  print_figure("LUT", d.fabric.lut);
  print_figure("FF", d.fabric.ff);
  print_figure("DSP", d.fabric.dsp);
  print_text("DSP type", d.dsp_type);
  print_figure("int8 MACs per DSP", d.int8_macs_per_dsp);
  print_figure("int4 MACs per DSP", d.int4_macs_per_dsp);
  print_figure("BRAM36", d.fabric.bram36);
  print_figure("URAM", d.fabric.uram);
  print_figure("on-chip MB", d.onchip_mb);
  print_figure("AI engines", d.ai_engines);
  if (d.platform.available.lut.has()) {
    const auto& a = d.platform.available;
    std::printf("  %-24s %s LUT, %s FF, %s DSP, %s BRAM36, %s URAM  (%s)\n", "after the shell", num(a.lut).c_str(),
                num(a.ff).c_str(), num(a.dsp).c_str(), num(a.bram36).c_str(), num(a.uram).c_str(),
                d.platform.available_source.c_str());
  }
  if (d.kind == hw::Kind::fpga)
    std::printf("  %-24s %.0f%% LUT, %.0f%% FF, %.0f%% DSP, %.0f%% BRAM, %.0f%% URAM  (%s)\n", "utilization ceilings",
                100 * d.platform.lut_ceiling, 100 * d.platform.ff_ceiling, 100 * d.platform.dsp_ceiling,
                100 * d.platform.bram_ceiling, 100 * d.platform.uram_ceiling, d.platform.ceiling_source.c_str());
  print_figure("kernel clock MHz", d.kernel_clock_mhz);
  print_figure("max clock MHz", d.max_clock_mhz);
  for (const auto& m : d.memory) {
    std::printf("  memory %s\n", m.kind.c_str());
    print_figure("  capacity GB", m.capacity_gb);
    print_figure("  bandwidth GB/s", m.bandwidth_gbps);
    print_figure("  channels", m.channels);
    print_figure("  GB/s per channel", m.channel_bandwidth_gbps);
  }
  print_figure("peak int8 TOPS", d.peak_int8_tops);
  print_figure("peak int4 TOPS", d.peak_int4_tops);
  print_figure("peak fp16 TFLOPS", d.peak_fp16_tflops);
  print_figure("peak bf16 TFLOPS", d.peak_bf16_tflops);
  print_figure("peak fp32 TFLOPS", d.peak_fp32_tflops);
  print_text("PCIe", d.pcie);
  print_figure("PCIe GB/s", d.pcie_gbps);
  print_text("card link", d.card_link);
  print_figure("card link GB/s", d.card_link_gbps);
  print_figure("TDP W", d.tdp_w);
  print_figure("static W", d.static_w);
  print_figure("price USD", d.price_usd);
  print_figure("cloud USD/hour", d.cloud_usd_per_hour);
  if (!d.notes.empty()) std::printf("  note: %s\n", d.notes.c_str());
}

void print_utilization(const hw::Utilization& u, const std::optional<hw::Power>& power, const std::string& no_power) {
  std::printf("\n%-26s %10s %10s %8s %8s %8s  %s\n", "part", "LUT", "FF", "DSP", "BRAM36", "URAM", "checked against");
  for (const auto& part : u.parts) {
    std::printf("%-26s %10.0f %10.0f %8.0f %8.0f %8.0f  %s\n", part.name.c_str(), part.use.lut, part.use.ff, part.use.dsp,
                part.use.bram36, part.use.uram, part.checked.empty() ? "model only" : "Yosys mapping (docs/rtl.md)");
    for (const auto& t : part.terms)  // what the unit instantiates, each with its formula and source line
      std::printf("    %g x %s: %s [%s]\n", t.count, t.what.c_str(), t.formula.c_str(), t.source.c_str());
  }
  std::printf("%-26s %10.0f %10.0f %8.0f %8.0f %8.0f\n\n", "total", u.total.lut, u.total.ff, u.total.dsp,
              u.total.bram36, u.total.uram);
  std::printf("%-8s %10s %10s %10s %7s %10s %s\n", "resource", "used", "available", "ceiling", "util", "margin", "fits");
  for (const auto& l : u.lines)
    std::printf("%-8s %10.0f %10.0f %10.0f %6.1f%% %10.0f %s\n", hw::to_string(l.resource), l.used, l.available,
                l.ceiling, 100 * l.utilization(), l.margin(), l.fits() ? "yes" : "NO");
  std::printf("%s (binding: %s)\n", u.fits ? "fits" : "does NOT fit", hw::to_string(u.binding()));
  for (const auto& a : u.assumptions) std::printf("  assumes: %s\n", a.c_str());
  if (!power) {
    std::printf("\npower: not estimated (%s)\n", no_power.c_str());
    return;
  }
  const hw::Power& p = *power;
  std::printf("\npower at full activity: %.1f W (static %.1f, DSP %.1f, RAM %.1f, logic %.1f, memory %.1f)\n",
              p.total_w, p.static_w, p.dsp_w, p.bram_w, p.logic_w, p.memory_w);
  for (const auto& a : p.assumptions) std::printf("  assumes: %s\n", a.c_str());
}

void devices(const DevicesArgs& a) {
  if (a.name.empty()) {
    if (!a.design.empty()) throw fpgallm::InputError("--design", "name a device: fpgallm devices ID --design FILE");
    if (a.json) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& d : hw::devices()) list.push_back(nlohmann::json(d));
      cli::print_json(list);
      return;
    }
    print_table();
    return;
  }
  const hw::Device& d = hw::find_device(a.name);
  nlohmann::json j = d;
  if (!a.design.empty()) {
    arch::Design design = arch::load(a.design);
    if (!design.device.empty() && !hw::lookup_device(design.device)) {
      try {
        (void)hw::find_device(design.device);
      } catch (const fpgallm::InputError& e) {
        throw fpgallm::InputError(a.design, "device: " + e.problem());
      }
    }
    hw::Utilization u = hw::estimate_resources(design, d);
    hw::Activity act;  // full activity, the fastest memory pool at its peak bandwidth
    act.offchip_bytes_per_s = d.memory.empty() ? 0 : d.memory.front().bandwidth_gbps.or_else(0) * 1e9;
    std::optional<hw::Power> p;
    std::string no_power;
    try {
      p = hw::estimate_power(design, d, u, act);
    } catch (const fpgallm::InputError& e) {
      no_power = e.problem();
    }
    if (a.json) {
      j = {{"device", d}, {"utilization", u}};
      j["power_at_full_activity"] = p ? nlohmann::json(*p) : nlohmann::json(nullptr);
      if (!p) j["power_unavailable"] = no_power;
      cli::print_json(j);
      return;
    }
    print_device(d);
    print_utilization(u, p, no_power);
    return;
  }
  if (a.json) {
    cli::print_json(j);
    return;
  }
  print_device(d);
}

void setup(CLI::App& root) {
  auto a = std::make_shared<DevicesArgs>();
  auto* cmd = root.add_subcommand("devices", "List FPGA cards and GPUs with their datasheet figures and sources");
  cmd->add_option("device", a->name, "Show one device with every figure's source");
  cmd->add_option("--design", a->design, "design.json: resource utilization and power of the design on this device");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { devices(*a); });
}

}  // namespace

FPGALLM_COMMAND("devices", setup);
