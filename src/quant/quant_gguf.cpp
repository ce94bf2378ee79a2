// The quantized model as GGUF (docs/quantization.md section 8).
#include <cstring>
#include <nlohmann/json.hpp>

#include "model/gguf.hpp"
#include "quant/quant.hpp"
#include "util/error.hpp"

namespace quant {

namespace gg = model::gguf;

namespace {

std::string tensor_base(int layer, model::Linear which) {
  if (which == model::Linear::cls) return "output";
  return "blk." + std::to_string(layer) + "." + model::gguf_name(which);
}

template <typename T>
std::vector<std::uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<std::uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <typename T>
std::vector<T> from_bytes(std::span<const std::uint8_t> b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

bool stored_as_q4_0(const Int4Matrix& m) { return m.group == 32 && m.cols % 32 == 0; }

std::vector<std::uint8_t> to_q4_0_blocks(const Int4Matrix& m) {
  std::vector<std::uint8_t> out;
  out.reserve(static_cast<std::size_t>(m.rows) * m.groups() * 18);
  for (int r = 0; r < m.rows; ++r)
    for (int k = 0; k < m.groups(); ++k) {
      const std::uint16_t d = m.scale[static_cast<std::size_t>(r) * m.groups() + k];
      out.push_back(static_cast<std::uint8_t>(d & 0xFF));
      out.push_back(static_cast<std::uint8_t>(d >> 8));
      const std::uint8_t* p = m.packed.data() + static_cast<std::size_t>(r) * m.row_bytes() + k * 16;
      out.insert(out.end(), p, p + 16);
    }
  return out;
}

void add_linear(gg::Writer& w, const std::string& base, const QuantLinear& q) {
  const auto R = static_cast<std::uint64_t>(q.rows), C = static_cast<std::uint64_t>(q.cols);
  switch (q.format) {
    case WeightFormat::f32: w.add_tensor(base + ".weight", gg::GgmlType::f32, {C, R}, as_bytes(q.f32)); break;
    case WeightFormat::f16: w.add_tensor(base + ".weight", gg::GgmlType::f16, {C, R}, as_bytes(q.f16)); break;
    case WeightFormat::int8:
      w.add_tensor(base + ".weight", gg::GgmlType::i8, {C, R}, as_bytes(q.int8.q));
      w.add_tensor(base + ".scale", gg::GgmlType::f32, {R}, as_bytes(q.int8.scale));
      break;
    case WeightFormat::int4:
      if (stored_as_q4_0(q.int4)) {
        w.add_tensor(base + ".weight", gg::GgmlType::q4_0, {C, R}, to_q4_0_blocks(q.int4));
      } else {
        w.add_tensor(base + ".weight", gg::GgmlType::i8, {static_cast<std::uint64_t>(q.int4.row_bytes()), R},
                     q.int4.packed);
        w.add_tensor(base + ".scale", gg::GgmlType::f16, {static_cast<std::uint64_t>(q.int4.groups()), R},
                     as_bytes(q.int4.scale));
      }
      break;
  }
}

}  // namespace

void save_gguf(const QuantModel& qm, const std::string& path) {
  const auto& c = qm.config;
  gg::Writer w;
  w.set("general.architecture", gg::Value::string("llama"));
  w.set("general.name", gg::Value::string(c.name));
  w.set("llama.context_length", gg::Value::u32(static_cast<std::uint32_t>(c.seq_len)));
  w.set("llama.embedding_length", gg::Value::u32(static_cast<std::uint32_t>(c.dim)));
  w.set("llama.feed_forward_length", gg::Value::u32(static_cast<std::uint32_t>(c.hidden_dim)));
  w.set("llama.block_count", gg::Value::u32(static_cast<std::uint32_t>(c.n_layers)));
  w.set("llama.attention.head_count", gg::Value::u32(static_cast<std::uint32_t>(c.n_heads)));
  w.set("llama.attention.head_count_kv", gg::Value::u32(static_cast<std::uint32_t>(c.n_kv_heads)));
  w.set("llama.rope.freq_base", gg::Value::f32(c.rope_theta));
  w.set("llama.attention.layer_norm_rms_epsilon", gg::Value::f32(c.norm_eps));
  w.set("llama.vocab_size", gg::Value::u32(static_cast<std::uint32_t>(c.vocab_size)));

  const Plan& p = qm.plan;
  std::vector<std::string> wf, af;
  std::vector<float> scales;
  for (const auto& l : p.layers) {
    wf.push_back(to_string(l.weight));
    af.push_back(to_string(l.act));
    scales.push_back(l.act_scale);
  }
  nlohmann::json pj = p;
  w.set("fpgallm.quant.version", gg::Value::u32(1));
  w.set("fpgallm.quant.scheme", gg::Value::string(to_string(p.scheme)));
  w.set("fpgallm.quant.group", gg::Value::u32(static_cast<std::uint32_t>(p.group)));
  w.set("fpgallm.quant.kv_cache", gg::Value::string(p.kv8 ? "int8" : "f32"));
  w.set("fpgallm.quant.smoothquant_alpha", gg::Value::f32(p.smooth_alpha));
  w.set("fpgallm.quant.weight_format", gg::Value::strings(wf));
  w.set("fpgallm.quant.act_format", gg::Value::strings(af));
  w.set("fpgallm.quant.act_scale", gg::Value::f32s(scales));
  w.set("fpgallm.quant.plan", gg::Value::string(pj.dump()));
  w.set("fpgallm.quant.calibration_file", gg::Value::string(qm.calibration_file));
  w.set("fpgallm.quant.calibration_fnv1a64", gg::Value::u64(qm.calibration_fnv1a));

  const auto dim = static_cast<std::uint64_t>(c.dim);
  w.add_tensor_view("token_embd.weight", gg::GgmlType::f32, {dim, static_cast<std::uint64_t>(c.vocab_size)},
                    {reinterpret_cast<const std::uint8_t*>(qm.token_embedding.data()), qm.token_embedding.size() * 4});
  for (int l = 0; l < c.n_layers; ++l) {
    const auto li = static_cast<std::size_t>(l);
    const std::string blk = "blk." + std::to_string(l) + ".";
    w.add_tensor(blk + "attn_norm.weight", gg::GgmlType::f32, {dim}, as_bytes(qm.attn_norm[li]));
    w.add_tensor(blk + "ffn_norm.weight", gg::GgmlType::f32, {dim}, as_bytes(qm.ffn_norm[li]));
    for (model::Linear which : model::kBlockLinears) add_linear(w, tensor_base(l, which), qm.linear(l, which));
  }
  w.add_tensor("output_norm.weight", gg::GgmlType::f32, {dim}, as_bytes(qm.final_norm));
  add_linear(w, "output", qm.linear(-1, model::Linear::cls));
  w.write(path);
}

namespace {

const gg::TensorInfo& expect(const gg::Reader& r, const std::string& name, gg::GgmlType type,
                             std::vector<std::uint64_t> dims) {
  const auto& t = r.tensor(name);
  if (t.type != type) r.fail("tensor " + name + " is " + gg::type_name(t.type) + ", expected " + gg::type_name(type));
  if (t.dims != dims) r.fail("tensor " + name + " has the wrong shape for the model");
  return t;
}

std::vector<float> read_f32(const gg::Reader& r, const std::string& name, std::vector<std::uint64_t> dims) {
  return from_bytes<float>(r.tensor_bytes(expect(r, name, gg::GgmlType::f32, std::move(dims))));
}

QuantLinear read_linear(const gg::Reader& r, const std::string& base, WeightFormat f, int rows, int cols, int group) {
  QuantLinear q;
  q.format = f;
  q.rows = rows;
  q.cols = cols;
  const auto R = static_cast<std::uint64_t>(rows), C = static_cast<std::uint64_t>(cols);
  const std::string wname = base + ".weight";
  switch (f) {
    case WeightFormat::f32: q.f32 = read_f32(r, wname, {C, R}); break;
    case WeightFormat::f16:
      q.f16 = from_bytes<std::uint16_t>(r.tensor_bytes(expect(r, wname, gg::GgmlType::f16, {C, R})));
      break;
    case WeightFormat::int8:
      q.int8.rows = rows;
      q.int8.cols = cols;
      q.int8.q = from_bytes<std::int8_t>(r.tensor_bytes(expect(r, wname, gg::GgmlType::i8, {C, R})));
      q.int8.scale = read_f32(r, base + ".scale", {R});
      break;
    case WeightFormat::int4: {
      auto& m = q.int4;
      m.rows = rows;
      m.cols = cols;
      m.group = group;
      if (stored_as_q4_0(m)) {
        const auto b = r.tensor_bytes(expect(r, wname, gg::GgmlType::q4_0, {C, R}));
        const int G = m.groups();
        m.packed.resize(static_cast<std::size_t>(rows) * m.row_bytes());
        m.scale.resize(static_cast<std::size_t>(rows) * G);
        for (std::size_t blk = 0; blk < static_cast<std::size_t>(rows) * G; ++blk) {
          const std::uint8_t* p = b.data() + blk * 18;
          m.scale[blk] = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
          std::memcpy(m.packed.data() + blk * 16, p + 2, 16);
        }
      } else {
        const auto b = r.tensor_bytes(
            expect(r, wname, gg::GgmlType::i8, {static_cast<std::uint64_t>(m.row_bytes()), R}));
        m.packed.assign(b.begin(), b.end());
        m.scale = from_bytes<std::uint16_t>(
            r.tensor_bytes(expect(r, base + ".scale", gg::GgmlType::f16, {static_cast<std::uint64_t>(m.groups()), R})));
      }
      for (std::uint8_t byte : m.packed)
        if ((byte & 0x0F) == 0 || (byte >> 4) == 0) r.fail("tensor " + wname + " holds int4 code -8 (outside -7..7)");
      break;
    }
  }
  return q;
}

}  // namespace

QuantModel load_gguf(const std::string& path) {
  gg::Reader r(path);
  if (!r.find("fpgallm.quant.version")) r.fail("not an fpgallm quantized model (no fpgallm.quant.version)");
  if (r.get_uint("fpgallm.quant.version") != 1) r.fail("fpgallm.quant.version is not 1");
  if (r.get_string("general.architecture") != "llama") r.fail("general.architecture is not llama");
  QuantModel qm;
  auto& c = qm.config;
  c.name = r.find("general.name") ? r.get_string("general.name") : "quantized";
  c.seq_len = static_cast<int>(r.get_int("llama.context_length"));
  c.dim = static_cast<int>(r.get_int("llama.embedding_length"));
  c.hidden_dim = static_cast<int>(r.get_int("llama.feed_forward_length"));
  c.n_layers = static_cast<int>(r.get_int("llama.block_count"));
  c.n_heads = static_cast<int>(r.get_int("llama.attention.head_count"));
  c.n_kv_heads = static_cast<int>(r.get_int("llama.attention.head_count_kv"));
  c.rope_theta = static_cast<float>(r.get_float("llama.rope.freq_base"));
  c.norm_eps = static_cast<float>(r.get_float("llama.attention.layer_norm_rms_epsilon"));
  c.vocab_size = static_cast<int>(r.get_int("llama.vocab_size"));
  c.shared_classifier = false;
  if (const std::string why = c.invalid_reason(); !why.empty()) r.fail(why);
  try {
    qm.plan = plan_from_json(nlohmann::json::parse(r.get_string("fpgallm.quant.plan")), c);
  } catch (const std::exception& e) {
    r.fail(std::string("fpgallm.quant.plan: ") + e.what());
  }
  const auto& wf = r.get_strings("fpgallm.quant.weight_format");
  if (wf.size() != qm.plan.layers.size()) r.fail("fpgallm.quant.weight_format has the wrong length");
  for (std::size_t i = 0; i < wf.size(); ++i)
    if (wf[i] != to_string(qm.plan.layers[i].weight)) r.fail("fpgallm.quant.weight_format disagrees with the plan");

  if (r.find("fpgallm.quant.calibration_file")) qm.calibration_file = r.get_string("fpgallm.quant.calibration_file");
  if (r.find("fpgallm.quant.calibration_fnv1a64")) qm.calibration_fnv1a = r.get_uint("fpgallm.quant.calibration_fnv1a64");
  const auto dim = static_cast<std::uint64_t>(c.dim);
  qm.token_embedding = read_f32(r, "token_embd.weight", {dim, static_cast<std::uint64_t>(c.vocab_size)});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    qm.attn_norm.push_back(read_f32(r, blk + "attn_norm.weight", {dim}));
    qm.ffn_norm.push_back(read_f32(r, blk + "ffn_norm.weight", {dim}));
  }
  qm.final_norm = read_f32(r, "output_norm.weight", {dim});
  for (const auto& lp : qm.plan.layers) {
    const auto s = model::linear_shape(c, lp.which);
    qm.linears.push_back(read_linear(r, tensor_base(lp.layer, lp.which), lp.weight, s.rows, s.cols, qm.plan.group));
  }
  return qm;
}

}  // namespace quant
