#pragma once
// The fp32 engine running a quantization plan: integer weights with int8 activations go
// through quant::linear_w8a8 / linear_w4a8 (the bit-exact integer reference of the
// kernels), weight-only layers multiply dequantized weights by fp16-rounded inputs, and
// the int8 KV cache is applied by quantize-dequantize after each store. Each runs batched
// (forward_block, so perplexity, calibration, Hessians and evaluation) with the per-token
// pass's bits: integer products by quant::linear_w8a8_rows / linear_w4a8_rows, float
// products by engine::matvec_rows, attention with attention_head's operations in its order
// (or, with FloatProducts::gemm, float products and attention as the fp32 reference's
// batched pass runs them).
#include <memory>
#include <vector>

#include "engine/transformer.hpp"
#include "quant/quant.hpp"

namespace calib {

// How the batched pass multiplies the layers that stay floating point (f32 weights, or
// dequantized weights with fp16 or fake-quantized inputs) and runs attention.
enum class FloatProducts {
  token_bits,  // engine::matvec_rows and attention_head's order: forward()'s bits
  gemm,        // as the fp32 reference's batched pass (OpenBLAS GEMMs): forward() within fp32
               // reordering, and the fp32 reference's own bits for every f32 layer. For the
               // mixed search's hundreds of passes (two to three times faster per layer).
};

// Dequantized weights of layers that multiply in floating point, by Plan::layers index
// (null: not given).
using DequantizedWeights = std::vector<std::shared_ptr<const std::vector<float>>>;

class SimulatedTransformer : public engine::Transformer {
 public:
  // `base` supplies the norms, embeddings and every layer whose plan weight is f32;
  // `linears` holds the quantized layers in Plan::layers order (entries of f32 layers are
  // ignored and may be empty). All three must outlive the transformer. `dequantized`, where
  // given for a float-path layer, is linears[i].dequantized() (and linears[i] is then not
  // read): the mixed search's plans share them.
  SimulatedTransformer(const model::Model& base, const quant::Plan& plan, const std::vector<quant::QuantLinear>& linears,
                       FloatProducts products = FloatProducts::token_bits, DequantizedWeights dequantized = {});
  bool supports_block() const override { return true; }
  bool block_keeps_token_bits() const override { return products_ == FloatProducts::token_bits; }

 protected:
  void linear(const engine::LinearCall& call) override;
  void linear_rows(const engine::LinearRows& call) override;
  void on_kv_stored(int layer, int pos, float* k, float* v) override;

 private:
  const quant::Plan& plan_;
  const std::vector<quant::QuantLinear>& linears_;
  FloatProducts products_;
  DequantizedWeights float_weights_;  // for float-path layers
  std::vector<float> x_round_, s_x_;
  std::vector<std::int8_t> qx_;
};

// Runs a plan as SimulatedTransformer and sums x x^T (quant::Hessians) at the linear
// input sites of block `layer` (-1: the classifier's input; kAllLayers: every site).
class HessianTransformer : public SimulatedTransformer {
 public:
  static constexpr int kAllLayers = -2;
  HessianTransformer(const model::Model& base, const quant::Plan& plan, const std::vector<quant::QuantLinear>& linears,
                     int layer);
  // The sums, symmetric, with tokens counted.
  quant::Hessians hessians() const;

 protected:
  void linear(const engine::LinearCall& call) override;
  void linear_rows(const engine::LinearRows& call) override;

 private:
  void add(int layer, model::Linear which, const float* x, int cols);
  int layer_;
  quant::Hessians h_;  // upper triangles while running
};

// Records the per-channel max |x| at each linear input site (quant::ActStats).
class StatsTransformer : public engine::Transformer {
 public:
  explicit StatsTransformer(const model::Model& m);
  const quant::ActStats& stats() const { return stats_; }
  void count_token() { ++stats_.tokens; }
  bool supports_block() const override { return true; }

 protected:
  void linear(const engine::LinearCall& call) override;
  void linear_rows(const engine::LinearRows& call) override;

 private:
  void record(int layer, model::Linear which, const float* x, int cols);
  quant::ActStats stats_;
};

}  // namespace calib
