#pragma once
// Quantization-aware training (docs/training.md, "Quantization-aware training"): the
// forward pass runs on the weights as a quantization plan stores them (quantized and
// dequantized, layer by layer) and on linear-layer inputs rounded as the plan's activation
// format rounds them; the gradients reach the fp32 master weights straight through both
// roundings. Exporting the master weights with quant::quantize_model and the same plan
// gives exactly the weights the forward pass trained on.
#include <functional>

#include "model/config.hpp"
#include "quant/quant.hpp"
#include "train/params.hpp"

namespace train {

// out = master with every linear layer of the plan replaced by its quantize-dequantize
// round trip (quant::quantize_linear(...).dequantized()); norms and the embedding copied.
// out.classifier is always filled (from the embedding when master shares it), so that
// the classifier's gradient stays apart from the embedding's.
void fake_quantize_weights(const Params<float>& master, const model::Config& c, const quant::Plan& plan,
                           Params<float>& out);

// The gradient of fake-quantized weights (shapes of fake_quantize_weights' output) as a
// gradient of master's shapes: a shared classifier's gradient added to the embedding's.
void fold_gradient(const Params<float>& fake_grad, Params<float>& master_grad);

// In-place rounding of linear-layer input rows [rows][cols] as activation format f does it
// in the quantized reference (calib::SimulatedTransformer): int8 dynamic per row
// (quant::quantize_activation_dynamic, then code * scale), fp16; empty for f32.
// Throws std::invalid_argument for int8_static (its scales come from calibration).
std::function<void(float* x, int rows, int cols)> activation_rounding(quant::ActFormat f);

}  // namespace train
