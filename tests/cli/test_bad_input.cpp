// Bad input through the command line, one case per kind of lie: exit status 2, exactly one
// line on stderr naming the file, no output file (or temporary) left behind, no hang.
#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model/gguf.hpp"
#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using testing_support::run_fpgallm;

struct Case {
  std::string dir;
  std::string out;  // where the command was told to write
};

Case fresh(const std::string& name) {
  Case c;
  c.dir = testing_support::scratch_dir("bad-" + name);
  c.out = c.dir + "/out.gguf";
  return c;
}

// Runs args and checks the contract; `names` must appear in the single stderr line.
void expect_rejected(const Case& c, const std::string& args, const std::string& names, const std::string& fragment = "") {
  auto r = run_fpgallm(args, 60);
  EXPECT_EQ(r.status, 2) << args << "\nstderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(names), std::string::npos) << "stderr does not name " << names << ": " << r.err;
  if (!fragment.empty()) {
    EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(c.out)) << "output left behind: " << c.out;
  for (const auto& e : fs::directory_iterator(c.dir))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "temporary left behind: " << e.path();
}

std::string prefix_of(const std::string& path, std::size_t n) { return testing_support::read_bytes(path).substr(0, n); }

template <typename T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_str(std::string& s, const std::string& v) {
  put<std::uint64_t>(s, v.size());
  s += v;
}

// A minimal valid-looking GGUF header with one llama key and one tensor; the fields the
// tests lie about are parameters.
std::string gguf_with(std::uint64_t n_tensors, std::uint64_t dim0, std::uint64_t dim1, std::uint64_t offset,
                      std::size_t data_bytes) {
  std::string s = "GGUF";
  put<std::uint32_t>(s, 3);
  put<std::uint64_t>(s, n_tensors);
  put<std::uint64_t>(s, 1);
  put_str(s, "general.architecture");
  put<std::uint32_t>(s, 8);
  put_str(s, "llama");
  put_str(s, "token_embd.weight");
  put<std::uint32_t>(s, 2);
  put<std::uint64_t>(s, dim0);
  put<std::uint64_t>(s, dim1);
  put<std::uint32_t>(s, 0);
  put<std::uint64_t>(s, offset);
  while (s.size() % 32) s.push_back('\0');
  s.append(data_bytes, '\0');
  return s;
}

TEST(BadInput, MissingFile) {
  auto c = fresh("missing");
  expect_rejected(c, "convert " + c.dir + "/nope.bin -o " + c.out, c.dir + "/nope.bin");
}

TEST(BadInput, TruncatedLlama2c) {
  auto c = fresh("trunc-bin");
  testing_support::write_bytes(c.dir + "/t.bin", prefix_of(testing_support::stories260k(), 5000));
  expect_rejected(c, "convert " + c.dir + "/t.bin -o " + c.out, c.dir + "/t.bin", "needs");
}

TEST(BadInput, TruncatedHeaderLlama2c) {
  auto c = fresh("trunc-hdr");
  testing_support::write_bytes(c.dir + "/t.bin", prefix_of(testing_support::stories260k(), 12));
  expect_rejected(c, "convert " + c.dir + "/t.bin -o " + c.out, c.dir + "/t.bin", "truncated");
}

TEST(BadInput, OverflowingLlama2cHeader) {
  auto c = fresh("overflow-bin");
  std::string s;
  for (std::int32_t v : {1 << 30, 1 << 30, 1 << 30, 8, 8, 1 << 30, 1 << 30}) put(s, v);
  s.append(1000, '\0');
  testing_support::write_bytes(c.dir + "/o.bin", s);
  expect_rejected(c, "convert " + c.dir + "/o.bin -o " + c.out, c.dir + "/o.bin");
}

TEST(BadInput, Llama2cHeaderLargerThanFile) {
  auto c = fresh("big-bin");
  std::string s;
  for (std::int32_t v : {4096, 11008, 32, 32, 32, 32000, 2048}) put(s, v);  // llama2-7b shape
  s.append(4096, '\0');
  testing_support::write_bytes(c.dir + "/b.bin", s);
  expect_rejected(c, "convert " + c.dir + "/b.bin -o " + c.out, c.dir + "/b.bin", "needs");
}

TEST(BadInput, WrongGgufMagic) {
  auto c = fresh("magic");
  auto s = gguf_with(1, 8, 4, 0, 128);
  s[3] = 'X';
  testing_support::write_bytes(c.dir + "/m.gguf", s);
  expect_rejected(c, "convert " + c.dir + "/m.gguf -o " + c.out, c.dir + "/m.gguf", "magic");
}

TEST(BadInput, TruncatedGguf) {
  auto c = fresh("trunc-gguf");
  auto s = gguf_with(1, 8, 4, 0, 128);
  testing_support::write_bytes(c.dir + "/t.gguf", s.substr(0, 70));
  expect_rejected(c, "convert " + c.dir + "/t.gguf -o " + c.out, c.dir + "/t.gguf", "truncated");
}

TEST(BadInput, GgufTensorCountBeyondTheFile) {
  auto c = fresh("count-gguf");
  testing_support::write_bytes(c.dir + "/c.gguf", gguf_with(std::uint64_t(1) << 60, 8, 4, 0, 128));
  expect_rejected(c, "convert " + c.dir + "/c.gguf -o " + c.out, c.dir + "/c.gguf", "tensors");
}

TEST(BadInput, GgufDimensionsThatOverflow) {
  auto c = fresh("dims-gguf");
  testing_support::write_bytes(c.dir + "/d.gguf", gguf_with(1, std::uint64_t(1) << 40, std::uint64_t(1) << 40, 0, 128));
  expect_rejected(c, "convert " + c.dir + "/d.gguf -o " + c.out, c.dir + "/d.gguf", "overflow");
}

TEST(BadInput, GgufTensorLargerThanTheFile) {
  auto c = fresh("size-gguf");
  testing_support::write_bytes(c.dir + "/s.gguf", gguf_with(1, 4096, 32000, 0, 128));
  expect_rejected(c, "convert " + c.dir + "/s.gguf -o " + c.out, c.dir + "/s.gguf", "past the end");
}

TEST(BadInput, GgufTensorOffsetPastTheEnd) {
  auto c = fresh("offset-gguf");
  testing_support::write_bytes(c.dir + "/o.gguf", gguf_with(1, 8, 4, std::uint64_t(1) << 50, 128));
  expect_rejected(c, "convert " + c.dir + "/o.gguf -o " + c.out, c.dir + "/o.gguf", "past the end");
}

TEST(BadInput, TokenizerVocabularyDoesNotMatchTheModel) {
  auto c = fresh("vocab");
  // A 3-token llama2.c tokenizer for the 512-token model.
  std::string t;
  put<std::int32_t>(t, 8);
  for (const char* p : {"<unk>", "a", "b"}) {
    put<float>(t, 0.0f);
    put<std::int32_t>(t, static_cast<std::int32_t>(std::strlen(p)));
    t += p;
  }
  testing_support::write_bytes(c.dir + "/tok3.bin", t);
  expect_rejected(c, "convert " + testing_support::stories260k() + " -z " + c.dir + "/tok3.bin -o " + c.out,
                  c.dir + "/tok3.bin", "512");
  auto r = run_fpgallm("run " + testing_support::stories260k() + " -z " + c.dir + "/tok3.bin -n 4 -t 0", 60);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("tok3.bin"), std::string::npos);
}

TEST(BadInput, GgufTokenizerVocabularyDoesNotMatchTheModel) {
  auto c = fresh("gguf-vocab");
  auto good = c.dir + "/good.gguf";
  auto r = run_fpgallm("convert " + testing_support::stories260k() + " -z " + testing_support::tok512() + " -o " + good);
  ASSERT_EQ(r.status, 0) << r.err;
  // Copy the file with a 511-token vocabulary for the 512-row embedding.
  {
    model::gguf::Reader in(good);
    model::gguf::Writer w;
    for (const auto& [key, value] : in.metadata()) {
      auto v = value;
      if (key == "tokenizer.ggml.tokens") v.s.pop_back();
      if (key == "tokenizer.ggml.scores") v.f.pop_back();
      if (key == "tokenizer.ggml.token_type") v.i.pop_back();
      w.set(key, v);
    }
    for (const auto& t : in.tensors()) w.add_tensor_view(t.name, t.type, t.dims, in.tensor_bytes(t));
    w.write(c.dir + "/v.gguf");
  }
  fs::remove(good);
  expect_rejected(c, "convert " + c.dir + "/v.gguf -o " + c.out, c.dir + "/v.gguf", "511");
}

TEST(BadInput, UnknownPreset) {
  auto c = fresh("preset");
  c.out = c.dir + "/out.bin";
  expect_rejected(c, "synth --preset llama-7b -o " + c.out, "llama-7b", "llama2-7b");
  expect_rejected(c, "info llama-7b", "llama-7b");
}

TEST(BadInput, SynthOfAnArchitectureTheEngineCannotRun) {
  auto c = fresh("synth-gpt2");
  c.out = c.dir + "/out.bin";
  expect_rejected(c, "synth --preset gpt2 -o " + c.out, "gpt2", "llama");
}

TEST(BadInput, MalformedConfigJson) {
  auto c = fresh("config");
  fs::create_directories(c.dir + "/m");
  testing_support::write_bytes(c.dir + "/m/config.json", "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": ");
  expect_rejected(c, "convert " + c.dir + "/m -o " + c.out, c.dir + "/m/config.json", "JSON");
  testing_support::write_bytes(c.dir + "/m/config.json", "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": -4}");
  expect_rejected(c, "convert " + c.dir + "/m -o " + c.out, c.dir + "/m/config.json", "hidden_size");
}

TEST(BadInput, SafetensorsHeaderPastTheEnd) {
  auto c = fresh("st-header");
  auto r = run_fpgallm("convert " + testing_support::stories260k() + " -o " + c.dir + "/m");
  ASSERT_EQ(r.status, 0) << r.err;
  std::string s = testing_support::read_bytes(c.dir + "/m/model.safetensors");
  std::uint64_t huge = std::uint64_t(1) << 40;
  std::memcpy(s.data(), &huge, 8);
  testing_support::write_bytes(c.dir + "/m/model.safetensors", s);
  expect_rejected(c, "convert " + c.dir + "/m -o " + c.out, c.dir + "/m/model.safetensors", "past the end");
}

TEST(BadInput, SafetensorsOffsetsPastTheEnd) {
  auto c = fresh("st-offsets");
  auto r = run_fpgallm("convert " + testing_support::stories260k() + " -o " + c.dir + "/m");
  ASSERT_EQ(r.status, 0) << r.err;
  std::string s = testing_support::read_bytes(c.dir + "/m/model.safetensors");
  s.resize(s.size() - 4096);  // the last tensors now end past the file
  testing_support::write_bytes(c.dir + "/m/model.safetensors", s);
  expect_rejected(c, "convert " + c.dir + "/m -o " + c.out, c.dir + "/m/model.safetensors", "outside");
}

TEST(BadInput, OutputThatCannotBeWrittenLeavesNothing) {
  auto c = fresh("unwritable");
  c.out = c.dir + "/no/such/folder/out.gguf";
  expect_rejected(c, "convert " + testing_support::stories260k() + " -o " + c.out, c.out);
}

}  // namespace
