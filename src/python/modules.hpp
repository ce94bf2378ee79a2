#pragma once
// Parts of the fpgallm._core module defined outside bindings.cpp.
#include <pybind11/pybind11.h>

namespace fpgallm_python {

// rmsnorm, rope, attention, swiglu: the engine's vector work on numpy arrays (engine_ops.cpp).
void bind_engine_ops(pybind11::module_& m);
// QuantModel, quantize, load_quant (quant.cpp); after Model and Transformer are bound.
void bind_quant(pybind11::module_& m);

}  // namespace fpgallm_python
