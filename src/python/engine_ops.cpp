// The fp32 engine's vector work (RMSNorm, RoPE, attention, SwiGLU) on numpy arrays, each
// row through the very function engine::Transformer::forward calls, so that a torch model
// built on these (fpgallm.torch) computes the engine's bits.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "engine/transformer.hpp"
#include "python/arguments.hpp"
#include "python/modules.hpp"

namespace py = pybind11;

namespace fpgallm_python {

namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using IntArray = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

py::ssize_t rows_of(const py::array& a, py::ssize_t row_len) { return row_len == 0 ? 0 : a.size() / row_len; }

FloatArray same_shape(const py::array& a) {
  std::vector<py::ssize_t> shape(a.shape(), a.shape() + a.ndim());
  return FloatArray(shape);
}

void require(bool ok, const std::string& what) {
  if (!ok) throw py::value_error(what);
}

// A float operand: real numbers (a complex array would lose its imaginary part), every
// dimension within int.
FloatArray floats(const py::object& o, const std::string& name) {
  if (o.is_none()) throw py::type_error(name + ": expected an array of real numbers, got None");
  check_real(o, name);
  FloatArray a = FloatArray::ensure(o);
  if (!a) {
    PyErr_Clear();
    throw py::type_error(name + ": expected an array of real numbers, got " + type_name(o));
  }
  check_dims(a, name);
  return a;
}

// Token positions: integers 0..2^31-1 (the engine's int positions), one per token.
IntArray positions_of(const py::object& o, const std::string& name) {
  if (o.is_none()) throw py::type_error(name + ": expected an array of integer positions, got None");
  check_integers(o, name);
  IntArray p = IntArray::ensure(o);
  if (!p) {
    PyErr_Clear();
    throw py::type_error(name + ": expected an array of integer positions, got " + type_name(o));
  }
  return p;
}

}  // namespace

void bind_engine_ops(py::module_& m) {
  m.def(
      "rmsnorm",
      [](const py::object& x_arg, const py::object& weight_arg, float eps) {
        const FloatArray x = floats(x_arg, "rmsnorm: x"), weight = floats(weight_arg, "rmsnorm: weight");
        // A model's norm_eps must be (model::Config::invalid_reason's words).
        require(std::isfinite(eps) && eps > 0, fmt::format("rmsnorm: eps {} must be finite and positive", eps));
        require(x.ndim() >= 1 && weight.ndim() == 1 && x.shape(x.ndim() - 1) == weight.shape(0),
                "rmsnorm: x [..., n] and weight [n]");
        const int n = static_cast<int>(weight.shape(0));
        const py::ssize_t rows = rows_of(x, n);
        FloatArray y = same_shape(x);
        const float *xd = x.data(), *wd = weight.data();
        float* yd = y.mutable_data();
        py::gil_scoped_release unlocked;
        for (py::ssize_t r = 0; r < rows; ++r) engine::rmsnorm(yd + r * n, xd + r * n, wd, n, eps);
        return y;
      },
      py::arg("x"), py::arg("weight"), py::arg("eps"), "engine::rmsnorm of each row of x [..., n]");

  m.def(
      "rope",
      [](const py::object& x_arg, const py::object& positions_arg, float theta) {
        const FloatArray x = floats(x_arg, "rope: x");
        const IntArray positions = positions_of(positions_arg, "rope: positions");
        // A model's rope_theta must be (model::Config::invalid_reason's words).
        require(std::isfinite(theta) && theta > 0, fmt::format("rope: theta {} must be finite and positive", theta));
        require(x.ndim() == 4, "rope: x must be [batch, tokens, heads, head_dim]");
        const py::ssize_t batch = x.shape(0), tokens = x.shape(1);
        const int width = static_cast<int>(x.shape(2) * x.shape(3)), head_size = static_cast<int>(x.shape(3));
        require(head_size % 2 == 0, "rope: head_dim must be even");
        require(positions.ndim() == 1 && positions.shape(0) == tokens, "rope: one position per token");
        for (py::ssize_t t = 0; t < tokens; ++t)
          require(positions.data()[t] >= 0 && positions.data()[t] <= INT_MAX,
                  fmt::format("rope: positions[{}] = {} is outside 0..{}", t, positions.data()[t], INT_MAX));
        FloatArray y = same_shape(x);
        std::copy(x.data(), x.data() + x.size(), y.mutable_data());
        float* yd = y.mutable_data();
        const std::int64_t* pd = positions.data();
        py::gil_scoped_release unlocked;
        for (py::ssize_t b = 0; b < batch; ++b)
          for (py::ssize_t t = 0; t < tokens; ++t)
            engine::rope(yd + (b * tokens + t) * width, width, nullptr, 0, head_size, static_cast<int>(pd[t]), theta);
        return y;
      },
      py::arg("x"), py::arg("positions"), py::arg("theta"),
      "engine::rope of x [batch, tokens, heads, head_dim], token t at positions[t]");

  m.def(
      "attention",
      [](const py::object& q_arg, const py::object& keys_arg, const py::object& values_arg,
         const py::object& positions_arg) {
        const FloatArray q = floats(q_arg, "attention: q"), keys = floats(keys_arg, "attention: keys"),
                         values = floats(values_arg, "attention: values");
        const IntArray positions = positions_of(positions_arg, "attention: positions");
        require(q.ndim() == 4 && keys.ndim() == 4 && values.ndim() == 4,
                "attention: q [batch, tokens, heads, head_dim], keys and values [batch, keys, kv_heads, head_dim]");
        const py::ssize_t batch = q.shape(0), tokens = q.shape(1), n_keys = keys.shape(1);
        const int heads = static_cast<int>(q.shape(2)), kv_heads = static_cast<int>(keys.shape(2));
        const int head_size = static_cast<int>(q.shape(3));
        require(keys.shape(0) == batch && keys.shape(3) == head_size, "attention: keys do not match q");
        for (int i = 0; i < 4; ++i) require(values.shape(i) == keys.shape(i), "attention: values do not match keys");
        require(kv_heads > 0 && heads % kv_heads == 0, "attention: heads must be a multiple of kv_heads");
        require(positions.ndim() == 1 && positions.shape(0) == tokens, "attention: one position per token");
        const std::int64_t* pd = positions.data();
        for (py::ssize_t t = 0; t < tokens; ++t)
          require(pd[t] >= 0 && pd[t] < n_keys, "attention: token " + std::to_string(t) + " at position " +
                                                    std::to_string(pd[t]) + " needs keys 0.." + std::to_string(pd[t]));
        FloatArray out = same_shape(q);
        const float *qd = q.data(), *kd = keys.data(), *vd = values.data();
        float* od = out.mutable_data();
        const int kv_mul = heads / kv_heads;
        const auto stride = static_cast<std::size_t>(kv_heads) * head_size;
        py::gil_scoped_release unlocked;
        std::vector<float> att(static_cast<std::size_t>(n_keys));
        for (py::ssize_t b = 0; b < batch; ++b)
          for (py::ssize_t t = 0; t < tokens; ++t)
            for (int h = 0; h < heads; ++h) {
              const std::size_t q_off = (static_cast<std::size_t>(b * tokens + t) * heads + h) * head_size;
              const std::size_t kv_off = static_cast<std::size_t>(b * n_keys) * stride + (h / kv_mul) * head_size;
              engine::attention_head(qd + q_off, kd + kv_off, vd + kv_off, stride, static_cast<int>(pd[t]) + 1, head_size,
                                     att.data(), od + q_off);
            }
        return out;
      },
      py::arg("q"), py::arg("keys"), py::arg("values"), py::arg("positions"),
      "engine::attention_head for every token and head: token t attends to keys 0..positions[t] "
      "(grouped-query: head h reads kv head h / (heads / kv_heads))");

  m.def(
      "swiglu",
      [](const py::object& gate_arg, const py::object& up_arg) {
        const FloatArray gate = floats(gate_arg, "swiglu: gate"), up = floats(up_arg, "swiglu: up");
        require(gate.size() <= INT_MAX, "swiglu: more than 2^31-1 elements");
        require(gate.ndim() == up.ndim() && gate.size() == up.size(), "swiglu: gate and up must have one shape");
        for (py::ssize_t i = 0; i < gate.ndim(); ++i) require(gate.shape(i) == up.shape(i), "swiglu: gate and up must have one shape");
        FloatArray y = same_shape(gate);
        std::copy(gate.data(), gate.data() + gate.size(), y.mutable_data());
        float* yd = y.mutable_data();
        const float* ud = up.data();
        const auto n = static_cast<int>(gate.size());
        py::gil_scoped_release unlocked;
        engine::swiglu(yd, ud, n);
        return y;
      },
      py::arg("gate"), py::arg("up"), "engine::swiglu: silu(gate) * up, elementwise");
}

}  // namespace fpgallm_python
