// The emitted project as v++ would link it (issue 28): for the projects `fpgallm plan` then
// `fpgallm emit` write for llama2-7b on the U280 and the U55C, llama3-8b on the U55C and the
// stories260K demo, read from the emitted files alone and recomputed here:
//   - what connectivity.cfg places on each SLR (its `# place` lines, or the whole kernel on
//     its slr= SLR) stays under that SLR's share of data/devices.json and the ceilings;
//   - every buffer (sizes from the emitted fpgallm_config.hpp) fits the banks its sp= line
//     names, together with the other buffers there;
//   - the KV banks deliver at least the KV bandwidth the plan assumes.
// The same projects linked as fpgallm wrote them before (the kernel pinned to SLR0, every
// non-weight bundle on one pseudo-channel) fail all three: the test checks that too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hw/device.hpp"
#include "hw/placement.hpp"
#include "hw/resources.hpp"
#include "arch/design.hpp"
#include "model/presets.hpp"
#include "model/model.hpp"
#include "testing.hpp"

using namespace testing_support;

namespace {

struct Range {
  int pool = 0;  // index in Device::memory
  int first = 0, last = 0;
};

long long config_int(const std::string& config, const std::string& name) {
  std::smatch m;
  const std::regex re("static constexpr int " + name + " = (\\d+);");
  EXPECT_TRUE(std::regex_search(config, m, re)) << name;
  return m.empty() ? 0 : std::stoll(m[1]);
}

// connectivity.cfg's sp= lines: port -> banks.
std::map<std::string, Range> sp_lines(const std::string& cfg, const hw::Device& dev) {
  std::map<std::string, Range> out;
  const std::regex re(R"(\nsp=fpgallm_overlay_1\.(\w+):(HBM|DDR)\[(\d+)(?::(\d+))?\])");
  for (std::sregex_iterator it(cfg.begin(), cfg.end(), re), end; it != end; ++it) {
    Range r;
    const std::string kind = (*it)[2];
    r.pool = -1;
    for (std::size_t i = 0; i < dev.memory.size(); ++i)
      if (dev.memory[i].is_hbm() == (kind == "HBM")) {
        r.pool = int(i);
        break;
      }
    r.first = std::stoi((*it)[3]);
    r.last = (*it)[4].matched ? std::stoi((*it)[4]) : r.first;
    out[(*it)[1]] = r;
  }
  return out;
}

// The card's bank: HBM pseudo-channels are 2^28 bytes on an 8 GB stack of 32 (UG1393), DDR
// banks the capacity over the banks.
double bank_capacity(const hw::MemoryPool& pool) {
  return pool.capacity_gb.or_else(0) * (pool.is_hbm() ? 1073741824.0 : 1e9) / pool.channels.or_else(1);
}

struct Project {
  std::string preset, device, dir;
  nlohmann::json plan;
  arch::Design design;
};

Project plan_and_emit(const std::string& model, const std::string& device) {
  Project p;
  p.preset = model;
  p.device = device;
  const std::string root = scratch_dir("link_" + std::regex_replace(model, std::regex("[^A-Za-z0-9]"), "_") + "_" + device);
  const auto plan = run_fpgallm("plan " + model + " --device " + device + " --json -o " + root + "/design.json", 300);
  EXPECT_EQ(plan.status, 0) << plan.err;
  if (plan.status != 0) return p;
  p.plan = nlohmann::json::parse(plan.out);
  p.design = arch::load(root + "/design.json");
  const auto emit = run_fpgallm("emit " + model + " --design " + root + "/design.json -o " + root + "/proj --golden-steps 1", 300);
  EXPECT_EQ(emit.status, 0) << emit.err;
  p.dir = root + "/proj";
  return p;
}

// What connectivity.cfg places on each SLR, recomputed from the resource model's units: one
// line per SLR over a ceiling.
std::vector<std::string> slr_violations(const Project& p, const model::Config& config, const std::string& cfg) {
  std::vector<std::string> bad;
  const hw::Device& dev = hw::find_device(p.device);
  const hw::Utilization u = hw::estimate_resources(p.design, dev, {&config});
  std::map<std::string, hw::Resources> unit;
  for (const auto& part : u.parts) {
    const bool lanes = part.name == "vector unit" || part.name == "attention" || part.name == "on-chip activations";
    unit[lanes ? "vector datapath" : part.name] += part.use;
  }
  std::vector<hw::Resources> placed(dev.slrs.size());
  const std::regex place(R"(\n# place SLR(\d+): ([a-zA-Z -]+?) (\d+)/(\d+) )");
  std::map<std::string, std::pair<long, long>> slices;  // unit -> (placed, of)
  for (std::sregex_iterator it(cfg.begin(), cfg.end(), place), end; it != end; ++it) {
    const std::size_t slr = std::stoul((*it)[1]);
    const std::string name = (*it)[2];
    if (slr >= placed.size() || !unit.count(name)) {
      bad.push_back("unknown SLR or unit: " + name);
      continue;
    }
    const double a = std::stod((*it)[3]), n = std::stod((*it)[4]);
    placed[slr] += unit[name] * (a / n);
    slices[name].first += long(a);
    slices[name].second = long(n);
  }
  if (slices.empty()) {  // no split: the whole kernel on its slr= SLR
    std::smatch m;
    const bool pinned = std::regex_search(cfg, m, std::regex(R"(\nslr=fpgallm_overlay_1:SLR(\d+))"));
    const std::size_t slr = pinned ? std::stoul(m[1]) : 0;
    for (const auto& [name, use] : unit) placed[std::min(slr, placed.size() - 1)] += use;
  } else {
    for (const auto& [name, s] : slices)
      if (s.first != s.second) bad.push_back(name + ": not every slice placed once");
    for (const auto& [name, use] : unit)
      if (!slices.count(name)) bad.push_back(name + " placed nowhere");
  }
  const hw::Platform& pf = dev.platform;
  for (std::size_t s = 0; s < dev.slrs.size(); ++s) {
    const hw::Fabric& a = dev.slrs[s].available;
    const std::string at = p.preset + " on " + p.device + ", SLR" + std::to_string(s);
    auto check = [&](const char* what, double used, double allowed) {
      if (used > allowed + 1e-6) bad.push_back(fmt::format("{}: {} {:.0f} of {:.0f} allowed", at, what, used, allowed));
    };
    check("DSP", placed[s].dsp, *a.dsp * pf.dsp_ceiling);
    check("LUT", placed[s].lut, *a.lut * pf.lut_ceiling);
    check("FF", placed[s].ff, *a.ff * pf.ff_ceiling);
    check("BRAM36", placed[s].bram36, *a.bram36 * pf.bram_ceiling);
    std::printf("%s: DSP %.0f of %.0f, LUT %.0f of %.0f, BRAM36 %.0f of %.0f\n", at.c_str(), placed[s].dsp,
                *a.dsp * pf.dsp_ceiling, placed[s].lut, *a.lut * pf.lut_ceiling, placed[s].bram36,
                *a.bram36 * pf.bram_ceiling);
  }
  return bad;
}

// Every buffer in its banks, and the KV banks' bandwidth against the plan's assumption: one
// line per violation.
std::vector<std::string> bank_violations(const Project& p, const std::string& cfg) {
  std::vector<std::string> bad;
  const hw::Device& dev = hw::find_device(p.device);
  const std::string config = read_bytes(p.dir + "/src/fpgallm_config.hpp");
  const auto sp = sp_lines(cfg, dev);
  const double dim = config_int(config, "dim"), hidden = config_int(config, "hidden_dim"),
               q_dim = config_int(config, "q_dim"), kv_dim = config_int(config, "kv_dim"),
               vocab = config_int(config, "vocab_size"), layers = config_int(config, "n_layers"),
               kv_heads = config_int(config, "n_kv_heads"), head_dim = config_int(config, "head_dim"),
               context = config_int(config, "context"), kv_bits = config_int(config, "kv_bits");
  const int channels = p.design.memory.weight_channels;
  // Lower bounds of the bytes the host allocates for the model the kernel is sized for.
  std::map<std::string, double> bytes;
  const double weights = layers * (2 * q_dim * dim + 2 * kv_dim * dim + 3 * hidden * dim) + vocab * dim;
  for (int c = 0; c < channels; ++c) bytes[fmt::format("w{:02d}", c)] = weights / channels;
  bytes["kv_k"] = bytes["kv_v"] = layers * context * kv_dim * kv_bits / 8;
  bytes["kv_k_scale"] = bytes["kv_v_scale"] = layers * context * kv_heads * 4;
  bytes["params"] = vocab * dim * 4 + context * head_dim * 4;
  bytes["row_scales"] = 64;
  bytes["program"] = 64;
  bytes["prompt"] = context * 4;
  bytes["result"] = vocab * 4;
  std::map<std::pair<int, int>, double> used;  // (pool, bank) -> bytes
  for (const auto& [port, b] : bytes) {
    if (!sp.count(port) || sp.at(port).pool < 0 ||
        sp.at(port).last >= int(dev.memory[std::size_t(sp.at(port).pool)].channels.or_else(1))) {
      bad.push_back(port + ": no sp= line to a bank of " + p.device);
      continue;
    }
    const Range r = sp.at(port);
    const double cap = bank_capacity(dev.memory[std::size_t(r.pool)]);
    if (b > cap * (r.last - r.first + 1))
      bad.push_back(fmt::format("{}: {:.0f} MB in {} banks of {:.0f} MB", port, b / 1e6, r.last - r.first + 1, cap / 1e6));
    double left = b;
    for (int i = r.first; i <= r.last; ++i) {
      const double take = i == r.last ? left : std::min(left, cap);
      used[{r.pool, i}] += take;
      left -= take;
    }
  }
  for (const auto& [bank, b] : used)
    if (b > bank_capacity(dev.memory[std::size_t(bank.first)]))
      bad.push_back(fmt::format("bank {} of memory {}: {:.0f} MB of {:.0f} MB", bank.second, bank.first, b / 1e6,
                                bank_capacity(dev.memory[std::size_t(bank.first)]) / 1e6));

  // KV: one port each for kv_k and kv_v, min(the port, its banks' share of the memory's peak),
  // the two together at most their banks' peak, x the memory efficiency the plan states.
  double plan_kv = 0, eta = 0;
  for (const auto& a : p.plan.at("assumptions")) {
    if (a.at("name") == "kv_bandwidth") plan_kv = a.at("value").get<double>() * 1e9;
    if (a.at("name") == "memory_efficiency") eta = a.at("value").get<double>();
  }
  if (!(plan_kv > 0 && eta > 0)) return {"the plan states no kv_bandwidth or memory_efficiency"};
  const double port = p.design.memory.port_bits / 8.0 * p.design.clock_mhz * 1e6;
  std::set<std::pair<int, int>> kv_banks;
  double ports = 0;
  for (const char* name : {"kv_k", "kv_v"}) {
    if (!sp.count(name) || sp.at(name).pool < 0) return bad;
    const Range r = sp.at(name);
    const auto& pool = dev.memory[std::size_t(r.pool)];
    const double per_bank = *pool.bandwidth_gbps * 1e9 / pool.channels.or_else(1);
    ports += std::min(port, per_bank * (r.last - r.first + 1));
    for (int i = r.first; i <= r.last; ++i) kv_banks.insert({r.pool, i});
  }
  double banks = 0;
  for (const auto& [pool, i] : kv_banks)
    banks += *dev.memory[std::size_t(pool)].bandwidth_gbps * 1e9 / dev.memory[std::size_t(pool)].channels.or_else(1);
  const double kv = eta * std::min(ports, banks);
  if (kv * (1 + 1e-9) < plan_kv)
    bad.push_back(fmt::format("KV banks deliver {:.2f} GB/s, the plan assumes {:.2f}", kv / 1e9, plan_kv / 1e9));
  std::printf("%s on %s: KV banks %.2f GB/s, plan assumes %.2f GB/s\n", p.preset.c_str(), p.device.c_str(), kv / 1e9,
              plan_kv / 1e9);
  return bad;
}

// connectivity.cfg as fpgallm wrote it before the placement and the bank map: the compute unit
// pinned to SLR0, the KV and the other non-weight bundles on the pseudo-channel after the
// weight channels (wrapping to HBM[0] when the weights take every channel).
std::string pinned_to_slr0(const std::string& cfg, int weight_channels) {
  std::string out = "[connectivity]\nnk=fpgallm_overlay:1:fpgallm_overlay_1\nslr=fpgallm_overlay_1:SLR0\n";
  for (int c = 0; c < weight_channels; ++c) out += fmt::format("sp=fpgallm_overlay_1.w{:02d}:HBM[{}]\n", c, c % 32);
  for (const char* port : {"row_scales", "params", "kv_k", "kv_v", "kv_k_scale", "kv_v_scale", "program", "result"})
    out += fmt::format("sp=fpgallm_overlay_1.{}:HBM[{}]\n", port, weight_channels % 32);
  (void)cfg;
  return out;
}

model::Config config_of(const std::string& model) {
  if (const auto c = model::find_preset(model)) return *c;
  return model::load(model).config;
}

}  // namespace

TEST(CodegenLink, PlannedProjectsFitTheirSlrsAndBanks) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"llama2-7b", "u280"}, {"llama2-7b", "u55c"}, {"llama3-8b", "u55c"}, {stories260k(), "u280"}};
  for (const auto& [model, device] : cases) {
    const Project p = plan_and_emit(model, device);
    ASSERT_FALSE(p.dir.empty()) << model << " " << device;
    const model::Config c = config_of(model);
    const std::string cfg = read_bytes(p.dir + "/connectivity.cfg");
    for (const auto& v : slr_violations(p, c, cfg)) ADD_FAILURE() << model << " on " << device << ": " << v;
    for (const auto& v : bank_violations(p, cfg)) ADD_FAILURE() << model << " on " << device << ": " << v;
    // The checks can fail: the same project linked as before (one SLR, one pseudo-channel
    // for everything but the weights) is refused on every count.
    const std::string old = pinned_to_slr0(cfg, p.design.memory.weight_channels);
    const auto slr = slr_violations(p, c, old), banks = bank_violations(p, old);
    EXPECT_FALSE(slr.empty()) << model << " on " << device;
    if (model != stories260k()) {
      bool capacity = false, bandwidth = false;
      for (const auto& v : banks) {
        capacity |= v.rfind("kv_k:", 0) == 0 || v.rfind("bank ", 0) == 0;
        bandwidth |= v.rfind("KV banks deliver", 0) == 0;
      }
      EXPECT_TRUE(capacity) << model << " on " << device;
      EXPECT_TRUE(bandwidth) << model << " on " << device;
    }
  }
}
