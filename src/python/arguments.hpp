#pragma once
// Checks of Python arguments before they reach the engine (issue 34): each bad value is a
// ValueError or TypeError whose message starts with the argument's name, in the words of
// the command line where it has the same check; never a crash, an IndexError from a C++
// container, or a RuntimeError from a failed cast.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace fpgallm_python {

namespace py = pybind11;

inline std::string type_name(const py::handle& o) { return py::str(py::type::handle_of(o).attr("__name__")); }

// A path given as str, bytes or os.PathLike (os.fsencode's rules). A NUL byte is refused:
// the operating system would cut the name there and open another file.
inline std::string path_arg(const py::handle& o, const std::string& name) {
  if (!py::isinstance<py::str>(o) && !py::isinstance<py::bytes>(o) && !py::hasattr(o, "__fspath__"))
    throw py::type_error(name + ": expected a path (str, bytes or os.PathLike), got " + type_name(o));
  std::string s;
  try {
    s = py::module_::import("os").attr("fsencode")(o).cast<std::string>();
  } catch (const py::error_already_set& e) {
    throw py::type_error(name + ": expected a path (str, bytes or os.PathLike): " + std::string(py::str(e.value())));
  }
  if (const auto nul = s.find('\0'); nul != std::string::npos)
    throw py::value_error(name + ": the path has a NUL byte at offset " + std::to_string(nul));
  return s;
}

// A token id of a vocabulary of `vocab` tokens.
inline void check_token(long long id, int vocab, const std::string& name) {
  if (id < 0 || id >= vocab)
    throw fpgallm::InputError(name, std::to_string(id) + " is outside the vocabulary (ids 0.." + std::to_string(vocab - 1) + ")");
}

inline void check_tokens(const std::vector<int>& ids, int vocab, const std::string& name) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      throw fpgallm::InputError(name, "[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                                          " is outside the vocabulary (ids 0.." + std::to_string(vocab - 1) + ")");
}

// Every dimension of an array fits the int the kernels count in (a zero-size array can
// claim any length without memory behind it).
inline void check_dims(const py::array& a, const std::string& name) {
  for (py::ssize_t i = 0; i < a.ndim(); ++i)
    if (a.shape(i) > INT_MAX)
      throw py::value_error(name + ": dimension " + std::to_string(i) + " has " + std::to_string(a.shape(i)) +
                            " entries, more than " + std::to_string(INT_MAX));
}

// Real numbers only: a complex array would lose its imaginary part to the float cast, and
// strings or objects are no numbers.
inline void check_real(const py::handle& o, const std::string& name) {
  if (!py::isinstance<py::array>(o)) return;
  const char kind = py::reinterpret_borrow<py::array>(o).dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b')
    throw py::type_error(name + ": expected an array of real numbers, got dtype " +
                         std::string(py::str(py::reinterpret_borrow<py::array>(o).dtype())));
}

// Integers only (positions, ids): a float would be truncated, NaN would become any integer.
inline void check_integers(const py::handle& o, const std::string& name) {
  if (!py::isinstance<py::array>(o)) return;
  const char kind = py::reinterpret_borrow<py::array>(o).dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw py::type_error(name + ": expected integers, got dtype " +
                         std::string(py::str(py::reinterpret_borrow<py::array>(o).dtype())));
}

// Values int8 quantization can give a code: NaN and infinity have none (the scale of a row
// holding one would be NaN or infinite and every code of the row meaningless).
inline void check_finite(const float* p, std::size_t n, std::size_t cols, const std::string& name) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i]))
      throw py::value_error(name + ": element [" + std::to_string(cols ? i / cols : i) + ", " +
                            std::to_string(cols ? i % cols : 0) + "] is " + (std::isnan(p[i]) ? "NaN" : "infinite") +
                            "; int8 quantization needs finite values");
}

// JSON of a Python dict/list/scalar (a design, a model config); `where` names the value in
// errors ("design.context").
inline nlohmann::json json_of(const py::handle& o, const std::string& where) {
  if (o.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(o)) return o.cast<bool>();
  if (py::isinstance<py::int_>(o)) {
    const py::int_ v = py::reinterpret_borrow<py::int_>(o);
    if (v >= py::int_(INT64_MIN) && v <= py::int_(INT64_MAX)) return v.cast<std::int64_t>();
    if (v >= py::int_(0) && v <= py::int_(UINT64_MAX)) return v.cast<std::uint64_t>();
    throw py::value_error(where + ": " + std::string(py::str(o)) + " is out of range");
  }
  if (py::isinstance<py::float_>(o)) return o.cast<double>();
  if (py::isinstance<py::array>(o) || (py::hasattr(o, "dtype") && py::hasattr(o, "tolist"))) {
    // A numpy scalar or array: its Python value (bool, int, float, or lists of them).
    const py::object value = o.attr("tolist")();
    if (!py::hasattr(value, "dtype")) return json_of(value, where);
  }
  if (PyIndex_Check(o.ptr())) {  // other integers
    PyObject* i = PyNumber_Index(o.ptr());
    if (!i) throw py::error_already_set();
    return json_of(py::reinterpret_steal<py::object>(i), where);
  }
  if (py::isinstance<py::str>(o)) {
    try {
      return o.cast<std::string>();
    } catch (const py::cast_error&) {
      throw py::value_error(where + ": the text is not valid Unicode");
    }
  }
  if (py::isinstance<py::dict>(o)) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(o)) {
      if (!py::isinstance<py::str>(k)) throw py::type_error(where + ": key " + std::string(py::repr(k)) + " is not a string");
      const std::string key = k.cast<std::string>();
      j[key] = json_of(v, where + "." + key);
    }
    return j;
  }
  if (py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o)) {
    nlohmann::json j = nlohmann::json::array();
    std::size_t i = 0;
    for (const auto& v : o) j.push_back(json_of(v, where + "[" + std::to_string(i++) + "]"));
    return j;
  }
  throw py::type_error(where + ": cannot convert " + type_name(o) + " to JSON");
}

}  // namespace fpgallm_python
