// fpgallm._core: models, tokenizer, the fp32 engine, designs and the int8 matrix unit,
// with numpy arrays in and out. Long computations release the GIL, so Python threads (the
// host pipeline in fpgallm.pipeline) run while the C++ side computes.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "arch/design.hpp"
#include "engine/generate.hpp"
#include "engine/perplexity.hpp"
#include "engine/sampler.hpp"
#include "engine/transformer.hpp"
#include "model/model.hpp"
#include "model/tokenizer.hpp"
#include "calib/calib.hpp"
#include "python/arguments.hpp"
#include "python/matrix_unit.hpp"
#include "python/modules.hpp"
#include "python/quant.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"
#if FPGALLM_HAVE_PERF && FPGALLM_HAVE_HW && FPGALLM_HAVE_GRAPH
#define FPGALLM_PYTHON_PREDICT 1
#include "graph/workload.hpp"
#include "hw/device.hpp"
#include "perf/perf.hpp"
#endif
#if FPGALLM_HAVE_SIM && FPGALLM_HAVE_HW
#define FPGALLM_PYTHON_SIMULATE 1
#include "hw/device.hpp"
#include "sim/simulate.hpp"
#endif

namespace py = pybind11;
namespace fp = fpgallm_python;

namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using Int8Array = py::array_t<std::int8_t, py::array::c_style | py::array::forcecast>;

py::object to_python(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return py::none();
    case nlohmann::json::value_t::boolean: return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return py::int_(j.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: return py::int_(j.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float: return py::float_(j.get<double>());
    case nlohmann::json::value_t::string: return py::str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      py::list l;
      for (const auto& e : j) l.append(to_python(e));
      return l;
    }
    case nlohmann::json::value_t::object: {
      py::dict d;
      for (const auto& [k, v] : j.items()) d[py::str(k)] = to_python(v);
      return d;
    }
    default: return py::none();
  }
}

void require_2d(const py::array& a, const char* name) {
  if (a.ndim() != 2) throw py::value_error(std::string(name) + " must be a 2-D array");
  fp::check_dims(a, name);
}

// Operands of a product: 2-D real arrays with one contraction length.
void require_operands(const py::array& a, const py::array& b, const char* na, const char* nb) {
  require_2d(a, na);
  require_2d(b, nb);
  if (a.shape(1) != b.shape(1))
    throw py::value_error(std::string(na) + " and " + nb + " must have the same number of columns (" +
                          std::to_string(a.shape(1)) + " and " + std::to_string(b.shape(1)) + ")");
}

// The scales of a matmul_int8_dequant operand: one per row, 1-D.
void require_scales(const py::array& s, const py::array& q, const char* ns, const char* nq) {
  if (s.ndim() != 1 || s.shape(0) != q.shape(0))
    throw py::value_error(fmt::format("{}: one scale per row of {} ({}), as a 1-D array; got {} value(s) in {} dimension(s)",
                                      ns, nq, q.shape(0), s.size(), s.ndim()));
}

// Float operands: real dtypes only (numpy would cast a complex array to its real part).
FloatArray float_operand(const py::object& o, const char* name) {
  if (o.is_none()) throw py::type_error(std::string(name) + ": expected an array of real numbers, got None");
  fp::check_real(o, name);
  auto a = FloatArray::ensure(o);
  if (!a) {
    PyErr_Clear();
    throw py::type_error(std::string(name) + ": expected an array of real numbers, got " + fp::type_name(o));
  }
  return a;
}

// int8 operands: int8 codes, or integers that are int8 codes (-128..127); floats would be
// truncated and larger integers wrapped around.
Int8Array int8_operand(const py::object& o, const char* name) {
  if (o.is_none()) throw py::type_error(std::string(name) + ": expected an array of int8 codes, got None");
  const py::array raw = py::array::ensure(o);
  if (!raw) {
    PyErr_Clear();
    throw py::type_error(std::string(name) + ": expected an array of int8 codes, got " + fp::type_name(o));
  }
  fp::check_integers(raw, name);
  if (!raw.dtype().is(py::dtype::of<std::int8_t>()) && raw.size() > 0) {
    const py::object np = py::module_::import("numpy");
    const py::object lo = np.attr("min")(raw).attr("item")(), hi = np.attr("max")(raw).attr("item")();
    if (lo < py::int_(-128) || hi > py::int_(127))
      throw py::value_error(std::string(name) + ": values " + std::string(py::str(lo)) + ".." + std::string(py::str(hi)) +
                            " are not int8 codes (-128..127)");
  }
  return Int8Array::ensure(raw);
}

int dim(const py::array& a, int i) { return static_cast<int>(a.shape(i)); }

// A read-only numpy view of a model's weight; the Model object stays alive with it.
py::array weight_view(const std::shared_ptr<model::Model>& m, const std::vector<float>& w,
                      std::vector<py::ssize_t> shape) {
  py::array a(py::dtype::of<float>(), std::move(shape), {}, w.data(), py::cast(m));
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

bool is_path(const py::handle& o) {
  return py::isinstance<py::str>(o) || py::isinstance<py::bytes>(o) || py::hasattr(o, "__fspath__");
}

// A design dict read into d (its fields checked by arch::from_json, not yet validated).
void read_design_dict(const py::handle& design, arch::Design& d) {
  const nlohmann::json j = fp::json_of(design, "design");
  try {
    arch::from_json(j, d);
  } catch (const nlohmann::json::exception& e) {
    throw fpgallm::InputError("design", e.what());
  }
}

// A design given as a design.json path or a dict (validated either way).
arch::Design design_of(const py::object& design) {
  if (is_path(design)) return arch::load(fp::path_arg(design, "design"));
  if (!py::isinstance<py::dict>(design))
    throw py::type_error("design: a design.json path or a dict, got " + fp::type_name(design));
  arch::Design d;
  read_design_dict(design, d);
  const auto problems = d.problems();
  if (!problems.empty()) throw fpgallm::InputError("design", problems.front());
  return d;
}

// A model given as a Model, or a checkpoint path / preset name.
model::Config config_of(const py::object& m) {
  if (py::isinstance<model::Model>(m)) return m.cast<const model::Model&>().config;
  if (!is_path(m))
    throw py::type_error("model: a Model, a checkpoint path or a preset name, got " + fp::type_name(m));
  return model::load_or_preset(fp::path_arg(m, "model")).config;
}

// The vocabulary `tok` must be the model's: ids one side makes index the other's tables.
// The words of the command line's tokenizer check (model::Tokenizer::load_llama2c).
void check_vocabulary(const model::Model& m, const model::Tokenizer& tok) {
  if (tok.vocab_size() != m.config.vocab_size)
    throw fpgallm::InputError("tokenizer", fmt::format("has {} tokens but the model's vocabulary has {}",
                                                       tok.vocab_size(), m.config.vocab_size));
}

py::dict generation_dict(const engine::Generation& g) {
  py::dict d;
  d["tokens"] = g.tokens;
  d["text"] = g.text;
  d["prompt_tokens"] = g.prompt_tokens;
  const double steps_after_first = static_cast<double>(g.tokens.size()) - 2;
  d["tokens_per_s"] = g.seconds_after_first > 0 ? steps_after_first / g.seconds_after_first : 0.0;
  return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "fpgallm C++ core: checkpoints, tokenizer, fp32 engine, designs, int8 matrix unit";

  static py::exception<fpgallm::InputError> input_error(m, "InputError", PyExc_ValueError);
  input_error.attr("__doc__") =
      "Bad input (a file, an option, a shape), in one line: 'SOURCE: PROBLEM' as the fpgallm command prints it; "
      "a ValueError";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const fpgallm::InputError& e) {
      // A path that is not UTF-8 (bytes) keeps its message readable: undecodable bytes are
      // replaced rather than losing the whole message.
      const std::string message = e.source() + ": " + e.problem();
      PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "replace");
      if (!text) {
        PyErr_Clear();
        input_error("bad input");
        return;
      }
      PyErr_SetObject(input_error.ptr(), text);
      Py_DECREF(text);
    }
  });

  // ---- models -------------------------------------------------------------------------
  py::class_<model::Model, std::shared_ptr<model::Model>>(m, "Model", "A checkpoint loaded into fp32 memory")
      .def_property_readonly("config", [](const model::Model& self) {
        nlohmann::json j;
        model::to_json(j, self.config);
        return to_python(j);
      })
      .def_property_readonly("format", [](const model::Model& self) { return model::to_string(self.source_format); })
      .def_property_readonly("path", [](const model::Model& self) { return self.source_path; })
      .def_property_readonly("has_weights", &model::Model::has_weights)
      .def(
          "weights",
          [](const std::shared_ptr<model::Model>& self) {
            const auto& c = self->config;
            const auto& w = self->weights;
            if (!self->has_weights()) throw py::value_error(c.name + " has no weights (a preset)");
            py::dict d;
            d["token_embedding"] = weight_view(self, w.token_embedding, {c.vocab_size, c.dim});
            d["final_norm"] = weight_view(self, w.final_norm, {c.dim});
            if (!w.classifier.empty()) d["classifier"] = weight_view(self, w.classifier, {c.vocab_size, c.dim});
            for (int l = 0; l < c.n_layers; ++l) {
              const auto& lw = w.layers[static_cast<std::size_t>(l)];
              const std::string p = "layers." + std::to_string(l) + ".";
              d[py::str(p + "attn_norm")] = weight_view(self, lw.attn_norm, {c.dim});
              d[py::str(p + "ffn_norm")] = weight_view(self, lw.ffn_norm, {c.dim});
              for (model::Linear which : model::kBlockLinears) {
                const auto shape = model::linear_shape(c, which);
                d[py::str(p + model::to_string(which))] = weight_view(self, lw.linear(which), {shape.rows, shape.cols});
              }
            }
            return d;
          },
          "Weights as read-only numpy views: token_embedding, final_norm, classifier (when not "
          "shared), layers.L.{attn_norm,ffn_norm,wq,wk,wv,wo,w1,w2,w3}; matrices are [out][in]");

  m.def(
      "load",
      [](const py::object& path_arg) {
        const std::string path = fp::path_arg(path_arg, "path");
        py::gil_scoped_release unlocked;
        return std::make_shared<model::Model>(model::load_or_preset(path));
      },
      py::arg("path"), "Loads a llama2.c .bin, .gguf, safetensors folder, or a preset name (config only)");

  py::class_<model::Tokenizer>(m, "Tokenizer",
                               "SentencePiece-style byte-pair tokenizer (llama2.c tokenizer.bin, or a GGUF's "
                               "tokenizer.ggml.* vocabulary). Tokenizer(path) reads one on its own; "
                               "Tokenizer(model, path='') gives a loaded model's, checked against its vocabulary.")
      .def(py::init([](const model::Model& mdl, const py::object& path_arg) {
             const std::string path = fp::path_arg(path_arg, "path");
             if (path.empty() && !mdl.tokenizer && mdl.source_path == "<python>")
               throw fpgallm::InputError("path", "the model was built from arrays (model_from_weights) and has no "
                                                 "tokenizer: give the tokenizer's path");
             return model::tokenizer_for(mdl, path);
           }),
           py::arg("model"), py::arg("path") = "",
           "The model's tokenizer: the file given, else the one in the checkpoint, else tokenizer.bin beside it")
      .def(py::init([](const py::object& path) { return model::load_tokenizer(fp::path_arg(path, "path")); }),
           py::arg("path"),
           "A tokenizer file on its own: tokenizer.bin (every token in it), a .gguf's vocabulary, or "
           "tokenizer.bin inside a safetensors folder")
      .def_property_readonly("vocab_size", &model::Tokenizer::vocab_size)
      .def(
          "encode",
          [](const model::Tokenizer& t, const std::string& text, bool bos, bool eos) {
            py::gil_scoped_release unlocked;
            return t.encode(text, bos, eos);
          },
          py::arg("text"), py::arg("bos") = true, py::arg("eos") = false)
      .def(
          "decode",
          [](const model::Tokenizer& t, int prev, int token) {
            fp::check_token(prev, t.vocab_size(), "prev");
            fp::check_token(token, t.vocab_size(), "token");
            return t.decode(prev, token);
          },
          py::arg("prev"), py::arg("token"))
      .def(
          "decode_all",
          [](const model::Tokenizer& t, const std::vector<int>& tokens) {
            fp::check_tokens(tokens, t.vocab_size(), "tokens");
            std::string s;
            for (std::size_t i = 1; i < tokens.size(); ++i) s += t.printable(tokens[i - 1], tokens[i]);
            return s;
          },
          py::arg("tokens"), "Text of tokens[1:], each piece decoded after its predecessor (as `fpgallm run` prints)")
      .def(
          "piece",
          [](const model::Tokenizer& t, int id) {
            fp::check_token(id, t.vocab_size(), "id");
            return t.piece(id);
          },
          py::arg("id"));
  py::class_<model::BpeTokenizer, std::shared_ptr<model::BpeTokenizer>>(m, "BpeTokenizer",
                                                                         "Byte-level BPE vocabulary (Qwen, Llama 3)")
      .def_static(
          "from_hf_json",
          [](const py::object& path) {
            return std::make_shared<model::BpeTokenizer>(model::BpeTokenizer::from_hf_json(fp::path_arg(path, "path")));
          },
          py::arg("path"), "From a Hugging Face tokenizer.json")
      .def_property_readonly("vocab_size", &model::BpeTokenizer::vocab_size)
      .def(
          "encode",
          [](const model::BpeTokenizer& t, const py::bytes& text, bool add_bos, bool parse_special) {
            std::string s = text;
            py::gil_scoped_release unlocked;
            return t.encode(s, add_bos, parse_special);
          },
          py::arg("text"), py::arg("add_bos") = false, py::arg("parse_special") = true, "Token ids of UTF-8 (or any) bytes")
      .def(
          "decode",
          [](const model::BpeTokenizer& t, const std::vector<int>& ids) {
            fp::check_tokens(ids, t.vocab_size(), "ids");
            return py::bytes(t.decode(ids));
          },
          py::arg("ids"), "The bytes of ids")
      .def("chat_prompt", &model::BpeTokenizer::chat_prompt, py::arg("user"), py::arg("system") = "");
  m.def(
      "bpe_tokenizer",
      [](const std::shared_ptr<model::Model>& mdl) -> py::object {
        if (!mdl) throw py::type_error("model: expected a Model, got None");
        if (!mdl->bpe_tokenizer) return py::none();
        return py::cast(std::const_pointer_cast<model::BpeTokenizer>(mdl->bpe_tokenizer));
      },
      py::arg("model"), "The model's byte-level BPE vocabulary (GGUF gpt2 vocabulary or tokenizer.json), or None");
  m.attr("BOS") = model::Tokenizer::kBos;
  m.attr("EOS") = model::Tokenizer::kEos;

  // ---- fp32 reference engine ------------------------------------------------------------
  py::class_<engine::Transformer>(m, "Transformer",
                                  "The engine of `fpgallm run`, one token at a time with a KV cache: the fp32 reference, "
                                  "or with quant=QuantModel its simulated quantization (as --quant)")
      .def(py::init([](const model::Model& mdl, const py::object& quant) { return fp::transformer_for(mdl, quant); }),
           py::arg("model"), py::arg("quant") = py::none(), py::keep_alive<1, 2>(), py::keep_alive<1, 3>())
      .def(
          "forward",
          [](engine::Transformer& t, int token, int pos) {
            const int vocab = t.config().vocab_size;
            fp::check_token(token, vocab, "token");
            if (pos < 0 || pos >= t.config().seq_len)
              throw fpgallm::InputError("pos", fmt::format("{} is outside the model's context (positions 0..{})", pos,
                                                           t.config().seq_len - 1));
            py::array_t<float> out(vocab);
            const float* logits;
            {
              py::gil_scoped_release unlocked;
              logits = t.forward(token, pos);
            }
            std::copy(logits, logits + vocab, out.mutable_data());
            return out;
          },
          py::arg("token"), py::arg("pos"), "Logits [vocab] of `token` at position `pos`")
      .def(
          "logits",
          [](engine::Transformer& t, const std::vector<int>& tokens) {
            const int vocab = t.config().vocab_size;
            fp::check_tokens(tokens, vocab, "tokens");
            if (tokens.size() > static_cast<std::size_t>(t.config().seq_len))
              throw fpgallm::InputError("tokens", fmt::format("{} positions exceed the model's context of {}",
                                                              tokens.size(), t.config().seq_len));
            py::array_t<float> out({static_cast<py::ssize_t>(tokens.size()), static_cast<py::ssize_t>(vocab)});
            float* dst = out.mutable_data();
            py::gil_scoped_release unlocked;
            for (std::size_t p = 0; p < tokens.size(); ++p) {
              const float* logits = t.forward(tokens[p], static_cast<int>(p));
              std::copy(logits, logits + vocab, dst + p * static_cast<std::size_t>(vocab));
            }
            return out;
          },
          py::arg("tokens"), "Logits [len(tokens), vocab] of a sequence starting at position 0");

  m.def(
      "generate",
      [](const model::Model& mdl, const model::Tokenizer& tok, const std::string& prompt, int steps,
         float temperature, float topp, std::uint64_t seed, const py::object& quant) {
        engine::check_sampling(temperature, topp);
        if (steps < 0) throw fpgallm::InputError("steps", std::to_string(steps) + " is negative");
        check_vocabulary(mdl, tok);
        engine::Generation g;
        const auto t = fp::transformer_for(mdl, quant);
        try {
          py::gil_scoped_release unlocked;
          engine::Sampler sampler(mdl.config.vocab_size, temperature, topp, seed);
          g = engine::generate(*t, tok, sampler, prompt, steps);
        } catch (const fpgallm::InputError& e) {
          // The engine names the prompt as the command line's -i.
          if (e.source() != "-i") throw;
          throw fpgallm::InputError("prompt", e.problem());
        }
        return generation_dict(g);
      },
      py::arg("model"), py::arg("tokenizer"), py::arg("prompt") = "", py::arg("steps") = 256,
      py::arg("temperature") = 1.0f, py::arg("topp") = 0.9f, py::arg("seed") = 1, py::arg("quant") = py::none(),
      "llama2.c's generate loop on the fp32 engine (with quant=QuantModel: `fpgallm run --quant`); returns "
      "{tokens, text, prompt_tokens, tokens_per_s}");

  m.def(
      "perplexity",
      [](const model::Model& mdl, const model::Tokenizer& tok, const std::string& text, const py::object& quant) {
        // As `fpgallm eval --text FILE` reads its file: UTF-8 without NUL bytes, not blank.
        fpgallm::require_utf8_text(text, "text");
        if (text.find_first_not_of(" \t\r\n") == std::string::npos)
          throw fpgallm::InputError("text", "is empty (one story per non-empty line)");
        check_vocabulary(mdl, tok);
        engine::Perplexity p;
        const auto t = fp::transformer_for(mdl, quant);
        const bool held_out = fp::is_calibration_text(quant, text);
        {
          py::gil_scoped_release unlocked;
          const auto sequences = held_out ? calib::split_text(tok, text, "text").held_out
                                          : engine::tokenize_stories(tok, engine::split_stories(text));
          p = engine::perplexity(*t, sequences);
        }
        py::dict d;
        d["part"] = held_out ? "held-out" : "all";
        d["perplexity"] = p.perplexity;
        d["perplexity_err"] = p.perplexity_err;
        d["nll_mean"] = p.nll_mean;
        d["nll_stderr"] = p.nll_stderr;
        d["tokens"] = p.tokens;
        d["sequences"] = p.sequences;
        return d;
      },
      py::arg("model"), py::arg("tokenizer"), py::arg("text"), py::arg("quant") = py::none(),
      "Perplexity on text (one story per non-empty line), as `fpgallm eval [--quant]`: the fp32 engine, or the "
      "QuantModel `quant` by simulated quantization; on the quantized model's own calibration text only its "
      "held-out half is measured (part: 'held-out')");

  fp::bind_quant(m);
  fp::bind_save(m);
  fp::bind_engine_ops(m);

  // ---- designs ----------------------------------------------------------------------------
  m.def(
      "load_design",
      [](const py::object& path) {
        nlohmann::json j;
        arch::to_json(j, arch::load(fp::path_arg(path, "path")));
        return to_python(j);
      },
      py::arg("path"), "Reads and validates design.json; returns it with every field resolved");
  m.def(
      "design_problems",
      [](const py::dict& design) {
        arch::Design d;
        read_design_dict(design, d);
        return d.problems();
      },
      py::arg("design"), "Problems of a design given as a dict (missing fields take defaults); [] when valid");
  m.def("default_design", [] {
    nlohmann::json j;
    arch::to_json(j, arch::Design{});
    return to_python(j);
  });

#if FPGALLM_PYTHON_PREDICT
  m.def(
      "devices",
      [] {
        std::vector<std::string> ids;
        for (const auto& d : hw::devices()) ids.push_back(d.id);
        return ids;
      },
      "Ids of the cards and GPUs in data/devices.json");
  m.def(
      "predict",
      [](const py::object& mdl, const py::object& design, const std::string& device, const std::string& scheme,
         int batch, int prompt, int context) {
        // The ranges of `fpgallm plan --batch/--prompt/--context`, in its words.
        auto range = [](int v, int lo, int hi, const char* name) {
          if (v < lo || v > hi) throw fpgallm::InputError(name, fmt::format("{} is not between {} and {}", v, lo, hi));
        };
        range(batch, 1, 4096, "batch");
        range(prompt, 1, 1 << 20, "prompt");
        range(context, 1, 1 << 20, "context");
        const model::Config config = config_of(mdl);
        const arch::Design d = design_of(design);
        const hw::Device& dev = hw::find_device(device.empty() ? d.device : device);
        nlohmann::json j;
        {
          py::gil_scoped_release unlocked;
          const perf::Workloads w = perf::lower(config, graph::parse_scheme(scheme), {batch, prompt, context});
          perf::to_json(j, perf::predict(d, dev, w));
        }
        return to_python(j);
      },
      py::arg("model"), py::arg("design"), py::arg("device") = "", py::arg("scheme") = "int8", py::arg("batch") = 1,
      py::arg("prompt") = 128, py::arg("context") = 512,
      "Analytical prediction (perf::predict) of a design on its device (or `device`), with its assumptions");
#endif
#if FPGALLM_PYTHON_SIMULATE
  m.def(
      "simulate",
      [](const py::object& mdl, const py::object& design, const std::string& device, const std::string& stage,
         int prompt, int context) {
        // `fpgallm simulate --prompt/--context` take positive numbers (context 0 here: the default).
        if (prompt <= 0) throw fpgallm::InputError("prompt", fmt::format("{} must be above 0", prompt));
        if (context < 0) throw fpgallm::InputError("context", fmt::format("{} is below the minimum 0", context));
        const model::Config config = config_of(mdl);
        const arch::Design d = design_of(design);
        const hw::Device& dev = hw::find_device(device.empty() ? d.device : device);
        sim::Options o;
        if (stage == "decode") o.stage = arch::Stage::decode;
        else if (stage == "prefill") o.stage = arch::Stage::prefill;
        else throw fpgallm::InputError("stage", "'" + stage + "' is not prefill or decode");
        o.prompt = prompt;
        o.context = context > 0 ? context : std::min(d.context, config.seq_len);
        nlohmann::json j;
        {
          py::gil_scoped_release unlocked;
          sim::to_json(j, sim::simulate(config, d, dev, o));
        }
        return to_python(j);
      },
      py::arg("model"), py::arg("design"), py::arg("device") = "", py::arg("stage") = "decode",
      py::arg("prompt") = 128, py::arg("context") = 0,
      "Cycle-level simulation (sim::simulate) of a design running one decode step (at `context`, default "
      "the design's context capped by the model's) or a prefill of `prompt` tokens, as `fpgallm simulate`");
#endif

  // ---- int8 matrix unit -------------------------------------------------------------------
  m.attr("INT8_MAX") = fp::kInt8Max;
  m.def(
      "quantize_rows",
      [](const py::object& x_arg) {
        const FloatArray x = float_operand(x_arg, "x");
        require_2d(x, "x");
        const int rows = dim(x, 0), cols = dim(x, 1);
        fp::check_finite(x.data(), static_cast<std::size_t>(x.size()), static_cast<std::size_t>(cols), "x");
        py::array_t<std::int8_t> q({rows, cols});
        py::array_t<float> scales(rows);
        const float* src = x.data();
        std::int8_t* qd = q.mutable_data();
        float* sd = scales.mutable_data();
        {
          py::gil_scoped_release unlocked;
          fp::quantize_rows(src, rows, cols, qd, sd);
        }
        return py::make_tuple(q, scales);
      },
      py::arg("x"), "Symmetric int8 per row: returns (q int8 [rows, cols], scale float32 [rows])");
  m.def(
      "matmul_int8",
      [](const py::object& a_arg, const py::object& b_arg, int threads) {
        const Int8Array a = int8_operand(a_arg, "a"), b = int8_operand(b_arg, "b");
        require_operands(a, b, "a", "b");
        const int mr = dim(a, 0), nr = dim(b, 0), k = dim(a, 1);
        py::array_t<std::int32_t> acc({mr, nr});
        const std::int8_t *ad = a.data(), *bd = b.data();
        std::int32_t* out = acc.mutable_data();
        py::gil_scoped_release unlocked;
        fp::matmul_int8_int32(ad, bd, out, mr, nr, k, threads);
        return acc;
      },
      py::arg("a"), py::arg("b"), py::arg("threads") = 0, "Exact int32 a @ b.T of int8 matrices");
  m.def(
      "matmul_int8_dequant",
      [](const py::object& qa_arg, const py::object& sa_arg, const py::object& qb_arg, const py::object& sb_arg,
         int threads) {
        const Int8Array qa = int8_operand(qa_arg, "qa"), qb = int8_operand(qb_arg, "qb");
        const FloatArray sa = float_operand(sa_arg, "sa"), sb = float_operand(sb_arg, "sb");
        require_operands(qa, qb, "qa", "qb");
        require_scales(sa, qa, "sa", "qa");
        require_scales(sb, qb, "sb", "qb");
        const int mr = dim(qa, 0), nr = dim(qb, 0), k = dim(qa, 1);
        py::array_t<float> y({mr, nr});
        const std::int8_t *ad = qa.data(), *bd = qb.data();
        const float *sad = sa.data(), *sbd = sb.data();
        float* out = y.mutable_data();
        py::gil_scoped_release unlocked;
        fp::matmul_int8_dequant(ad, sad, bd, sbd, out, mr, nr, k, threads);
        return y;
      },
      py::arg("qa"), py::arg("sa"), py::arg("qb"), py::arg("sb"), py::arg("threads") = 0,
      "(float(qa @ qb.T) * sb[None, :]) * sa[:, None] in fp32 (docs/quantization.md section 4)");
  m.def(
      "linear_int8",
      [](const py::object& a_arg, const py::object& b_arg, int threads) {
        const FloatArray a = float_operand(a_arg, "a"), b = float_operand(b_arg, "b");
        require_operands(a, b, "a", "b");
        const int mr = dim(a, 0), nr = dim(b, 0), k = dim(a, 1);
        fp::check_finite(a.data(), static_cast<std::size_t>(a.size()), static_cast<std::size_t>(k), "a");
        fp::check_finite(b.data(), static_cast<std::size_t>(b.size()), static_cast<std::size_t>(k), "b");
        py::array_t<float> y({mr, nr});
        fp::check_threads(threads);
        if (k == 0) {  // the empty sum (the kernels are not invoked without columns)
          std::fill(y.mutable_data(), y.mutable_data() + y.size(), 0.0f);
          return y;
        }
        const float *ad = a.data(), *bd = b.data();
        float* out = y.mutable_data();
        py::gil_scoped_release unlocked;
        fp::linear_int8(ad, bd, out, mr, nr, k, threads);
        return y;
      },
      py::arg("a"), py::arg("b"), py::arg("threads") = 0,
      "a @ b.T on the int8 matrix unit: both quantized per row (along the contraction), int32 sums, fp32 out; a = activations, b = weights");
  m.def(
      "linear_fp32",
      [](const py::object& a_arg, const py::object& b_arg) {
        const FloatArray a = float_operand(a_arg, "a"), b = float_operand(b_arg, "b");
        require_operands(a, b, "a", "b");
        const int mr = dim(a, 0), nr = dim(b, 0), k = dim(a, 1);
        py::array_t<float> y({mr, nr});
        const float *ad = a.data(), *bd = b.data();
        float* out = y.mutable_data();
        py::gil_scoped_release unlocked;
        fp::linear_fp32(ad, bd, out, mr, nr, k);
        return y;
      },
      py::arg("a"), py::arg("b"), "a @ b.T in fp32 with the reference engine's dot-product order");

  m.def(
      "linear_int8_reference",
      [](const py::object& a_arg, const py::object& b_arg, int threads) {
        const FloatArray a = float_operand(a_arg, "a"), b = float_operand(b_arg, "b");
        require_operands(a, b, "a", "b");
        const int mr = dim(a, 0), nr = dim(b, 0), k = dim(a, 1);
        fp::check_finite(a.data(), static_cast<std::size_t>(a.size()), static_cast<std::size_t>(k), "a");
        fp::check_finite(b.data(), static_cast<std::size_t>(b.size()), static_cast<std::size_t>(k), "b");
        py::array_t<float> y({mr, nr});
        const float *ad = a.data(), *bd = b.data();
        float* out = y.mutable_data();
        py::gil_scoped_release unlocked;
        fp::linear_int8_reference(ad, bd, out, mr, nr, k, threads);
        return y;
      },
      py::arg("a"), py::arg("b"), py::arg("threads") = 0,
      "linear_int8 by the plain C++ statement of the contract (src/python/matrix_unit.cpp), not the kernels");
  m.attr("matrix_unit_source") = fp::matrix_unit_source();
}
