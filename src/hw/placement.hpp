#pragma once
// Where the units of a design go on a stacked-silicon card (one kernel, several SLRs): the
// per-unit counts of hw::unit_resources against each SLR's share (data/devices.json "slrs",
// FINN platforms.py, under the platform's timing-closure ceilings), and the wires that cross
// each SLR boundary against the card's super long lines (sll_per_boundary).
//
// The rule (a Vitis engineer's floorplan of one big compute unit): the memory side sits in
// SLR0, where the HBM stacks attach on the U50/U55C/U280; every unit is cut only along its
// independent slices (the matrix unit by PE rows, the vector datapath by lanes, the memory
// ports by m_axi bundle), slices fill SLR0 first and then the next SLR up, so that a slice
// away from SLR0 crosses every boundary below it. Each crossing signal is registered on both
// sides in the boundary's Laguna TX/RX flip-flops (UG949 "Using SLR Crossing Registers"), so
// it costs no fabric FF but two cycles of latency on that path; v++ and HLS insert none of
// these inside one kernel: only Vivado's placement of the linked design confirms them.
#include <string>
#include <vector>

#include "arch/design.hpp"
#include "hw/device.hpp"
#include "hw/resources.hpp"

namespace hw {

// One unit's slices in one SLR.
struct SlrShare {
  std::string part;     // "matrix unit", "vector datapath", ...
  int slr = 0;
  int slices = 0;       // slices placed in this SLR
  int of = 0;           // slices of the whole unit
  std::string slice;    // "PE rows", "lanes", "m_axi bundles", "whole unit"
  Resources use;
};

struct SlrLoad {
  int index = 0;
  Resources used;
  Resources allowed;    // available x ceiling
};

// Signals crossing the boundary between SLR `lower` and SLR lower + 1.
struct SlrCrossing {
  int lower = 0;
  double wires = 0;
  double available = 0;  // the device's SLLs per boundary (0: no sourced figure)
  std::string what;      // how `wires` was counted
};

struct SlrPlacement {
  bool per_slr = false;  // false: the device lists no SLRs, nothing was placed
  std::vector<SlrShare> shares;
  std::vector<SlrLoad> slrs;
  std::vector<SlrCrossing> crossings;
  bool fits = true;
  std::vector<std::string> problems;     // one line each: an SLR over a ceiling, a boundary over its SLLs
  std::vector<std::string> assumptions;
  // The SLRs any unit occupies (1 when the whole kernel sits in SLR0).
  int spanned() const;
};

// Places `parts` (estimate_resources' units, platform parts included) on `device`'s SLRs.
SlrPlacement place_units(const std::vector<Part>& parts, const Device& device, const arch::Design& design);

// One line per SLR (placed and allowed resources, the units' slices) and per boundary crossed.
std::vector<std::string> placement_lines(const SlrPlacement& placement);

}  // namespace hw
