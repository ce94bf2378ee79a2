#pragma once
// Quantization-aware training (docs/training.md, "Quantization-aware training"): the
// forward pass runs on the weights as a quantization plan stores them (quantized and
// dequantized, layer by layer) and on linear-layer inputs rounded as the plan's activation
// format rounds them; the gradients reach the fp32 master weights straight through both
// roundings. Exporting the master weights with quant::quantize_model and the same plan
// (or export_quantized, with learned scales) gives exactly the weights the forward pass
// trained on.
#include <cstdint>
#include <functional>
#include <vector>

#include "model/config.hpp"
#include "quant/quant.hpp"
#include "train/params.hpp"

namespace train {

// Learned step sizes (LSQ, Esser et al., ICLR 2020): one trainable scale per int4 group of
// every int4 layer of a plan, held as log(scale) in fp32. The forward pass quantizes a
// group with s = fp16(exp(log_scale)), the value the file stores, and the codes
// quant::quantize_value(w, s, 7); d(q s)/ds is LSQ's: q - w/s where the code is inside
// -7..7, q where it saturates. A group whose scale is 0 (all weights 0) stays 0.
struct GroupScales {
  std::vector<std::vector<float>> log_scale;  // per Plan::layers entry, [rows][groups]; empty unless int4

  // quant::quantize_int4's scales (fp16 of max |w| / 7) of master's int4 layers.
  static GroupScales round_to_nearest(const Params<float>& master, const model::Config& c, const quant::Plan& plan);
  // The int4 scales of `linears` (Plan::layers order), e.g. GPTQ's searched ones.
  static GroupScales of(const quant::Plan& plan, const std::vector<quant::QuantLinear>& linears);
  // The fp16 bits the forward pass and the exported file use for layer i of the plan.
  std::vector<std::uint16_t> fp16_bits(std::size_t i) const;
};

// Adam (no weight decay, no clipping) on log scales.
class ScaleAdam {
 public:
  ScaleAdam(const GroupScales& s, double beta1, double beta2);
  void step(GroupScales& s, const GroupScales& grad, double lr);

 private:
  GroupScales m_, v_;
  double beta1_, beta2_;
  int t_ = 0;
};

// out = master with every linear layer of the plan replaced by its quantize-dequantize
// round trip (quant::quantize_linear(...).dequantized(), or with `scales`' int4 scales
// when given); norms and the embedding copied. out.classifier is always filled (from the
// embedding when master shares it), so that the classifier's gradient stays apart from
// the embedding's.
void fake_quantize_weights(const Params<float>& master, const model::Config& c, const quant::Plan& plan,
                           Params<float>& out, const GroupScales* scales = nullptr);

// LSQ's backward step for the int4 layers under `scales`: from fake_grad (the gradient of
// fake_quantize_weights' output) the gradient of every log scale, into scale_grad; and
// fake_grad's entries zeroed where the code saturates (no straight-through gradient for
// clipped weights).
void scale_gradient(const Params<float>& master, const model::Config& c, const quant::Plan& plan,
                    const GroupScales& scales, Params<float>& fake_grad, GroupScales& scale_grad);

// quant::quantize_model of m, with the int4 layers' codes and scales from `scales`: the
// weights fake_quantize_weights(..., &scales) trains on.
quant::QuantModel export_quantized(const model::Model& m, const quant::Plan& plan, const GroupScales& scales);

// The gradient of fake-quantized weights (shapes of fake_quantize_weights' output) as a
// gradient of master's shapes: a shared classifier's gradient added to the embedding's.
void fold_gradient(const Params<float>& fake_grad, Params<float>& master_grad);

// In-place rounding of linear-layer input rows [rows][cols] as activation format f does it
// in the quantized reference (calib::SimulatedTransformer): int8 dynamic per row
// (quant::quantize_activation_dynamic, then code * scale), fp16; empty for f32.
// Throws std::invalid_argument for int8_static (its scales come from calibration).
std::function<void(float* x, int rows, int cols)> activation_rounding(quant::ActFormat f);

}  // namespace train
