#pragma once
// Power model: static board power plus activity-weighted dynamic power of DSPs, block RAM
// and logic at the design's clock, plus off-chip memory energy per byte. Joules per token
// come from watts x the performance model's time. Constants (pJ/bit, W per DSP per MHz)
// and their sources: data/devices.json "power_model" and docs/performance-model.md.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "arch/design.hpp"
#include "hw/device.hpp"
#include "hw/resources.hpp"

namespace hw {

// What the design does on average while running (fractions 0..1 and a byte rate); the
// performance model supplies these.
struct Activity {
  double mac_busy = 1.0;        // fraction of cycles the matrix unit multiplies
  double vector_busy = 0.2;     // fraction of cycles the vector unit works
  double bram_busy = 1.0;       // fraction of cycles buffers are read or written
  double offchip_bytes_per_s = 0;
  double toggle_rate = 0.125;   // logic toggle rate (Vivado power estimator default 12.5%)
};

struct Power {
  double static_w = 0;
  double dsp_w = 0;
  double bram_w = 0;
  double logic_w = 0;           // LUT + FF + routing
  double memory_w = 0;          // off-chip memory traffic
  double total_w = 0;
  std::vector<std::string> assumptions;
};

// Coefficients of the power model, from data/devices.json "power_model" (each with its source).
struct PowerConstants {
  Figure static_fraction_of_tdp;    // board power at idle / TDP, when a card has no static figure
  Figure dsp_uw_per_mhz;            // one busy DSP block, microwatts per MHz
  Figure bram36_uw_per_mhz;         // one busy BRAM36
  Figure uram_uw_per_mhz;           // one busy URAM
  Figure lut_uw_per_mhz;            // one LUT with its flip-flops and routing at 12.5% toggle
  Figure hbm_pj_per_bit;            // off-chip HBM access energy
  Figure ddr_pj_per_bit;            // off-chip DDR4 access energy
  Figure gddr_pj_per_bit;           // GDDR6
};
const PowerConstants& power_constants();

// FPGA: from the resource count and activity. Throws InputError for a GPU.
Power estimate_power(const arch::Design& design, const Device& device, const Utilization& use,
                     const Activity& activity);
// GPU (or any card with only a TDP): static + (TDP - static) x busy, memory folded in.
Power estimate_board_power(const Device& device, double busy);

void to_json(nlohmann::json& j, const Power& p);

}  // namespace hw
