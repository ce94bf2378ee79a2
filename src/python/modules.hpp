#pragma once
// Parts of the fpgallm._core module defined outside bindings.cpp.
#include <pybind11/pybind11.h>

namespace fpgallm_python {

// rmsnorm, rope, attention, swiglu: the engine's vector work on numpy arrays (engine_ops.cpp).
void bind_engine_ops(pybind11::module_& m);
// QuantModel, quantize, load_quant (quant.cpp); after Model and Transformer are bound.
void bind_quant(pybind11::module_& m);
// model_from_weights, save_model, interleaved_to_hf, hf_to_interleaved (save.cpp); after Model
// and Tokenizer are bound.
void bind_save(pybind11::module_& m);

}  // namespace fpgallm_python
