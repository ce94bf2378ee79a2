#pragma once
// The Python QuantModel (fpgallm._core.QuantModel) and what the run/eval bindings need of it.
#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/transformer.hpp"
#include "model/model.hpp"
#include "quant/quant.hpp"

namespace fpgallm_python {

struct QuantModelView {
  quant::QuantModel qm;
  model::Model base;       // qm's weights dequantized: what the simulated-quantization engine reads
  nlohmann::json report;   // quantize()'s measurements; null for a loaded file
  std::optional<model::Tokenizer> tokenizer;  // quantize()'s vocabulary, written by save() as the CLI does
};
using QuantModelHandle = std::shared_ptr<QuantModelView>;

// The engine `fpgallm run/eval` runs for m: the fp32 reference when quant is None, else the
// simulated quantization of the QuantModel `quant` (shape checked against m; m's own
// weights are then unused, as with --quant). The result references both.
std::unique_ptr<engine::Transformer> transformer_for(const model::Model& m, const pybind11::object& quant);
// Whether `text` is the calibration text of `quant` (eval then measures its held-out half).
bool is_calibration_text(const pybind11::object& quant, const std::string& text);

}  // namespace fpgallm_python
