#pragma once
// hw::Device: datasheet figures of one card (FPGA or GPU), read from data/devices.json.
// Every figure is optional and carries the source it was taken from; a figure nobody could
// source is empty, never guessed. Planning code asks has() before using one.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hw {

enum class Kind { fpga, gpu };
const char* to_string(Kind k);

// A number with where it comes from ("DS890 v4.0 table 1", "DERIVED: 9024 x 2 x 2 x 0.3 GHz").
struct Figure {
  std::optional<double> value;
  std::string source;

  bool has() const { return value.has_value(); }
  double operator*() const { return *value; }        // precondition: has()
  double or_else(double fallback) const { return value.value_or(fallback); }
};

// A word with where it comes from (memory type, DSP type, PCIe generation).
struct Text {
  std::optional<std::string> value;
  std::string source;

  bool has() const { return value.has_value(); }
  const std::string& operator*() const { return *value; }
};

// One kind of off-chip memory on the card (an HBM stack set, the DDR banks).
struct MemoryPool {
  std::string kind;                 // "HBM2", "HBM2e", "HBM3", "DDR4", "GDDR6", "LPDDR4"
  Figure capacity_gb;               // decimal GB
  Figure bandwidth_gbps;            // GB/s, theoretical peak of the whole pool
  Figure channels;                  // HBM pseudo-channels or DDR banks usable as AXI ports
  Figure channel_bandwidth_gbps;    // GB/s per channel

  bool is_hbm() const { return kind.rfind("HBM", 0) == 0; }
};

// FPGA fabric resources (whole device or one region).
struct Fabric {
  Figure lut;      // 6-input LUTs (Intel: ALMs, see lut_note)
  Figure ff;
  Figure dsp;      // DSP blocks (DSP48E2, DSP58, Intel variable-precision or AI tensor blocks)
  Figure bram36;   // 36 Kb block RAMs
  Figure uram;     // 288 Kb UltraRAMs
};

// One super logic region of a stacked-silicon device (FINN util/platforms.py style).
struct Slr {
  int index = 0;
  Fabric total;     // whole SLR
  Fabric available; // left to user kernels after the platform shell (empty when unknown)
};

// The share of the card a design may use: what the platform shell leaves, and the
// utilization ceiling above which timing closure becomes unlikely.
struct Platform {
  Fabric available;          // user-region resources after the static shell, whole card
  std::string available_source;
  double lut_ceiling = 0.70; // fractions of `available` a design should stay under
  double ff_ceiling = 0.50;
  double dsp_ceiling = 0.80;
  double bram_ceiling = 0.80;
  double uram_ceiling = 0.80;
  std::string ceiling_source;
};

struct Device {
  std::string id;                   // lookup key: "u280", "h100-sxm"
  std::string name;                 // "AMD Alveo U280"
  std::vector<std::string> aliases; // other names accepted by find_device
  std::string vendor;
  Kind kind = Kind::fpga;
  Text chip;                        // "XCU280 (xcu280-fsvh2892-2L-e), VU37P-class die"
  Figure process_nm;

  // FPGA fabric (empty for GPUs).
  Fabric fabric;
  std::string lut_note;             // e.g. "Intel ALMs, not 6-input LUTs"
  Text dsp_type;                    // "DSP48E2", "DSP58", "Intel AI Tensor Block"
  Figure int8_macs_per_dsp;         // MACs per DSP per cycle at 8x8 bits
  Figure int4_macs_per_dsp;         // MACs per DSP per cycle with 4-bit weights
  Figure ai_engines;                // Versal AI Engine tiles (not used by the overlay)
  Figure onchip_mb;                 // on-chip SRAM, MB (FPGA: BRAM+URAM; GPU: L2 + shared)
  std::vector<Slr> slrs;
  // Super long lines (SLLs) joining two neighbouring SLRs, both directions together: the
  // wires a signal crossing that boundary can take (hw/placement.hpp).
  Figure sll_per_boundary;
  Platform platform;
  Figure kernel_clock_mhz;          // typical kernel clock of the vendor platform
  Figure max_clock_mhz;             // upper limit a design may ask for

  // "hard ..." when the memory controllers are hard blocks (Zynq PS, Versal DDRMC): no fabric cost.
  Text memory_controller;
  // Off-chip memory, fastest pool first.
  std::vector<MemoryPool> memory;

  // Peak dense throughput (GPUs; for FPGAs a vendor claim if one exists).
  Figure peak_int8_tops;
  Figure peak_int4_tops;
  Figure peak_fp16_tflops;
  Figure peak_bf16_tflops;
  Figure peak_fp32_tflops;

  // Links.
  Text pcie;                        // "Gen3 x16"
  Figure pcie_gbps;                 // GB/s per direction
  Text card_link;                   // "NVLink 4", "2x QSFP28 (100 GbE)"
  Figure card_link_gbps;            // GB/s per direction between two cards

  // Power and money.
  Figure tdp_w;                     // maximum board power
  Figure static_w;                  // idle/static board power
  Figure price_usd;
  Figure cloud_usd_per_hour;        // on-demand price of one card in a public cloud

  // The processor that runs operators a design leaves off the fabric: an embedded one
  // ("embedded: 4x Arm Cortex-A53") on SoC boards; empty on PCIe cards (a server host).
  Text host_cpu;
  Figure host_cpu_gflops;           // its peak fp32 throughput
  bool embedded_host() const { return host_cpu.has() && host_cpu.value->rfind("embedded", 0) == 0; }
  std::string notes;

  // Sums over `memory`.
  double memory_capacity_gb() const;
  double memory_bandwidth_gbps() const;
  int memory_channels() const;
  // The user-region resources a design may count on: platform.available where known,
  // else the whole fabric.
  Fabric usable() const;
};

// Every device of data/devices.json, in file order (read once).
const std::vector<Device>& devices();
// Case-insensitive lookup by id, name or alias; nullptr if unknown.
const Device* lookup_device(const std::string& name);
// As lookup_device, but an unknown name throws fpgallm::InputError(option, "unknown
// device 'x' (did you mean: u280, u250?)"): the option or file field that named it.
const Device& find_device(const std::string& name, const std::string& option = "--device");
// Ids of devices whose id, name or alias is close to `name`, closest first.
std::vector<std::string> close_device_names(const std::string& name);

// Reads a device table from a file (devices() reads data/devices.json through this).
// Throws fpgallm::InputError naming the file for malformed entries or a figure without a
// source.
std::vector<Device> load_devices(const std::string& path);

void to_json(nlohmann::json& j, const Figure& f);
void to_json(nlohmann::json& j, const Device& d);

}  // namespace hw
