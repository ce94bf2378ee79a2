// Writes small valid files of every format into <dir>/<fuzzer>/ as seeds for the fuzzers, and
// copies the hand-written seeds of fuzz/seeds/<fuzzer>/ (Hugging Face config.json and
// tokenizer.json files in the published layouts).
#include <filesystem>
#include <fstream>
#include <string>

#include "model/gguf_llama.hpp"
#include "model/safetensors.hpp"
#include "model/synth.hpp"
#include "util/paths.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const fs::path root = argv[1];
  for (const char* d : {"llama2c", "gguf", "safetensors", "tokenizer", "design", "results_csv", "text", "hf_config", "tokenizer_json"})
    fs::create_directories(root / d);
  for (const auto& dir : fs::directory_iterator(fs::path(fpgallm::source_dir()) / "fuzz/seeds"))
    for (const auto& e : fs::directory_iterator(dir.path())) fs::copy_file(e.path(), root / dir.path().filename() / e.path().filename());
  // The parsers' seeds are the project's own files of each kind.
  const fs::path data = fs::path(fpgallm::source_dir()) / "data";
  for (const auto& e : fs::directory_iterator(data / "published"))
    if (e.path().extension() == ".json" && e.path().stem() != "models") fs::copy_file(e.path(), root / "design" / e.path().filename());
  fs::copy_file(data / "designs/u280-overlay-64x64.json", root / "design/u280-overlay-64x64.json");
  {
    // One seed per published row (header + row): the rows are about 600 bytes each, and
    // libFuzzer sizes its inputs from the largest seed, so the whole table as one seed
    // would make every input 20 KB and the run a tenth as fast for the same code paths.
    std::ifstream in(data / "published_results.csv", std::ios::binary);
    std::string header, row;
    std::getline(in, header);
    for (int i = 0; std::getline(in, row); ++i)
      std::ofstream(root / "results_csv" / ("row" + std::to_string(i) + ".csv"), std::ios::binary)
          << header << '\n' << row << '\n';
  }
  {
    std::ifstream in(fs::path(fpgallm::source_dir()) / "models/tinystories-valid-sample.txt", std::ios::binary);
    std::string line;
    for (int i = 0; i < 4 && std::getline(in, line); ++i)
      std::ofstream(root / "text" / ("story" + std::to_string(i))) << line.substr(0, 400);
    std::ofstream(root / "text/mixed") << "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 <0x0A> \t\"quoted\"";
  }

  model::Config c;
  c.name = "tiny";
  c.dim = 32;
  c.hidden_dim = 32;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.vocab_size = 64;  // 1 + 3*21: the tokenizer fuzzer's first byte 21 selects it
  c.seq_len = 8;
  model::Model m = model::synthesize(c, 1);

  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n", " ", "a", "b", "c", "d", "e", "n", "o", "t", "i", "m",
                                     " a", "on", "ce", " t", "im", " time", "up", " up", "<0x0A>"};
  while (pieces.size() < 64) pieces.push_back("x" + std::to_string(pieces.size()));
  std::vector<float> scores;
  for (std::size_t i = 0; i < pieces.size(); ++i) scores.push_back(-static_cast<float>(i));
  model::Tokenizer tok(pieces, scores);

  model::save_llama2c(m, (root / "llama2c/tiny.bin").string());
  model::save_gguf(m, (root / "gguf/tiny.gguf").string(), model::gguf::GgmlType::f32, &tok);
  model::save_gguf(m, (root / "gguf/tiny_q8.gguf").string(), model::gguf::GgmlType::q8_0, nullptr, 2);
  model::save_gguf(m, (root / "gguf/tiny_q4.gguf").string(), model::gguf::GgmlType::q4_0, nullptr);

  std::vector<model::safetensors::NamedTensor> tensors = {
      {"model.embed_tokens.weight", {64, 32}, m.weights.token_embedding},
      {"model.norm.weight", {32}, m.weights.final_norm}};
  std::ofstream(root / "safetensors/tiny.safetensors", std::ios::binary) << model::safetensors::serialize_f32(tensors);
  std::ofstream(root / "safetensors/config.json") << model::safetensors::hf_config_json(c);
  std::ofstream(root / "hf_config/tiny_llama.json") << model::safetensors::hf_config_json(c);

  tok.save_llama2c((root / "tokenizer/tok.bin.tmp").string());
  std::ifstream in(root / "tokenizer/tok.bin.tmp", std::ios::binary);
  std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(root / "tokenizer/tok64", std::ios::binary) << static_cast<char>(21) << body;
  fs::remove(root / "tokenizer/tok.bin.tmp");
  return 0;
}
