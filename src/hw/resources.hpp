#pragma once
// Resource model: DSP, LUT, FF, BRAM36 and URAM of each unit of an arch::Design as the
// emitted kernels instantiate it (hw/unit_resources.hpp: every term with its formula and
// source line), the platform's memory subsystem, and the utilization against what the
// platform shell leaves and the timing-closure ceilings.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "arch/design.hpp"
#include "hw/device.hpp"
#include "model/config.hpp"

namespace hw {

struct Resources {
  double lut = 0, ff = 0, dsp = 0, bram36 = 0, uram = 0;

  Resources& operator+=(const Resources& o);
  friend Resources operator+(Resources a, const Resources& b) { return a += b; }
  friend Resources operator*(Resources a, double s);
};

// One kind of thing a unit instantiates: `count` instances of `each`.
struct Term {
  std::string what;     // "int8 x int8 products"
  double count = 0;
  Resources each;
  std::string formula;  // how `count` follows from the design: "rows x cols = 4 x 8"
  std::string source;   // where the code instantiates it: "src/kernels/matrix_unit.hpp:476 (...)"
  Resources total() const { return each * count; }
};

// One part of the design: a unit of the emitted accelerator ("matrix unit", "vector
// unit", ...) or of the platform ("HBM subsystem").
struct Part {
  std::string name;
  Resources use;
  std::string formula;  // how the counts were obtained, with the source of the constants
  // What the counts were checked against: a synthesis mapping ("Yosys 0.23 synth_xilinx
  // -family xcup of rtl/..., docs/rtl.md") or empty when the figures are model-only.
  std::string checked;
  std::vector<Term> terms;  // what `use` sums (empty for platform parts)
};

enum class Resource { lut, ff, dsp, bram36, uram };
const char* to_string(Resource r);

struct ResourceLine {
  Resource resource = Resource::lut;
  double used = 0;
  double available = 0;  // user region after the shell
  double ceiling = 0;    // available x the utilization ceiling
  double utilization() const { return available > 0 ? used / available : (used > 0 ? 1e9 : 0); }
  bool fits() const { return used <= ceiling; }
  double margin() const { return ceiling - used; }  // negative when over
};

struct Utilization {
  std::string device;
  std::vector<Part> parts;
  Resources total;
  std::vector<ResourceLine> lines;  // one per resource, in enum order
  bool fits = true;                 // every line under its ceiling, and the units placed on the SLRs
  std::vector<std::string> assumptions;
  // The units on the card's SLRs (hw/placement.hpp): an SLR over its ceilings or a boundary
  // over its SLLs, one line each; empty when they fit or the card lists no SLRs.
  std::vector<std::string> slr_problems;
  int slrs_spanned = 1;             // SLRs the units occupy

  const ResourceLine& line(Resource r) const;
  // The resource closest to (or furthest over) its ceiling, as a fraction of the ceiling.
  Resource binding() const;
  // "DSP 9500 of 7200 allowed (80% of 9000)" for every line that does not fit, then the
  // SLR placement's problems ("SLR0: DSP 3000 of 2189 allowed").
  std::vector<std::string> overflows() const;
};

// Options of the resource model that are not part of the Design.
struct ResourceOptions {
  // The model the emitted top is sized for (its on-chip arrays and loop bounds); without
  // one, kernel_sizes(design) states what is assumed.
  const model::Config* model = nullptr;
  // false: the counts alone, as the design search needs them for many designs: parts without
  // terms or formulas, no assumptions; every count, line and total is the same.
  bool describe = true;
};

// Counts every part of `design` on `device`. Throws fpgallm::InputError if the device is
// a GPU or lacks the fabric figures the model needs.
Utilization estimate_resources(const arch::Design& design, const Device& device,
                               const ResourceOptions& options = {});

// `design` without what the resource model does not read: its name, and the tile shape and
// weight buffer of an HLS matrix unit when the top builds no tiled unit (hw::builds_tiled_unit).
// Designs with equal views have equal counts on a device.
arch::Design resource_view(const arch::Design& design);

// The matrix unit as rtl/fpgallm_matrix_unit.v builds it on DSP48E2 fabric (int8
// activations, int8 or int4 weights): DSP, LUT, FF and BRAM of the Yosys mapping of that
// RTL, by formulas derived from its structure with two LUT constants and one FF constant
// fitted to Yosys counts (docs/rtl.md: fit set, held-out shapes, errors).
Resources matrix_unit_resources(const arch::MatrixUnit& mu, const arch::Tiling& tiling);
// Bits of the adders the RTL unit maps to fabric (adder trees, accumulators, the
// packing's sign correction): the regressor of the matrix unit's LUT formula.
double matrix_unit_adder_bits(const arch::MatrixUnit& mu);
// Where the figures of matrix_unit_resources were checked.
extern const char* const kMatrixUnitChecked;

void to_json(nlohmann::json& j, const Utilization& u);

}  // namespace hw
