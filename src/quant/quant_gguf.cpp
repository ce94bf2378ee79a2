// The quantized model as GGUF (docs/quantization.md section 8): a file llama.cpp loads and
// runs as it is (standard ggml block types, llama.cpp's keys and tensor set of the llama, qwen2 or qwen3
// architecture; Qwen's q/k rows in its rotate-half order), with the plan
// in fpgallm.quant.* keys so that fpgallm recovers the exact integer codes and scales.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "model/gguf.hpp"
#include "model/gguf_llama.hpp"
#include "model/safetensors.hpp"
#include "quant/quant.hpp"
#include "util/error.hpp"

namespace quant {

namespace gg = model::gguf;

namespace {

constexpr std::uint32_t kFileVersion = 2;
const std::string kInt4ScalesKey = "fpgallm.quant.int4_scales.";  // + tensor name
constexpr int kBlock = 32;  // elements of a Q8_0 / Q4_0 block

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

void put_u16(std::vector<std::uint8_t>& out, std::uint16_t v) {
  out.push_back(static_cast<std::uint8_t>(v & 0xFF));
  out.push_back(static_cast<std::uint8_t>(v >> 8));
}
std::uint16_t u16_at(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

// The ggml type a layer of format f with `cols` columns is stored as. Q8_0 and Q4_0 hold
// the codes and scales exactly (one fp16 scale per 32 values: the row's int8 scale, which
// the int8 quantizer makes fp16-exact, or the int4 group's fp16 scale repeated for each 32
// of the group); rows that are not a whole number of blocks are stored as F32 values,
// float(q) * scale, which are exact in fp32.
gg::GgmlType stored_type(WeightFormat f, int cols) {
  switch (f) {
    case WeightFormat::f32: return gg::GgmlType::f32;
    case WeightFormat::f16: return gg::GgmlType::f16;
    case WeightFormat::int8: return cols % kBlock == 0 ? gg::GgmlType::q8_0 : gg::GgmlType::f32;
    case WeightFormat::int4: return cols % kBlock == 0 ? gg::GgmlType::q4_0 : gg::GgmlType::f32;
  }
  return gg::GgmlType::f32;
}

std::vector<std::uint8_t> q8_0_blocks(const Int8Matrix& m) {
  std::vector<std::uint8_t> out;
  out.reserve(static_cast<std::size_t>(m.rows) * (m.cols / kBlock) * 34);
  for (int r = 0; r < m.rows; ++r) {
    const float s = m.scale[static_cast<std::size_t>(r)];
    const std::uint16_t d = gg::float_to_fp16(s);
    if (gg::fp16_to_float(d) != s) throw std::logic_error("int8 row scale is not an fp16 value");
    for (int b = 0; b < m.cols / kBlock; ++b) {
      put_u16(out, d);
      const auto* q = m.q.data() + static_cast<std::size_t>(r) * m.cols + b * kBlock;
      for (int j = 0; j < kBlock; ++j) out.push_back(static_cast<std::uint8_t>(q[j]));
    }
  }
  return out;
}

// Int4Matrix packing is Q4_0's nibble order (docs 2.2), so a 32-column chunk is a block's qs.
std::vector<std::uint8_t> q4_0_blocks(const Int4Matrix& m) {
  std::vector<std::uint8_t> out;
  out.reserve(static_cast<std::size_t>(m.rows) * (m.cols / kBlock) * 18);
  for (int r = 0; r < m.rows; ++r)
    for (int b = 0; b < m.cols / kBlock; ++b) {
      put_u16(out, m.scale[static_cast<std::size_t>(r) * m.groups() + b * kBlock / m.group]);
      const std::uint8_t* p = m.packed.data() + static_cast<std::size_t>(r) * m.row_bytes() + b * 16;
      out.insert(out.end(), p, p + 16);
    }
  return out;
}

void add_linear(gg::Writer& w, const std::string& name, const QuantLinear& q) {
  const std::vector<std::uint64_t> dims = model::gguf_matrix_dims({q.rows, q.cols});
  const gg::GgmlType type = stored_type(q.format, q.cols);
  switch (type) {
    case gg::GgmlType::f16: w.add_tensor(name, type, dims, as_bytes(q.f16)); return;
    case gg::GgmlType::q8_0: w.add_tensor(name, type, dims, q8_0_blocks(q.int8)); return;
    case gg::GgmlType::q4_0: w.add_tensor(name, type, dims, q4_0_blocks(q.int4)); return;
    default: break;
  }
  const std::vector<float> values = q.dequantized();
  // int4 groups whose largest code is not +-7 (GPTQ, searched scales) cannot be recovered
  // from the values by quantizing them again: their scales go beside them.
  if (q.format == WeightFormat::int4 && quantize_int4(values, q.rows, q.cols, q.int4.group).scale != q.int4.scale)
    w.set(kInt4ScalesKey + name, gg::Value::u32s(std::vector<std::uint32_t>(q.int4.scale.begin(), q.int4.scale.end())));
  w.add_tensor(name, gg::GgmlType::f32, dims, as_bytes(values));
}

// The type most of the linear weights (by element count) are stored as.
// Rows of `l` reordered: row j of the result is row from[j] of l (every format).
QuantLinear reorder_rows(const QuantLinear& l, const std::vector<int>& from) {
  QuantLinear out = l;
  auto move_rows = [&](const auto& src, auto& dst, std::size_t width) {
    for (std::size_t j = 0; j < from.size(); ++j)
      std::copy_n(src.begin() + std::ptrdiff_t(std::size_t(from[j]) * width), width,
                  dst.begin() + std::ptrdiff_t(j * width));
  };
  const auto cols = std::size_t(l.cols);
  switch (l.format) {
    case WeightFormat::f32: move_rows(l.f32, out.f32, cols); break;
    case WeightFormat::f16: move_rows(l.f16, out.f16, cols); break;
    case WeightFormat::int8:
      move_rows(l.int8.q, out.int8.q, cols);
      move_rows(l.int8.scale, out.int8.scale, 1);
      break;
    case WeightFormat::int4:
      move_rows(l.int4.packed, out.int4.packed, std::size_t(l.int4.row_bytes()));
      move_rows(l.int4.scale, out.int4.scale, std::size_t(l.int4.groups()));
      break;
  }
  return out;
}

// Qwen's GGUF tensors hold q and k rows (and their biases and gains) in Hugging Face's
// rotate-half order, as llama.cpp and model::load_gguf expect; fpgallm keeps them
// interleaved (model/safetensors.hpp). The row order of one direction, as indices.
std::vector<int> rope_row_order(int heads, int head_dim, bool to_hf) {
  std::vector<float> idx(std::size_t(heads) * head_dim);
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = float(i);
  if (to_hf)
    model::safetensors::interleaved_to_hf(idx, heads, head_dim, 1);
  else
    model::safetensors::hf_to_interleaved(idx, heads, head_dim, 1);
  return std::vector<int>(idx.begin(), idx.end());
}

std::vector<float> reorder(const std::vector<float>& v, const std::vector<int>& from) {
  std::vector<float> out(v.size());
  for (std::size_t j = 0; j < from.size(); ++j) out[j] = v[std::size_t(from[j])];
  return out;
}

gg::GgmlType predominant_type(const QuantModel& qm) {
  std::map<gg::GgmlType, std::uint64_t> elements;
  for (const auto& l : qm.linears)
    elements[stored_type(l.format, l.cols)] += static_cast<std::uint64_t>(l.rows) * l.cols;
  return std::max_element(elements.begin(), elements.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

}  // namespace

void save_gguf(const QuantModel& qm, const std::string& path, const model::Tokenizer* tokenizer,
               const model::BpeTokenizer* bpe) {
  const auto& c = qm.config;
  if (tokenizer && tokenizer->vocab_size() != c.vocab_size)
    throw fpgallm::InputError(path, "tokenizer has " + std::to_string(tokenizer->vocab_size()) +
                                        " tokens but the model's vocabulary has " + std::to_string(c.vocab_size));
  gg::Writer w;
  model::put_llama_metadata(w, c);
  w.set("general.file_type", gg::Value::u32(model::llama_file_type(predominant_type(qm))));
  if (tokenizer) model::put_tokenizer_metadata(w, *tokenizer);
  else if (bpe) model::put_bpe_tokenizer_metadata(w, *bpe, c.vocab_size, path);

  const Plan& p = qm.plan;
  std::vector<std::string> wf, af;
  std::vector<float> scales;
  for (const auto& l : p.layers) {
    wf.push_back(to_string(l.weight));
    af.push_back(to_string(l.act));
    scales.push_back(l.act_scale);
  }
  nlohmann::json pj = p;
  w.set("fpgallm.quant.version", gg::Value::u32(kFileVersion));
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
  const bool qwen = c.arch != model::Arch::llama;
  const int hd = c.head_dim();
  const auto q_hf = rope_row_order(c.n_heads, hd, true), k_hf = rope_row_order(c.n_kv_heads, hd, true);
  const auto head_hf = rope_row_order(1, hd, true);
  auto vec = [&](const std::string& name, const std::vector<float>& v) {
    w.add_tensor(name, gg::GgmlType::f32, {v.size()}, as_bytes(v));
  };
  // llama.cpp's tensor order: embedding, then per block norms and matrices, then the head.
  w.add_tensor_view("token_embd.weight", gg::GgmlType::f32, {dim, static_cast<std::uint64_t>(c.vocab_size)},
                    {reinterpret_cast<const std::uint8_t*>(qm.token_embedding.data()), qm.token_embedding.size() * 4});
  for (int l = 0; l < c.n_layers; ++l) {
    const auto li = static_cast<std::size_t>(l);
    const std::string blk = "blk." + std::to_string(l) + ".";
    w.add_tensor(blk + "attn_norm.weight", gg::GgmlType::f32, {dim}, as_bytes(qm.attn_norm[li]));
    w.add_tensor(blk + "ffn_norm.weight", gg::GgmlType::f32, {dim}, as_bytes(qm.ffn_norm[li]));
    for (model::Linear which : model::kBlockLinears) {
      const std::string name = model::gguf_tensor_name(l, which);
      if (qwen && which == model::Linear::wq)
        add_linear(w, name, reorder_rows(qm.linear(l, which), q_hf));
      else if (qwen && which == model::Linear::wk)
        add_linear(w, name, reorder_rows(qm.linear(l, which), k_hf));
      else
        add_linear(w, name, qm.linear(l, which));
    }
    if (c.qkv_bias) {
      vec(blk + "attn_q.bias", reorder(qm.bq[li], q_hf));
      vec(blk + "attn_k.bias", reorder(qm.bk[li], k_hf));
      vec(blk + "attn_v.bias", qm.bv[li]);
    }
    if (c.qk_norm) {
      vec(blk + "attn_q_norm.weight", reorder(qm.q_norm[li], head_hf));
      vec(blk + "attn_k_norm.weight", reorder(qm.k_norm[li], head_hf));
    }
  }
  w.add_tensor("output_norm.weight", gg::GgmlType::f32, {dim}, as_bytes(qm.final_norm));
  add_linear(w, model::gguf_tensor_name(-1, model::Linear::cls), qm.linear(-1, model::Linear::cls));
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

Int8Matrix int8_from_q8_0(const gg::Reader& r, const std::string& name, std::span<const std::uint8_t> b, int rows,
                          int cols) {
  Int8Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.q.resize(static_cast<std::size_t>(rows) * cols);
  m.scale.resize(static_cast<std::size_t>(rows));
  const std::size_t per_row = static_cast<std::size_t>(cols / kBlock);
  for (std::size_t row = 0; row < static_cast<std::size_t>(rows); ++row) {
    const std::uint8_t* first = b.data() + row * per_row * 34;
    const std::uint16_t d = u16_at(first);
    m.scale[row] = gg::fp16_to_float(d);
    if (!(m.scale[row] >= 0.0f) || std::isinf(m.scale[row]))
      r.fail("tensor " + name + " row " + std::to_string(row) + " has a negative or non-finite scale");
    for (std::size_t k = 0; k < per_row; ++k) {
      const std::uint8_t* p = first + k * 34;
      if (u16_at(p) != d)
        r.fail("tensor " + name + " row " + std::to_string(row) + " has more than one Q8_0 scale (not a per-row int8 layer)");
      for (int j = 0; j < kBlock; ++j) {
        const auto q = static_cast<std::int8_t>(p[2 + j]);
        if (q == -128) r.fail("tensor " + name + " holds int8 code -128 (outside -127..127)");
        m.q[row * cols + k * kBlock + j] = q;
      }
    }
  }
  return m;
}

Int4Matrix int4_from_q4_0(const gg::Reader& r, const std::string& name, std::span<const std::uint8_t> b, int rows,
                          int cols, int group) {
  Int4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.group = group;
  const int G = m.groups(), per_row = cols / kBlock;
  m.packed.resize(static_cast<std::size_t>(rows) * m.row_bytes());
  m.scale.resize(static_cast<std::size_t>(rows) * G);
  for (int row = 0; row < rows; ++row)
    for (int k = 0; k < per_row; ++k) {
      const std::uint8_t* p = b.data() + (static_cast<std::size_t>(row) * per_row + k) * 18;
      const std::size_t g = static_cast<std::size_t>(row) * G + static_cast<std::size_t>(k * kBlock / group);
      if (k * kBlock % group == 0) m.scale[g] = u16_at(p);
      else if (m.scale[g] != u16_at(p))
        r.fail("tensor " + name + " has different Q4_0 scales inside one group of " + std::to_string(group));
      std::memcpy(m.packed.data() + static_cast<std::size_t>(row) * m.row_bytes() + k * 16, p + 2, 16);
    }
  for (std::uint8_t byte : m.packed)
    if ((byte & 0x0F) == 0 || (byte >> 4) == 0) r.fail("tensor " + name + " holds int4 code -8 (outside -7..7)");
  return m;
}

QuantLinear read_linear(const gg::Reader& r, const std::string& name, WeightFormat f, int rows, int cols, int group) {
  const gg::TensorInfo& t = expect(r, name, stored_type(f, cols), model::gguf_matrix_dims({rows, cols}));
  const auto bytes = r.tensor_bytes(t);
  QuantLinear q;
  q.format = f;
  q.rows = rows;
  q.cols = cols;
  switch (t.type) {
    case gg::GgmlType::f16: q.f16 = from_bytes<std::uint16_t>(bytes); return q;
    case gg::GgmlType::q8_0: q.int8 = int8_from_q8_0(r, name, bytes, rows, cols); return q;
    case gg::GgmlType::q4_0: q.int4 = int4_from_q4_0(r, name, bytes, rows, cols, group); return q;
    default: break;
  }
  std::vector<float> w = from_bytes<float>(bytes);
  if (f == WeightFormat::f32) {
    q.f32 = std::move(w);
    return q;
  }
  if (f == WeightFormat::int4 && r.find(kInt4ScalesKey + name)) {
    // The codes are value / scale, exactly (float(q) * scale is exact in fp32).
    const auto scales = r.get_ints(kInt4ScalesKey + name);
    Int4Matrix& m = q.int4;
    m.rows = rows;
    m.cols = cols;
    m.group = group;
    if (scales.size() != static_cast<std::size_t>(rows) * m.groups())
      r.fail(kInt4ScalesKey + name + " has " + std::to_string(scales.size()) + " scales; the layer has " +
             std::to_string(rows * m.groups()) + " groups");
    m.packed.assign(static_cast<std::size_t>(rows) * m.row_bytes(), 0x88);
    m.scale.resize(scales.size());
    for (int row = 0; row < rows; ++row)
      for (int c = 0; c < cols; ++c) {
        const auto k = static_cast<std::size_t>(row) * m.groups() + static_cast<std::size_t>(c / group);
        if (scales[k] < 0 || scales[k] > 0xFFFF) r.fail(kInt4ScalesKey + name + " holds a value that is not fp16 bits");
        m.scale[k] = static_cast<std::uint16_t>(scales[k]);
        const float sc = model::gguf::fp16_to_float(m.scale[k]);
        const float v = w[static_cast<std::size_t>(row) * cols + c];
        const float code = sc == 0.0f ? 0.0f : v / sc;
        if (!(std::fabs(code) <= static_cast<float>(kInt4Max)) || code != std::nearbyint(code) ||
            static_cast<float>(static_cast<int>(code)) * sc != v)
          r.fail("tensor " + name + " does not hold int4 codes times the scales of " + kInt4ScalesKey + name);
        m.set_code(row, c, static_cast<int>(code));
      }
    return q;
  }
  // An int8/int4 layer whose rows are not whole blocks holds float(q) * scale in F32:
  // quantizing those values again gives back the same codes and scales (the element of
  // largest magnitude in a row or group is code +-127 or +-7), which is checked bit for bit.
  try {
    q = quantize_linear(w, rows, cols, f, group);
  } catch (const std::invalid_argument& e) {
    r.fail("tensor " + name + ": " + e.what());
  }
  if (q.dequantized() != w)
    r.fail("tensor " + name + " does not hold " + to_string(f) + " values (quantizing them again changes them)");
  return q;
}

}  // namespace

QuantModel load_gguf(const std::string& path) {
  gg::Reader r(path);
  if (!r.find("fpgallm.quant.version")) r.fail("not an fpgallm quantized model (no fpgallm.quant.version)");
  if (const auto v = r.get_uint("fpgallm.quant.version"); v != kFileVersion)
    r.fail("fpgallm.quant.version is " + std::to_string(v) + ", this fpgallm reads " + std::to_string(kFileVersion) +
           (v == 1 ? " (version 1 files held I8 tensors that llama.cpp cannot load: quantize the model again)" : ""));
  const std::string arch = r.get_string("general.architecture");
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3")
    r.fail("general.architecture is " + arch + ", not llama, qwen2 or qwen3");
  const std::string k = arch + ".";
  QuantModel qm;
  auto& c = qm.config;
  c.arch = model::arch_from_string(arch);
  c.qkv_bias = c.arch == model::Arch::qwen2;
  c.qk_norm = c.arch == model::Arch::qwen3;
  c.name = r.find("general.name") ? r.get_string("general.name") : "quantized";
  c.seq_len = static_cast<int>(r.get_int(k + "context_length"));
  c.dim = static_cast<int>(r.get_int(k + "embedding_length"));
  c.hidden_dim = static_cast<int>(r.get_int(k + "feed_forward_length"));
  c.n_layers = static_cast<int>(r.get_int(k + "block_count"));
  c.n_heads = static_cast<int>(r.get_int(k + "attention.head_count"));
  c.n_kv_heads = static_cast<int>(r.get_int(k + "attention.head_count_kv"));
  c.rope_theta = static_cast<float>(r.get_float(k + "rope.freq_base"));
  c.norm_eps = static_cast<float>(r.get_float(k + "attention.layer_norm_rms_epsilon"));
  c.vocab_size = static_cast<int>(r.get_int(k + "vocab_size"));
  if (r.find(k + "attention.key_length")) {
    const auto key_length = r.get_int(k + "attention.key_length");
    if (key_length < 1 || key_length > (1 << 20)) r.fail(k + "attention.key_length is out of range");
    if (key_length * c.n_heads != c.dim) c.head_size = static_cast<int>(key_length);
  }
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
  const int hd = c.head_dim();
  const auto q_rows = std::uint64_t(c.n_heads) * hd, kv_rows = std::uint64_t(c.kv_dim());
  const auto q_mem = rope_row_order(c.n_heads, hd, false), k_mem = rope_row_order(c.n_kv_heads, hd, false);
  const auto head_mem = rope_row_order(1, hd, false);
  const bool qwen = c.arch != model::Arch::llama;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    qm.attn_norm.push_back(read_f32(r, blk + "attn_norm.weight", {dim}));
    qm.ffn_norm.push_back(read_f32(r, blk + "ffn_norm.weight", {dim}));
    const bool b = c.qkv_bias, n = c.qk_norm;
    qm.bq.push_back(b ? reorder(read_f32(r, blk + "attn_q.bias", {q_rows}), q_mem) : std::vector<float>{});
    qm.bk.push_back(b ? reorder(read_f32(r, blk + "attn_k.bias", {kv_rows}), k_mem) : std::vector<float>{});
    qm.bv.push_back(b ? read_f32(r, blk + "attn_v.bias", {kv_rows}) : std::vector<float>{});
    qm.q_norm.push_back(n ? reorder(read_f32(r, blk + "attn_q_norm.weight", {std::uint64_t(hd)}), head_mem)
                          : std::vector<float>{});
    qm.k_norm.push_back(n ? reorder(read_f32(r, blk + "attn_k_norm.weight", {std::uint64_t(hd)}), head_mem)
                          : std::vector<float>{});
  }
  qm.final_norm = read_f32(r, "output_norm.weight", {dim});
  for (const auto& lp : qm.plan.layers) {
    const auto s = model::linear_shape(c, lp.which);
    qm.linears.push_back(
        read_linear(r, model::gguf_tensor_name(lp.layer, lp.which), lp.weight, s.rows, s.cols, qm.plan.group));
    if (qwen && lp.which == model::Linear::wq) qm.linears.back() = reorder_rows(qm.linears.back(), q_mem);
    if (qwen && lp.which == model::Linear::wk) qm.linears.back() = reorder_rows(qm.linears.back(), k_mem);
  }
  return qm;
}

bool is_quantized_gguf(const std::string& path) {
  try {
    return gg::Reader(path).find("fpgallm.quant.version") != nullptr;
  } catch (const fpgallm::InputError&) {
    return false;
  }
}

}  // namespace quant
