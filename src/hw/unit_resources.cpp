#include "hw/unit_resources.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "arch/units.hpp"
#include "kernels/attention.hpp"
#include "kernels/matrix_unit.hpp"
#include "kernels/vector_unit.hpp"

namespace hw {

namespace {

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }
int round_up(int v, int m) { return int(ceil_div(v, m) * m); }

// Vitis HLS's default bindings of the fp32 operators (csynth names them
// <op>_32ns_32ns_32_<latency>_{full_dsp,max_dsp,no_dsp}_1: fadd/fsub -> fulldsp, fmul ->
// maxdsp, fdiv/fsqrt/fcmp/conversions -> fabric; UG1399 "BIND_OP" lists the impl values).
// DSP counts: AMD PG060 (Floating-Point Operator) single precision on DSP48E2, full usage
// for add (2), max usage for multiply (3), none for divide, square root, compare and the
// int <-> float conversions. fadd LUT/FF: a Vitis HLS csynth report of
// fadd_32ns_32ns_32_3_full_dsp_1 on xcu280 (2 DSP, 177 FF, 226 LUT). The other LUT/FF
// figures are typical csynth values [recalled, not checked against a report here].
constexpr FpCore kFpCores[] = {
    {"fadd", 2, 226, 177, "PG060 full DSP usage, 2 DSP48E2; LUT/FF from a Vitis csynth report (xcu280)"},
    {"fmul", 3, 78, 143, "PG060 max DSP usage (Vitis's default for fmul), 3 DSP48E2; LUT/FF [recalled]"},
    {"fdiv", 0, 800, 1400, "fabric (Vitis's default for fdiv, no_dsp); LUT/FF [recalled]"},
    {"fsqrt", 0, 460, 800, "fabric (no_dsp); LUT/FF [recalled]"},
    {"fcmp", 0, 66, 0, "fabric compare (no_dsp); LUT [recalled]"},
    {"sitofp", 0, 250, 350, "fabric int -> float (no_dsp); LUT/FF [recalled]"},
    {"fptosi", 0, 150, 100, "fabric float -> int (no_dsp); LUT/FF [recalled]"},
    // Half precision, at the same default bindings (hadd full_dsp, hmul max_dsp, the rest
    // fabric: csynth names them hadd_16ns_16ns_16_<l>_full_dsp_1, hmul_16ns_16ns_16_<l>_max_dsp_1).
    // DSP counts: DFX (Hong et al., MICRO'22, section 5, built with AMD's floating-point
    // cores on a U280) maps each FP16 multiplier to one DSP48E2 and each FP16 adder to two,
    // its matrix unit's 3 x d x l DSPs; the multiplier agrees with the 11 x 11 significand
    // product fitting one 27 x 18 multiplier (UG579). LUT/FF: the fp32 core's scaled by the
    // significand width, 11/24 [assumption].
    {"hadd", 2, 104, 81, "DFX (MICRO'22) section 5: an FP16 adder is two DSP48E2; LUT/FF 11/24 of fadd's [assumption]"},
    {"hmul", 1, 36, 66, "DFX (MICRO'22) section 5: an FP16 multiplier is one DSP48E2 (11 x 11 fits one 27 x 18, UG579); LUT/FF 11/24 of fmul's [assumption]"},
    {"hdiv", 0, 367, 642, "fabric (no_dsp); LUT/FF 11/24 of fdiv's [assumption]"},
    {"hsqrt", 0, 211, 367, "fabric (no_dsp); LUT/FF 11/24 of fsqrt's [assumption]"},
    {"hcmp", 0, 30, 0, "fabric compare (no_dsp); LUT 11/24 of fcmp's [assumption]"},
    {"sitohp", 0, 115, 160, "fabric int -> half (no_dsp); LUT/FF 11/24 of sitofp's [assumption]"},
    {"hptosi", 0, 69, 46, "fabric half -> int (no_dsp); LUT/FF 11/24 of fptosi's [assumption]"},
};

// The operator core of `fp32_name` ("fadd") in the vector unit's number format.
const char* in_format(const char* fp32_name, arch::VectorFormat f) {
  if (f == arch::VectorFormat::fp32) return fp32_name;
  const std::string n = fp32_name;
  if (n == "sitofp") return "sitohp";
  if (n == "fptosi") return "hptosi";
  for (const auto& c : kFpCores)
    if (c.name[0] == 'h' && n.substr(1) == c.name + 1) return c.name;
  throw std::logic_error("no half-precision core for " + n);
}

// One fp32 add or multiply is one DSP58 in its floating-point mode on Versal (AM004,
// DSPFP32).
constexpr double kDsp58FpDsp = 1;

// Block RAM and LUTRAM rules. A bank of at most kLutramMaxDepth words is put in LUTRAM
// (RAM32M16: 32 x 14 bits in 8 LUTs, RAM64M8: 64 x 7 bits in 8 LUTs; UG574); deeper banks
// in RAMB18E2 [assumption: Vitis's automatic storage choice, no BIND_STORAGE in the kernels].
constexpr long long kLutramMaxDepth = 64;
// A FIFO of at most kSrlMaxDepth words is shift registers (SRLC32E, one LUT per bit per
// 32 words; UG574), deeper ones block RAM [assumption: Vitis's FIFO implementation].
constexpr long long kSrlMaxDepth = 32;
// Words of at most 72 bits one UltraRAM block holds: URAM288 is 4K x 72 (UG573); a bank of
// fp32 words takes one block per 4,096 of them (no two words share a row).
constexpr long long kUramWords = 4096;
// Fabric adders: one LUT (and its CARRY8 bit) per adder bit (UG574); every adder of a
// pipelined loop registered once [assumption].
constexpr double kLutPerAdderBit = 1;
// One m_axi adapter (address generation, request/response FIFOs, the AXI protocol) without
// its data buffers [assumption, not measured here].
constexpr double kAxiAdapterLut = 1800;
constexpr double kAxiAdapterFf = 3000;
// UG1399 INTERFACE m_axi defaults: 16 outstanding requests, bursts of 16 beats.
constexpr int kAxiDefaultOutstanding = 16;
constexpr int kAxiDefaultBurst = 16;
// The top's control: instruction loop, the switch over opcodes, the s_axilite register
// file and the block-level handshakes [assumption, not measured here].
constexpr double kControlLut = 6000;
constexpr double kControlFf = 9000;

struct Ops {  // fp32 operators of one pipelined loop body (or one shared sequential region)
  int fadd = 0, fmul = 0, fdiv = 0, fsqrt = 0, fcmp = 0, sitofp = 0, fptosi = 0;
};

// How the units are counted: on Versal's DSP58 or not; with every term described, or the
// counts alone (Part::use summed in the same order, no terms or formulas).
struct Counting {
  bool dsp58 = false;
  bool describe = true;
};

class Unit {
 public:
  Unit(std::string name, const Counting& how, arch::VectorFormat format = arch::VectorFormat::fp32)
      : dsp58_(how.dsp58), describe_(how.describe), format_(format) {
    part_.name = std::move(name);
  }
  void term(std::string what, double count, Resources each, std::string formula, std::string source) {
    if (count <= 0) return;
    if (!describe_) {
      part_.use += each * count;
      return;
    }
    part_.terms.push_back({std::move(what), count, each, std::move(formula), std::move(source)});
  }
  // `copies` x the operators `ops` (e.g. lanes x the ops of one lane).
  void fp(const std::string& what, double copies, const Ops& ops, const std::string& formula, const std::string& source) {
    auto add = [&](const char* fp32_name, int n) {
      if (n <= 0) return;
      const char* name = in_format(fp32_name, format_);
      const FpCore& c = fp_core(name);
      Resources r{c.lut, c.ff, c.dsp, 0, 0};
      if (dsp58_ && c.dsp > 0) r.dsp = kDsp58FpDsp;
      if (!describe_) return term({}, copies * n, r, {}, {});
      term(fmt::format("{}: {}", what, name), copies * n, r, fmt::format("{} x {} {}", formula, n, name),
           source + "; " + c.source);
    };
    add("fadd", ops.fadd);
    add("fmul", ops.fmul);
    add("fdiv", ops.fdiv);
    add("fsqrt", ops.fsqrt);
    add("fcmp", ops.fcmp);
    add("sitofp", ops.sitofp);
    add("fptosi", ops.fptosi);
  }
  // `banks` banks of `depth` words of `width` bits (LUTRAM or BRAM18 by depth).
  void memory(const std::string& what, long long banks, int width, long long depth, const std::string& formula,
              const std::string& source) {
    if (banks <= 0 || depth <= 0) return;
    Resources each;
    std::string how;
    if (depth <= 1) {
      each.ff = width;
      how = "one word: registers";
    } else if (depth <= kLutramMaxDepth) {
      each.lut = depth <= 32 ? 8 * std::ceil(width / 14.0) : 8 * std::ceil(width / 7.0) * std::ceil(depth / 64.0);
      how = "LUTRAM (RAM32M16 / RAM64M8, UG574)";
    } else {
      each.bram36 = bram18_for_bank(width, depth) / 2;
      if (describe_) how = fmt::format("{:g} BRAM18 per bank (UG573 aspect ratios)", bram18_for_bank(width, depth));
    }
    if (!describe_) return term({}, double(banks), each, {}, {});
    term(what, double(banks), each, fmt::format("{} banks x {} words x {} bits ({}); {}", banks, depth, width, how, formula),
         source);
  }
  void fifo(const std::string& what, long long copies, int width, long long depth, const std::string& source) {
    Resources each;
    std::string how;
    if (depth <= kSrlMaxDepth) {
      each.lut = double(width) * std::ceil(double(depth) / 32.0);
      how = "shift registers, SRLC32E (UG574)";
    } else {
      each.bram36 = bram18_for_bank(width, depth) / 2;
      if (describe_) how = fmt::format("{:g} BRAM18 (UG573)", bram18_for_bank(width, depth));
    }
    if (!describe_) return term({}, double(copies), each, {}, {});
    term(what, double(copies), each, fmt::format("{} x FIFO of {} words x {} bits ({})", copies, depth, width, how), source);
  }
  Part done() {
    if (!describe_) return std::move(part_);
    for (const auto& t : part_.terms) part_.use += t.total();
    std::string f;
    for (const auto& t : part_.terms) f += (f.empty() ? "" : "; ") + fmt::format("{:g} {}", t.count, t.what);
    part_.formula = f;
    return std::move(part_);
  }
  Part& part() { return part_; }

 private:
  bool dsp58_, describe_;
  arch::VectorFormat format_;
  Part part_;
};

// quantize_static's lane (vector_unit.hpp:173): x * inv, then saturate_round_i8
// (numerics.hpp:39-44): 3 compares, + magic, - magic, to int.
Ops quantize_codes_ops() { return Ops{.fadd = 2, .fmul = 1, .fcmp = 3, .fptosi = 1}; }
// max_abs's lane (vector_unit.hpp:116-117): |x| (a sign bit) and one compare.
Ops max_abs_ops() {
  Ops o;
  o.fcmp = 1;
  return o;
}

// kernels::exp_rom (numerics.hpp): x log2e 2^B, the rounding (+ magic, - magic), to int,
// n and i to float, r by 4 products and 4 sums and differences, the cubic (3 products, 3
// sums), x T[i], x 2^n, and 3 compares (NaN, the two clamps).
Ops exp_rom_ops() { return Ops{.fadd = 9, .fmul = 10, .fcmp = 3, .sitofp = 2, .fptosi = 1}; }

// One loop (or sequential region) of the vector unit, attention or the KV store in the
// emitted top: `sites` call sites whose body takes `ops` per element, `width` elements per
// cycle (the vector unit's lanes, the attention's lanes, or 1 for scalar work), and `once`
// more per cycle beside them.
struct LaneLoop {
  std::string what;
  int sites = 1;
  Ops ops;
  int width = 1;
  std::string source;  // the kernel function and its FPGALLM_TRIP loop id
  Ops once;
  int fmul() const { return width * ops.fmul + once.fmul; }
  int fadd() const { return width * ops.fadd + once.fadd; }
};

// The loops that share the top's binary32 cores, read off the kernels at the call sites of
// the emitted top (emit_text.cpp's instruction switch, overlay.hpp).
std::vector<LaneLoop> shared_lane_loops(const arch::Design& d) {
  std::vector<LaneLoop> v;
  const int lanes = d.vector_unit.lanes, att = kernels::attention_lanes(lanes, d.kv_bits);
  auto add = [&](std::string what, int sites, Ops ops, int width, std::string source, Ops once = {}) {
    v.push_back({std::move(what), sites, ops, width, std::move(source), once});
  };
  Ops reduce;  // lane_reduce of x^2 (shift 0 folds away): acc += x * x
  reduce.fmul = 1;
  reduce.fadd = 1;
  Ops scale;  // gain * (inv * x)
  scale.fmul = 2;
  Ops norm_scalar;  // sum tree, / n, + eps, sqrt, 1/sqrt, int n -> float
  norm_scalar.fadd = 1;
  norm_scalar.fdiv = 1;
  norm_scalar.fsqrt = 1;
  norm_scalar.sitofp = 1;
  add("rmsnorm sum of squares", 2, reduce, lanes, "op_norm's 2 calls of kernels::rmsnorm; lane_reduce (trip lane_reduce)");
  add("rmsnorm scale", 2, scale, lanes, "kernels::rmsnorm (trip rmsnorm_scale)");
  add("rmsnorm scalar part", 2, norm_scalar, 1, "kernels::rmsnorm, between its loops [assumption: one core per kind]");
  // quantize: one call site (overlay::quantize: one max |x| loop and one codes loop for
  // every source array).
  Ops q_scalar;  // 1 / scale, max / 127, scale == 0
  q_scalar.fdiv = 1;
  q_scalar.fcmp = 1;
  add("quantize codes", 1, quantize_codes_ops(), lanes,
      "overlay::quantize -> kernels::quantize_codes (trip quantize_codes), saturate_round_i8");
  add("quantize max |x|", 1, max_abs_ops(), lanes, "overlay::quantize -> kernels::max_abs_of (trip max_abs)");
  add("quantize scalar part", 1, q_scalar, 1, "overlay::quantize [assumption: one core per kind]");
  Ops sum;
  sum.fadd = 1;
  add("residual add", 1, sum, lanes, "kernels::residual_add (trip residual_add)");
  // swiglu: per lane exp_rom, then 1 + e, 1 / (...), v x (...), x up: 12 products (kLaneFmul)
  // and 10 sums and differences.
  Ops swiglu = exp_rom_ops();
  swiglu.fmul += 2;
  swiglu.fadd += 1;
  swiglu.fdiv = 1;
  add("swiglu", 1, swiglu, lanes, "kernels::swiglu (trip swiglu), exp_rom");
  // RoPE: lanes elements (lanes / 2 pairs) per cycle, each pair 4 products and 2 sums.
  Ops rope;
  rope.fmul = 2;
  rope.fadd = 1;
  add("rope", 2 * std::max(2, lanes) / lanes, rope, lanes,
      "overlay::rope_heads's 2 calls (q, k) of kernels::rope (trip rope; max(2, lanes) elements per cycle)");
  // The K and V blocks hold the codes as stored (the load loop copies them); the scores and
  // values loops convert each element they read (kv_read: int8 code x scale, fp16
  // subnormal mantissa x 2^-24, fp32 nothing).
  Ops lane_mac;
  lane_mac.fmul = 1;
  lane_mac.fadd = 1;
  if (d.kv_bits != 32) {
    lane_mac.sitofp = 1;
    lane_mac.fmul += 1;
  }
  // scores: per element the key converted, q x k and its share of the lane tree; once per
  // cycle the sum over beats, / sqrt(d) and the running maximum's compare.
  Ops score_tail;
  score_tail.fadd = 1;
  score_tail.fdiv = 1;
  score_tail.fcmp = 1;
  add("attention: scores (q . k, / sqrt(d), max)", 1, lane_mac, att, "kernels::attention (trip attention_scores), tree_sum",
      score_tail);
  // values: per element the value converted, p x v and the slot's sum; once per cycle
  // exp(s - m_new) and the denominator's slot.
  Ops exp_tail = exp_rom_ops();
  exp_tail.fadd += 2;  // s - m_new, and the denominator's slot
  add("attention: values (p = exp(s - m_new), p v)", 1, lane_mac, att,
      "kernels::attention (trip attention_values), exp_table", exp_tail);
  // combine: per lane acc x corr and the tree over kAddSlots slots (kAddSlots - 1 sums) plus
  // the sum into acc.
  Ops combine;
  combine.fmul = 1;
  combine.fadd = kernels::kAddSlots;
  add("attention: combine (acc x corr + slots)", 1, combine, lanes, "kernels::attention (trip attention_combine)");
  Ops store;
  store.fdiv = 1;
  add("attention: store (acc / l)", 1, store, 1, "kernels::attention (trip attention_store: one element per cycle)");
  Ops att_scalar;  // sqrt(d), the correction exp, l x corr + sum: one core of each kind
  att_scalar.fmul = 1;
  att_scalar.fadd = 1;
  att_scalar.fsqrt = 1;
  att_scalar.fcmp = 1;
  att_scalar.sitofp = 1;
  att_scalar.fptosi = 1;
  add("attention: scalar part", 1, att_scalar, 1,
      "kernels::attention: sqrt(d), exp_table of the correction, l [assumption: one core per kind]");
  if (d.kv_bits == 8) {  // kv_store: quantize_dynamic of k and of v (two call sites of kv_write)
    add("kv_store codes", 2, quantize_codes_ops(), lanes, "kernels::kv_store's 2 kv_write -> quantize_static (trip quantize_codes)");
    add("kv_store max |x|", 2, max_abs_ops(), lanes, "kernels::kv_store's 2 kv_write -> max_abs (trip max_abs)");
  }
  return v;
}

// Adder bits of one row of the MAC array: a binary tree over `cols` products of `product_bits`
// bits (level l: cols / 2^l adders of product_bits + l bits) and the 32-bit accumulator.
double row_adder_bits(int cols, int product_bits) {
  double bits = 32;
  for (int l = 1; (cols >> l) > 0; ++l) bits += double(cols >> l) * (product_bits + l);
  return bits;
}

}  // namespace

const FpCore& fp_core(const std::string& name) {
  for (const auto& c : kFpCores)
    if (name == c.name) return c;
  throw std::logic_error("no fp core " + name);
}

double bram18_for_bank(int width_bits, long long depth) {
  // RAMB18E2 in simple dual port: (width, depth) aspect ratios, UG573 Table 1-2.
  constexpr std::pair<int, int> kShapes[] = {{1, 16384}, {2, 8192}, {4, 4096}, {9, 2048}, {18, 1024}, {36, 512}};
  if (width_bits <= 0 || depth <= 0) return 0;
  double best = std::numeric_limits<double>::infinity();
  for (auto [w, d] : kShapes) best = std::min(best, std::ceil(double(width_bits) / w) * std::ceil(double(depth) / d));
  return best;
}

bool builds_tiled_unit(const arch::Design& d) {
  return d.matrix_unit.impl == arch::MatrixUnitImpl::hls && d.kernel_gaps().empty() &&
         (arch::block_tokens(d) > 1 || d.matrix_unit.weight_bits == 4);
}

KernelSizes kernel_sizes(const model::Config& c) {
  KernelSizes k;
  k.dim = c.dim;
  k.hidden_dim = c.hidden_dim;
  k.q_dim = c.n_heads * c.head_dim();
  k.kv_dim = c.kv_dim();
  k.vocab = c.vocab_size;
  k.head_dim = c.head_dim();
  k.source = "model " + (c.name.empty() ? std::string("(unnamed)") : c.name);
  return k;
}

KernelSizes kernel_sizes(const arch::Design& d) {
  KernelSizes k;
  const int n = int(std::max<long long>(16, d.buffers.activation_bytes / 4 / 11));
  k.dim = k.hidden_dim = k.q_dim = k.kv_dim = k.vocab = n;
  k.head_dim = 128;
  k.source = fmt::format(
      "no model given: the top's 11 fp32 activation arrays taken as {} words each (buffers.activation_bytes / 4 / 11), "
      "heads of 128",
      n);
  return k;
}

std::vector<Part> unit_resources(const arch::Design& d, const KernelSizes& k, bool dsp58, bool describe) {
  const Counting how{dsp58, describe};
  const int pe = d.matrix_unit.rows, simd = d.matrix_unit.cols, lanes = d.vector_unit.lanes;
  // Each compute unit streams its weights over its share of the weight channels
  // (arch::Design::compute_units), whole channels that together do not exceed the design's
  // (32 over 3 units: 10 each); the caller multiplies the units by compute_units.
  const int channels = std::max(1, d.memory.weight_channels / std::max(1, d.compute_units));
  const int step_words = std::max(1, pe * simd / kernels::kWordBytes);
  const int group_words = kernels::lcm_small(step_words, channels);
  const int scale_words = int(ceil_div(pe, kernels::kFloatsPerWord));
  const int max_cols = std::max({k.hidden_dim, k.dim, k.q_dim});
  const int padded_cols = round_up(max_cols, simd);
  // Rows of the on-chip activation arrays: the prompt call's block for a design the kernels
  // build; a published design (Design::kernel_gaps) is counted by its decode step's row.
  const bool emitted = d.kernel_gaps().empty();
  const int block = emitted ? arch::block_tokens(d) : 1;
  std::vector<Part> units;

  // Matrix unit: the streaming matrix-vector unit of the emitted matmul_region (DATAFLOW,
  // emit_text.cpp:250-258).
  {
    const bool fp16_macs = d.matrix_unit.weight_bits == 16 && d.matrix_unit.act_bits == 16;
    Unit u("matrix unit", how, fp16_macs ? arch::VectorFormat::fp16 : arch::VectorFormat::fp32);
    const double products = double(pe) * simd;
    if (fp16_macs) {
      // fp16 operands (DFX's matrix unit): per row cols multipliers, an adder tree of cols - 1
      // adders and the accumulating adder, each an fp16 core; no requantization.
      Ops mul, add;
      mul.fmul = 1;
      add.fadd = 1;
      u.fp("fp16 products", products, mul, fmt::format("rows x cols = {} x {}", pe, simd),
           "design: matrix_unit weight_bits = act_bits = 16 read as fp16 (not a kernel: the kernels multiply int8)");
      u.fp("fp16 adder tree and accumulator", double(pe) * simd, add,
           fmt::format("rows x ((cols - 1) tree adders + 1 accumulator) = {} x {}", pe, simd),
           "design: matrix_unit weight_bits = act_bits = 16 read as fp16");
    } else {
      u.term("int8 x int8 products", products, Resources{0, 0, 1, 0, 0},
             fmt::format("rows x cols = {} x {}, one DSP each: the code writes one multiply per product and packs none; "
                         "Vitis HLS maps a mul->add fragment within the DSP48E2's 27 x 18 multiplier to one DSP (UG1399 "
                         "'DSP Multi-Operation Matching', UG579); no BIND_OP in the kernels",
                         pe, simd),
             "src/kernels/matrix_unit.hpp:476-477 (matrix_vector_w8a8: PIPELINE II=1 at :466, the pe and k loops inside "
             "it unrolled)");
      const double adder_bits = row_adder_bits(simd, 16);
      u.term("adder tree and accumulator of one row", pe, Resources{kLutPerAdderBit * adder_bits, adder_bits, 0, 0, 0},
             fmt::format("rows = {}; per row {:g} adder bits: a tree over cols = {} products of 16 bits (level l: cols/2^l "
                         "adders of 16 + l bits) and the 32-bit accumulator; 1 LUT and 1 FF per bit [assumption]",
                         pe, adder_bits, simd),
             "src/kernels/matrix_unit.hpp:470-479 (s += products, acc[pe] = acc + s)");
      u.term("accumulator registers", pe, Resources{0, 32, 0, 0, 0}, fmt::format("rows = {}, 32 bits each", pe),
             "src/kernels/matrix_unit.hpp:462-463 (i32 acc[PE], ARRAY_PARTITION complete)");
      // The requantization of store_rows: PIPELINE II=scale_words over the PE outputs of a row
      // fold, so each core serves scale_words of them.
      Ops rq;
      rq.sitofp = 1;
      rq.fmul = 2;
      u.fp("requantize", double(ceil_div(pe, scale_words)), rq,
           fmt::format("ceil(rows / scale_words) = ceil({} / {}) cores (PIPELINE II=scale_words shares each over "
                       "scale_words outputs) x (float(acc), x s_w, x s_x)",
                       pe, scale_words),
           "src/codegen/templates/overlay.hpp:46-56 (store_rows), src/kernels/matrix_unit.hpp:494-496 (requantize_w8a8)");
    }
    u.term("scale word registers", scale_words, Resources{0, 512, 0, 0, 0},
           fmt::format("scale_words = ceil(rows / 16) = {} FloatWords of 512 bits", scale_words),
           "src/codegen/templates/overlay.hpp:49-51 (sw[], ARRAY_PARTITION complete)");
    u.fifo("weight channel FIFOs", channels, 512, 64,
           fmt::format("src/codegen/emit_text.cpp:253 (Fifo<PackedWord, 64> channel[{}])", channels));
    u.fifo("weight step FIFO", 1, step_words * 512, 4,
           fmt::format("src/codegen/emit_text.cpp:254 (Fifo<WeightStep<{}>, 4>: rows x cols / 64 = {} words)", step_words,
                       step_words));
    u.fifo("accumulator FIFO", 1, pe * 32, 4, "src/codegen/emit_text.cpp:255 (Fifo<AccWord<rows>, 4>)");
    u.term("gather buffer", group_words, Resources{0, 512, 0, 0, 0},
           fmt::format("group_words = lcm(rows x cols / 64, channels) = lcm({}, {}) = {} words of 512 bits in registers",
                       step_words, channels, group_words),
           "src/kernels/matrix_unit.hpp:434-435 (PackedWord buf[group_words], ARRAY_PARTITION complete)");
    u.memory("activation codes", simd, 8, ceil_div(static_cast<long long>(block) * padded_cols, simd),
             fmt::format("cols = {} banks (cyclic), {} token(s) x padded_cols = {} codes ({})", simd, block, padded_cols,
                         k.source),
             "src/codegen/emit_text.cpp top_source (i8 codes[max_tokens * padded_cols], ARRAY_PARTITION cyclic "
             "factor=MV::simd)");
    u.term("activation code scales", block, Resources{0, 32, 0, 0, 0},
           fmt::format("{} token(s), one fp32 scale each [assumption: registers]", block),
           "src/codegen/emit_text.cpp top_source (float code_scale[max_tokens])");
    units.push_back(u.done());
  }

  // The tiled matrix unit (kernels::matmul_w8a8 / matmul_w4a8 through overlay::matmul_block):
  // the prompt call's blocks of more than one token, and every int4 matmul. Vitis builds one
  // instance per called function: a w8a8 tile when blocks hold more than one token, a w4a8
  // tile when the weights are int4, each with its own MAC array, double-buffered weight and
  // activation tiles and accumulators of block_tokens x tile_rows.
  if (builds_tiled_unit(d)) {
    Unit u("tiled matrix unit", how);
    const int tr = d.tiling.tile_rows, tc = d.tiling.tile_cols;
    const double products = double(pe) * simd;
    const std::string shape = fmt::format("tile {} x {}, {} token(s) per block", tr, tc, block);
    auto tile = [&](const std::string& kind, const std::string& src, bool int4) {
      u.term(kind + ": int8 x int8 products", products, Resources{0, 0, 1, 0, 0},
             fmt::format("rows x cols = {} x {}, one DSP each as the streaming unit's{}", pe, simd,
                         int4 ? " (unpacked int4 codes) [assumption: the 4-bit operand is not packed two to a DSP]" : ""),
             src);
      const int chunk = int4 ? std::min(simd, 32) : simd, chunks = std::max(1, simd / chunk);
      const double part_bits = row_adder_bits(chunk, 16);
      u.term(kind + ": adder tree and accumulator of one row part", double(pe) * chunks,
             Resources{kLutPerAdderBit * part_bits, part_bits, 0, 0, 0},
             fmt::format("rows x parts = {} x {}; per part {:g} adder bits (a tree over {} products and the 32-bit "
                         "accumulator); 1 LUT and 1 FF per bit [assumption]",
                         pe, chunks, part_bits, chunk),
             src);
      u.memory(kind + ": weight tile buffers", 2LL * pe * simd, 8, ceil_div(tr, pe) * ceil_div(tc, simd),
               fmt::format("2 buffers x rows x cols banks (wbuf dims 2, 3 cyclic), {}", shape), src);
      u.memory(kind + ": activation tile buffers", 2LL * simd, 8, ceil_div(static_cast<long long>(block) * tc, simd),
               fmt::format("2 buffers x cols banks (xbuf dim 3 cyclic) of {} token(s) x tile_cols", block), src);
      if (int4) {
        u.memory(kind + ": group sums and accumulators", pe, 64, ceil_div(static_cast<long long>(block) * tr, pe),
                 fmt::format("rows banks (dim 2 cyclic) of {} token(s) x tile_rows words: fp32 sum + int32 accumulator",
                             block),
                 src);
        Ops dq;
        dq.sitofp = 1;
        dq.fmul = 1;
        dq.fadd = 1;
        u.fp(kind + ": group dequantization", double(pe) * chunks, dq,
             fmt::format("rows x parts = {} x {} x (float(acc), x fp16 scale, + sum)", pe, chunks), src);
      } else {
        u.memory(kind + ": accumulators", pe, 32, ceil_div(static_cast<long long>(block) * tr, pe),
                 fmt::format("rows banks (acc dim 2 cyclic) of {} token(s) x tile_rows int32 words", block), src);
      }
      Ops st;  // the store stage, one output per cycle: (float(acc) x s_w) x s_x (int4: sum x s_x), + bias
      st.fmul = int4 ? 1 : 2;
      st.sitofp = int4 ? 0 : 1;
      st.fadd = 1;
      u.fp(kind + ": store", 1, st, "one output per cycle (store_tile: requantize, + bias)", src);
    };
    if (block > 1)
      tile("w8a8 tile",
           "src/kernels/matrix_unit.hpp matmul_w8a8 / compute_tile_i8 (PIPELINE II=1, pe and k unrolled), called by "
           "src/codegen/templates/overlay.hpp matmul_block",
           false);
    if (d.matrix_unit.weight_bits == 4)
      tile("w4a8 tile",
           "src/kernels/matrix_unit.hpp matmul_w4a8 / compute_tile_i4 (PIPELINE II=1, pe and k unrolled), called by "
           "src/codegen/templates/overlay.hpp matmul_block",
           true);
    units.push_back(u.done());
  }

  const arch::VectorFormat vformat = d.vector_unit.format;
  const int vbits = vformat == arch::VectorFormat::fp16 ? 16 : 32;
  const long long rom_depth = 1LL << d.vector_unit.exp_table_bits;
  // A shared vector unit (design.vector_unit.shared, not the kernels): one datapath per
  // lane that every vector operation runs on in turn.
  if (d.vector_unit.shared) {
    Unit u("vector unit", how, vformat);
    const std::string L = fmt::format("lanes = {}", lanes);
    const char* src = "design: vector_unit.shared (not a kernel: the kernels give each operation its own datapath)";
    Ops lane;  // multiply, add, compare (max, clamp), to integer (codes, the exp table's index)
    lane.fmul = 1;
    lane.fadd = 1;
    lane.fcmp = 1;
    lane.fptosi = 1;
    u.fp("lane datapath", lanes, lane, L + " x (multiply, add, compare, to integer)", src);
    Ops scalar;  // 1/n, 1/sqrt for norms, 1/l for softmax, 1/scale for quantize, n to float
    scalar.fdiv = 1;
    scalar.fsqrt = 1;
    scalar.sitofp = 1;
    u.fp("scalar part", 1, scalar, "one divider, one square root, one int -> float for the whole unit", src);
    u.memory("exp tables", lanes, vbits, rom_depth, fmt::format("one per lane, 2^{} entries", d.vector_unit.exp_table_bits),
             src);
    units.push_back(u.done());
  }
  // Vector unit, attention's lane work and the KV store: their functions are inlined into
  // the emitted top, whose ALLOCATION pragmas limit the binary32 multipliers, adders and
  // subtracters to kernels::SharedCores (the most any one of their loops takes at II=1),
  // shared by every loop below (each checked here to fit). The operators that stay in
  // fabric (divide, square root, compares, conversions) are not limited: one core per
  // operation of each loop.
  if (!d.vector_unit.shared) {
    const std::vector<LaneLoop> loops = shared_lane_loops(d);
    Unit u("vector unit", how, vformat);
    const int fmul_pool = kernels::shared_fmul_cores(lanes, d.kv_bits);
    const int adder_pool = kernels::shared_fadd_cores(lanes, d.kv_bits) + kernels::shared_fsub_cores(lanes);
    // For core j of a kind, the loops that use more than j cores of that kind.
    std::vector<double> fmul_users(std::size_t(fmul_pool), 0), adder_users(std::size_t(adder_pool), 0);
    for (const auto& l : loops) {
      if (l.fmul() > fmul_pool || l.fadd() > adder_pool)
        throw std::logic_error(fmt::format("{}: {} fmul and {} fadd/fsub, more than the top's ALLOCATION gives "
                                           "({}, {})",
                                           l.what, l.fmul(), l.fadd(), fmul_pool, adder_pool));
      for (int j = 0; j < l.fmul(); ++j) fmul_users[std::size_t(j)] += l.sites;
      for (int j = 0; j < l.fadd(); ++j) adder_users[std::size_t(j)] += l.sites;
      Ops fabric = l.ops, fabric_once = l.once;  // what is not shared: one core per operation of each loop
      fabric.fmul = fabric.fadd = fabric_once.fmul = fabric_once.fadd = 0;
      u.fp(l.what, double(l.sites) * l.width, fabric,
           l.width > 1 ? fmt::format("{} call site(s) x {} elements per cycle", l.sites, l.width)
                       : fmt::format("{} call site(s), one core of each kind", l.sites),
           l.source);
      u.fp(l.what + ", once per cycle", l.sites, fabric_once, fmt::format("{} call site(s)", l.sites), l.source);
    }
    Ops mul, add;
    mul.fmul = 1;
    add.fadd = 1;
    const int att = kernels::attention_lanes(lanes, d.kv_bits);
    const char* alloc = "the emitted top's ALLOCATION pragmas (src/codegen/emit_text.cpp: limit=CORES::fmul, "
                        "CORES::fadd, CORES::fsub; kernels::SharedCores, src/kernels/attention.hpp)";
    u.fp("shared multipliers", fmul_pool, mul,
         fmt::format("max(lanes = {} x kernels::kLaneFmul, attention values {} x {} + kLaneFmul)", lanes, att,
                     d.kv_bits == 32 ? 1 : 2),
         alloc);
    u.fp("shared adders", adder_pool, add,
         fmt::format("max(lanes = {} x kernels::kLaneFadd, attention values {} + kLaneFadd) + lanes x kLaneFsub", lanes,
                     att),
         alloc);
    // Each shared core takes its two 32-bit operands through a multiplexer over the loops
    // that use it: one LUT6 selects one bit among 4 inputs, so each input beyond the first
    // costs a third of a LUT per operand bit [assumption: Vitis's sharing muxes, not measured].
    double mux_inputs = 0;
    for (double n : fmul_users) mux_inputs += std::max(0.0, n - 1);
    for (double n : adder_users) mux_inputs += std::max(0.0, n - 1);
    u.term("operand multiplexers of the shared cores", mux_inputs, Resources{64.0 / 3, 0, 0, 0, 0},
           "inputs beyond each core's first (the loops below sharing it), 64 operand bits, 1/3 LUT per bit per input "
           "[assumption]",
           alloc);
    u.memory("exp ROMs", lanes, vbits, rom_depth, fmt::format("one per lane, 2^{} entries", d.vector_unit.exp_table_bits),
             "kernels::swiglu (Exp2Roms<bits, lanes>, ARRAY_PARTITION complete dim=1)");
    units.push_back(u.done());
  }

  // Attention and the KV store: their block memories (their lane work is counted above,
  // or on the shared vector unit).
  {
    Unit u("attention", how, vformat);
    const int att = kernels::attention_lanes(lanes, d.kv_bits);
    const int dl = round_up(std::max(2, k.head_dim), att);
    u.memory("K and V blocks", 2, att * d.kv_bits, ceil_div(static_cast<long long>(arch::kKvBlock) * dl, att),
             fmt::format("2 arrays (k, v), each reshaped into words of attention_lanes = {} elements of {} bits; "
                         "kKvBlock x round_up(head_dim = {}, {}) = {} x {} elements",
                         att, d.kv_bits, k.head_dim, att, arch::kKvBlock, dl),
             "kernels::attention (kblk, vblk [B][DL] as stored, ARRAY_RESHAPE dim=2 cyclic factor=A)");
    u.memory("query accumulator", lanes, vbits, ceil_div(dl, lanes), "lanes banks of DL / lanes floats",
             "kernels::attention (acc[Q][DL], ARRAY_PARTITION dim=2 cyclic factor=L)");
    u.memory("scores and scales", d.kv_bits == 8 ? 3 : 1, 32, arch::kKvBlock, "s[B] (+ kscale[B], vscale[B] for int8)",
             "kernels::attention (not partitioned)");
    units.push_back(u.done());
  }

  // On-chip activations: the top's static arrays, each cyclically partitioned; the block
  // arrays hold `block` rows of whole partitions, in UltraRAM when buffers.activations_in_uram.
  {
    Unit u("on-chip activations", how);
    const int partition = arch::activation_partition(d);
    const int max_width =
        round_up(std::max({k.vocab, k.hidden_dim, k.dim, k.q_dim, k.kv_dim}), std::max(16, lanes));
    struct Array {
      const char* name;
      int copies;
      int width;
      bool block_rows;
    };
    const Array arrays[] = {{"x, xb, xb2 [dim]", 3, k.dim, true},          {"q, att [q_dim]", 2, k.q_dim, true},
                            {"k, v [kv_dim]", 2, k.kv_dim, true},          {"hb, hb2 [hidden_dim]", 2, k.hidden_dim, true},
                            {"logits [vocab]", 1, k.vocab, false},         {"param [max_width]", 1, max_width, false}};
    const char* src = "src/codegen/emit_text.cpp top_source (static float arrays, ARRAY_PARTITION cyclic "
                      "factor=CFG::partition, BIND_STORAGE impl=uram); arch::activation_partition, activation_row";
    for (const auto& a : arrays) {
      const long long banks = static_cast<long long>(a.copies) * partition;
      const int rows = a.block_rows ? block : 1;
      const long long depth = a.block_rows && block > 1 ? arch::activation_bank_depth(d, a.width)
                                                          : ceil_div(a.width, partition);
      const std::string formula =
          fmt::format("{} array(s) x partition = max(rows, lanes, 16) = {} banks; {} row(s) of {} words ({})", a.copies,
                      partition, rows, a.width, k.source);
      if (a.block_rows && d.buffers.activations_in_uram) {
        const long long per_bank = ceil_div(depth, kUramWords);
        u.term(a.name, double(banks), Resources{0, 0, 0, 0, double(per_bank)},
               fmt::format("{} banks x {} words x 32 bits: {} URAM (4K x 72, UG573) per bank; {}", banks, depth,
                           per_bank, formula),
               src);
      } else {
        u.memory(a.name, banks, 32, depth, formula, src);
      }
    }
    units.push_back(u.done());
  }

  // Memory ports: the m_axi bundles of the top's INTERFACE pragmas (emit_text.cpp:220-224,
  // 266-273), each an adapter with its read (and, where the top writes, write) data buffer of
  // outstanding x burst beats (UG1399 'Controlling AXI4 Burst Behavior', 'M_AXI Resources').
  {
    Unit u("memory ports", how);
    const int burst = arch::burst_beats(d);
    const int bundles = channels + 7;
    u.term("m_axi adapters", bundles, Resources{kAxiAdapterLut, kAxiAdapterFf, 0, 0, 0},
           fmt::format("{} bundles: {} weight (gmem_w00..) + host, scales, params, kv_k, kv_v, kv_k_scale, kv_v_scale "
                       "[adapter logic: assumption]",
                       bundles, channels),
           "src/codegen/emit_text.cpp:220-224 (one bundle per weight channel), :268-275");
    auto buffer = [&](const std::string& what, int copies, int width, int outstanding, int beats, const std::string& src) {
      Resources each;
      each.bram36 = bram18_for_bank(width, (long long)outstanding * beats) / 2;
      u.term(what, copies, each,
             fmt::format("{} x {} bits x ({} outstanding x {} beats) = {:g} BRAM18 each (UG573)", copies, width, outstanding,
                         beats, bram18_for_bank(width, (long long)outstanding * beats)),
             src);
    };
    buffer("weight read buffers", channels, 512, arch::kWeightReadsOutstanding, burst,
           "src/codegen/emit_text.cpp:222-223 (max_read_burst_length=burst_bytes/64, num_read_outstanding=16)");
    buffer("scales, params read buffers", 2, 512, kAxiDefaultOutstanding, burst,
           "src/codegen/emit_text.cpp:270-271 (FloatWord: 512 bits, max_read_burst_length=burst_bytes/64)");
    buffer("KV read and write buffers", 4, 512, kAxiDefaultOutstanding, kAxiDefaultBurst,
           "src/codegen/emit_text.cpp:272-273 (max_widen_bitwidth=512; read and written, UG1399 defaults 16 x 16)");
    buffer("KV scale read and write buffers", 4, 32, kAxiDefaultOutstanding, kAxiDefaultBurst,
           "src/codegen/emit_text.cpp:274-275 (float: 32 bits; UG1399 defaults)");
    buffer("host read and write buffers", 2, 32, kAxiDefaultOutstanding, kAxiDefaultBurst,
           "src/codegen/emit_text.cpp:268-269 (program in, result out: 32 bits; UG1399 defaults)");
    units.push_back(u.done());
  }

  // Controller: the top's instruction loop.
  {
    Unit u("controller", how);
    u.term("instruction words", arch::kInstructionWords, Resources{0, 32, 0, 0, 0},
           fmt::format("{} x 32-bit registers; the program is read from gmem_host, no instruction memory on chip",
                       arch::kInstructionWords),
           "src/codegen/emit_text.cpp:297-302 (int w[kWords], ARRAY_PARTITION complete)");
    u.term("instruction loop, opcode switch, s_axilite", 1, Resources{kControlLut, kControlFf, 0, 0, 0},
           "one [assumption, not measured]", "src/codegen/emit_text.cpp:276,294-358");
    units.push_back(u.done());
  }
  return units;
}

}  // namespace hw
