// convert and synth as a user runs them: the stories260K greedy story is the same from the
// .bin, from a GGUF carrying its tokenizer, and from a safetensors folder; synth writes the
// same bytes every time.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using testing_support::run_fpgallm;

nlohmann::json run_json(const std::string& args) {
  auto r = run_fpgallm(args);
  EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
  return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

TEST(ConvertCli, EveryFormatTellsTheSameStory) {
  auto dir = testing_support::scratch_dir("cli-convert");
  const std::string bin = testing_support::stories260k(), tok = testing_support::tok512();
  auto ref = run_json("run " + bin + " -z " + tok + " -t 0 -n 200 --json");
  ASSERT_TRUE(ref.contains("tokens"));
  EXPECT_EQ(ref["text"].get<std::string>().rfind("Once upon a time, there was a little girl named Lily.", 0), 0u);

  auto g = run_json("convert " + bin + " -z " + tok + " -o " + dir + "/s.gguf --json");
  EXPECT_EQ(g["format"], "gguf");
  EXPECT_EQ(g["tokenizer"], true);
  auto from_gguf = run_json("run " + dir + "/s.gguf -t 0 -n 200 --json");  // tokenizer from the file
  EXPECT_EQ(from_gguf["tokens"], ref["tokens"]);
  EXPECT_EQ(from_gguf["text"], ref["text"]);

  auto s = run_json("convert " + bin + " -z " + tok + " -o " + dir + "/hf --json");
  EXPECT_EQ(s["format"], "safetensors");
  EXPECT_TRUE(fs::exists(dir + "/hf/config.json"));
  auto from_st = run_json("run " + dir + "/hf -t 0 -n 200 --json");  // tokenizer.bin inside the folder
  EXPECT_EQ(from_st["tokens"], ref["tokens"]);

  // And back: safetensors -> .bin reproduces the original weights byte for byte.
  run_json("convert " + dir + "/hf -o " + dir + "/back.bin --json");
  auto a = testing_support::read_bytes(dir + "/back.bin"), b = testing_support::read_bytes(bin);
  ASSERT_EQ(a.size(), b.size());
  const std::size_t weights_end = a.size() - std::size_t(512) * 8 * 4;  // legacy RoPE tables excepted
  EXPECT_TRUE(a.compare(0, weights_end, b, 0, weights_end) == 0);

  auto info = run_json("info " + dir + "/s.gguf --json");
  EXPECT_EQ(info["source"], "gguf");
  EXPECT_EQ(info["has_tokenizer"], true);
  EXPECT_EQ(info["n_kv_heads"], 4);
}

TEST(SynthCli, SameBytesEveryRunInEveryFormat) {
  auto dir = testing_support::scratch_dir("cli-synth");
  run_json("synth --preset stories15m -o " + dir + "/a.bin --seed 3 --json");
  auto j = run_json("synth --preset stories15m -o " + dir + "/c.gguf --seed 3 --json");
  EXPECT_EQ(j["format"], "gguf");
  auto info = run_json("info " + dir + "/c.gguf --json");
  EXPECT_EQ(info["dim"], 288);
  EXPECT_EQ(info["n_layers"], 6);
  EXPECT_EQ(info["vocab_size"], 32000);
  // A second run, through GGUF and back, gives the first run's bytes.
  run_json("convert " + dir + "/c.gguf -o " + dir + "/c.bin --json");
  auto x = testing_support::read_bytes(dir + "/a.bin"), y = testing_support::read_bytes(dir + "/c.bin");
  EXPECT_EQ(x.size(), y.size());
  EXPECT_TRUE(x == y);
}

}  // namespace
