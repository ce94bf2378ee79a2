// fpgallm.save from Python: a model built from numpy arrays (a trained torch model's
// weights) written by the C++ writers of `fpgallm convert` (model::save), and the
// Hugging Face q/k row order conversion the safetensors reader and writer use.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model.hpp"
#include "model/safetensors.hpp"
#include "model/save.hpp"
#include "python/arguments.hpp"
#include "python/modules.hpp"
#include "util/error.hpp"

namespace py = pybind11;

namespace fpgallm_python {

namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

// The model config of a dict (Model.config's fields): integers where the config counts,
// checked before model::from_json reads them as int (a float or an integer past int would
// be cast, not refused), then Config::invalid_reason.
model::Config config_of_dict(const py::dict& config) {
  nlohmann::json j = json_of(config, "config");
  if (!j.is_object()) throw py::type_error("config: expected a dict");
  for (const char* key : {"dim", "hidden_dim", "n_layers", "n_heads", "vocab_size", "seq_len"})
    if (!j.contains(key))
      throw fpgallm::InputError("config", fmt::format("missing '{}' (dim, hidden_dim, n_layers, n_heads, vocab_size "
                                                      "and seq_len give a model's shape)", key));
  for (const char* key :
       {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len", "head_dim", "head_size"}) {
    const auto it = j.find(key);
    if (it == j.end()) continue;
    if (!it->is_number_integer())
      throw fpgallm::InputError("config", fmt::format("{} must be an integer, got {}", key, it->dump()));
    if (it->is_number_unsigned() ? it->get<std::uint64_t>() > INT_MAX
                                 : (it->get<std::int64_t>() < INT_MIN || it->get<std::int64_t>() > INT_MAX))
      throw fpgallm::InputError("config", fmt::format("{} {} out of range", key, it->dump()));
  }
  // A head size other than dim / n_heads (Model.config's head_size) is the config's own.
  const int head_size = j.contains("head_size") ? j["head_size"].get<int>() : 0;
  if (head_size) j.erase("head_dim");
  model::Config c;
  try {
    model::from_json(j, c);
  } catch (const fpgallm::InputError&) {
    throw;
  } catch (const std::exception& e) {
    throw fpgallm::InputError("config", e.what());
  }
  c.head_size = head_size;
  if (auto why = c.invalid_reason(); !why.empty()) throw fpgallm::InputError("config", why);
  return c;
}

std::string shape_text(const std::vector<py::ssize_t>& s) {
  std::string t;
  for (auto v : s) t += (t.empty() ? "" : ", ") + std::to_string(v);
  return "(" + t + ")";
}

// weights[name] as a float32 array of the shape the config needs (checked before anything is
// allocated for the model, so that a config of a huge model with small arrays costs nothing).
FloatArray checked(const py::dict& weights, const std::string& name, const std::vector<py::ssize_t>& shape) {
  if (!weights.contains(name)) throw fpgallm::InputError("weights", "missing '" + name + "'");
  const py::object value = weights[py::str(name)];
  const py::array raw = py::array::ensure(value);
  if (!raw) {
    PyErr_Clear();
    throw fpgallm::InputError("weights", "'" + name + "' is not an array of numbers");
  }
  const char kind = raw.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b')
    throw fpgallm::InputError("weights", fmt::format("'{}' is not an array of real numbers (dtype {})", name,
                                                     std::string(py::str(raw.dtype()))));
  std::vector<py::ssize_t> got(raw.shape(), raw.shape() + raw.ndim());
  if (got != shape)
    throw fpgallm::InputError("weights", fmt::format("'{}' has shape {}, the config needs {}", name, shape_text(got),
                                                     shape_text(shape)));
  const FloatArray a = FloatArray::ensure(raw);
  if (!a) {
    PyErr_Clear();
    throw fpgallm::InputError("weights", "'" + name + "' is not an array of numbers");
  }
  return a;
}

std::shared_ptr<model::Model> model_from_weights(const py::dict& config, const py::dict& weights) {
  model::Model m;
  m.config = config_of_dict(config);
  auto& c = m.config;
  if (c.arch != model::Arch::llama) throw fpgallm::InputError("config", "only llama-architecture models are written");
  c.shared_classifier = !weights.contains("classifier");
  // Every array checked first, then copied.
  std::vector<std::pair<std::string, std::vector<py::ssize_t>>> wanted;
  wanted.push_back({"token_embedding", {c.vocab_size, c.dim}});
  wanted.push_back({"final_norm", {c.dim}});
  if (!c.shared_classifier) wanted.push_back({"classifier", {c.vocab_size, c.dim}});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    wanted.push_back({p + "attn_norm", {c.dim}});
    wanted.push_back({p + "ffn_norm", {c.dim}});
    for (model::Linear which : model::kBlockLinears) {
      const auto s = model::linear_shape(c, which);
      wanted.push_back({p + model::to_string(which), {s.rows, s.cols}});
    }
  }
  std::vector<FloatArray> checked_arrays;
  checked_arrays.reserve(wanted.size());
  for (const auto& [name, shape] : wanted) checked_arrays.push_back(checked(weights, name, shape));
  m.weights = model::allocate_weights(c);
  auto& w = m.weights;
  std::vector<std::vector<float>*> dst{&w.token_embedding, &w.final_norm};
  if (!c.shared_classifier) dst.push_back(&w.classifier);
  for (auto& lw : w.layers) {
    dst.push_back(&lw.attn_norm);
    dst.push_back(&lw.ffn_norm);
    for (model::Linear which : model::kBlockLinears) dst.push_back(&lw.linear(which));
  }
  for (std::size_t i = 0; i < dst.size(); ++i)
    dst[i]->assign(checked_arrays[i].data(), checked_arrays[i].data() + checked_arrays[i].size());
  // As a checkpoint is loaded: NaN or infinite weights are refused (the engine would
  // compute NaN logits and sample garbage).
  model::require_finite(m, "weights", "a model's weights must be finite numbers");
  m.source_path = "<python>";
  return std::make_shared<model::Model>(std::move(m));
}

py::array_t<float> permuted(const FloatArray& w, int n_heads, bool to_hf) {
  if (w.ndim() != 2) throw py::value_error("w must be a 2-D array [n_heads * head_dim, cols]");
  check_dims(w, "w");
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
  m.def(
      "model_config",
      [](const py::dict& config) {
        nlohmann::json j;
        model::to_json(j, config_of_dict(config));
        return py::module_::import("json").attr("loads")(j.dump());
      },
      py::arg("config"),
      "A model config dict (Model.config's fields; dim, hidden_dim, n_layers, n_heads, vocab_size and seq_len "
      "required) checked as a loaded checkpoint's is, with every field resolved; an InputError naming config "
      "otherwise");
  m.def("model_from_weights", &model_from_weights, py::arg("config"), py::arg("weights"),
        "A Model from a config dict (Model.config's fields) and fp32 arrays named as Model.weights() names them; "
        "without 'classifier' the classifier is the token embedding");
  m.def(
      "save_model",
      [](const model::Model& mdl, const py::object& path_obj, const std::string& format, const std::string& type,
         const model::Tokenizer* tokenizer) {
        const std::string path = path_arg(path_obj, "path");
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
