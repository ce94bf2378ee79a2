#pragma once
// arch::Design: the one description of an accelerator. The kernels are instantiated from
// it, the resource and performance models read it, the simulator executes it and the code
// generator emits it; design.json is its file form. No second copy of these numbers exists.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace arch {

// Temporal overlay: one set of units runs every layer from an instruction list, weights
// streamed from off-chip memory. Dataflow: one unit per layer, weights resident on chip.
enum class Style { overlay, dataflow };
// How a model is split over several cards.
enum class Split { none, tensor, pipeline };
enum class Phase { inference, train };

// How the matrix unit is built in the emitted project: the HLS kernel
// (src/kernels/matrix_unit.hpp) or the RTL unit (rtl/fpgallm_matrix_unit.v, packaged as
// a Vitis RTL kernel; docs/rtl.md).
enum class MatrixUnitImpl { hls, rtl };
// Number format of the vector unit's arithmetic: fp32 (the kernels) or fp16 (the special-
// function units published overlays describe, FlightLLM, DFX).
enum class VectorFormat { fp32, fp16 };

// Cycles from the first operands entering the HLS matrix unit to its first result: the
// unrolled dot product of `cols` int8 products in kernels::matrix_vector_w8a8 pipelined as
// one cycle to read the weight and activation words from their streams, three in the
// DSP48E2 multiplier with its A/B, M and P registers (UG579's fully pipelined multiplier),
// one per level of the adder tree over the `cols` products, one to add into the
// accumulator and one to write the result stream. An estimate from the loop's structure;
// only the Vitis HLS schedule report (the loop's iteration latency) confirms it. The RTL
// unit's measured latency (hw::rtl_matrix_unit_latency) is one cycle less.
constexpr int hls_matrix_unit_depth(int cols) {
  int levels = 0;
  while ((1 << levels) < cols) ++levels;
  return 1 + 3 + levels + 1 + 1;
}

struct MatrixUnit {
  MatrixUnitImpl impl = MatrixUnitImpl::hls;
  int rows = 32;          // output features computed in parallel (PE)
  int cols = 32;          // input features consumed per cycle per row (SIMD)
  int weight_bits = 8;    // 1..8 or 16 (the kernels implement 8 and 4; 4-bit weights are unpacked to int8 at the MAC)
  int act_bits = 8;       // activation operand width: 4, 8 or 16 (the kernels implement 8)
  int acc_bits = 32;      // accumulator width
  int ii = 1;             // initiation interval of the MAC pipeline (cycles per tile step)
  int pipeline_depth = hls_matrix_unit_depth(32);  // cycles from first operand in to first result out
  bool operator==(const MatrixUnit&) const = default;
};

struct VectorUnit {
  int lanes = 16;         // elements per cycle for norms, softmax, activations, RoPE, adds
  int exp_table_bits = 8; // address bits of the exp lookup table (see docs/accelerator.md)
  VectorFormat format = VectorFormat::fp32;
  // false: every vector operation has its own datapath at each place the top calls it (the
  // kernels); true: one multiply-add datapath per lane, with the exp table, that every
  // vector operation (norms, softmax, activations, RoPE, quantize, residual, attention's
  // lane work) runs on in turn, divide and square root as one scalar core each (a
  // special-function unit, as published overlays describe theirs).
  bool shared = false;
  bool operator==(const VectorUnit&) const = default;
};

struct Tiling {
  int tile_rows = 128;    // output rows of one weight tile (multiple of matrix_unit.rows)
  int tile_cols = 256;    // input columns of one weight tile (multiple of matrix_unit.cols)
  int prefill_block = 64; // tokens processed together in prefill attention / GEMM
  bool operator==(const Tiling&) const = default;
};

struct Buffers {
  std::int64_t weight_bytes = 2 * 128 * 256;  // on-chip weight tile storage (double-buffered)
  std::int64_t activation_bytes = 256 * 1024; // on-chip activations
  std::int64_t kv_bytes = 0;                  // on-chip KV cache (0 = KV in off-chip memory)
  // The emitted top's block activation arrays (x, xb, xb2, q, k, v, att, hb, hb2: one row per
  // token of a prompt block) bound to UltraRAM (BIND_STORAGE impl=uram); false: block RAM or
  // LUTRAM, as Vitis chooses.
  bool activations_in_uram = false;
  bool operator==(const Buffers&) const = default;
};

// Off-chip channels (HBM pseudo-channels or DDR banks) given to each kind of traffic.
struct Memory {
  int weight_channels = 16;
  int kv_channels = 8;
  int activation_channels = 1;
  int burst_bytes = 4096;  // DMA burst length
  int port_bits = 512;     // AXI data width of each channel's port: 128, 256 or 512
  bool operator==(const Memory&) const = default;
};

// The weights as stored and streamed, where they differ from what the MAC consumes:
// mixed or sub-byte widths (ternary 1.58, FlightLLM's 3/4/5-bit mix averaging 3.5) and
// N:M structured sparsity (N weights kept in every M, with their position indices).
struct StoredWeights {
  double bits = 0;      // average stored bits per weight; 0 = matrix_unit.weight_bits
  int group_size = 0;   // weights sharing one fp16 scale; 0 = one fp32 scale per output row
  int sparse_n = 0;     // N of N:M (0 = dense)
  int sparse_m = 0;     // M of N:M
  double density() const { return sparse_n > 0 ? double(sparse_n) / sparse_m : 1.0; }
  // Stored bits per dense weight position: the kept weights, their log2(M)-bit indices and the scales.
  double bits_per_weight(int mac_weight_bits) const;
  bool operator==(const StoredWeights&) const = default;
};

struct Parallelism {
  int cards = 1;
  Split split = Split::none;
  bool operator==(const Parallelism&) const = default;
};

struct Design {
  std::string name = "design";
  std::string device;               // key into data/devices.json, e.g. "u280"
  Style style = Style::overlay;
  Phase phase = Phase::inference;
  double clock_mhz = 300.0;
  MatrixUnit matrix_unit;
  VectorUnit vector_unit;
  Tiling tiling;
  Buffers buffers;
  Memory memory;
  Parallelism parallel;
  int batch = 1;
  int context = 512;                // maximum context the KV cache is sized for
  int kv_bits = 8;                  // KV cache element: 8 = int8 (scale per position and head), 16 = fp16, 32 = fp32
  // RMSNorm folded into the following matmul's input stage (published overlays); fpgallm's
  // kernels run the norm as its own vector-unit instruction.
  bool fuse_norm_matmul = false;
  bool fuse_attention = true;       // scores, softmax and value product in one pass
  double weight_sparsity = 0.0;     // fraction of weights skipped (0 = dense)
  StoredWeights weights;
  // Compute units on each card (one per SLR on stacked-silicon parts), each with the
  // matrix and vector units above and its share of the memory channels; every matmul is
  // split over them by output rows and the partial results meet at a barrier.
  int compute_units = 1;
  // Operators left on the host or embedded CPU (graph::OpKind names: "classifier",
  // "embedding", "norm", "softmax"); their inputs and outputs cross to the host.
  std::vector<std::string> host_ops;
  // The host starts the accelerator once per layer (a fused block invoked with each layer's
  // weights, StreamTensor) instead of the card running the model from its instruction list.
  bool host_launch_per_layer = false;
  bool operator==(const Design&) const = default;

  // Every field in range and the combination implementable by the kernels; returns the
  // problems found, empty when valid. Messages name the field: "matrix_unit.rows: ...".
  std::vector<std::string> problems() const;
  // The range and consistency checks alone: a design the performance and resource models
  // can predict, whether or not the kernels implement it.
  std::vector<std::string> model_problems() const;
  // What the kernels (src/kernels) cannot run in this design; empty when they can.
  std::vector<std::string> kernel_gaps() const;
};

const char* to_string(MatrixUnitImpl i);
const char* to_string(VectorFormat f);
const char* to_string(Style s);
const char* to_string(Split s);
const char* to_string(Phase p);

void to_json(nlohmann::json& j, const Design& d);
// Missing fields take their defaults; unknown fields and wrong types are errors.
void from_json(const nlohmann::json& j, Design& d);

// Reads and validates design.json; throws fpgallm::InputError naming the file and the
// first problem (a field out of range, a malformed file, an unknown key).
Design load(const std::string& path);
// Writes design.json atomically.
void save(const Design& d, const std::string& path);

}  // namespace arch
