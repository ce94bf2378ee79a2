// fpgallm.quantize / load_quant and the QuantModel they return: the `fpgallm quantize`
// flow (calib::quantize) from Python, the GGUF file it writes, and the simulated-quantization
// transformer `fpgallm run/eval --quant` runs.
#include "python/quant.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <fmt/format.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "calib/calib.hpp"
#include "calib/simulated.hpp"
#include "python/arguments.hpp"
#include "python/modules.hpp"
#include "util/error.hpp"

namespace py = pybind11;

namespace fpgallm_python {

namespace {

py::object to_python(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

QuantModelHandle make_handle(quant::QuantModel qm) {
  auto h = std::make_shared<QuantModelView>();
  h->qm = std::move(qm);
  h->base = h->qm.dequantized_model();
  return h;
}

void check_shape(const model::Model& m, const QuantModelView& q, const std::string& source) {
  const auto &a = q.qm.config, &b = m.config;
  if (a.dim != b.dim || a.hidden_dim != b.hidden_dim || a.n_layers != b.n_layers || a.n_heads != b.n_heads ||
      a.n_kv_heads != b.n_kv_heads || a.vocab_size != b.vocab_size || a.seq_len != b.seq_len)
    throw fpgallm::InputError(source, "quantized model does not have the shape of " + m.source_path);
}

// The flow of `fpgallm quantize`, with the same arguments and the same refusal when a
// mixed plan misses its budget.
QuantModelHandle quantize(const model::Model& m, const model::Tokenizer& tok, const py::object& calib_arg,
                          const std::string& scheme, int group, float alpha, double budget_percent, bool kv8,
                          std::size_t sensitivity_tokens) {
  const std::string calib_path = path_arg(calib_arg, "calib");
  if (tok.vocab_size() != m.config.vocab_size)
    throw fpgallm::InputError("tokenizer", fmt::format("has {} tokens but the model's vocabulary has {}", tok.vocab_size(),
                                                       m.config.vocab_size));
  calib::QuantizeOptions opt;
  opt.scheme = quant::scheme_from_string(scheme);
  if (opt.scheme == quant::Scheme::fp32) throw fpgallm::InputError("scheme", "fp32 is the reference, not a quantization");
  if (group != 32 && group != 64 && group != 128) throw fpgallm::InputError("group", "must be 32, 64 or 128");
  if (!(alpha >= 0.0f && alpha <= 1.0f)) throw fpgallm::InputError("alpha", "must be between 0 and 1");
  if (!(budget_percent >= -100 && budget_percent <= 1000))
    throw fpgallm::InputError("budget", "must be a percentage between -100 and 1000");
  opt.group = group;
  opt.alpha = alpha;
  opt.budget = budget_percent / 100.0;
  opt.kv8 = kv8;
  opt.sensitivity_tokens = sensitivity_tokens;
  calib::QuantizeResult r;
  {
    py::gil_scoped_release unlocked;
    const std::string text = engine::read_text_file(calib_path);
    r = calib::quantize(m, tok, text, calib_path, opt);
  }
  if (r.search && !r.search->budget_met)
    throw fpgallm::InputError("budget", fmt::format("{}% cannot be met: the best plan found measures {:+.3f}% on the "
                                                    "held-out text",
                                                    budget_percent, 100.0 * r.search->rel_increase));
  nlohmann::json report = calib::measurements_json(r, calib_path);
  auto h = make_handle(std::move(r.qm));
  h->report = std::move(report);
  h->tokenizer = tok;
  return h;
}

py::dict linear_dict(const quant::QuantLinear& l) {
  py::dict d;
  d["format"] = quant::to_string(l.format);
  d["rows"] = l.rows;
  d["cols"] = l.cols;
  const std::vector<py::ssize_t> shape{l.rows, l.cols};
  switch (l.format) {
    case quant::WeightFormat::int8: {
      py::array_t<std::int8_t> q(shape);
      std::copy(l.int8.q.begin(), l.int8.q.end(), q.mutable_data());
      d["q"] = q;
      d["scale"] = py::array_t<float>(static_cast<py::ssize_t>(l.int8.scale.size()), l.int8.scale.data());
      break;
    }
    case quant::WeightFormat::int4: {
      py::array_t<std::int8_t> q(shape);
      std::int8_t* qd = q.mutable_data();
      for (int r = 0; r < l.rows; ++r)
        for (int c = 0; c < l.cols; ++c) qd[static_cast<std::size_t>(r) * l.cols + c] = static_cast<std::int8_t>(l.int4.code(r, c));
      d["q"] = q;
      d["group"] = l.int4.group;
      d["scale_f16"] = py::array_t<std::uint16_t>({static_cast<py::ssize_t>(l.rows), static_cast<py::ssize_t>(l.int4.groups())},
                                                  l.int4.scale.data());
      break;
    }
    default: break;
  }
  const std::vector<float> w = l.dequantized();
  d["dequantized"] = py::array_t<float>(shape, w.data());
  return d;
}

}  // namespace

// quant: None or a QuantModel (a TypeError naming it otherwise, not pybind11's failed cast).
static const QuantModelView* quant_of(const py::object& quant) {
  if (quant.is_none()) return nullptr;
  if (!py::isinstance<QuantModelView>(quant))
    throw py::type_error("quant: expected a QuantModel (fpgallm.quantize or fpgallm.load_quant) or None, got " +
                         type_name(quant));
  return &quant.cast<const QuantModelView&>();
}

std::unique_ptr<engine::Transformer> transformer_for(const model::Model& m, const py::object& quant) {
  if (quant.is_none()) return std::make_unique<engine::Transformer>(m);
  const auto& q = *quant_of(quant);
  check_shape(m, q, "quant");
  return std::make_unique<calib::SimulatedTransformer>(q.base, q.qm.plan, q.qm.linears);
}

bool is_calibration_text(const py::object& quant, const std::string& text) {
  if (quant.is_none()) return false;
  const auto& q = *quant_of(quant);
  return q.qm.calibration_fnv1a != 0 && quant::fnv1a64(text) == q.qm.calibration_fnv1a;
}

void bind_quant(py::module_& m) {
  py::class_<QuantModelView, QuantModelHandle>(
      m, "QuantModel",
      "A quantized model (quant::QuantModel): its plan, integer weights and the GGUF file of docs/quantization.md")
      .def_property_readonly("scheme", [](const QuantModelView& q) { return quant::to_string(q.qm.plan.scheme); })
      .def_property_readonly("plan", [](const QuantModelView& q) { return to_python(nlohmann::json(q.qm.plan)); })
      .def_property_readonly("config", [](const QuantModelView& q) {
        nlohmann::json j;
        model::to_json(j, q.qm.config);
        return to_python(j);
      })
      .def_property_readonly("linear_weight_bytes", [](const QuantModelView& q) { return q.qm.linear_weight_bytes(); })
      .def_property_readonly("calibration_file", [](const QuantModelView& q) { return q.qm.calibration_file; })
      .def_property_readonly(
          "report", [](const QuantModelView& q) { return q.report.is_null() ? py::object(py::none()) : to_python(q.report); },
          "What quantize() measured (held-out perplexities, split, sensitivity); None for a loaded file")
      .def_property_readonly(
          "model", [](const QuantModelHandle& q) { return std::shared_ptr<model::Model>(q, &q->base); },
          "The fp32 Model with the dequantized weights (and folded norms when smoothed)")
      .def(
          "save",
          [](const QuantModelView& q, const py::object& path_obj) {
            const std::string path = path_arg(path_obj, "path");
            py::gil_scoped_release unlocked;
            quant::save_gguf(q.qm, path, q.tokenizer ? &*q.tokenizer : nullptr);
          },
          py::arg("path"), "Writes the .gguf (atomically), byte for byte what `fpgallm quantize -o` writes")
      .def(
          "linear",
          [](const QuantModelView& q, const std::string& name) {
            const auto& c = q.qm.config;
            std::string plan_name = name;  // the plan's names; Model.weights()'s are accepted too
            if (plan_name.starts_with("layers.")) plan_name = "blk." + plan_name.substr(7);
            if (plan_name == "classifier" || plan_name == "output") plan_name = "cls";
            for (std::size_t i = 0; i < q.qm.plan.layers.size(); ++i) {
              const auto& lp = q.qm.plan.layers[i];
              if (model::linear_name(lp.layer, lp.which) == plan_name) {
                py::dict d = linear_dict(q.qm.linears[i]);
                d["act"] = quant::to_string(lp.act);
                if (lp.act == quant::ActFormat::int8_static) d["act_scale"] = lp.act_scale;
                return d;
              }
            }
            throw fpgallm::InputError("linear", "'" + name + "' is not a layer of this " + std::to_string(c.n_layers) +
                                                    "-layer model (blk.L.wq ... blk.L.w3 as in the plan, or layers.L.wq, or cls)");
          },
          py::arg("name"),
          "One layer's stored weights as numpy (name: blk.L.wq as in the plan, layers.L.wq as in Model.weights(), "
          "or cls): format, q (codes [rows, cols]), scale (int8, fp32 per row) or scale_f16 (int4, fp16 bits per "
          "group), dequantized [rows, cols], act");

  m.def("quantize", &quantize, py::arg("model"), py::arg("tokenizer"), py::arg("calib"), py::arg("scheme") = "w8a8",
        py::arg("group") = 32, py::arg("alpha") = 0.5f, py::arg("budget") = 1.0, py::arg("kv8") = false,
        py::arg("sensitivity_tokens") = 1024,
        "`fpgallm quantize MODEL --calib FILE --scheme S ...`: calibrate on the first half of the stories in "
        "`calib` (a file path), quantize, and measure both models on the held-out half (QuantModel.report). "
        "budget: mixed scheme, max perplexity increase in percent.");
  m.def(
      "load_quant",
      [](const py::object& path_obj, const py::object& mdl) {
        if (!mdl.is_none() && !py::isinstance<model::Model>(mdl))
          throw py::type_error("model: expected a Model or None, got " + type_name(mdl));
        const std::string path = path_arg(path_obj, "path");
        QuantModelHandle h;
        {
          py::gil_scoped_release unlocked;
          h = make_handle(quant::load_gguf(path));
        }
        if (!mdl.is_none()) check_shape(mdl.cast<const model::Model&>(), *h, path);
        return h;
      },
      py::arg("path"), py::arg("model") = py::none(),
      "Reads a quantized .gguf (from `fpgallm quantize` or QuantModel.save); with `model`, checks it has its shape");
}

}  // namespace fpgallm_python
