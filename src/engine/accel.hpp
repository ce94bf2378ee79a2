#pragma once
// The accelerator backend: runs a quantized model through the HLS kernels of src/kernels
// (C simulation), executing the arch::Program instruction list of every step: embedding,
// every block and the classifier on the accelerator's units; tokenization and sampling
// stay on the host. Integer results do not depend on the design's unit or tile shapes;
// vector-unit sums depend on the lane count within docs/accelerator.md's bound.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "arch/design.hpp"
#include "arch/program.hpp"
#include "engine/shard.hpp"
#include "engine/transformer.hpp"
#include "quant/quant.hpp"

namespace engine {

// Why `d` cannot run in this build's C simulation (a unit or tile shape, lane count or exp
// table size that is not among the instantiated kernels; see docs/accelerator.md); empty
// when it can. arch::Design::problems() covers what no kernel instance can implement.
std::vector<std::string> accel_design_problems(const arch::Design& d);

// Why `qm` cannot run on `d`: the design's problems, layers whose precision the matrix unit
// lacks (fp16/fp32 weights, fp16 activations, int4 on an 8-bit design), shapes beyond the
// kernels' limits. Empty when it runs.
std::vector<std::string> accel_problems(const quant::QuantModel& qm, const arch::Design& d);

// The KV cache element width the backend uses for `d` (design kv_bits: 8, 16 or 32).
int accel_kv_bits(const arch::Design& d);

class AccelTransformer : public Transformer {
 public:
  // `base` is the fp32 model the quantized one was made from (same config); it and `qm`
  // must outlive the transformer. Throws fpgallm::InputError("design", problem) when
  // accel_problems() is not empty.
  AccelTransformer(const model::Model& base, const quant::QuantModel& qm, const arch::Design& design);
  // One card of a multi-card design (engine/shard.hpp): `card_qm` is shard_model() of the
  // whole quantized model for `share`, `link` the card's network (outlives the
  // transformer). Every card returns the same logits as the single-card transformer: bit
  // for bit with int8 weights; int4 partial sums are fp32 and added in card order.
  AccelTransformer(const model::Model& base, const quant::QuantModel& card_qm, const arch::Design& design,
                   const CardShare& share, CardLink* link);
  ~AccelTransformer() override;

  const CardShare& share() const;
  // Bytes of the card's KV cache (elements and scales) and tokens run since construction.
  std::uint64_t kv_bytes() const;
  std::uint64_t tokens_run() const;

  // One decode step; logits [vocab] valid until the next call.
  const float* forward(int token, int pos) override;
  // Runs tokens[0..n) at positions pos..pos+n-1 as prefill programs of arch::block_tokens
  // (design.tiling.prefill_block, at most arch::kMaxBlockTokens) tokens, as the emitted top's
  // prompt call does; returns the logits of the last token. Bit-identical to n forward() calls.
  const float* prefill(const std::vector<int>& tokens, int pos);

  // The program of the last step executed.
  const arch::Program& last_program() const;
  // The KV cache of `layer` (a layer the card holds) at positions [0, n) as stored: keys and
  // values [n][kv_dim] of kv_bits / 8 bytes each, and for int8 the scales [n][kv_heads].
  struct KvRows {
    std::vector<std::uint8_t> k, v;
    std::vector<float> k_scale, v_scale;
  };
  KvRows kv_rows(int layer, int n) const;
  // Called with the fp32 input of each matrix-unit operation before it is quantized
  // (instruction, token index, vector): for per-layer error analysis.
  using Tap = std::function<void(const arch::Instruction&, int token, const float* x, int n)>;
  void set_tap(Tap tap);

 private:
  struct State;
  std::unique_ptr<State> s_;
  const float* run(const std::vector<int>& tokens, int pos, arch::Stage stage);
};

}  // namespace engine
