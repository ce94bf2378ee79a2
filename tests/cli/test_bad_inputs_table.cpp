// Issue 34, what it must show (1): a table of bad inputs, each built in a scratch folder and
// given to the fpgallm binary, with the exit status (2) and what its one stderr line names
// (the file or the option). Nesting, oversized cells, number overflow, huge sizes, NaN and
// infinite parameters, wrong types, sampler edge cases and messages. Not labelled nosan: the
// sanitizer suite runs it. Below the table, the checks that sit below the command line (the
// sampler's buffer, the finiteness rule on biases and norm gains).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/sampler.hpp"
#include "model/model.hpp"
#include "testing.hpp"
#include "util/error.hpp"

namespace {

namespace fs = std::filesystem;
using testing_support::read_bytes;
using testing_support::run_fpgallm;
using testing_support::write_bytes;

std::string deep(int levels, char open = '[', char close = ']') {
  return std::string(static_cast<std::size_t>(levels), open) + std::string(static_cast<std::size_t>(levels), close);
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  if (at == std::string::npos) return s;
  return s.replace(at, from.size(), to);
}

// The bundled model as a safetensors folder (config.json beside the weights), made once.
const std::string& base_folder() {
  static const std::string dir = [] {
    const std::string d = testing_support::scratch_dir("bad-table-base") + "/st";
    const auto r = run_fpgallm("convert " + testing_support::stories260k() + " -o " + d, 120);
    if (r.status != 0) throw std::runtime_error("convert failed: " + r.err);
    return d;
  }();
  return dir;
}
const std::string& base_config() {
  static const std::string text = read_bytes(base_folder() + "/config.json");
  return text;
}

// A copy of the base folder in dir, its config.json replaced by config and, when given, a
// tokenizer.json beside it.
std::string folder_with(const std::string& dir, const std::string& config, const std::string& tokenizer = "") {
  const std::string d = dir + "/model";
  fs::create_directories(d);
  for (const char* f : {"model.safetensors", "generation_config.json"}) fs::copy_file(base_folder() + "/" + f, d + "/" + f);
  write_bytes(d + "/config.json", config);
  if (!tokenizer.empty()) write_bytes(d + "/tokenizer.json", tokenizer);
  return d;
}

const std::string kZ = " -z " + testing_support::source_path("models/tok512.bin");

// A byte-level BPE tokenizer.json with the fields the rows lie about as parameters.
std::string tokenizer_json(const std::string& model_fields, const std::string& top_fields = "") {
  return "{" + top_fields + (top_fields.empty() ? "" : ",") + R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, )" +
         model_fields + "}}";
}

// The published-results CSV header and one row with cells the rows lie about.
std::string results_csv(const std::string& batch, const std::string& prompt, const std::string& gen, const std::string& value) {
  return "source_id,device,model,metric,value,batch,prompt_len,gen_len\n"
         "x,Xilinx Alveo U280,LLaMA2-7B,decode_tokens_per_s," +
         value + "," + batch + "," + prompt + "," + gen + "\n";
}

struct Row {
  std::string name;
  // Builds the inputs in dir and returns the fpgallm arguments.
  std::function<std::string(const std::string& dir)> build;
  // What the one stderr line must name: a path relative to dir ("@/...") or an option.
  std::string names;
  // Rows that only apply on some machines say why they do not apply here ("" = they do).
  std::function<std::string()> skip = [] { return std::string(); };
};

std::string config_row(const std::string& dir, const std::string& config) { return "run " + folder_with(dir, config) + kZ + " -n 4 -t 0"; }
std::function<std::string(const std::string&)> config_edit(std::string from, std::string to) {
  return [from, to](const std::string& dir) { return config_row(dir, replace(base_config(), from, to)); };
}
std::function<std::string(const std::string&)> config_add(std::string field) {
  return [field](const std::string& dir) { return config_row(dir, replace(base_config(), "{", "{" + field + ",")); };
}
std::function<std::string(const std::string&)> tokenizer_row(std::string tokenizer) {
  return [tokenizer](const std::string& dir) { return "run " + folder_with(dir, base_config(), tokenizer) + " -n 4 -t 0"; };
}
std::function<std::string(const std::string&)> csv_row(std::string csv) {
  return [csv](const std::string& dir) {
    write_bytes(dir + "/results.csv", csv);
    return "validate --results " + dir + "/results.csv";
  };
}
std::function<std::string(const std::string&)> models_json_row(std::string text) {
  return [text](const std::string& dir) {
    fs::create_directories(dir + "/designs");
    write_bytes(dir + "/designs/models.json", text);
    write_bytes(dir + "/results.csv", results_csv("1", "128", "128", "55"));
    return "validate --results " + dir + "/results.csv --designs " + dir + "/designs";
  };
}
std::function<std::string(const std::string&)> file_row(std::string name, std::string text, std::string args) {
  return [name, text, args](const std::string& dir) {
    write_bytes(dir + "/" + name, text);
    return replace(args, "@", dir + "/" + name);
  };
}
std::function<std::string(const std::string&)> args_row(std::string args) {
  return [args](const std::string&) { return replace(args, "@M", testing_support::stories260k() + kZ); };
}

std::string digits(std::size_t n) { return std::string(n, '9'); }

double physical_bytes() { return double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE)); }

std::vector<Row> rows() {
  const std::string big_context_needs = "22 GB";
  std::vector<Row> r = {
      // config.json: nesting, wrong types, infinite and out-of-range numbers, huge sizes.
      {"config_nested_300_deep", [](const std::string& d) { return config_row(d, deep(300)); }, "@/model/config.json"},
      {"config_nested_objects", [](const std::string& d) {
         std::string s;
         for (int i = 0; i < 1000; ++i) s += "{\"a\":";
         return config_row(d, s + "1" + std::string(1000, '}'));
       }, "@/model/config.json"},
      {"config_nested_inside_a_field", config_add("\"x\": " + deep(5000)), "@/model/config.json"},
      {"config_rope_type_number", config_edit("\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": 3}"), "@/model/config.json"},
      {"config_rope_scaling_number", config_edit("\"rope_scaling\": null", "\"rope_scaling\": 5"), "@/model/config.json"},
      {"config_rope_factor_string", config_edit("\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": \"x\"}"), "@/model/config.json"},
      {"config_rope_factor_overflow", config_edit("\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 1e999, \"original_max_position_embeddings\": 8}"), "@/model/config.json"},
      {"config_rope_theta_overflow", config_edit("\"rope_theta\": 10000.0", "\"rope_theta\": 1e999"), "@/model/config.json"},
      {"config_rope_theta_beyond_float", config_edit("\"rope_theta\": 10000.0", "\"rope_theta\": 1e300"), "@/model/config.json"},
      {"config_rope_theta_negative", config_edit("\"rope_theta\": 10000.0", "\"rope_theta\": -5"), "@/model/config.json"},
      {"config_rope_theta_zero", config_edit("\"rope_theta\": 10000.0", "\"rope_theta\": 0"), "@/model/config.json"},
      {"config_rope_theta_string", config_edit("\"rope_theta\": 10000.0", "\"rope_theta\": \"big\""), "@/model/config.json"},
      {"config_eps_zero", config_edit("\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 0"), "@/model/config.json"},
      {"config_eps_below_float", config_edit("\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1e-300"), "@/model/config.json"},
      {"config_eps_negative_overflow", config_edit("\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": -1e999"), "@/model/config.json"},
      {"config_hidden_size_string", config_edit("\"hidden_size\": 64", "\"hidden_size\": \"64\""), "@/model/config.json"},
      {"config_layers_fraction", config_edit("\"num_hidden_layers\": 5", "\"num_hidden_layers\": 5.5"), "@/model/config.json"},
      {"config_layers_huge", config_edit("\"num_hidden_layers\": 5", "\"num_hidden_layers\": 99999999999999999999999"), "@/model/config.json"},
      {"config_context_2_40", config_edit("\"max_position_embeddings\": 512", "\"max_position_embeddings\": 1099511627776"), "@/model/config.json"},
      {"config_context_negative", config_edit("\"max_position_embeddings\": 512", "\"max_position_embeddings\": -512"), "@/model/config.json"},
      {"config_tie_string", config_edit("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": \"yes\""), "@/model/config.json"},
      {"config_head_dim_array", config_edit("\"head_dim\": 8", "\"head_dim\": [8]"), "@/model/config.json"},
      {"config_an_array", [](const std::string& d) { return config_row(d, "[1, 2, 3]"); }, "@/model/config.json"},
      {"config_empty", [](const std::string& d) { return config_row(d, ""); }, "@/model/config.json"},
      {"config_not_json", [](const std::string& d) { return config_row(d, "{\"hidden_size\": 64,"); }, "@/model/config.json"},
      {"config_context_2_24",
       config_edit("\"max_position_embeddings\": 512", "\"max_position_embeddings\": 16777216"), "max_position_embeddings",
       [] { return physical_bytes() / 2 > 22.1e9 ? std::string("this machine holds a 22 GB KV cache") : std::string(); }},
      // tokenizer.json: nesting and wrong types.
      {"tokenizer_nested_100000", tokenizer_row(deep(100000)), "@/model/tokenizer.json"},
      {"tokenizer_nested_in_pre_tokenizer", tokenizer_row(tokenizer_json("\"merges\": []", "\"pre_tokenizer\": " + deep(20000))), "@/model/tokenizer.json"},
      {"tokenizer_nested_objects_in_model", tokenizer_row(tokenizer_json("\"x\": " + deep(3000, '{', '}'))), "@/model/tokenizer.json"},
      {"tokenizer_model_type_number", tokenizer_row("{\"model\": {\"type\": 3}}"), "@/model/tokenizer.json"},
      {"tokenizer_model_a_string", tokenizer_row("{\"model\": \"BPE\"}"), "@/model/tokenizer.json"},
      {"tokenizer_vocab_an_array", tokenizer_row("{\"model\": {\"type\": \"BPE\", \"vocab\": [\"a\"]}}"), "@/model/tokenizer.json"},
      {"tokenizer_id_a_string", tokenizer_row("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"0\"}}}"), "@/model/tokenizer.json"},
      {"tokenizer_id_2_40", tokenizer_row("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 1099511627776}}}"), "@/model/tokenizer.json"},
      {"tokenizer_id_past_the_vocabulary", tokenizer_row("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 16000000}}}"), "@/model/tokenizer.json"},
      {"tokenizer_id_negative", tokenizer_row("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}}}"), "@/model/tokenizer.json"},
      {"tokenizer_id_overflow", tokenizer_row("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": " + digits(400) + "}}}"), "@/model/tokenizer.json"},
      {"tokenizer_merges_a_number", tokenizer_row(tokenizer_json("\"merges\": 5")), "@/model/tokenizer.json"},
      {"tokenizer_merge_a_number", tokenizer_row(tokenizer_json("\"merges\": [5]")), "@/model/tokenizer.json"},
      {"tokenizer_byte_fallback_string", tokenizer_row(tokenizer_json("\"byte_fallback\": \"no\"")), "@/model/tokenizer.json"},
      {"tokenizer_ignore_merges_number", tokenizer_row(tokenizer_json("\"merges\": [], \"ignore_merges\": 1")), "@/model/tokenizer.json"},
      {"tokenizer_normalizer_number", tokenizer_row(tokenizer_json("\"merges\": []", "\"normalizer\": 7")), "@/model/tokenizer.json"},
      {"tokenizer_normalizer_type_number", tokenizer_row(tokenizer_json("\"merges\": []", "\"normalizer\": {\"type\": 7}")), "@/model/tokenizer.json"},
      {"tokenizer_added_tokens_object", tokenizer_row(tokenizer_json("\"merges\": []", "\"added_tokens\": {}")), "@/model/tokenizer.json"},
      {"tokenizer_added_content_number", tokenizer_row(tokenizer_json("\"merges\": []", "\"added_tokens\": [{\"content\": 5, \"id\": 3}]")), "@/model/tokenizer.json"},
      {"tokenizer_pre_tokenizer_number", tokenizer_row(tokenizer_json("\"merges\": []", "\"pre_tokenizer\": 5")), "@/model/tokenizer.json"},
      {"tokenizer_pre_tokenizer_type_number", tokenizer_row(tokenizer_json("\"merges\": []", "\"pre_tokenizer\": {\"type\": 5}")), "@/model/tokenizer.json"},
      {"tokenizer_split_invert_string", tokenizer_row(tokenizer_json("\"merges\": []", "\"pre_tokenizer\": {\"type\": \"Split\", \"behavior\": \"Isolated\", \"invert\": \"no\"}")), "@/model/tokenizer.json"},
      {"tokenizer_post_processor_type_number", tokenizer_row(tokenizer_json("\"merges\": []", "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"post_processor\": {\"type\": 3}")), "@/model/tokenizer.json"},
      {"tokenizer_not_json", tokenizer_row("{\"model\": "), "@/model/tokenizer.json"},
      // The published-results CSV: oversized cells and numbers beyond range.
      {"csv_cell_of_1MB_digits", csv_row(results_csv(digits(1 << 20), "128", "128", "55")), "@/results.csv"},
      {"csv_cell_of_1MB_spaces", csv_row(results_csv(std::string(1 << 20, ' '), "128", "128", "55")), "@/results.csv"},
      {"csv_quoted_cell_of_1MB", csv_row(results_csv("\"" + std::string(1 << 20, ',') + "\"", "128", "128", "55")), "@/results.csv"},
      {"csv_header_cell_of_1MB", csv_row(std::string(1 << 20, 'x') + ",source_id\n1,2\n"), "@/results.csv"},
      {"csv_batch_400_digits", csv_row(results_csv(digits(400), "128", "128", "55")), "@/results.csv"},
      {"csv_prompt_len_400_digits", csv_row(results_csv("1", digits(400), "128", "55")), "@/results.csv"},
      {"csv_gen_len_400_digits", csv_row(results_csv("1", "128", digits(400), "55")), "@/results.csv"},
      {"csv_gen_len_beyond_int", csv_row(results_csv("1", "128", "99999999999", "55")), "@/results.csv"},
      {"csv_batch_beyond_int", csv_row(results_csv("4294967296", "128", "128", "55")), "@/results.csv"},
      {"csv_value_400_digits", csv_row(results_csv("1", "128", "128", digits(400))), "@/results.csv"},
      {"csv_kv_length_400_digits", csv_row(results_csv("1", "KV length " + digits(400), "", "55")), "@/results.csv"},
      // models.json in the --designs folder.
      {"models_json_empty", models_json_row(""), "@/designs/models.json"},
      {"models_json_empty_object", models_json_row("{}"), "@/designs/models.json"},
      {"models_json_models_a_number", models_json_row("{\"models\": 5}"), "@/designs/models.json"},
      {"models_json_entry_without_preset", models_json_row("{\"models\": [{\"contains\": [\"llama\"]}]}"), "@/designs/models.json"},
      {"models_json_contains_numbers", models_json_row("{\"models\": [{\"contains\": [1], \"preset\": \"llama2-7b\"}]}"), "@/designs/models.json"},
      {"models_json_nested", models_json_row(deep(100000)), "@/designs/models.json"},
      // Design and prediction files.
      {"design_nested", file_row("d.json", deep(100000), "devices u280 --design @"), "@/d.json"},
      {"design_clock_a_string", file_row("d.json", "{\"clock_mhz\": \"fast\"}", "devices u280 --design @"), "@/d.json"},
      {"design_empty", file_row("d.json", "", "devices u280 --design @"), "@/d.json"},
      {"devices_design_of_an_unknown_device",
       [](const std::string& d) {
         std::string text = read_bytes(testing_support::source_path("data/published/flightllm_fpga24.json"));
         const auto at = text.find("\"device\"");
         const auto q1 = text.find('"', text.find(':', at)), q2 = text.find('"', q1 + 1);
         text.replace(q1 + 1, q2 - q1 - 1, "no-such-card");
         write_bytes(d + "/d.json", text);
         return "devices u280 --design " + d + "/d.json";
       },
       "@/d.json"},
      {"cost_from_an_unknown_device", file_row("p.json", R"({"device": "no-such-card", "watts": 40, "decode_tokens_per_s": 10})", "cost --from @ --days 10"), "@/p.json"},
      {"cost_from_nested", file_row("p.json", deep(100000, '{', '}'), "cost --from @"), "@/p.json"},
      {"cost_from_design_without_matrix_unit",
       file_row("p.json", R"({"device": "u280", "clock_mhz": 200, "vector_unit": {"lanes": 16}, "tiling": {"tile_rows": 8, "tile_cols": 8}, "predicted": {"watts": 40, "decode_tokens_per_s": 10}})",
                "cost --from @"),
       "@/p.json"},
      {"cost_from_prediction_of_wrong_types", file_row("p.json", R"({"watts": "x", "decode_tokens_per_s": [1]})", "cost --from @"), "@/p.json"},
      // safetensors header.
      {"safetensors_header_nested", [](const std::string& d) {
         const std::string header = "{\"a\":" + deep(50000) + "}";
         std::string bytes(8, '\0');
         const std::uint64_t n = header.size();
         std::memcpy(bytes.data(), &n, 8);
         fs::create_directories(d + "/m");
         write_bytes(d + "/m/model.safetensors", bytes + header);
         write_bytes(d + "/m/config.json", base_config());
         return "run " + d + "/m" + kZ + " -n 4";
       }, "@/m/model.safetensors"},
      // GGUF: a header count that disagrees with the tensor it counts.
      {"gguf_vocab_size_disagrees_with_the_embedding", [](const std::string& d) {
         const auto c = run_fpgallm("convert " + testing_support::stories260k() + " -z " + testing_support::tok512() + " -o " + d + "/m.gguf", 120);
         if (c.status != 0) return std::string("convert failed");
         std::string bytes = read_bytes(d + "/m.gguf");
         const std::string key = "llama.vocab_size";
         const auto at = bytes.find(key);
         if (at == std::string::npos) return std::string("no llama.vocab_size");
         const std::uint32_t lie = 1000;  // the embedding has 512 rows
         std::memcpy(bytes.data() + at + key.size() + 4, &lie, 4);  // after the key: the u32 type tag, then the value
         write_bytes(d + "/m.gguf", bytes);
         return "info " + d + "/m.gguf";
       }, "@/m.gguf"},
      // Sampler and prompt options.
      {"run_topp_nan", args_row("run @M -p nan -n 8"), "--topp"},
      {"run_topp_inf", args_row("run @M -p inf -n 8"), "--topp"},
      {"run_topp_above_one", args_row("run @M -p 1.5 -n 8"), "--topp"},
      {"run_topp_negative", args_row("run @M -p -0.1 -n 8"), "--topp"},
      {"run_temperature_nan", args_row("run @M -t nan -n 8"), "--temperature"},
      {"run_temperature_negative", args_row("run @M -t -1 -n 8"), "--temperature"},
      {"run_temperature_overflow", args_row("run @M -t 1e999 -n 8"), "--temperature"},
      {"run_seed_negative", args_row("run @M -s -1 -n 8"), "--seed"},
      {"run_seed_beyond_64_bits", args_row("run @M -s 99999999999999999999999 -n 8"), "--seed"},
      {"run_steps_beyond_int", args_row("run @M -n 99999999999999999999"), "--steps"},
      {"run_prompt_file_missing", [](const std::string& d) { return "run " + testing_support::stories260k() + kZ + " --prompt-file " + d + "/none.txt"; }, "@/none.txt"},
      {"run_prompt_longer_than_the_context", [](const std::string& d) {
         std::string prompt;
         for (int i = 0; i < 2000; ++i) prompt += "Once upon a time ";
         write_bytes(d + "/p.txt", prompt);
         return "run " + testing_support::stories260k() + kZ + " -n 0 --prompt-file " + d + "/p.txt";
       }, "context of 512"},
      {"run_steps_below_the_prompt", args_row("run @M -n 3 -i \"Once upon a time there was a little girl\""), "at most 3 fit"},
      {"run_prompt_file_longer_than_steps", [](const std::string& d) {
         write_bytes(d + "/p.txt", "Once upon a time there was a little girl");
         return "run " + testing_support::stories260k() + kZ + " -n 3 --prompt-file " + d + "/p.txt";
       }, "@/p.txt"},
      {"run_prompt_file_and_prompt", [](const std::string& d) {
         write_bytes(d + "/p.txt", "Once");
         return "run " + testing_support::stories260k() + kZ + " -i Once --prompt-file " + d + "/p.txt";
       }, "--prompt-file"},
      {"explore_unknown_device", args_row("explore llama2-7b --devices u280,nope"), "--devices"},
      {"deploy_budget_not_a_number", args_row("deploy " + testing_support::stories260k() + " --device u280 --budget 2x% -o /nonexistent/x"), "--budget"},
  };
  (void)big_context_needs;
  return r;
}

class BadInput : public ::testing::TestWithParam<Row> {};

TEST_P(BadInput, ExitsTwoWithOneLineNamingTheCulprit) {
  const Row& row = GetParam();
  if (const std::string why = row.skip(); !why.empty()) GTEST_SKIP() << why;
  const std::string dir = testing_support::scratch_dir("bad-table-" + row.name);
  const std::string args = row.build(dir);
  const auto r = run_fpgallm(args + " </dev/null", 60);
  EXPECT_EQ(r.status, 2) << args.substr(0, 300) << "\nstderr: " << r.err.substr(0, 2000);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err.substr(0, 2000);
  const std::string names = row.names.rfind("@", 0) == 0 ? dir + row.names.substr(1) : row.names;
  EXPECT_NE(r.err.find(names), std::string::npos) << "stderr does not name " << names << ": " << r.err.substr(0, 2000);
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err.substr(0, 2000);
}

INSTANTIATE_TEST_SUITE_P(Table, BadInput, ::testing::ValuesIn(rows()),
                         [](const ::testing::TestParamInfo<Row>& info) { return info.param.name; });

TEST(BadInputTable, HasAtLeastSixtyRows) { EXPECT_GE(rows().size(), 60u); }

// Top-p reads only its own buffer: a flat distribution with a tiny top-p (every token below
// the nucleus cutoff once rounded), a vocabulary of one, NaN logits. ASan/valgrind see an
// over-read; here every sample is a token of the vocabulary.
TEST(Sampler, TopPOnAnyDistributionGivesATokenOfTheVocabulary) {
  for (int n : {1, 2, 3, 512, 32000}) {
    for (float topp : {1e-30f, 0.0001f, 0.5f, 0.9999f}) {
      engine::Sampler s(n, 1.0f, topp, 42);
      for (int trial = 0; trial < 4; ++trial) {
        std::vector<float> logits(static_cast<std::size_t>(n), 0.0f);  // uniform
        const int t = s.sample(logits.data());
        EXPECT_GE(t, 0);
        EXPECT_LT(t, n);
        std::vector<float> nan(static_cast<std::size_t>(n), std::numeric_limits<float>::quiet_NaN());
        const int u = s.sample(nan.data());
        EXPECT_GE(u, 0);
        EXPECT_LT(u, n);
      }
    }
  }
}

TEST(Sampler, RefusesNonFiniteOrOutOfRangeSettings) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (auto [t, p] : std::vector<std::pair<float, float>>{{nan, 0.9f}, {inf, 0.9f}, {-1, 0.9f}, {1, nan}, {1, -0.1f}, {1, 1.1f}, {1, inf}})
    EXPECT_THROW(engine::Sampler(16, t, p, 1), fpgallm::InputError) << t << " " << p;
  EXPECT_NO_THROW(engine::Sampler(16, 0, 0, 1));
  EXPECT_NO_THROW(engine::Sampler(16, 100, 1, 1));
}

// NaN or infinity in a Qwen model's q/k/v biases or q/k norm gains is refused like a NaN weight.
TEST(FiniteWeights, BiasesAndNormGainsFollowTheNaNWeightRule) {
  for (int which = 0; which < 5; ++which) {
    model::Model m;
    model::LayerWeights lw;
    std::vector<float>* t[] = {&lw.bq, &lw.bk, &lw.bv, &lw.q_norm, &lw.k_norm};
    for (auto* v : t) v->assign(8, 0.5f);
    (*t[which])[3] = which % 2 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    m.weights.layers.push_back(lw);
    EXPECT_THROW(model::require_finite(m, "qwen.gguf", "refused"), fpgallm::InputError) << which;
  }
}

}  // namespace
