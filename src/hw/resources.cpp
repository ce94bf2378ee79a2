#include "hw/resources.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

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
  return out;
}

namespace {

// Simple-dual-port aspect ratios of one block: (width bits, depth words).
// BRAM36: UG573 (UltraScale memory resources), Table 1-1/1-10; URAM: 4K x 72 only (UG573).
constexpr std::pair<int, int> kBram36Shapes[] = {{1, 32768}, {2, 16384}, {4, 8192}, {9, 4096},
                                                 {18, 2048}, {36, 1024}, {72, 512}};

double blocks_for_memory(double width_bits, double depth, bool uram) {
  if (width_bits <= 0 || depth <= 0) return 0;
  if (uram) return std::ceil(width_bits / 72.0) * std::ceil(depth / 4096.0);
  double best = std::numeric_limits<double>::infinity();
  for (auto [w, d] : kBram36Shapes) best = std::min(best, std::ceil(width_bits / w) * std::ceil(depth / d));
  return best;
}

double bank_blocks(double bytes, int banks, int width_bits, bool uram) {
  if (bytes <= 0) return 0;
  banks = std::max(banks, 1);
  width_bits = std::max(width_bits, 1);
  const double depth = std::ceil(bytes * 8.0 / (double(banks) * width_bits));
  return banks * blocks_for_memory(width_bits, depth, uram);
}

}  // namespace

double bram36_for_buffer(double bytes, int banks, int width_bits) { return bank_blocks(bytes, banks, width_bits, false); }
double uram_for_buffer(double bytes, int banks, int width_bits) { return bank_blocks(bytes, banks, width_bits, true); }

namespace {

bool is_dsp58(const Device& d) { return d.dsp_type.has() && d.dsp_type.value->find("DSP58") != std::string::npos; }

// MACs one DSP block holds for these operand widths.
double macs_per_dsp(int weight_bits, int act_bits, const Device& d) {
  // 4-bit weights are unpacked to int8 at the MAC (arch::MatrixUnit), so they pack like int8.
  const int w = std::max(weight_bits, 8);
  if (w <= 8 && act_bits <= 8) return d.int8_macs_per_dsp.or_else(1);
  return 1.0 / std::ceil(double(weight_bits + act_bits) / 48.0);  // FINN dsp_estimation for wide operands
}

}  // namespace

double dsps_for_macs(double macs, int weight_bits, int act_bits, const Device& device) {
  return std::ceil(macs / macs_per_dsp(weight_bits, act_bits, device));
}

namespace {

// Constants that are not device figures. Each is an assumption stated in
// docs/performance-model.md ("Resource and power model"); the FINN ones are cited there.
// Fitted once to Yosys's mapping of rtl/fpgallm_matrix_unit.v over the fit set of
// bench/rtl_resources.cpp (`rtl_resources --fit`; docs/rtl.md, "Fit").
constexpr double kMuLutPerAdderBit = 0.7425;
constexpr double kMuLutBase = 466;
constexpr double kMuControlFf = 64 + 3;  // 4 x 16-bit loop counters + 3 flags (the residual on the fit set)
constexpr double kFinnLutBase = 300;      // FINN lut_estimation c0
constexpr double kFinnLutScale = 1.1;     // FINN lut_estimation c1
constexpr int kRequantScaleBits = 16;     // fixed-point scale multiplier width
constexpr double kRequantDsp = 2;         // 32 x 16-bit product does not fit one 27 x 18 (or 27 x 24) multiplier
constexpr double kLaneDsp = 1;            // one fixed-point multiplier per vector lane
constexpr double kFp16MacDsp = 3;         // fp16 multiply (1) + add (2), PG060 full DSP usage
constexpr double kLaneLut = 400;          // adder, max/compare, shifter and muxes of one 32-bit lane
constexpr double kLaneFf = 300;
constexpr double kSpecialFnLut = 1500;    // shared reciprocal / inverse square root (iterative, fixed point)
constexpr double kSpecialFnFf = 1500;
constexpr double kSpecialFnDsp = 4;
constexpr double kAxiMasterLut = 1800;    // Vitis HLS m_axi adapter + burst DMA engine, per channel
constexpr double kAxiMasterFf = 3000;
constexpr int kAxiReadDepth = 16 * 16;    // UG1399 defaults: max_read_burst_length 16 x num_read_outstanding 16
constexpr double kLutramMaxDepth = 256; // deeper banks go to block RAM
constexpr double kControlLut = 6000;      // instruction fetch/decode, address generators, AXI-lite control
constexpr double kControlFf = 9000;
constexpr double kControlBram = 8;        // instruction memory
// FINN util/platforms.py infrastructure costs (BRAM_18K halved to BRAM36).
constexpr Resources kFinnHbm{10718, 21793, 0, 4, 0};
constexpr Resources kFinnDdr{33256, 44889, 3, 99.5, 0};
constexpr Resources kFinnEth{35219, 86269, 0, 91.5, 0};

int ceil_log2(double x) { return x <= 1 ? 0 : int(std::ceil(std::log2(x))); }

bool is_hbm(const MemoryPool& m) { return m.kind.rfind("HBM", 0) == 0; }

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
  const bool amd = dev.dsp_type.has() && (dev.dsp_type.value->find("DSP48E2") != std::string::npos || is_dsp58(dev));
  if (!amd && !dev.int8_macs_per_dsp.has())
    throw fpgallm::InputError(dev.id, "has no DSP packing figure (int8_macs_per_dsp) in data/devices.json");

  Utilization u;
  u.device = dev.id;
  const auto& mu = d.matrix_unit;
  const int R = mu.rows, C = mu.cols, W = mu.weight_bits, A = mu.act_bits;
  const int W_mac = std::max(W, 8);  // 4-bit weights are unpacked to int8 before the multiplier
  const bool have_uram = dev.fabric.uram.has() && dev.usable().uram.or_else(0) > 0;
  auto add = [&](std::string name, Resources r, std::string formula) {
    u.parts.push_back({std::move(name), r, std::move(formula)});
  };

  // Matrix unit. On DSP48E2 fabric with 8-bit operands: the RTL unit's structure, checked
  // against Yosys's mapping. Otherwise (DSP58, wider operands): FINN's MVAU estimates.
  if (amd && W_mac <= 8 && A <= 8 && !is_dsp58(dev)) {
    add("matrix unit", matrix_unit_resources(mu, d.tiling),
        fmt::format("{}x{} MACs ({}-bit weights) as rtl/fpgallm_matrix_unit.v: DSP = ceil(R/2) x C (two int8 "
                    "products sharing the activation per DSP48E2, WP486); FF = R x (adder-tree bits + 32) + control; "
                    "LUT = {} x adder bits + {} + LUTRAM of the activation and partial-sum buffers (constants "
                    "fitted to Yosys, docs/rtl.md)",
                    R, C, W, kMuLutPerAdderBit, kMuLutBase));
    u.parts.back().checked = kMatrixUnitChecked;
  } else {
    Resources r;
    std::string packing;
    if (!amd) {  // Intel variable-precision DSP or AI tensor block: int8_macs_per_dsp MACs per block
      const double per = W_mac <= 8 && A <= 8 ? *dev.int8_macs_per_dsp : 1.0;
      r.dsp = std::ceil(double(R) * C / per);
      packing = fmt::format("ceil(R x C / {:g}): {} ({})", per, dev.dsp_type.has() ? *dev.dsp_type : "DSP block",
                            dev.int8_macs_per_dsp.source);
    } else if (W_mac <= 8 && A <= 8 && is_dsp58(dev)) {
      r.dsp = double(R) * std::ceil(C / 3.0);
      packing = "R x ceil(C/3): DSP58 INT8 three-element dot product (AM004; FINN mvu_8sx9)";
    } else if (W == 16 && A == 16) {
      r.dsp = double(R) * C * kFp16MacDsp;
      packing = "R x C x 3: an fp16 multiplier (1 DSP) and adder (2 DSP) per MAC at full DSP usage (AMD PG060 "
                "Floating-Point Operator resource tables) [recalled]";
    } else {
      r.dsp = double(R) * C * std::ceil((W + A) / 48.0);
      packing = "R x C x ceil((W+A)/48): one multiplier per MAC (FINN dsp_estimation)";
    }
    const int acc = std::min(mu.acc_bits, W_mac + A + ceil_log2(d.tiling.tile_cols));
    const double adder_tree = double(W_mac + A) * (2.0 * C - 1);
    r.lut = kFinnLutBase + kFinnLutScale * R * (adder_tree + acc);
    r.ff = R * (adder_tree + mu.acc_bits) + double(C) * A * std::ceil(R / 16.0);
    add("matrix unit", r,
        fmt::format("{}x{} MACs ({}-bit x {}-bit). DSP = {}. LUT = 300 + 1.1 x R x ((W+A)(2C-1) + acc) (FINN MVAU "
                    "lut_estimation, FINN-R). FF = R x (adder tree + accumulator) + activation fan-out registers "
                    "(one stage per 16 rows) [assumption]",
                    R, C, W_mac, A, packing));
  }

  // Requantizers: one per output row (scale multiply, round, saturate).
  {
    Resources r;
    r.dsp = kRequantDsp * R;
    r.lut = R * (2.0 * mu.acc_bits + 2.0 * A);
    r.ff = R * double(mu.acc_bits + kRequantScaleBits + A);
    add("requantizers", r,
        fmt::format("{} x (2 DSP for the {}x{}-bit scale product; 2 x acc + 2 x act LUT for round and saturate) "
                    "[assumption]",
                    R, mu.acc_bits, kRequantScaleBits));
  }

  // Vector unit.
  {
    const int L = d.vector_unit.lanes;
    const double table_bits = std::pow(2.0, d.vector_unit.exp_table_bits) * 16;  // 16-bit entries
    Resources r;
    r.dsp = (A >= 16 ? kFp16MacDsp : kLaneDsp) * L + kSpecialFnDsp;
    r.lut = L * (kLaneLut + std::ceil(table_bits / 64.0)) + kSpecialFnLut;  // exp table in LUTRAM, 64 bits per LUT
    r.ff = L * kLaneFf + kSpecialFnFf;
    add("vector unit", r,
        fmt::format("{} lanes x (1 DSP, 3 for fp16 activations, 400 LUT, 300 FF, exp table of 2^{} x 16 bit in LUTRAM) + shared "
                    "reciprocal/rsqrt (4 DSP, 1500 LUT, 1500 FF) [assumption]",
                    L, d.vector_unit.exp_table_bits));
  }

  // Buffers: partitioned for the bandwidth the matrix unit needs; ping-pong halves. Each buffer
  // takes the storage (BRAM36, URAM or LUTRAM) that costs the smallest fraction of the card.
  auto buffer = [&](const std::string& name, double bytes, int banks, int width, const std::string& why) {
    if (bytes <= 0) return;
    const double half = bytes / 2;
    const double depth = std::ceil(half * 8.0 / (double(banks) * width));
    struct Option {
      Resources r;
      const char* what;
      double fraction;
    };
    std::vector<Option> options;
    Resources bram;
    bram.bram36 = 2 * bank_blocks(half, banks, width, false);
    options.push_back({bram, "BRAM36 SDP aspect ratios, ceil(width/w) x ceil(depth/d) (UG573; FINN bram_estimation)",
                       bram.bram36 / std::max(1.0, avail_fabric.bram36.or_else(0))});
    if (have_uram && bytes >= opt.uram_min_bytes) {
      Resources ur;
      ur.uram = 2 * bank_blocks(half, banks, width, true);
      options.push_back({ur, "URAM 4K x 72, ceil(width/72) x ceil(depth/4096) (UG573; FINN uram_estimation)",
                         ur.uram / avail_fabric.uram.or_else(1)});
    }
    if (depth <= kLutramMaxDepth) {
      Resources lr;
      lr.lut = 2.0 * banks * width * std::ceil(depth / 64.0) * 2;
      options.push_back({lr, "LUTRAM, 2 LUTs per bit of width per 64 words (RAM64X1D, simple dual port; UG574)",
                         lr.lut / std::max(1.0, avail_fabric.lut.or_else(0))});
    }
    const Option& best = *std::min_element(options.begin(), options.end(),
                                           [](const Option& a, const Option& b) { return a.fraction < b.fraction; });
    add(name, best.r,
        fmt::format("{:.0f} bytes as 2 ping-pong halves x {} banks x {} bits, depth {:.0f} ({}); {}; cheapest of "
                    "{} storage options as a share of the card",
                    bytes, banks, width, depth, why, best.what, options.size()));
  };
  // Weight tile: R x C weights per cycle, stored at their packed width.
  buffer("weight buffer", double(d.buffers.weight_bytes), R, C * W, "R banks, each C weights wide");
  // Activations: C inputs read per cycle.
  buffer("activation buffer", double(d.buffers.activation_bytes), 1, C * A, "one bank of C activations");
  // On-chip KV: keys/values are the B operand of the attention products: R x C per cycle.
  buffer("KV buffer", double(d.buffers.kv_bytes), R, C * d.kv_bits, "R banks, each C elements wide");

  // Memory interfaces: one AXI master + burst DMA per channel, plus the memory subsystem.
  {
    const int channels = d.memory.weight_channels + d.memory.kv_channels + d.memory.activation_channels;
    const MemoryPool* pool = dev.memory.empty() ? nullptr : &dev.memory.front();
    const bool hbm = pool && is_hbm(*pool);
    const int width = d.memory.port_bits;  // the design's AXI port per channel
    Resources per;
    per.lut = kAxiMasterLut;
    per.ff = kAxiMasterFf;
    per.bram36 = blocks_for_memory(width, kAxiReadDepth, false);
    add(fmt::format("memory interfaces x{}", channels), per * channels,
        fmt::format("per channel: m_axi adapter + burst DMA (1800 LUT, 3000 FF [assumption]) and a {}-bit x {} read "
                    "buffer (memory.port_bits; {} BRAM36; UG1399 default burst 16 x 16 outstanding)",
                    width, kAxiReadDepth, per.bram36));
    const bool hard = dev.memory_controller.has() && dev.memory_controller.value->rfind("hard", 0) == 0;
    if (hard) {
      u.assumptions.push_back("memory controllers are hard blocks on " + dev.id + " (" + dev.memory_controller.source +
                              "): no fabric cost beyond the AXI masters");
    } else if (hbm) {
      add("HBM subsystem", kFinnHbm, "FINN util/platforms.py HBM_RESOURCE_REQUIREMENTS (once per card)");
    } else if (pool) {
      const int controllers = std::min(channels, static_cast<int>(pool->channels.or_else(1)));
      add(fmt::format("DDR controllers x{}", controllers), kFinnDdr * controllers,
          "FINN util/platforms.py DDR_RESOURCE_REQUIREMENTS per DDR controller used");
    }
  }

  add("control", Resources{kControlLut, kControlFf, 0, kControlBram, 0},
      "instruction fetch/decode, address generators, AXI-lite registers, instruction memory [assumption]");

  // Stored weights narrower than the MAC operand, or N:M sparse: a decoder per MAC input
  // unpacks the stored width (a shifter/mux of `bits` LUTs) and, for N:M, selects the
  // activation each kept weight multiplies (an M:1 mux of A bits, M/4 LUT6 per bit).
  const bool decode = (d.weights.bits > 0 && d.weights.bits != W) || d.weights.sparse_n > 0;
  if (decode) {
    const double bits = d.weights.bits > 0 ? d.weights.bits : W;
    const double mux = d.weights.sparse_n > 0 ? A * std::ceil(d.weights.sparse_m / 4.0) : 0;
    Resources r;
    r.lut = double(R) * C * (std::ceil(bits) + mux);
    r.ff = double(R) * C * std::ceil(bits);
    add("weight decoder", r,
        fmt::format("R x C x (ceil({:g}) unpack LUTs{}) and one register per stored bit [assumption]", bits,
                    d.weights.sparse_n > 0 ? fmt::format(" + {}:{} activation select, A x ceil(M/4) LUTs", d.weights.sparse_n,
                                                         d.weights.sparse_m)
                                           : std::string()));
  }
  // Each compute unit (one per SLR) has its own matrix unit, requantizers, vector unit,
  // buffers, decoder and control; the memory interfaces are counted once per channel.
  if (d.compute_units > 1)
    for (auto& p : u.parts) {
      if (p.name.rfind("memory interfaces", 0) == 0 || p.name == "HBM subsystem" || p.name.rfind("DDR controllers", 0) == 0)
        continue;
      p.use = p.use * d.compute_units;
      p.formula += fmt::format("; x {} compute units", d.compute_units);
    }
  if (d.parallel.cards > 1)
    add("card-to-card network", kFinnEth, "FINN util/platforms.py ETH_RESOURCE_REQUIREMENTS (VNx UDP stack)");

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

  u.assumptions.push_back(pf.available.lut.has()
                              ? "available = user region after the platform shell: " + pf.available_source
                              : "no shell share known for " + dev.id + ": the whole device counts as available");
  u.assumptions.push_back(fmt::format(
      "ceilings {:.0f}% LUT, {:.0f}% FF, {:.0f}% DSP, {:.0f}% BRAM, {:.0f}% URAM of available ({})", 100 * pf.lut_ceiling,
      100 * pf.ff_ceiling, 100 * pf.dsp_ceiling, 100 * pf.bram_ceiling, 100 * pf.uram_ceiling, pf.ceiling_source));
  if (!have_uram) u.assumptions.push_back("no URAM on " + dev.id + ": every buffer is in BRAM36");
  // One matrix unit placed across SLRs crosses super-long lines; flag it.
  double largest_slr_dsp = 0;
  for (const auto& s : dev.slrs) largest_slr_dsp = std::max(largest_slr_dsp, s.available.dsp.or_else(0));
  const double unit_dsp = u.parts.front().use.dsp / d.compute_units;
  if (largest_slr_dsp > 0 && unit_dsp > pf.dsp_ceiling * largest_slr_dsp)
    u.assumptions.push_back(fmt::format(
        "the matrix unit's {:.0f} DSPs exceed one SLR's {:.0f} allowed: it spans SLRs (expect a lower clock)",
        unit_dsp, pf.dsp_ceiling * largest_slr_dsp));
  return u;
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
                     {"assumptions", u.assumptions}};
}

}  // namespace hw
