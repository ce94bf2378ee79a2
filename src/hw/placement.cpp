#include "hw/placement.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace hw {

namespace {

// Wires of one m_axi bundle's read channels when its adapter sits in another SLR than the
// memory: the 512-bit R data plus the AR address (64 bits), burst length, id, response and
// handshakes (AXI4, ARM IHI 0022): about 600.
constexpr double kAxiBundleWires = 600;
// The controller's instruction words fanned out to the units in other SLRs: 16 words x 32 bits.
constexpr double kInstructionWires = 16 * 32;

struct Unit {
  std::string name;
  std::string slice;      // what one slice is
  int slices = 1;
  Resources use;
  double wires_per_slice = 0;  // signals one slice away from SLR0 puts on each boundary below it
  double broadcast = 0;        // signals on each boundary below any slice (shared inputs)
  std::string wires_formula;
  bool fixed = false;          // whole, in SLR0 (the platform's memory subsystem)
};

double fit_count(const Resources& room, const Resources& each) {
  double n = std::numeric_limits<double>::infinity();
  auto one = [&](double r, double e) {
    if (e > 0) n = std::min(n, std::floor(r / e + 1e-9));
  };
  one(room.lut, each.lut);
  one(room.ff, each.ff);
  one(room.dsp, each.dsp);
  one(room.bram36, each.bram36);
  one(room.uram, each.uram);
  return std::max(0.0, n);
}

Resources allowed_of(const Fabric& f, const Fabric& fallback, const Platform& p) {
  auto v = [](const Figure& a, const Figure& b) { return a.has() ? *a : b.or_else(0); };
  Resources r;
  r.lut = v(f.lut, fallback.lut) * p.lut_ceiling;
  r.ff = v(f.ff, fallback.ff) * p.ff_ceiling;
  r.dsp = v(f.dsp, fallback.dsp) * p.dsp_ceiling;
  r.bram36 = v(f.bram36, fallback.bram36) * p.bram_ceiling;
  r.uram = v(f.uram, fallback.uram) * p.uram_ceiling;
  return r;
}

std::vector<std::string> over(const SlrLoad& s) {
  std::vector<std::string> out;
  auto one = [&](const char* what, double used, double allowed) {
    if (used > allowed + 1e-6) out.push_back(fmt::format("SLR{}: {} {:.0f} of {:.0f} allowed", s.index, what, used, allowed));
  };
  one("LUT", s.used.lut, s.allowed.lut);
  one("FF", s.used.ff, s.allowed.ff);
  one("DSP", s.used.dsp, s.allowed.dsp);
  one("BRAM36", s.used.bram36, s.allowed.bram36);
  one("URAM", s.used.uram, s.allowed.uram);
  return out;
}

// The design's units as placement sees them: the vector unit, attention and the on-chip
// activation banks are one lane-sliced datapath (the activation arrays are partitioned by
// lane, and attention runs on the vector lanes).
std::vector<Unit> units_of(const std::vector<Part>& parts, const arch::Design& d) {
  std::vector<Unit> units;
  const int cu = std::max(1, d.compute_units);
  Unit lanes{"vector datapath", "lanes", d.vector_unit.lanes * cu, {}, 0, 0, "", false};
  lanes.wires_per_slice = 104 + 2.0 * d.kv_bits;
  lanes.wires_formula = fmt::format(
      "per lane {:.0f}: a 32-bit reduction partial, a 32-bit matrix result into the lane's bank, a 32-bit parameter "
      "word, an 8-bit activation code and two {}-bit K/V elements",
      lanes.wires_per_slice, d.kv_bits);
  bool has_lanes = false;
  for (const auto& p : parts) {
    if (p.name == "vector unit" || p.name == "attention" || p.name == "on-chip activations") {
      lanes.use += p.use;
      has_lanes = true;
      continue;
    }
    Unit u{p.name, "whole unit", 1, p.use, 0, 0, "", false};
    if (p.name == "tiled matrix unit") {
      // Each PE row's weight tile banks and accumulators are its own (wbuf, acc: dim 2
      // cyclic by PE); only the tile load's word, the activation codes and the store stage's
      // result are shared.
      u.slice = "PE rows";
      u.slices = d.matrix_unit.rows * cu;
      u.broadcast = double(d.matrix_unit.cols) * 8 + 512 + 32;
      u.wires_formula = fmt::format("per row none (its tile banks and accumulators are local); shared: the {}-code "
                                    "activation word, the 512-bit weight word of the tile load and the 32-bit result "
                                    "of the store stage ({:.0f})",
                                    d.matrix_unit.cols, u.broadcast);
    } else if (p.name == "matrix unit") {
      u.slice = "PE rows";
      u.slices = d.matrix_unit.rows * cu;
      u.wires_per_slice = double(d.matrix_unit.cols) * d.matrix_unit.weight_bits + 32;
      u.broadcast = double(d.matrix_unit.cols) * 8;
      u.wires_formula = fmt::format("per row cols x weight bits + a 32-bit accumulator = {:.0f}, and the {}-code "
                                    "activation broadcast ({:.0f})",
                                    u.wires_per_slice, d.matrix_unit.cols, u.broadcast);
    } else if (p.name == "memory ports") {
      // One adapter per m_axi bundle of the emitted top: the weight channels, and the host,
      // row-scale, parameter and four KV bundles.
      u.slice = "m_axi bundles";
      u.slices = (d.memory.weight_channels + 7) * cu;
      u.wires_per_slice = kAxiBundleWires;
      u.wires_formula = fmt::format("per bundle {:.0f} (AXI4 read address and data channels of a 512-bit port)", kAxiBundleWires);
    } else if (p.name == "controller") {
      u.wires_formula = fmt::format("{:.0f} (its instruction words, to every SLR a unit occupies)", kInstructionWires);
    } else {
      u.fixed = true;  // the platform's memory subsystem, network stack
    }
    units.push_back(u);
  }
  if (has_lanes) units.push_back(lanes);
  // The platform's parts first (SLR0 whatever else goes there).
  std::stable_partition(units.begin(), units.end(), [](const Unit& u) { return u.fixed; });
  return units;
}

}  // namespace

int SlrPlacement::spanned() const {
  int top = 0;
  for (const auto& s : shares)
    if (s.slices > 0) top = std::max(top, s.slr);
  return top + 1;
}


namespace {

// The units in this order: the whole ones where they go, the sliced ones filling SLR0 first.
SlrPlacement place_in_order(const std::vector<Unit>& units, const Device& dev) {
  SlrPlacement pl;
  pl.per_slr = true;
  const int n = int(dev.slrs.size());
  const Fabric& whole = dev.fabric;
  for (const auto& s : dev.slrs) {
    // An SLR without a shell share: the whole SLR (or an equal part of the device's).
    Fabric even;
    auto part = [&](const Figure& f) { return f.has() ? Figure{*f / n, f.source} : Figure{}; };
    even.lut = part(whole.lut);
    even.ff = part(whole.ff);
    even.dsp = part(whole.dsp);
    even.bram36 = part(whole.bram36);
    even.uram = part(whole.uram);
    const Fabric& avail = s.available.dsp.has() ? s.available : (s.total.dsp.has() ? s.total : even);
    pl.slrs.push_back({s.index, {}, allowed_of(avail, even, dev.platform)});
  }
  std::vector<double> remote(std::size_t(n), 0);  // wires on boundary b (between SLR b and b + 1)
  std::vector<std::set<std::string>> crossing{std::size_t(n)};  // units with slices above boundary b
  int top = 0;
  for (const Unit& u : units) {
    if (u.fixed || u.slices <= 1) {
      // Whole: the platform's parts in SLR0; a whole unit in the lowest SLR with room.
      int at = 0;
      if (!u.fixed)
        for (int s = 0; s < n; ++s) {
          Resources room = pl.slrs[std::size_t(s)].allowed;
          room += pl.slrs[std::size_t(s)].used * -1.0;
          if (fit_count(room, u.use) >= 1) {
            at = s;
            break;
          }
        }
      pl.slrs[std::size_t(at)].used += u.use;
      pl.shares.push_back({u.name, at, 1, 1, u.fixed ? "platform, beside the memory controllers" : "whole unit", u.use});
      top = std::max(top, u.fixed ? 0 : at);
      continue;
    }
    const Resources each = u.use * (1.0 / u.slices);
    int left = u.slices;
    for (int s = 0; s < n && left > 0; ++s) {
      SlrLoad& load = pl.slrs[std::size_t(s)];
      Resources room = load.allowed;
      room += load.used * -1.0;
      int k = int(std::min<double>(left, fit_count(room, each)));
      if (s == n - 1) k = left;  // what is left goes in the last SLR (over its ceiling: a problem below)
      if (k <= 0) continue;
      load.used += each * k;
      pl.shares.push_back({u.name, s, k, u.slices, u.slice, each * k});
      for (int b = 0; b < s; ++b) {
        remote[std::size_t(b)] += k * u.wires_per_slice;
        if (crossing[std::size_t(b)].insert(u.name).second) remote[std::size_t(b)] += u.broadcast;
      }
      top = std::max(top, s);
      left -= k;
    }
  }
  // The controller's instruction words reach every SLR a unit occupies.
  for (int b = 0; b < top; ++b) remote[std::size_t(b)] += kInstructionWires;
  for (const auto& s : pl.slrs)
    for (auto& o : over(s)) pl.problems.push_back(o);
  const double sll = dev.sll_per_boundary.or_else(0);
  for (int b = 0; b + 1 < n; ++b) {
    if (remote[std::size_t(b)] <= 0) continue;
    std::string what;
    for (const auto& name : crossing[std::size_t(b)]) what += (what.empty() ? "" : ", ") + name;
    SlrCrossing c{b, remote[std::size_t(b)], sll, what + (what.empty() ? "" : ", ") + "controller instructions"};
    pl.crossings.push_back(c);
    if (sll > 0 && c.wires > sll)
      pl.problems.push_back(
          fmt::format("SLR{}-SLR{} boundary: {:.0f} crossing signals of {:.0f} SLLs", b, b + 1, c.wires, sll));
  }
  pl.fits = pl.problems.empty();
  return pl;
}

double crossing_wires(const SlrPlacement& p) {
  double w = 0;
  for (const auto& c : p.crossings) w += c.wires;
  return w;
}

}  // namespace

SlrPlacement place_units(const std::vector<Part>& parts, const Device& dev, const arch::Design& d) {
  if (dev.slrs.empty()) return {};
  // Every order of the sliced units (at most 3! = 6): the first unit placed takes SLR0's room.
  // Kept: the order that fits with the fewest crossing signals, else the one with the fewest problems.
  std::vector<Unit> units = units_of(parts, d);
  const auto first_sliced = std::stable_partition(units.begin(), units.end(),
                                                  [](const Unit& u) { return u.fixed || u.slices <= 1; });
  std::sort(first_sliced, units.end(), [](const Unit& a, const Unit& b) { return a.name < b.name; });
  SlrPlacement pl;
  bool have = false;
  do {
    SlrPlacement t = place_in_order(units, dev);
    const bool better = !have || (t.fits && !pl.fits) ||
                        (t.fits == pl.fits && (t.fits ? crossing_wires(t) < crossing_wires(pl)
                                                      : t.problems.size() < pl.problems.size()));
    if (better) pl = std::move(t);
    have = true;
  } while (std::next_permutation(first_sliced, units.end(), [](const Unit& a, const Unit& b) { return a.name < b.name; }));
  const double sll = dev.sll_per_boundary.or_else(0);
  pl.assumptions.push_back(
      "placement (hw/placement.hpp): the platform's memory subsystem and the controller in SLR0 (where the HBM "
      "attaches on the U50/U55C/U280; on DDR cards SLR0 is assumed); units cut only along independent slices (matrix "
      "unit by PE rows, the vector datapath of vector unit, attention and activation banks by lanes, the memory ports "
      "by m_axi bundle), each filling SLR0 first and then the next SLR up, in the order of the sliced units that fits "
      "with the fewest crossing signals");
  for (const Unit& u : units)
    if (!u.wires_formula.empty()) pl.assumptions.push_back("crossing signals of the " + u.name + ": " + u.wires_formula);
  pl.assumptions.push_back(
      sll > 0 ? fmt::format("{:.0f} SLLs per SLR boundary ({}); every crossing signal registered in the boundary's Laguna "
                            "TX/RX flip-flops (UG949), two cycles on its path, no fabric FF",
                            sll, dev.sll_per_boundary.source)
              : "no sourced SLL count for " + dev.id + ": the crossing signals are counted, not checked");
  return pl;
}

}  // namespace hw

namespace hw {

std::vector<std::string> placement_lines(const SlrPlacement& p) {
  std::vector<std::string> out;
  if (!p.per_slr) return out;
  for (const auto& s : p.slrs) {
    std::string units;
    for (const auto& sh : p.shares)
      if (sh.slr == s.index)
        units += fmt::format("{}{} {}", units.empty() ? "" : ", ", sh.part,
                             sh.of > 1 ? fmt::format("{}/{} {}", sh.slices, sh.of, sh.slice) : std::string("(whole)"));
    out.push_back(fmt::format("SLR{}: DSP {:.0f}/{:.0f}, LUT {:.0f}/{:.0f}, FF {:.0f}/{:.0f}, BRAM36 {:.0f}/{:.0f} "
                              "(placed/allowed): {}",
                              s.index, s.used.dsp, s.allowed.dsp, s.used.lut, s.allowed.lut, s.used.ff, s.allowed.ff,
                              s.used.bram36, s.allowed.bram36, units.empty() ? "nothing" : units));
  }
  for (const auto& c : p.crossings)
    out.push_back(fmt::format("SLR{}-SLR{} boundary: {:.0f} crossing signals{} ({})", c.lower, c.lower + 1, c.wires,
                              c.available > 0 ? fmt::format(" of {:.0f} SLLs", c.available) : std::string(), c.what));
  return out;
}

}  // namespace hw
