// Issue 19, table-driven: bad input across every command. For each row: exit status 2,
// exactly one line on stderr naming the file or option, and the folder of inputs (hashed
// whole, before and after) neither changed nor left with anything new.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <filesystem>
#include <string>
#include <vector>

#include "model/presets.hpp"
#include "model/safetensors.hpp"
#include "safety_support.hpp"
#include "testing.hpp"

namespace {

namespace fs = std::filesystem;

struct Row {
  const char* args;     // "{d}" stands for the folder of inputs
  const char* names;    // what the one line must name ("{d}" likewise)
  const char* problem;  // a fragment of the problem ("" = any)
};

// clang-format off
const Row kRows[] = {
  // -o naming an input, a user's file, a user's folder: deploy, quantize, convert, emit, synth, train
  {"deploy {d}/model.bin --device u280 --text {d}/text.txt -z {d}/tok.bin -o {d}/model.bin", "{d}/model.bin", "input"},
  {"deploy {d}/model.bin --device u280 --text {d}/text.txt -z {d}/tok.bin -o {d}/notes.txt", "{d}/notes.txt", "not a folder"},
  {"deploy {d}/model.bin --device u280 --text {d}/text.txt -z {d}/tok.bin -o {d}/foreign", "{d}/foreign", "did not write"},
  {"deploy {d}/model.bin --device u280 --text {d}/text.txt -z {d}/tok.bin -o {d}", "{d}", ""},
  {"deploy {d}/model.bin --device u280 --text {d}/text.txt -z {d}/tok.bin -o {d}/touched", "{d}/touched", "changed since"},
  {"deploy {d}/model.bin --device u280 --text {d}/text.txt -z {d}/tok.bin -o {d}/added", "{d}/added", "did not write"},
  {"quantize {d}/model.bin --calib {d}/text.txt -z {d}/tok.bin -o {d}/model.bin", "{d}/model.bin", "input"},
  {"quantize {d}/model.bin --calib {d}/text.txt -z {d}/tok.bin -o {d}/model.bin --force", "{d}/model.bin", "input"},
  {"quantize {d}/model.bin --calib {d}/text.txt -z {d}/tok.bin -o {d}/text.txt --force", "{d}/text.txt", "input"},
  {"quantize {d}/model.bin --calib {d}/text.txt -z {d}/tok.bin -o {d}/notes.gguf", "{d}/notes.gguf", "--force"},
  {"quantize {d}/model.bin --calib {d}/text.txt -z {d}/tok.bin -o {d}/foreign", "{d}/foreign", "folder"},
  {"quantize {d}/model.bin --calib {d}/text.txt -z {d}/tok.bin -o {d}/q.gguf --plan-json {d}/notes.txt", "{d}/notes.txt", "--force"},
  {"convert {d}/model.bin -o {d}/model.bin", "{d}/model.bin", "input"},
  {"convert {d}/model.bin -o {d}/model.bin --force", "{d}/model.bin", "input"},
  {"convert {d}/model.bin -z {d}/tok.bin -o {d}/tok.bin --to bin --force", "{d}/tok.bin", "input"},
  {"convert {d}/model.bin -o {d}/notes.gguf", "{d}/notes.gguf", "--force"},
  {"convert {d}/model.bin -o {d}/foreign", "{d}/foreign", "did not write"},
  {"convert {d}/model.bin -o {d}/touched", "{d}/touched", "changed since"},
  {"emit {d}/model.bin --design {d}/design.json -o {d}/model.bin", "{d}/model.bin", "input"},
  {"emit {d}/model.bin --design {d}/design.json -o {d}/design.json", "{d}/design.json", "input"},
  {"emit {d}/model.bin --design {d}/design.json -o {d}/notes.txt", "{d}/notes.txt", "not a folder"},
  {"emit {d}/model.bin --design {d}/design.json -o {d}/foreign", "{d}/foreign", "did not write"},
  {"emit {d}/model.bin --design {d}/design.json -o {d}/added", "{d}/added", "did not write"},
  {"synth --preset stories260k -o {d}/model.bin", "{d}/model.bin", "--force"},
  {"synth --preset stories260k -o {d}/notes.gguf", "{d}/notes.gguf", "--force"},
  {"synth --preset stories260k -o {d}/foreign", "{d}/foreign", "did not write"},
  {"synth --preset stories260k -o {d}/notes.txt/m.bin", "{d}/notes.txt/m.bin", "not a folder"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 -o {d}/model.bin", "{d}/model.bin", "input"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 -o {d}/text.txt --force", "{d}/text.txt", "input"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 -o {d}/notes.txt", "{d}/notes.txt", "--force"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 -o {d}/foreign", "{d}/foreign", "folder"},
  // other outputs, checked before the work
  {"plan stories260k --device u280 -o {d}/design.json", "{d}/design.json", "--force"},
  {"plan stories260k --device u280 -o {d}/new.json --svg {d}/notes.txt/x.svg", "{d}/notes.txt/x.svg", "not a folder"},
  {"plan stories260k --device u280 -o {d}/new.json --svg {d}/new.json", "--svg", "same file"},
  {"simulate stories260k --design {d}/design.json --trace {d}/design.json", "{d}/design.json", "input"},
  {"explore stories260k --devices u280 --svg {d}/foreign", "{d}/foreign", "folder"},
  // NaN, infinity and negative numbers
  {"run {d}/model.bin -z {d}/tok.bin -n 4 -t nan", "--temperature", "finite"},
  {"run {d}/model.bin -z {d}/tok.bin -n 4 -t inf", "--temperature", ""},
  {"run {d}/model.bin -z {d}/tok.bin -n 4 -p nan", "--topp", "finite"},
  {"run {d}/model.bin -z {d}/tok.bin -n 4 -p -inf", "--topp", ""},
  {"run {d}/model.bin -z {d}/tok.bin -n 4 -s -1", "--seed", "negative"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --lr nan", "--lr", "finite"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --clip inf", "--clip", ""},
  // quantization-aware training: what it cannot train, and options that need another
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --qat w8a8-static", "--qat", "w4a8"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --qat w5a5", "--qat", "w5a5"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --qat w4a8 --backend accel", "--backend", "--qat"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --group 64", "--group", "--qat"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --warmup 2", "--warmup", "--steps 1"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --fixed-scales", "--fixed-scales", "--qat w4a8"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --qat w8a8 --scale-lr 1e-3", "--scale-lr", "--qat w4a8"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --qat w8a8 --method gptq", "--method", "int4"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --qat w8a8 --search-scales", "--search-scales", "int4"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --qat w4a8 --method gptx", "--method", "gptx"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --qat w4a8 --fixed-scales --search-scales", "--search-scales", "--fixed-scales"},
  {"train {d}/model.bin --data {d}/text.txt -z {d}/tok.bin --steps 1 --qat w4a8 --fixed-scales --scale-lr 1e-3", "--scale-lr", "--fixed-scales"},
  {"deploy {d}/model.bin --device u280 --text {d}/text.txt -z {d}/tok.bin -o {d}/dep --budget nan", "--budget", "finite"},
  {"cost --price-per-kwh nan --watts 30 --throughput 100", "--price-per-kwh", "finite"},
  {"cost --price-per-kwh 0.1 --watts 30 --throughput 100 --days 1e999", "--days", ""},
  {"synth --preset stories260k -o {d}/s.bin --seed -1", "--seed", "negative"},
  // not regular files: never opened for reading (a FIFO would block forever)
  {"info {d}/fifo", "{d}/fifo", "FIFO"},
  {"run {d}/fifo -n 4", "{d}/fifo", "FIFO"},
  {"run {d}/model.bin -z {d}/fifo -n 4", "{d}/fifo", "FIFO"},
  {"eval {d}/model.bin -z {d}/tok.bin --text {d}/fifo", "{d}/fifo", "FIFO"},
  {"eval {d}/model.bin -z {d}/tok.bin --text /dev/zero", "/dev/zero", "device"},
  {"quantize {d}/model.bin -z {d}/tok.bin --calib {d}/fifo -o {d}/q.gguf", "{d}/fifo", "FIFO"},
  {"train {d}/model.bin -z {d}/tok.bin --data {d}/fifo --steps 1", "{d}/fifo", "FIFO"},
  {"simulate stories260k --design {d}/fifo", "{d}/fifo", "FIFO"},
  {"info /dev/null", "/dev/null", "device"},
  // text that is not text
  {"quantize {d}/model.bin -z {d}/tok.bin --calib {d}/nul.txt -o {d}/q.gguf", "{d}/nul.txt", "NUL"},
  {"train {d}/model.bin -z {d}/tok.bin --data {d}/latin1.txt --steps 1", "{d}/latin1.txt", "UTF-8"},
  {"eval {d}/model.bin -z {d}/tok.bin --text {d}/model.bin", "{d}/model.bin", ""},
  {"deploy {d}/model.bin --device u280 --text {d}/nul.txt -z {d}/tok.bin -o {d}/dep", "{d}/nul.txt", "NUL"},
  // a stated maximum prompt length
  {"run {d}/model.bin -z {d}/tok.bin -n 4 -i Once_upon_a_time_there_was_a_little_girl", "-i", "at most 4"},
  // non-finite weights
  {"info {d}/nan.bin", "{d}/nan.bin", "NaN"},
  {"run {d}/nan.bin -z {d}/tok.bin -n 4", "{d}/nan.bin", "NaN"},
  {"quantize {d}/nan.bin -z {d}/tok.bin --calib {d}/text.txt -o {d}/q.gguf", "{d}/nan.bin", "NaN"},
  {"convert {d}/inf.bin -o {d}/c.gguf", "{d}/inf.bin", "infinite"},
  // --allow-nonfinite loads them for fp32 commands; a command that quantizes still refuses
  {"--allow-nonfinite quantize {d}/nan.bin -z {d}/tok.bin --calib {d}/text.txt -o {d}/q.gguf", "{d}/nan.bin",
   "no integer code"},
  {"--allow-nonfinite deploy {d}/inf.bin --device u280 --text {d}/text.txt -z {d}/tok.bin -o {d}/dep", "{d}/inf.bin",
   "no integer code"},
  {"--allow-nonfinite emit {d}/nan.bin --design {d}/design.json -o {d}/e", "{d}/nan.bin", "no integer code"},
  // tensors that share bytes
  {"info {d}/overlap.gguf", "{d}/overlap.gguf", "overlap"},
  {"convert {d}/overlap_st -o {d}/c.gguf", "{d}/overlap_st/model.safetensors", "overlap"},
  // design.json values that do not fit, are fractional, or are missing
  {"simulate stories260k --design {d}/wrap.json", "{d}/wrap.json", "does not fit"},
  {"simulate stories260k --design {d}/frac.json", "{d}/frac.json", "not an integer"},
  {"simulate stories260k --design {d}/missing.json", "{d}/missing.json", "missing 'tiling'"},
  {"simulate stories260k --design {d}/style.json", "{d}/style.json", "style"},
  {"emit {d}/model.bin --design {d}/frac.json -o {d}/e", "{d}/frac.json", "not an integer"},
  {"devices u280 --design {d}/wrap.json", "{d}/wrap.json", "does not fit"},
  {"cost --from {d}/frac.json --price-per-kwh 0.1", "{d}/frac.json", "not an integer"},
  {"cost --from {d}/zero_cards.json --price-per-kwh 0.1", "{d}/zero_cards.json", "cards"},
  // results tables
  {"validate --results {d}/header_only.csv", "{d}/header_only.csv", "no rows"},
  {"validate --results {d}/open_quote.csv", "{d}/open_quote.csv", "unterminated"},
  // sizes refused before allocating
  {"synth --preset llama2-70b -o {d}/big.bin", "", "GB"},
};
// clang-format on

std::string expand(std::string s, const std::string& d) {
  for (std::size_t i = 0; (i = s.find("{d}", i)) != std::string::npos;) s.replace(i, 3, d);
  return s;
}

void write_bad_inputs(const std::string& d) {
  std::string model = testing_support::read_bytes(d + "/model.bin");
  std::string nan = model, inf = model;
  const float qnan = std::numeric_limits<float>::quiet_NaN(), pinf = std::numeric_limits<float>::infinity();
  std::memcpy(nan.data() + 28 + 4 * 1000, &qnan, 4);  // inside the token embedding
  std::memcpy(inf.data() + 28 + 4 * (512 * 64 + 10), &pinf, 4);  // the first layer's attention norm
  testing_support::write_bytes(d + "/nan.bin", nan);
  testing_support::write_bytes(d + "/inf.bin", inf);
  testing_support::write_bytes(d + "/nul.txt", std::string("Once upon a time\0there was", 26));
  testing_support::write_bytes(d + "/latin1.txt", "Caf\xe9 au lait, na\xefve\n");
  std::string design = testing_support::read_bytes(d + "/design.json");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = design;
    const auto at = s.find(from);
    if (at == std::string::npos) return std::string("{}");
    return s.replace(at, from.size(), to);
  };
  testing_support::write_bytes(d + "/wrap.json", with("\"rows\": 64", "\"rows\": 4294967360"));
  testing_support::write_bytes(d + "/frac.json", with("\"rows\": 64", "\"rows\": 64.5"));
  testing_support::write_bytes(d + "/style.json", with("\"style\": \"overlay\"", "\"style\": 5"));
  testing_support::write_bytes(d + "/missing.json", R"({"device": "u280", "clock_mhz": 300,
    "matrix_unit": {"rows": 64, "cols": 64}, "vector_unit": {"lanes": 16}, "buffers": {}, "memory": {}})");
  testing_support::write_bytes(d + "/zero_cards.json", R"({"watts": 30, "decode_tokens_per_s": 100, "cards": 0})");
  testing_support::write_bytes(
      d + "/header_only.csv",
      testing_support::read_bytes(testing_support::source_path("data/published_results.csv")).substr(
          0, testing_support::read_bytes(testing_support::source_path("data/published_results.csv")).find('\n') + 1));
  testing_support::write_bytes(d + "/open_quote.csv", "source_id,device,model,metric,value,batch,prompt_len,gen_len\n"
                                                      "x,\"u280,llama,tps,1,1,1,1\n");
  // GGUF: two tensors at data offset 0.
  std::string g = "GGUF";
  auto put32 = [&](std::uint32_t v) { g.append(reinterpret_cast<const char*>(&v), 4); };
  auto put64 = [&](std::uint64_t v) { g.append(reinterpret_cast<const char*>(&v), 8); };
  auto str = [&](const std::string& v) { put64(v.size()), g += v; };
  put32(3), put64(2), put64(1);
  str("general.architecture"), put32(8), str("llama");
  for (const char* name : {"token_embd.weight", "output_norm.weight"}) str(name), put32(1), put64(8), put32(0), put64(0);
  g.append((32 - g.size() % 32) % 32, '\0');
  g.append(64, '\0');
  testing_support::write_bytes(d + "/overlap.gguf", g);
  // safetensors: the second tensor starts inside the first.
  fs::create_directories(d + "/overlap_st");
  testing_support::write_bytes(d + "/overlap_st/config.json",
                               model::safetensors::hf_config_json(*model::find_preset("stories260k")));
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string st;
  const std::uint64_t n = header.size();
  st.append(reinterpret_cast<const char*>(&n), 8);
  st += header;
  st.append(16, '\0');
  testing_support::write_bytes(d + "/overlap_st/model.safetensors", st);
  // Folders that look like fpgallm's but hold a user's change or addition.
  safety::write_fpgallm_folder(d + "/touched", {{"summary.json", "{}\n"}, {"hls/README.md", "emitted\n"}});
  testing_support::write_bytes(d + "/touched/summary.json", "{\"edited\": true}\n");
  safety::write_fpgallm_folder(d + "/added", {{"summary.json", "{}\n"}});
  testing_support::write_bytes(d + "/added/my-notes.txt", "mine\n");
}

TEST(BadInputsTable, EveryRowRefusedWithOneLineAndNothingChanged) {
  const std::string d = safety::prepare_inputs("table");
  write_bad_inputs(d);
  ASSERT_GE(std::size(kRows), 60u);
  for (const Row& row : kRows) {
    const std::string args = expand(row.args, d), names = expand(row.names, d);
    const std::string before = safety::hash_tree(d);
    const auto r = testing_support::run_fpgallm(args, 60);
    EXPECT_EQ(r.status, 2) << args << "\nstderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(names), std::string::npos) << args << "\nstderr does not name " << names << ": " << r.err;
    EXPECT_NE(r.err.find(row.problem), std::string::npos) << args << "\nexpected '" << row.problem << "': " << r.err;
    EXPECT_EQ(safety::hash_tree(d), before) << args << ": the folder changed";
  }
}

// A run that succeeds replaces its own earlier output, and --force replaces a user's file
// (never an input): the refusals above are not refusing everything.
TEST(BadInputsTable, OwnOutputsAreReplacedAndForceReplacesAFile) {
  const std::string d = safety::prepare_inputs("replace");
  auto ok = [&](const std::string& args) {
    const auto r = testing_support::run_fpgallm(expand(args, d), 120);
    EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
  };
  ok("convert {d}/model.bin -z {d}/tok.bin -o {d}/st");
  ok("convert {d}/model.bin -z {d}/tok.bin -o {d}/st");  // its own folder, files unchanged: replaced
  EXPECT_TRUE(fs::exists(d + "/st/fpgallm-manifest.json"));
  ok("convert {d}/model.bin -o {d}/notes.gguf --force");
  EXPECT_EQ(testing_support::read_bytes(d + "/notes.gguf").substr(0, 4), "GGUF");
  ok("emit {d}/model.bin --design {d}/design.json -o {d}/proj");
  ok("emit {d}/model.bin --design {d}/design.json -o {d}/proj");
  EXPECT_TRUE(safety::debris(d).empty()) << safety::debris(d).front();
}

}  // namespace
