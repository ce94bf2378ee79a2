#include "hw/resources.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "hw/placement.hpp"
#include "hw/unit_resources.hpp"
#include "util/error.hpp"

namespace hw {

Resources& Resources::operator+=(const Resources& o) {
  lut += o.lut;
  ff += o.ff;
  dsp += o.dsp;
  bram36 += o.bram36;
  uram += o.uram;
  return *this;
}

Resources operator*(Resources a, double s) {
  a.lut *= s;
  a.ff *= s;
  a.dsp *= s;
  a.bram36 *= s;
  a.uram *= s;
  return a;
}

const char* to_string(Resource r) {
  switch (r) {
    case Resource::lut: return "LUT";
    case Resource::ff: return "FF";
    case Resource::dsp: return "DSP";
    case Resource::bram36: return "BRAM36";
    case Resource::uram: return "URAM";
  }
  return "?";
}

const ResourceLine& Utilization::line(Resource r) const {
  for (const auto& l : lines)
    if (l.resource == r) return l;
  throw std::logic_error("utilization has no line for a resource");
}

Resource Utilization::binding() const {
  Resource best = Resource::lut;
  double worst = -1;
  for (const auto& l : lines) {
    const double frac = l.ceiling > 0 ? l.used / l.ceiling : (l.used > 0 ? std::numeric_limits<double>::infinity() : 0);
    if (frac > worst) {
      worst = frac;
      best = l.resource;
    }
  }
  return best;
}

std::vector<std::string> Utilization::overflows() const {
  std::vector<std::string> out;
  for (const auto& l : lines)
    if (!l.fits())
      out.push_back(fmt::format("{} {:.0f} of {:.0f} allowed ({:.0f}% of {:.0f})", to_string(l.resource), l.used,
                                l.ceiling, l.available > 0 ? 100.0 * l.ceiling / l.available : 0.0, l.available));
  out.insert(out.end(), slr_problems.begin(), slr_problems.end());
  return out;
}

namespace {

bool is_dsp58(const Device& d) { return d.dsp_type.has() && d.dsp_type.value->find("DSP58") != std::string::npos; }

// Constants that are not device figures. Each is an assumption stated in
// docs/performance-model.md ("Resource and power model"); the FINN ones are cited there.
// Fitted once to Yosys's mapping of rtl/fpgallm_matrix_unit.v over the fit set of
// bench/rtl_resources.cpp (`rtl_resources --fit`; docs/rtl.md, "Fit").
constexpr double kMuLutPerAdderBit = 0.7425;
constexpr double kMuLutBase = 466;
constexpr double kMuControlFf = 64 + 3;  // 4 x 16-bit loop counters + 3 flags (the residual on the fit set)
// FINN util/platforms.py infrastructure costs (BRAM_18K halved to BRAM36).
constexpr Resources kFinnHbm{10718, 21793, 0, 4, 0};
constexpr Resources kFinnDdr{33256, 44889, 3, 99.5, 0};
constexpr Resources kFinnEth{35219, 86269, 0, 91.5, 0};

int ceil_log2(double x) { return x <= 1 ? 0 : int(std::ceil(std::log2(x))); }

}  // namespace

const char* const kMatrixUnitChecked =
    "Yosys 0.23 synth_xilinx -family xcup of rtl/fpgallm_matrix_unit.v (DSP exact; LUT and FF within 15% on "
    "held-out shapes; docs/rtl.md)";

namespace {

// Fabric LUTs of one distributed-RAM buffer `width` bits wide and `depth` words deep, as
// Yosys maps an asynchronous-read memory: RAM32M16 (32 x 14 bits, 8 LUTs) up to 32 words,
// RAM64M8 (64 x 7 bits, 8 LUTs) per 64 words beyond (UG574); one word is a register.
double lutram_luts(double width, double depth) {
  if (depth <= 1) return 0;
  if (depth <= 32) return 8 * std::ceil(width / 14);
  return 8 * std::ceil(width / 7) * std::ceil(depth / 64);
}

}  // namespace

double matrix_unit_adder_bits(const arch::MatrixUnit& mu) {
  const int L = ceil_log2(mu.cols);
  const int pw = std::max(mu.weight_bits, 4) + 8;  // product width: int8 x int8 16 bits, int4 x int8 12
  // Adder tree of one row: level l holds cols / 2^l sums of pw + l bits.
  double tree = 0;
  for (int l = 1; l <= L; ++l) tree += (mu.cols >> l) * double(pw + l);
  // Per row the tree and a 32-bit accumulator; per DSP the sign correction P[35:18] + P[17].
  return mu.rows * (tree + 32) + std::ceil(mu.rows / 2.0) * mu.cols * pw;
}

Resources matrix_unit_resources(const arch::MatrixUnit& mu, const arch::Tiling& tiling) {
  const double R = mu.rows, C = mu.cols;
  const int L = ceil_log2(mu.cols);
  const int pw = std::max(mu.weight_bits, 4) + 8;
  double tree = 0;
  for (int l = 1; l <= L; ++l) tree += (mu.cols >> l) * double(pw + l);
  const double row_steps = tiling.tile_rows / R, col_steps = tiling.tile_cols / C;
  const int rf_bits = std::max(1, ceil_log2(row_steps));
  Resources r;
  r.dsp = std::ceil(R / 2) * C;
  // Registers: every adder-tree level, one 32-bit accumulator per row (Yosys merges the
  // equal output register into it), the control word beside each of the 4 + log2(C)
  // pipeline stages (valid, row step, four flags), the loop counters and flags (a fitted
  // constant), and the one-word buffers that stay registers.
  r.ff = R * (tree + 32) + (4 + L) * (5 + rf_bits) + kMuControlFf + (col_steps <= 1 ? C * 8 : 0) +
         (row_steps <= 1 ? R * 32 : 0);
  r.lut = kMuLutPerAdderBit * matrix_unit_adder_bits(mu) + kMuLutBase + lutram_luts(C * 8, col_steps) +
          lutram_luts(R * 32, row_steps);
  return r;
}

Utilization estimate_resources(const arch::Design& d, const Device& dev, const ResourceOptions& opt) {
  if (dev.kind != Kind::fpga)
    throw fpgallm::InputError(dev.id, "is a GPU; the resource model applies to FPGA designs");
  const Fabric avail_fabric = dev.usable();
  if (!avail_fabric.lut.has() || !avail_fabric.ff.has() || !avail_fabric.dsp.has() || !avail_fabric.bram36.has())
    throw fpgallm::InputError(
        dev.id, "has no sourced LUT/FF/DSP/BRAM figures in data/devices.json; the resource model cannot size a design for it");
  const bool dsp48 = dev.dsp_type.has() && dev.dsp_type.value->find("DSP48E2") != std::string::npos;
  const bool dsp58 = is_dsp58(dev);

  // The RTL matrix unit replaces terms by name: it is always described.
  const bool describe = opt.describe || d.matrix_unit.impl == arch::MatrixUnitImpl::rtl;
  Utilization u;
  u.device = dev.id;
  auto assume = [&](auto&& words) {
    if (describe) u.assumptions.push_back(words());
  };
  const KernelSizes sizes = opt.model ? kernel_sizes(*opt.model) : kernel_sizes(d);
  u.parts = unit_resources(d, sizes, dsp58, describe);
  assume([&] { return "sizes of the top's arrays: " + sizes.source; });
  if (!dsp48 && !dsp58)
    assume([&] {
      return fmt::format(
          "{} is not AMD fabric ({}): counted as the Vitis HLS build of the same kernels would be on DSP48E2 "
          "(one DSP block per product, fp32 cores at their AMD costs); its own tools would map them differently",
          dev.id, dev.dsp_type.has() ? *dev.dsp_type : "DSP type unknown");
    });
  if (d.matrix_unit.impl == arch::MatrixUnitImpl::rtl) {
    // The RTL unit (rtl/fpgallm_matrix_unit.v) replaces the MAC array and its adders.
    Part& mu = u.parts.front();
    auto& t = mu.terms;
    t.erase(std::remove_if(t.begin(), t.end(),
                           [](const Term& x) {
                             return x.what == "int8 x int8 products" || x.what == "adder tree and accumulator of one row" ||
                                    x.what == "accumulator registers";
                           }),
            t.end());
    t.insert(t.begin(), Term{"RTL matrix unit", 1, matrix_unit_resources(d.matrix_unit, d.tiling),
                             fmt::format("rtl/fpgallm_matrix_unit.v {}x{}: DSP = ceil(R/2) x C (two int8 products sharing "
                                         "the activation per DSP48E2, WP486, explicit in the RTL); LUT = {} x adder bits + {} "
                                         "+ LUTRAM; FF = adder-tree bits + control (docs/rtl.md)",
                                         d.matrix_unit.rows, d.matrix_unit.cols, kMuLutPerAdderBit, kMuLutBase),
                             "rtl/fpgallm_matrix_unit.v"});
    mu.use = {};
    for (const auto& x : t) mu.use += x.total();
    mu.checked = kMatrixUnitChecked;
  }
  // Each compute unit (one per SLR) has its own units; the memory subsystem below is counted once.
  if (d.compute_units > 1)
    for (auto& p : u.parts) {
      p.use = p.use * d.compute_units;
      if (describe) p.formula += fmt::format("; x {} compute units", d.compute_units);
    }
  assume([] {
    return std::string(
        "URAM: only the block activation arrays, when buffers.activations_in_uram (the top's BIND_STORAGE impl=uram); "
        "design.buffers.weight_bytes and kv_bytes are not instantiated by the emitted top: weights stream through "
        "FIFOs and the tiled unit's tiles (counted from tiling), the KV cache stays off chip (arch/units.hpp)");
  });

  // The platform's memory subsystem behind the AXI masters.
  {
    const MemoryPool* pool = dev.memory.empty() ? nullptr : &dev.memory.front();
    const bool hbm = pool && pool->is_hbm();
    const bool hard = dev.memory_controller.has() && dev.memory_controller.value->rfind("hard", 0) == 0;
    const int channels = d.memory.weight_channels + d.memory.kv_channels + d.memory.activation_channels;
    if (hard) {
      assume([&] {
        return "memory controllers are hard blocks on " + dev.id + " (" + dev.memory_controller.source +
               "): no fabric cost beyond the AXI masters";
      });
    } else if (hbm) {
      u.parts.push_back({"HBM subsystem", kFinnHbm, "FINN util/platforms.py HBM_RESOURCE_REQUIREMENTS (once per card)", "", {}});
    } else if (pool) {
      const int controllers = std::max(1, std::min(channels, static_cast<int>(pool->channels.or_else(1))));
      u.parts.push_back({fmt::format("DDR controllers x{}", controllers), kFinnDdr * controllers,
                         "FINN util/platforms.py DDR_RESOURCE_REQUIREMENTS per DDR controller used", "", {}});
    }
  }
  if (d.parallel.cards > 1)
    u.parts.push_back({"card-to-card network", kFinnEth, "FINN util/platforms.py ETH_RESOURCE_REQUIREMENTS (VNx UDP stack)", "", {}});

  for (const auto& p : u.parts) u.total += p.use;

  const Platform& pf = dev.platform;
  auto line = [&](Resource res, double used, const Figure& avail, double ceiling) {
    ResourceLine l;
    l.resource = res;
    l.used = used;
    l.available = avail.or_else(0);
    l.ceiling = l.available * ceiling;
    u.lines.push_back(l);
  };
  line(Resource::lut, u.total.lut, avail_fabric.lut, pf.lut_ceiling);
  line(Resource::ff, u.total.ff, avail_fabric.ff, pf.ff_ceiling);
  line(Resource::dsp, u.total.dsp, avail_fabric.dsp, pf.dsp_ceiling);
  line(Resource::bram36, u.total.bram36, avail_fabric.bram36, pf.bram_ceiling);
  line(Resource::uram, u.total.uram, avail_fabric.uram, pf.uram_ceiling);
  u.fits = std::all_of(u.lines.begin(), u.lines.end(), [](const ResourceLine& l) { return l.fits(); });

  assume([&] {
    return pf.available.lut.has() ? "available = user region after the platform shell: " + pf.available_source
                                  : "no shell share known for " + dev.id + ": the whole device counts as available";
  });
  assume([&] {
    return fmt::format("ceilings {:.0f}% LUT, {:.0f}% FF, {:.0f}% DSP, {:.0f}% BRAM, {:.0f}% URAM of available ({})",
                       100 * pf.lut_ceiling, 100 * pf.ff_ceiling, 100 * pf.dsp_ceiling, 100 * pf.bram_ceiling,
                       100 * pf.uram_ceiling, pf.ceiling_source);
  });
  // The units on the SLRs: a design that fits the device but not its SLRs does not fit.
  const SlrPlacement placement = place_units(u.parts, dev, d);
  u.slr_problems = placement.problems;
  u.slrs_spanned = placement.spanned();
  u.fits = u.fits && placement.fits;
  if (describe && placement.per_slr) {
    for (const auto& a : placement.assumptions) u.assumptions.push_back(a);
    if (placement.spanned() > 1)
      u.assumptions.push_back(
          fmt::format("the kernel spans SLRs (SLR0 to SLR{}): expect a lower clock than in one SLR", placement.spanned() - 1));
  }
  return u;
}

arch::Design resource_view(const arch::Design& design) {
  arch::Design v = design;
  v.name.clear();
  // The HLS units depend on the tiles only through the tiled matrix unit (its tile buffers,
  // unit_resources.cpp), which a decode-only top without int4 weights does not build; the
  // block's tokens (the activation arrays' rows) always count.
  if (v.matrix_unit.impl == arch::MatrixUnitImpl::hls && !builds_tiled_unit(v)) {
    v.tiling = {};
    v.tiling.prefill_block = design.tiling.prefill_block;
    v.buffers.weight_bytes = 0;
  }
  return v;
}

void to_json(nlohmann::json& j, const Utilization& u) {
  auto res = [](const Resources& r) {
    return nlohmann::json{{"lut", r.lut}, {"ff", r.ff}, {"dsp", r.dsp}, {"bram36", r.bram36}, {"uram", r.uram}};
  };
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& p : u.parts) {
    nlohmann::json e = res(p.use);
    e["name"] = p.name;
    e["formula"] = p.formula;
    e["checked"] = p.checked;
    nlohmann::json terms = nlohmann::json::array();
    for (const auto& t : p.terms) {
      nlohmann::json te = res(t.total());
      te["what"] = t.what;
      te["count"] = t.count;
      te["formula"] = t.formula;
      te["source"] = t.source;
      terms.push_back(te);
    }
    e["terms"] = terms;
    parts.push_back(e);
  }
  nlohmann::json lines = nlohmann::json::array();
  for (const auto& l : u.lines)
    lines.push_back({{"resource", to_string(l.resource)},
                     {"used", l.used},
                     {"available", l.available},
                     {"ceiling", l.ceiling},
                     {"utilization", l.utilization()},
                     {"margin", l.margin()},
                     {"fits", l.fits()}});
  j = nlohmann::json{{"device", u.device},  {"parts", parts},
                     {"total", res(u.total)}, {"lines", lines},
                     {"fits", u.fits},        {"binding", to_string(u.binding())},
                     {"slr_problems", u.slr_problems}, {"slrs_spanned", u.slrs_spanned},
                     {"assumptions", u.assumptions}};
}

}  // namespace hw
