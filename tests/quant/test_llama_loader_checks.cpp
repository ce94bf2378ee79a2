// The GGUF that `fpgallm quantize` writes must load in llama.cpp. This test parses the file
// with its own code, written from the GGUF specification (ggml docs/gguf.md) and the checks
// llama.cpp's loader makes for a "llama" model (gguf_init_from_file, llama_model_loader,
// llm_load_hparams, llm_load_vocab, create_tensor / check_tensor_dims / done_getting_tensors),
// not through fpgallm's GGUF reader. Then it checks that the weights a ggml reader decodes
// are, bit for bit, the weights fpgallm runs, and that fpgallm reads the plan back exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "model/gguf.hpp"
#include "model/gguf_llama.hpp"
#include "model/model.hpp"
#include "model/tokenizer.hpp"
#include "quant/quant.hpp"
#include "testing.hpp"
#include "util/error.hpp"

namespace {

// ---- an independent GGUF parser ----

struct Kv {
  std::uint32_t type = 0, element = 0;  // element: array element type
  std::uint64_t count = 1;              // array length
  std::uint64_t u = 0;                  // an integer scalar
  double f = 0;
  std::string s;
};

struct TensorEntry {
  std::string name;
  std::vector<std::uint64_t> ne;
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
};

struct Parsed {
  std::uint32_t version = 0;
  std::map<std::string, Kv> kv;
  std::vector<TensorEntry> tensors;
  std::uint64_t data_start = 0, file_size = 0;
};

// ggml_type -> (block size, bytes per block), from ggml.h / ggml.c's type_traits.
const std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> kGgmlTypes = {
    {0, {1, 4}},      {1, {1, 2}},      {2, {32, 18}},   {3, {32, 20}},   {6, {32, 22}},   {7, {32, 24}},
    {8, {32, 34}},    {10, {256, 84}},  {11, {256, 110}}, {12, {256, 144}}, {13, {256, 176}}, {14, {256, 210}},
    {20, {32, 18}},   {23, {256, 136}}, {24, {1, 1}},    {26, {1, 4}},    {30, {1, 2}}};

class Cursor {
 public:
  explicit Cursor(const std::string& b) : b_(b) {}
  template <typename T>
  T get() {
    if (at_ + sizeof(T) > b_.size()) throw std::runtime_error("read past the end at " + std::to_string(at_));
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string str() {
    const auto n = get<std::uint64_t>();
    if (n > b_.size() - at_) throw std::runtime_error("string past the end");
    std::string s = b_.substr(at_, n);
    at_ += n;
    return s;
  }
  std::size_t at() const { return at_; }

 private:
  const std::string& b_;
  std::size_t at_ = 0;
};

void read_scalar(Cursor& c, std::uint32_t t, Kv& kv) {
  switch (t) {
    case 0: kv.u = c.get<std::uint8_t>(); return;
    case 1: kv.u = static_cast<std::uint64_t>(c.get<std::int8_t>()); return;
    case 2: kv.u = c.get<std::uint16_t>(); return;
    case 3: kv.u = static_cast<std::uint64_t>(c.get<std::int16_t>()); return;
    case 4: kv.u = c.get<std::uint32_t>(); return;
    case 5: kv.u = static_cast<std::uint64_t>(c.get<std::int32_t>()); return;
    case 6: kv.f = c.get<float>(); return;
    case 7: kv.u = c.get<std::uint8_t>(); return;
    case 8: kv.s = c.str(); return;
    case 10: kv.u = c.get<std::uint64_t>(); return;
    case 11: kv.u = static_cast<std::uint64_t>(c.get<std::int64_t>()); return;
    case 12: kv.f = c.get<double>(); return;
    default: throw std::runtime_error("bad value type " + std::to_string(t));
  }
}

Parsed parse(const std::string& b) {
  Parsed p;
  Cursor c(b);
  p.file_size = b.size();
  if (b.compare(0, 4, "GGUF") != 0) throw std::runtime_error("bad magic");
  c.get<std::uint32_t>();
  p.version = c.get<std::uint32_t>();
  const auto n_tensors = c.get<std::uint64_t>();
  const auto n_kv = c.get<std::uint64_t>();
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = c.str();
    Kv kv;
    kv.type = c.get<std::uint32_t>();
    if (kv.type == 9) {
      kv.element = c.get<std::uint32_t>();
      kv.count = c.get<std::uint64_t>();
      for (std::uint64_t e = 0; e < kv.count; ++e) {
        Kv item;
        read_scalar(c, kv.element, item);
        if (e == 0) kv.s = item.s;  // first element kept (enough for the checks below)
      }
    } else {
      read_scalar(c, kv.type, kv);
    }
    if (!p.kv.emplace(key, kv).second) throw std::runtime_error("duplicate key " + key);
  }
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    TensorEntry t;
    t.name = c.str();
    const auto n_dims = c.get<std::uint32_t>();
    if (n_dims < 1 || n_dims > 4) throw std::runtime_error(t.name + ": n_dims " + std::to_string(n_dims));
    for (std::uint32_t d = 0; d < n_dims; ++d) t.ne.push_back(c.get<std::uint64_t>());
    t.type = c.get<std::uint32_t>();
    t.offset = c.get<std::uint64_t>();
    p.tensors.push_back(t);
  }
  std::uint64_t align = 32;
  if (auto it = p.kv.find("general.alignment"); it != p.kv.end()) align = it->second.u;
  p.data_start = (c.at() + align - 1) / align * align;
  return p;
}

// ---- llama.cpp's checks ----

// Returns every problem llama.cpp's loader would stop at (empty: it loads).
std::vector<std::string> llama_loader_problems(const Parsed& p) {
  std::vector<std::string> bad;
  auto need = [&](const std::string& key, std::set<std::uint32_t> types) -> const Kv* {
    auto it = p.kv.find(key);
    if (it == p.kv.end()) {
      bad.push_back("key not found in model: " + key);
      return nullptr;
    }
    if (!types.count(it->second.type)) bad.push_back("key " + key + " has type " + std::to_string(it->second.type));
    return &it->second;
  };
  const std::set<std::uint32_t> ints = {0, 2, 4, 10};  // llama.cpp reads these as unsigned
  if (p.version != 2 && p.version != 3) bad.push_back("version " + std::to_string(p.version));
  // gguf_init_from_file: the alignment is a power of two.
  std::uint64_t align = 32;
  if (auto it = p.kv.find("general.alignment"); it != p.kv.end()) {
    align = it->second.u;
    if (it->second.type != 4 || align == 0 || (align & (align - 1))) bad.push_back("general.alignment");
  }
  const Kv* arch = need("general.architecture", {8});
  if (arch && arch->s != "llama") bad.push_back("architecture " + arch->s);
  need("general.file_type", {4});  // llama_model_ftype; llama.cpp guesses without it, the issue requires it
  const Kv* ctx = need("llama.context_length", ints);
  const Kv* embd = need("llama.embedding_length", ints);
  const Kv* ff = need("llama.feed_forward_length", ints);
  const Kv* blocks = need("llama.block_count", ints);
  const Kv* heads = need("llama.attention.head_count", ints);
  need("llama.attention.layer_norm_rms_epsilon", {6});
  const Kv* rot = need("llama.rope.dimension_count", ints);
  const Kv* kv_heads = p.kv.count("llama.attention.head_count_kv") ? &p.kv.at("llama.attention.head_count_kv") : heads;
  // llm_load_vocab for an SPM ("llama") vocabulary.
  const Kv* tok_model = need("tokenizer.ggml.model", {8});
  if (tok_model && tok_model->s != "llama") bad.push_back("tokenizer.ggml.model " + tok_model->s);
  const Kv* tokens = need("tokenizer.ggml.tokens", {9});
  if (tokens && tokens->element != 8) bad.push_back("tokenizer.ggml.tokens is not a string array");
  const std::uint64_t n_vocab = tokens ? tokens->count : 0;
  for (const char* key : {"tokenizer.ggml.scores", "tokenizer.ggml.token_type"})
    if (auto it = p.kv.find(key); it != p.kv.end() && it->second.count != n_vocab)
      bad.push_back(std::string(key) + " has a length other than the vocabulary's");
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"})
    if (auto it = p.kv.find(key); it != p.kv.end() && it->second.u >= n_vocab) bad.push_back(std::string(key) + " out of range");
  if (!ctx || !embd || !ff || !blocks || !heads || !rot || !tokens) return bad;
  const std::uint64_t n_embd = embd->u, n_head = heads->u, n_head_kv = kv_heads->u, n_ff = ff->u;
  if (n_head == 0 || n_embd % n_head) {
    bad.push_back("n_embd is not a multiple of n_head");
    return bad;
  }
  const std::uint64_t head_dim = n_embd / n_head;
  if (rot->u != head_dim) bad.push_back("invalid n_rot");  // llama: n_rot must equal the head size

  // create_tensor + check_tensor_dims: every tensor llama builds, with its shape; output.weight
  // is optional (tied to token_embd). done_getting_tensors: the file holds no other tensor.
  std::map<std::string, std::vector<std::uint64_t>> expected = {
      {"token_embd.weight", {n_embd, n_vocab}}, {"output_norm.weight", {n_embd}}, {"output.weight", {n_embd, n_vocab}}};
  for (std::uint64_t l = 0; l < blocks->u; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    expected[b + "attn_norm.weight"] = {n_embd};
    expected[b + "attn_q.weight"] = {n_embd, head_dim * n_head};
    expected[b + "attn_k.weight"] = {n_embd, head_dim * n_head_kv};
    expected[b + "attn_v.weight"] = {n_embd, head_dim * n_head_kv};
    expected[b + "attn_output.weight"] = {head_dim * n_head, n_embd};
    expected[b + "ffn_norm.weight"] = {n_embd};
    expected[b + "ffn_gate.weight"] = {n_embd, n_ff};
    expected[b + "ffn_down.weight"] = {n_ff, n_embd};
    expected[b + "ffn_up.weight"] = {n_embd, n_ff};
  }
  const bool has_output = std::any_of(p.tensors.begin(), p.tensors.end(), [](const auto& t) { return t.name == "output.weight"; });
  const std::size_t n_expected = expected.size() - (has_output ? 0 : 1);
  if (p.tensors.size() != n_expected)
    bad.push_back("wrong number of tensors; expected " + std::to_string(n_expected) + ", got " +
                  std::to_string(p.tensors.size()));
  std::set<std::string> seen;
  std::uint64_t running = 0;  // gguf_init_from_file: offsets are the running padded sizes
  for (const auto& t : p.tensors) {
    if (!seen.insert(t.name).second) bad.push_back("duplicate tensor " + t.name);
    if (t.name.size() >= 64) bad.push_back("tensor name too long: " + t.name);
    auto e = expected.find(t.name);
    if (e == expected.end()) bad.push_back("unexpected tensor " + t.name);
    else if (e->second != t.ne) bad.push_back("check_tensor_dims: tensor '" + t.name + "' has wrong shape");
    auto ty = kGgmlTypes.find(t.type);
    if (ty == kGgmlTypes.end()) {
      bad.push_back("tensor " + t.name + " has invalid ggml type " + std::to_string(t.type));
      continue;
    }
    const auto [block, block_bytes] = ty->second;
    if (t.ne[0] % block) bad.push_back("tensor " + t.name + ": row of " + std::to_string(t.ne[0]) + " is not whole blocks");
    std::uint64_t n = 1;
    for (auto d : t.ne) n *= d;
    const std::uint64_t bytes = n / block * block_bytes;
    if (t.offset != running) bad.push_back("tensor " + t.name + " has offset " + std::to_string(t.offset) + ", expected " +
                                           std::to_string(running));
    if (t.offset % align) bad.push_back("tensor " + t.name + " is not aligned");
    running += (bytes + align - 1) / align * align;
  }
  if (p.data_start + running > p.file_size + (align - 1))  // the last tensor's padding may be absent
    bad.push_back("tensor data is not within the file bounds");
  return bad;
}

// ---- the files ----

struct Case {
  const char* name;
  quant::Plan plan;
};

std::vector<Case> cases(const model::Config& c) {
  using namespace quant;
  Plan mixed = uniform_plan(c, Scheme::mixed, 64);
  const WeightFormat cycle[] = {WeightFormat::int8, WeightFormat::int4, WeightFormat::f16, WeightFormat::f32};
  for (std::size_t i = 0; i < mixed.layers.size(); ++i) {
    mixed.layers[i].weight = cycle[i % 4];
    mixed.layers[i].act = mixed.layers[i].weight == WeightFormat::int8 ? ActFormat::int8_dynamic : ActFormat::f32;
  }
  return {{"w8a8", uniform_plan(c, Scheme::w8a8, 32)},
          {"w4a16-g32", uniform_plan(c, Scheme::w4a16, 32)},
          {"w4a16-g128", uniform_plan(c, Scheme::w4a16, 128)},
          {"mixed", mixed}};
}

TEST(LlamaLoaderChecks, QuantizedGgufPassesEveryCheck) {
  // stories260K: dim 64 (whole Q8_0/Q4_0 blocks) and hidden 172 (ffn_down rows are not).
  const model::Model m = model::load(testing_support::stories260k());
  const auto tok = model::Tokenizer::load_llama2c(testing_support::tok512(), m.config.vocab_size);
  const auto dir = testing_support::scratch_dir("llama-loader");
  for (const auto& cs : cases(m.config)) {
    SCOPED_TRACE(cs.name);
    const quant::QuantModel qm = quant::quantize_model(m, cs.plan);
    const std::string path = dir + "/" + cs.name + ".gguf";
    quant::save_gguf(qm, path, &tok);
    const Parsed p = parse(testing_support::read_bytes(path));
    const auto problems = llama_loader_problems(p);
    for (const auto& why : problems) ADD_FAILURE() << why;

    // The weights a ggml reader dequantizes are the weights fpgallm runs, bit for bit.
    const model::gguf::Reader r(path);
    for (const auto& lp : qm.plan.layers) {
      const auto& t = r.tensor(model::gguf_tensor_name(lp.layer, lp.which));
      EXPECT_EQ(r.tensor_floats(t), qm.linear(lp.layer, lp.which).dequantized()) << t.name;
    }
    // And fpgallm reads back the same codes and scales.
    const quant::QuantModel back = quant::load_gguf(path);
    ASSERT_EQ(back.linears.size(), qm.linears.size());
    for (std::size_t i = 0; i < qm.linears.size(); ++i) {
      EXPECT_EQ(back.linears[i].int8.q, qm.linears[i].int8.q) << i;
      EXPECT_EQ(back.linears[i].int8.scale, qm.linears[i].int8.scale) << i;
      EXPECT_EQ(back.linears[i].int4.packed, qm.linears[i].int4.packed) << i;
      EXPECT_EQ(back.linears[i].int4.scale, qm.linears[i].int4.scale) << i;
      EXPECT_EQ(back.linears[i].f16, qm.linears[i].f16) << i;
      EXPECT_EQ(back.linears[i].f32, qm.linears[i].f32) << i;
    }
  }
}

// The checker itself catches what llama.cpp refuses: the files fpgallm wrote before this
// format (I8 codes with .scale side tensors, no tokenizer) fail it.
TEST(LlamaLoaderChecks, CheckerRejectsWhatLlamaCppRefuses) {
  const model::Model m = model::load(testing_support::stories260k());
  const auto dir = testing_support::scratch_dir("llama-loader-bad");
  const std::string path = dir + "/w8a8.gguf";
  quant::save_gguf(quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32)), path);
  auto problems = llama_loader_problems(parse(testing_support::read_bytes(path)));
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems[0], "key not found in model: tokenizer.ggml.model");

  // A side tensor, a wrong shape and a misaligned offset, added by hand to a valid file.
  const auto tok = model::Tokenizer::load_llama2c(testing_support::tok512(), m.config.vocab_size);
  model::gguf::Writer w;
  quant::save_gguf(quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32)), path, &tok);
  const model::gguf::Reader good(path);
  for (const auto& [k, v] : good.metadata()) w.set(k, v);
  for (const auto& t : good.tensors()) {
    auto dims = t.dims;
    if (t.name == "blk.0.attn_norm.weight") dims = {dims[0] / 2, 2};
    w.add_tensor_view(t.name, t.type, dims, good.tensor_bytes(t));
  }
  w.add_tensor("blk.0.attn_q.scale", model::gguf::GgmlType::f32, {64}, std::vector<std::uint8_t>(256));
  const std::string bad_path = dir + "/bad.gguf";
  w.write(bad_path);
  problems = llama_loader_problems(parse(testing_support::read_bytes(bad_path)));
  std::string all;
  for (const auto& s : problems) all += s + "\n";
  EXPECT_NE(all.find("wrong number of tensors"), std::string::npos) << all;
  EXPECT_NE(all.find("unexpected tensor blk.0.attn_q.scale"), std::string::npos) << all;
  EXPECT_NE(all.find("check_tensor_dims: tensor 'blk.0.attn_norm.weight'"), std::string::npos) << all;
}

// What the command writes (calibrated, with the tokenizer given by -z) passes the same checks.
TEST(LlamaLoaderChecks, QuantizeCommandOutputPassesEveryCheck) {
  const auto dir = testing_support::scratch_dir("llama-loader-cmd");
  const std::string out = dir + "/static.gguf";
  const auto r = testing_support::run_fpgallm("quantize " + testing_support::stories260k() + " -z " +
                                              testing_support::tok512() + " --calib " + testing_support::sample_text() +
                                              " --scheme w8a8-static -o " + out + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const auto& why : llama_loader_problems(parse(testing_support::read_bytes(out)))) ADD_FAILURE() << why;
}

// `fpgallm info`, `run` and `eval` take the quantized file on its own.
TEST(LlamaLoaderChecks, CliAcceptsTheQuantizedFileAlone) {
  const model::Model m = model::load(testing_support::stories260k());
  const auto tok = model::Tokenizer::load_llama2c(testing_support::tok512(), m.config.vocab_size);
  const auto dir = testing_support::scratch_dir("llama-loader-cli");
  const std::string path = dir + "/w8a8.gguf";
  const auto qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
  quant::save_gguf(qm, path, &tok);
  const auto info = testing_support::run_fpgallm("info " + path);
  EXPECT_EQ(info.status, 0) << info.err;
  const auto alone = testing_support::run_fpgallm("run " + path + " -n 24 -t 0 --json");
  ASSERT_EQ(alone.status, 0) << alone.err;
  // Alone, the file runs as the quantized model: the same tokens as the fp32 model with
  // --quant pointing at it.
  const auto with_quant = testing_support::run_fpgallm("run " + testing_support::stories260k() + " -z " +
                                                       testing_support::tok512() + " --quant " + path + " -n 24 -t 0 --json");
  ASSERT_EQ(with_quant.status, 0) << with_quant.err;
  const auto a = nlohmann::json::parse(alone.out), b = nlohmann::json::parse(with_quant.out);
  EXPECT_EQ(a["tokens"], b["tokens"]);
  const auto ev = testing_support::run_fpgallm("eval " + path + " --text " + testing_support::sample_text() + " --json");
  ASSERT_EQ(ev.status, 0) << ev.err;
  EXPECT_EQ(nlohmann::json::parse(ev.out)["backend"], "ref (simulated quantization)");
}

}  // namespace

namespace {

// A file llama.cpp wrote (Q4_K_M: Q4_K, Q6_K and F32 tensors) is a starting model like any
// other: quantized by a plan, written, and the result passes llama.cpp's checks.
TEST(LlamaLoaderChecks, LlamacppFileIsAStartingModel) {
  const std::string src = testing_support::source_path("../shared/fixtures/llamacpp/k256_Q4_K_M.gguf");
  const model::Model m = model::load(src);
  ASSERT_TRUE(m.tokenizer.has_value());
  const auto dir = testing_support::scratch_dir("llama-loader-start");
  const std::string path = dir + "/k256-w4a16.gguf";
  const auto qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w4a16, 32));
  quant::save_gguf(qm, path, &*m.tokenizer);
  for (const auto& why : llama_loader_problems(parse(testing_support::read_bytes(path)))) ADD_FAILURE() << why;
  const model::gguf::Reader r(path);
  EXPECT_EQ(r.tensor("blk.0.ffn_down.weight").type, model::gguf::GgmlType::q4_0);
  EXPECT_EQ(r.get_uint("general.file_type"), 2u);  // MOSTLY_Q4_0
}

}  // namespace
