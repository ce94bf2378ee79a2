#pragma once
// arch::Program: the per-layer instruction list an overlay accelerator executes for one
// step of a model (a decode step of one token, or a prefill block of several tokens).
// The accelerator backend (engine/accel_*) executes it through the kernels; the cycle
// simulator (sim/) executes the same list cycle by cycle. It is plain data: no kernel,
// engine or simulator type appears here.
//
// One step of a Llama block, in execution order (the order of llama2.c's run.c):
//   norm(x -> xb) · quantize(xb) · matmul wq, wk, wv (xb -> q, k, v) · rope(q, k) ·
//   kv_store(k, v) · attention(q, KV cache -> att) · quantize(att) · matmul wo (att -> xb2) ·
//   residual_add(x += xb2) · norm(x -> xb) · quantize(xb) · matmul w1, w3 (xb -> hb, hb2) ·
//   swiglu(hb = silu(hb) * hb2) · quantize(hb) · matmul w2 (hb -> xb2) · residual_add(x += xb2)
// Qwen2's q/k/v biases are an operand of those three matmuls (added in fp32 after the
// requantization, in the store stage); Qwen3's per-head RMSNorm of q and k is a head_norm
// between the matmuls and rope; Qwen3's head width need not be dim / heads (q, att are
// heads x head_dim wide).
// framed by embed(token -> x) before the first block and norm(x) · quantize · matmul cls
// (x -> logits) after the last. GPT-2/BERT-style models (LayerNorm, GELU, no gate) have
// the same shape with norm = layernorm, no rope, and w1 · gelu · w2 as the feed-forward.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "arch/isa.hpp"
#include "arch/design.hpp"
#include "model/config.hpp"
#include "model/model.hpp"

namespace arch {

// Which step of inference a program runs.
enum class Stage { prefill, decode };

// The operations and buffers of the instruction set (src/arch/isa.hpp: what each does, and
// the encoding the emitted kernel decodes), numbered as encoded.
#define FPGALLM_ISA_NAME(name) name,
enum class Op { FPGALLM_ISA_OPS(FPGALLM_ISA_NAME) };
enum class Buf { FPGALLM_ISA_BUFS(FPGALLM_ISA_NAME) };
#undef FPGALLM_ISA_NAME

// The memory channel group an instruction's off-chip traffic uses (design.memory.*_channels).
enum class MemGroup { none, weights, kv, activations, host };

struct Instruction {
  Op op = Op::norm;
  int layer = -1;                         // block index; -1 before the first / after the last block
  model::Linear linear = model::Linear::wq;  // matmul: which weight; meaningless otherwise
  std::string name;                       // "blk.3.wq", "blk.3.attn_norm", "output_norm", "cls", ...
  int tokens = 1;                         // activation vectors processed together
  int pos = 0;                            // position of the first of those tokens
  // matmul: output x input features of W. Vector ops: rows = vectors per token (heads for
  // rope), cols = elements per vector; norm/quantize/residual/swiglu have rows = 1.
  int rows = 0;
  int cols = 0;
  // attention (and rope, kv_store): head geometry and the keys each token attends to.
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int context = 0;                        // keys attended by the last token of the step (pos + tokens)
  Buf in = Buf::none, in2 = Buf::none, out = Buf::none;
  MemGroup mem = MemGroup::none;          // channel group of the off-chip operand
  // matmul: weight precision and the tiling the matrix unit walks.
  int weight_bits = 0;                    // 8, or 4 (unpacked to int8 at the MAC)
  int group = 0;                          // int4: columns per scale group; 0 = one scale per row
  bool bias = false;                      // matmul: y += b[rows] (fp32) after requantization
  int row_tiles = 0;                      // ceil(rows / tiling.tile_rows)
  int col_tiles = 0;                      // ceil(cols / tiling.tile_cols)
  // Off-chip bytes moved by this instruction (weights incl. scales, KV reads and writes,
  // host transfers). Activations stay on chip during a step.
  std::int64_t weight_bytes = 0;
  std::int64_t kv_read_bytes = 0;
  std::int64_t kv_write_bytes = 0;
  std::int64_t host_bytes = 0;
  // Executed inside the pipeline of the next instruction (norm -> matmul input stage when
  // design.fuse_norm_matmul; quantize is always fused into its producer's store stage).
  bool fused = false;
  // quantize: the consuming matmul's activations have a calibrated (static) scale, so the
  // codes are taken without the max_abs pass of a dynamic scale.
  bool static_scale = false;

  // Multiply-accumulates on the matrix unit (matmul), or elements through the vector unit.
  std::int64_t macs() const;
  std::int64_t vector_elements() const;
  bool operator==(const Instruction&) const = default;
};

struct Program {
  Stage stage = Stage::decode;
  int pos = 0;        // first position of the step
  int tokens = 1;     // tokens in the step (1 for decode)
  std::vector<Instruction> instructions;

  std::int64_t total_weight_bytes() const;
  std::int64_t total_macs() const;
};

// Weight precision of one linear layer (the quantization plan's choice).
struct LinearPrecision {
  int weight_bits = 8;
  int group = 0;             // int4: columns per scale; 0 = per output row
  bool static_act = false;   // int8 activations at a calibrated scale (no max_abs pass)
};
using PrecisionFn = std::function<LinearPrecision(int layer, model::Linear which)>;

// What of a Design the instruction list reads: designs equal in these get the same programs.
struct ProgramFields {
  int weight_bits = 0;  // matrix_unit.weight_bits
  int kv_bits = 0;
  int tile_rows = 0, tile_cols = 0, prefill_block = 0;
  bool fuse_norm_matmul = false, fuse_attention = false;
  bool operator==(const ProgramFields&) const = default;
};
ProgramFields program_fields(const Design& design);

// The instruction list for `tokens` tokens starting at position `pos`. Decode requires
// tokens == 1; prefill takes up to design.tiling.prefill_block tokens (split longer
// prompts into several programs). Without `precision`, every linear layer uses
// design.matrix_unit.weight_bits (int4 with group 32). Throws std::invalid_argument on
// positions past the model's context or a config the overlay cannot run.
Program build_program(const model::Config& config, const Design& design, Stage stage, int pos, int tokens,
                      const PrecisionFn& precision = {});

const char* to_string(Stage s);
const char* to_string(Op op);
const char* to_string(Buf b);
const char* to_string(MemGroup g);

void to_json(nlohmann::json& j, const Instruction& i);
void to_json(nlohmann::json& j, const Program& p);

}  // namespace arch
