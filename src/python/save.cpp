// fpgallm.save from Python: a model built from numpy arrays (a trained torch model's
// weights) written by the C++ writers of `fpgallm convert` (model::save), and the
// Hugging Face q/k row order conversion the safetensors reader and writer use.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model.hpp"
#include "model/safetensors.hpp"
#include "model/save.hpp"
#include "python/modules.hpp"
#include "util/error.hpp"

namespace py = pybind11;

namespace fpgallm_python {

namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

nlohmann::json to_json(const py::dict& d) {
  return nlohmann::json::parse(py::module_::import("json").attr("dumps")(d).cast<std::string>());
}

// Copies weights[name] (shape checked) into dst.
void take(const py::dict& weights, const std::string& name, std::vector<py::ssize_t> shape, std::vector<float>& dst) {
  if (!weights.contains(name)) throw fpgallm::InputError("weights", "missing '" + name + "'");
  const FloatArray a = FloatArray::ensure(weights[py::str(name)]);
  if (!a) throw fpgallm::InputError("weights", "'" + name + "' is not an array of numbers");
  std::vector<py::ssize_t> got(a.shape(), a.shape() + a.ndim());
  if (got != shape) {
    auto text = [](const std::vector<py::ssize_t>& s) {
      std::string t;
      for (auto v : s) t += (t.empty() ? "" : ", ") + std::to_string(v);
      return "(" + t + ")";
    };
    throw fpgallm::InputError("weights", fmt::format("'{}' has shape {}, the config needs {}", name, text(got), text(shape)));
  }
  dst.assign(a.data(), a.data() + a.size());
}

std::shared_ptr<model::Model> model_from_weights(const py::dict& config, const py::dict& weights) {
  model::Model m;
  try {
    model::from_json(to_json(config), m.config);
  } catch (const std::exception& e) {
    throw fpgallm::InputError("config", e.what());
  }
  auto& c = m.config;
  if (auto why = c.invalid_reason(); !why.empty()) throw fpgallm::InputError("config", why);
  if (c.arch != model::Arch::llama) throw fpgallm::InputError("config", "only llama-architecture models are written");
  c.shared_classifier = !weights.contains("classifier");
  m.weights = model::allocate_weights(c);
  auto& w = m.weights;
  take(weights, "token_embedding", {c.vocab_size, c.dim}, w.token_embedding);
  take(weights, "final_norm", {c.dim}, w.final_norm);
  if (!c.shared_classifier) take(weights, "classifier", {c.vocab_size, c.dim}, w.classifier);
  for (int l = 0; l < c.n_layers; ++l) {
    auto& lw = w.layers[static_cast<std::size_t>(l)];
    const std::string p = "layers." + std::to_string(l) + ".";
    take(weights, p + "attn_norm", {c.dim}, lw.attn_norm);
    take(weights, p + "ffn_norm", {c.dim}, lw.ffn_norm);
    for (model::Linear which : model::kBlockLinears) {
      const auto s = model::linear_shape(c, which);
      take(weights, p + model::to_string(which), {s.rows, s.cols}, lw.linear(which));
    }
  }
  m.source_path = "<python>";
  return std::make_shared<model::Model>(std::move(m));
}

py::array_t<float> permuted(const FloatArray& w, int n_heads, bool to_hf) {
  if (w.ndim() != 2) throw py::value_error("w must be a 2-D array [n_heads * head_dim, cols]");
  const int rows = static_cast<int>(w.shape(0)), cols = static_cast<int>(w.shape(1));
  if (n_heads < 1 || rows % n_heads != 0 || (rows / n_heads) % 2 != 0)
    throw py::value_error(fmt::format("w has {} rows: not n_heads ({}) heads of an even head size", rows, n_heads));
  py::array_t<float> out({rows, cols});
  std::copy(w.data(), w.data() + w.size(), out.mutable_data());
  std::span<float> s(out.mutable_data(), static_cast<std::size_t>(out.size()));
  if (to_hf)
    model::safetensors::interleaved_to_hf(s, n_heads, rows / n_heads, cols);
  else
    model::safetensors::hf_to_interleaved(s, n_heads, rows / n_heads, cols);
  return out;
}

}  // namespace

void bind_save(py::module_& m) {
  m.def("model_from_weights", &model_from_weights, py::arg("config"), py::arg("weights"),
        "A Model from a config dict (Model.config's fields) and fp32 arrays named as Model.weights() names them; "
        "without 'classifier' the classifier is the token embedding");
  m.def(
      "save_model",
      [](const model::Model& mdl, const std::string& path, const std::string& format, const std::string& type,
         const model::Tokenizer* tokenizer) {
        const model::Format f = model::output_format(path, format);
        py::gil_scoped_release unlocked;
        return model::save(mdl, path, f, type, tokenizer);
      },
      py::arg("model"), py::arg("path"), py::arg("format") = "", py::arg("type") = "f32",
      py::arg("tokenizer") = py::none(),
      "Writes the model as `fpgallm convert` does: format 'bin' (llama2.c), 'gguf' or 'safetensors' (a folder), "
      "or '' to tell it from the path; returns the bytes written");
  m.def(
      "interleaved_to_hf", [](const FloatArray& w, int n_heads) { return permuted(w, n_heads, true); }, py::arg("w"),
      py::arg("n_heads"),
      "Rows of a q/k projection [n_heads*head_dim, cols] from interleaved-pair RoPE order (llama2.c, GGUF) to "
      "Hugging Face's rotate-half order, as the safetensors writer stores them");
  m.def(
      "hf_to_interleaved", [](const FloatArray& w, int n_heads) { return permuted(w, n_heads, false); }, py::arg("w"),
      py::arg("n_heads"), "The inverse of interleaved_to_hf, as the safetensors reader applies it");
}

}  // namespace fpgallm_python
