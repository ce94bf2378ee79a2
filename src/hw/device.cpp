#include "hw/device.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include <fmt/format.h>

#include "model/presets.hpp"
#include "util/error.hpp"
#include "util/paths.hpp"
#include "util/json_file.hpp"

namespace hw {

const char* to_string(Kind k) { return k == Kind::fpga ? "fpga" : "gpu"; }

double Device::memory_capacity_gb() const {
  double s = 0;
  for (const auto& m : memory) s += m.capacity_gb.or_else(0);
  return s;
}

double Device::memory_bandwidth_gbps() const {
  double s = 0;
  for (const auto& m : memory) s += m.bandwidth_gbps.or_else(0);
  return s;
}

int Device::memory_channels() const {
  int s = 0;
  for (const auto& m : memory) s += static_cast<int>(m.channels.or_else(0));
  return s;
}

Fabric Device::usable() const {
  Fabric f = fabric;
  const Fabric& a = platform.available;
  if (a.lut.has()) f.lut = a.lut;
  if (a.ff.has()) f.ff = a.ff;
  if (a.dsp.has()) f.dsp = a.dsp;
  if (a.bram36.has()) f.bram36 = a.bram36;
  if (a.uram.has()) f.uram = a.uram;
  return f;
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A figure is written [value, "source"] (value may be null) or omitted.
struct Reader {
  const std::string& path;
  std::string where;

  [[noreturn]] void fail(const std::string& what) const { throw fpgallm::InputError(path, where + ": " + what); }

  Figure figure(const nlohmann::json& obj, const char* key) const {
    Figure f;
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return f;
    if (!it->is_array() || it->size() != 2 || !(*it)[1].is_string())
      fail(fmt::format("{}: expected [value, \"source\"]", key));
    const auto& v = (*it)[0];
    f.source = (*it)[1].get<std::string>();
    if (v.is_null()) return f;
    if (!v.is_number()) fail(fmt::format("{}: value is not a number", key));
    f.value = v.get<double>();
    if (*f.value < 0) fail(fmt::format("{}: negative value", key));
    if (f.source.empty()) fail(fmt::format("{}: a figure without a source", key));
    return f;
  }

  Text text(const nlohmann::json& obj, const char* key) const {
    Text t;
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return t;
    if (!it->is_array() || it->size() != 2 || !(*it)[1].is_string())
      fail(fmt::format("{}: expected [\"text\", \"source\"]", key));
    const auto& v = (*it)[0];
    t.source = (*it)[1].get<std::string>();
    if (v.is_null()) return t;
    if (!v.is_string()) fail(fmt::format("{}: value is not a string", key));
    t.value = v.get<std::string>();
    if (t.source.empty()) fail(fmt::format("{}: a figure without a source", key));
    return t;
  }

  Fabric fabric(const nlohmann::json& obj) const {
    Fabric f;
    f.lut = figure(obj, "lut");
    f.ff = figure(obj, "ff");
    f.dsp = figure(obj, "dsp");
    f.bram36 = figure(obj, "bram36");
    f.uram = figure(obj, "uram");
    return f;
  }
};

const std::set<std::string> kDeviceKeys = {
    "id", "name", "aliases", "vendor", "kind", "chip", "process_nm", "lut", "ff", "dsp", "bram36", "uram",
    "lut_note", "dsp_type", "int8_macs_per_dsp", "int4_macs_per_dsp", "ai_engines", "onchip_mb", "slrs", "sll_per_boundary",
    "platform", "kernel_clock_mhz", "max_clock_mhz", "memory", "peak_int8_tops", "peak_int4_tops",
    "peak_fp16_tflops", "peak_bf16_tflops", "peak_fp32_tflops", "pcie", "pcie_gbps", "card_link",
    "card_link_gbps", "memory_controller", "tdp_w", "static_w", "price_usd", "cloud_usd_per_hour", "notes",
    "host_cpu", "host_cpu_gflops"};

Device read_device(const nlohmann::json& e, const std::string& path, const nlohmann::json& defaults) {
  Device d;
  if (!e.is_object() || !e.contains("id") || !e["id"].is_string())
    throw fpgallm::InputError(path, "a device entry without an \"id\" string");
  d.id = e["id"].get<std::string>();
  Reader r{path, "device " + d.id};
  for (auto it = e.begin(); it != e.end(); ++it)
    if (!kDeviceKeys.count(it.key())) r.fail("unknown key \"" + it.key() + "\"");
  try {
    d.name = e.value("name", d.id);
    d.aliases = e.value("aliases", std::vector<std::string>{});
    d.vendor = e.value("vendor", "");
    const std::string kind = e.value("kind", "fpga");
    if (kind != "fpga" && kind != "gpu") r.fail("kind must be fpga or gpu, not " + kind);
    d.kind = kind == "gpu" ? Kind::gpu : Kind::fpga;
    d.lut_note = e.value("lut_note", "");
    d.notes = e.value("notes", "");
  } catch (const nlohmann::json::exception& ex) {
    r.fail(ex.what());
  }
  d.chip = r.text(e, "chip");
  d.process_nm = r.figure(e, "process_nm");
  d.fabric = r.fabric(e);
  d.dsp_type = r.text(e, "dsp_type");
  d.int8_macs_per_dsp = r.figure(e, "int8_macs_per_dsp");
  d.int4_macs_per_dsp = r.figure(e, "int4_macs_per_dsp");
  d.ai_engines = r.figure(e, "ai_engines");
  d.onchip_mb = r.figure(e, "onchip_mb");
  d.sll_per_boundary = r.figure(e, "sll_per_boundary");
  d.kernel_clock_mhz = r.figure(e, "kernel_clock_mhz");
  d.max_clock_mhz = r.figure(e, "max_clock_mhz");
  d.peak_int8_tops = r.figure(e, "peak_int8_tops");
  d.peak_int4_tops = r.figure(e, "peak_int4_tops");
  d.peak_fp16_tflops = r.figure(e, "peak_fp16_tflops");
  d.peak_bf16_tflops = r.figure(e, "peak_bf16_tflops");
  d.peak_fp32_tflops = r.figure(e, "peak_fp32_tflops");
  d.pcie = r.text(e, "pcie");
  d.memory_controller = r.text(e, "memory_controller");
  d.pcie_gbps = r.figure(e, "pcie_gbps");
  d.card_link = r.text(e, "card_link");
  d.card_link_gbps = r.figure(e, "card_link_gbps");
  d.tdp_w = r.figure(e, "tdp_w");
  d.static_w = r.figure(e, "static_w");
  d.price_usd = r.figure(e, "price_usd");
  d.cloud_usd_per_hour = r.figure(e, "cloud_usd_per_hour");
  d.host_cpu = r.text(e, "host_cpu");
  d.host_cpu_gflops = r.figure(e, "host_cpu_gflops");

  if (auto it = e.find("memory"); it != e.end()) {
    if (!it->is_array()) r.fail("memory: expected a list");
    for (const auto& m : *it) {
      MemoryPool p;
      p.kind = m.value("kind", "");
      if (p.kind.empty()) r.fail("memory: a pool without \"kind\"");
      Reader rm{path, r.where + " memory " + p.kind};
      p.capacity_gb = rm.figure(m, "capacity_gb");
      p.bandwidth_gbps = rm.figure(m, "bandwidth_gbps");
      p.channels = rm.figure(m, "channels");
      p.channel_bandwidth_gbps = rm.figure(m, "channel_bandwidth_gbps");
      d.memory.push_back(std::move(p));
    }
  }
  if (auto it = e.find("slrs"); it != e.end()) {
    int index = 0;
    for (const auto& s : *it) {
      Slr slr;
      slr.index = index++;
      Reader rs{path, r.where + fmt::format(" slr {}", slr.index)};
      if (s.contains("total")) slr.total = rs.fabric(s["total"]);
      if (s.contains("available")) slr.available = rs.fabric(s["available"]);
      d.slrs.push_back(std::move(slr));
    }
  }
  // Ceilings: the table's defaults, overridden per device.
  auto apply_ceilings = [&](const nlohmann::json& c) {
    d.platform.lut_ceiling = c.value("lut", d.platform.lut_ceiling);
    d.platform.ff_ceiling = c.value("ff", d.platform.ff_ceiling);
    d.platform.dsp_ceiling = c.value("dsp", d.platform.dsp_ceiling);
    d.platform.bram_ceiling = c.value("bram36", d.platform.bram_ceiling);
    d.platform.uram_ceiling = c.value("uram", d.platform.uram_ceiling);
    d.platform.ceiling_source = c.value("source", d.platform.ceiling_source);
  };
  if (defaults.is_object()) apply_ceilings(defaults);
  if (auto it = e.find("platform"); it != e.end()) {
    Reader rp{path, r.where + " platform"};
    if (it->contains("available")) d.platform.available = rp.fabric((*it)["available"]);
    d.platform.available_source = it->value("source", "");
    if (it->contains("ceilings")) apply_ceilings((*it)["ceilings"]);
  }
  for (double c : {d.platform.lut_ceiling, d.platform.ff_ceiling, d.platform.dsp_ceiling, d.platform.bram_ceiling,
                   d.platform.uram_ceiling})
    if (!(c > 0 && c <= 1)) r.fail("a utilization ceiling outside (0, 1]");
  return d;
}

}  // namespace

static std::vector<Device> devices_of(const nlohmann::json& j, const std::string& path);

std::vector<Device> load_devices(const std::string& path) {
  const nlohmann::json j = fpgallm::read_json_file(path, "the device table");
  return fpgallm::reading_json(path, [&] { return devices_of(j, path); });
}

static std::vector<Device> devices_of(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object() || !j.contains("devices") || !j["devices"].is_array())
    throw fpgallm::InputError(path, "expected an object with a \"devices\" list");
  const nlohmann::json defaults = j.value("ceilings", nlohmann::json::object());
  std::vector<Device> out;
  std::set<std::string> names;
  for (const auto& e : j["devices"]) {
    Device d = read_device(e, path, defaults);
    std::vector<std::string> keys = d.aliases;
    keys.push_back(d.id);
    for (const auto& k : keys)
      if (!names.insert(lower(k)).second) throw fpgallm::InputError(path, "device name used twice: " + k);
    out.push_back(std::move(d));
  }
  return out;
}

const std::vector<Device>& devices() {
  static const std::vector<Device> table = load_devices(fpgallm::data_dir() + "/devices.json");
  return table;
}

const Device* lookup_device(const std::string& name) {
  const std::string key = lower(name);
  for (const auto& d : devices()) {
    if (lower(d.id) == key || lower(d.name) == key) return &d;
    for (const auto& a : d.aliases)
      if (lower(a) == key) return &d;
  }
  return nullptr;
}

std::vector<std::string> close_device_names(const std::string& name) {
  std::vector<std::string> candidates;
  for (const auto& d : devices()) {
    candidates.push_back(d.id);
    for (const auto& a : d.aliases) candidates.push_back(a);
  }
  std::vector<std::string> out;
  for (const auto& c : model::close_names(name, candidates)) {
    const Device* d = lookup_device(c);
    if (d && std::find(out.begin(), out.end(), d->id) == out.end()) out.push_back(d->id);
  }
  return out;
}

const Device& find_device(const std::string& name, const std::string& option) {
  if (const Device* d = lookup_device(name)) return *d;
  std::string msg = "unknown device '" + name + "'";
  auto close = close_device_names(name);
  if (!close.empty()) {
    msg += " (did you mean: ";
    for (std::size_t i = 0; i < close.size() && i < 5; ++i) msg += (i ? ", " : "") + close[i];
    msg += "?)";
  }
  msg += "; `fpgallm devices` lists the known ones";
  throw fpgallm::InputError(option, msg);
}

void to_json(nlohmann::json& j, const Figure& f) {
  if (f.has())
    j = nlohmann::json{{"value", *f.value}, {"source", f.source}};
  else
    j = nullptr;
}

namespace {
nlohmann::json text_json(const Text& t) {
  if (!t.has()) return nullptr;
  return {{"value", *t.value}, {"source", t.source}};
}
nlohmann::json fabric_json(const Fabric& f) {
  return {{"lut", f.lut}, {"ff", f.ff}, {"dsp", f.dsp}, {"bram36", f.bram36}, {"uram", f.uram}};
}
}  // namespace

void to_json(nlohmann::json& j, const Device& d) {
  j = nlohmann::json::object();
  j["id"] = d.id;
  j["name"] = d.name;
  j["aliases"] = d.aliases;
  j["vendor"] = d.vendor;
  j["kind"] = to_string(d.kind);
  j["chip"] = text_json(d.chip);
  j["process_nm"] = d.process_nm;
  if (d.kind == Kind::fpga) {
    j["fabric"] = fabric_json(d.fabric);
    if (!d.lut_note.empty()) j["lut_note"] = d.lut_note;
    j["dsp_type"] = text_json(d.dsp_type);
    j["int8_macs_per_dsp"] = d.int8_macs_per_dsp;
    j["int4_macs_per_dsp"] = d.int4_macs_per_dsp;
    j["ai_engines"] = d.ai_engines;
    nlohmann::json slrs = nlohmann::json::array();
    for (const auto& s : d.slrs)
      slrs.push_back({{"index", s.index}, {"total", fabric_json(s.total)}, {"available", fabric_json(s.available)}});
    j["slrs"] = slrs;
    j["platform"] = {{"available", fabric_json(d.platform.available)},
                     {"available_source", d.platform.available_source},
                     {"ceilings",
                      {{"lut", d.platform.lut_ceiling},
                       {"ff", d.platform.ff_ceiling},
                       {"dsp", d.platform.dsp_ceiling},
                       {"bram36", d.platform.bram_ceiling},
                       {"uram", d.platform.uram_ceiling},
                       {"source", d.platform.ceiling_source}}}};
    j["kernel_clock_mhz"] = d.kernel_clock_mhz;
    j["max_clock_mhz"] = d.max_clock_mhz;
  }
  j["onchip_mb"] = d.onchip_mb;
  j["sll_per_boundary"] = d.sll_per_boundary;
  nlohmann::json mem = nlohmann::json::array();
  for (const auto& m : d.memory)
    mem.push_back({{"kind", m.kind},
                   {"capacity_gb", m.capacity_gb},
                   {"bandwidth_gbps", m.bandwidth_gbps},
                   {"channels", m.channels},
                   {"channel_bandwidth_gbps", m.channel_bandwidth_gbps}});
  j["memory"] = mem;
  j["memory_controller"] = text_json(d.memory_controller);
  j["memory_capacity_gb"] = d.memory_capacity_gb();
  j["memory_bandwidth_gbps"] = d.memory_bandwidth_gbps();
  j["peak_int8_tops"] = d.peak_int8_tops;
  j["peak_int4_tops"] = d.peak_int4_tops;
  j["peak_fp16_tflops"] = d.peak_fp16_tflops;
  j["peak_bf16_tflops"] = d.peak_bf16_tflops;
  j["peak_fp32_tflops"] = d.peak_fp32_tflops;
  j["pcie"] = text_json(d.pcie);
  j["pcie_gbps"] = d.pcie_gbps;
  j["card_link"] = text_json(d.card_link);
  j["card_link_gbps"] = d.card_link_gbps;
  j["tdp_w"] = d.tdp_w;
  j["static_w"] = d.static_w;
  j["price_usd"] = d.price_usd;
  j["cloud_usd_per_hour"] = d.cloud_usd_per_hour;
  j["host_cpu"] = text_json(d.host_cpu);
  j["host_cpu_gflops"] = d.host_cpu_gflops;
  if (!d.notes.empty()) j["notes"] = d.notes;
}

}  // namespace hw
