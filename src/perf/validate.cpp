#include "perf/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "arch/design.hpp"
#include "hw/resources.hpp"
#include "model/presets.hpp"
#include "perf/perf.hpp"
#include "util/csv.hpp"
#include "util/error.hpp"
#include "util/json_file.hpp"
#include "util/number.hpp"
#include "util/paths.hpp"

namespace perf {

namespace {

using Record = std::map<std::string, std::string>;


std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The first number of a cell ("~45 tok/s", "65.9%", "KV length 128"); nullopt when none.
std::optional<double> first_number(const std::string& s) {  // "1,384.0 ms" -> 1384
  static const std::regex number(R"((\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)|\d+(?:\.\d+)?))");
  std::smatch m;
  if (!std::regex_search(s, m, number)) return std::nullopt;
  std::string digits = m[1];
  digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
  return fpgallm::parse_double(digits).value_or(HUGE_VAL);  // beyond a double's range: infinity, refused by the caller
}
bool is_range(const std::string& s) {
  static const std::regex range(R"(\d\s*-\s*\d)");
  return std::regex_search(s, range);
}
// Cards or nodes a cell says it measured on: "4x V100", "4 x U280", "2 nodes", "on 4 FPGAs",
// "(8 cards)"; 1 when it says none.
int card_count(const std::string& s) {
  static const std::regex times(R"(^\s*(\d{1,4})\s*(?:x|\xC3\x97)\s)", std::regex::icase);  // "4x", "4 x", "4 \u00d7"
  static const std::regex counted(R"((?:^|[^\w.])(\d{1,4})\s*(?:nodes?|cards?|boards?|fpgas?|gpus?|devices?)\b)",
                                  std::regex::icase);
  std::smatch m;
  if (std::regex_search(s, m, times) || std::regex_search(s, m, counted)) return std::max(1, static_cast<int>(fpgallm::parse_integer(m[1].str(), 0, 9999).value_or(1)));
  return 1;
}

// "1.67x faster", "up to 9", "< 10", ">= 5", "at most": a ratio or a bound, not a measurement.
bool is_bound_or_ratio(const std::string& cell) {
  static const std::regex ratio(R"(\d\s*(x|×)(\s|$|[^a-z0-9]))", std::regex::icase);
  const std::string s = lower(cell);
  for (const char* w : {"up to", "at most", "at least", "<", ">", "≤", "≥", "faster", "slower", "speedup", "times",
                        "more than", "less than", "over "})
    if (s.find(w) != std::string::npos) return true;
  return std::regex_search(s, ratio);
}

struct Metric {
  std::string name, unit;
  double per_published = 1;  // the metric's unit per unit of the cell ("TTFT (s)": 1000 ms per s)
};
std::optional<Metric> metric_of(const std::string& cell) {
  const std::string s = lower(cell);
  auto starts = [&](const char* p) { return s.rfind(p, 0) == 0; };
  if (starts("decode_tokens_per_s")) return Metric{"decode_tokens_per_s", "tok/s"};
  if (starts("ms_per_token")) return Metric{"ms_per_token", "ms"};
  if (starts("throughput_tokens_per_s")) return Metric{"throughput_tokens_per_s", "tok/s"};
  if (starts("end_to_end_latency_ms")) return Metric{"end_to_end_latency_ms", "ms"};
  if (starts("prefill_latency_ms")) return Metric{"prefill_latency_ms", "ms"};
  if (starts("achieved_gflops")) return Metric{"achieved_gflops", "GFLOP/s"};
  // The same metrics as papers write them: "TTFT (ms)", "TPOT", "ms/token", "tokens/s".
  auto has = [&](const char* p) { return s.find(p) != std::string::npos; };
  // A latency the cell states in seconds ("TTFT (s)", "ttft_s").
  const bool seconds = has("(s)") || has("[s]") || (s.size() > 2 && s.compare(s.size() - 2, 2, "_s") == 0);
  if (has("ttft")) return Metric{"prefill_latency_ms", "ms", seconds ? 1e3 : 1};
  if (has("tpot") || has("ms/token") || has("ms/tok") || has("ms per token")) return Metric{"ms_per_token", "ms"};
  const bool per_second = has("/s") || has("per s") || has("per_s");
  if ((has("token") || has("tok")) && per_second && (has("prefill") || has("prompt")))
    return Metric{"prefill_tokens_per_s", "tok/s"};
  if ((has("token") || has("tok")) && per_second && !has("prefill") && !has("prompt") && !has("total") &&
      !has("end-to-end") && !has("e2e"))
    return Metric{"decode_tokens_per_s", "tok/s"};
  return std::nullopt;
}

struct ModelAlias {
  std::vector<std::string> contains;
  std::string preset;
};
// The --designs folder's models.json when it has one, else the shipped table.
std::vector<ModelAlias> model_aliases(const std::string& designs_dir) {
  std::string path = designs_dir + "/models.json";
  if (!std::filesystem::exists(path)) path = fpgallm::data_dir() + "/published/models.json";
  const nlohmann::json j = fpgallm::read_json_file(path, "the model-name table");
  return fpgallm::reading_json(path, [&] {
    if (!j.is_object() || !j.contains("models") || !j["models"].is_array())
      throw fpgallm::InputError(path, "expected an object with a \"models\" list");
    std::vector<ModelAlias> out;
    for (const auto& e : j["models"]) {
      if (!e.is_object() || !e.contains("contains") || !e["contains"].is_array() || !e.contains("preset") || !e["preset"].is_string())
        throw fpgallm::InputError(path, "each entry of \"models\" needs a \"contains\" list of strings and a \"preset\" string");
      out.push_back({e.at("contains").get<std::vector<std::string>>(), e.at("preset")});
    }
    return out;
  });
}

std::optional<std::string> resolve_model(const std::string& text, const std::vector<ModelAlias>& aliases) {
  const std::string t = lower(text);
  for (const auto& a : aliases) {
    bool all = true;
    for (const auto& piece : a.contains) all = all && t.find(lower(piece)) != std::string::npos;
    if (all) return a.preset;
  }
  return identify_model(text);
}

// A device's id and aliases: the names a row may call it by.
std::vector<std::string> names_of(const hw::Device& d) {
  std::vector<std::string> names{d.id};
  names.insert(names.end(), d.aliases.begin(), d.aliases.end());
  return names;
}

// The lower-case runs of letters and digits of a text ("A100-SXM4-80GB" -> a100, sxm4, 80gb).
std::vector<std::string> words_of(const std::string& s) {
  static const std::regex alnum(R"([a-z0-9]+)");
  std::vector<std::string> out;
  const std::string l = lower(s);
  for (auto it = std::sregex_iterator(l.begin(), l.end(), alnum); it != std::sregex_iterator(); ++it)
    out.push_back(it->str());
  return out;
}

// A GPU named somewhere in free text ("A100 W8A8 (1065 MHz listed)", "V100S (vLLM+...)").
// Runs of up to three words are tried joined by '-' ("Jetson AGX Orin" -> jetson-agx-orin),
// longest first at each position.
const hw::Device* find_gpu(const std::string& text) {
  static const std::regex word(R"([A-Za-z0-9][A-Za-z0-9\-]*)");
  std::vector<std::string> words;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), word); it != std::sregex_iterator(); ++it)
    words.push_back(it->str());
  for (std::size_t i = 0; i < words.size(); ++i)
    for (std::size_t n = std::min<std::size_t>(3, words.size() - i); n >= 1; --n) {
      std::string name = words[i];
      for (std::size_t k = 1; k < n; ++k) name += "-" + words[i + k];
      const hw::Device* d = hw::lookup_device(name);
      if (d && d->kind == hw::Kind::gpu) return d;
    }
  // Else the GPU whose id or alias has every part among the text's words ("A100-SXM4-80GB"
  // holds a100 and 80gb: a100-80gb), the one with the most parts.
  const std::vector<std::string> in_text = words_of(text);
  const hw::Device* best = nullptr;
  std::size_t best_parts = 0;
  for (const auto& d : hw::devices()) {
    if (d.kind != hw::Kind::gpu) continue;
    for (const auto& key : names_of(d)) {
      const auto want = words_of(key);
      const bool all = !want.empty() && std::all_of(want.begin(), want.end(), [&](const std::string& w) {
        return std::find(in_text.begin(), in_text.end(), w) != in_text.end();
      });
      if (all && want.size() > best_parts) {
        best = &d;
        best_parts = want.size();
      }
    }
  }
  return best;
}

// The FPGA card named somewhere in free text ("1x Xilinx Alveo U280", "Intel Stratix 10 NX
// 2100", "AWS EC2 F1 (VU9P)"): the longest of the cards' ids and aliases that occurs, compared
// on letters and digits only; a key of three characters or fewer ("f1", "u50") only as a
// whole word.
const hw::Device* find_fpga(const std::string& text) {
  auto flat = [](const std::string& s) {
    std::string o;
    for (char c : s)
      if (std::isalnum(static_cast<unsigned char>(c))) o += char(std::tolower(static_cast<unsigned char>(c)));
    return o;
  };
  const std::string t = lower(text), t_flat = flat(text);
  auto whole_word = [&](const std::string& key) {
    for (std::size_t at = t.find(key); at != std::string::npos; at = t.find(key, at + 1)) {
      const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(t[at - 1]));
      const std::size_t end = at + key.size();
      const bool right = end >= t.size() || !std::isalnum(static_cast<unsigned char>(t[end]));
      if (left && right) return true;
    }
    return false;
  };
  const hw::Device* best = nullptr;
  std::size_t best_len = 0;
  for (const auto& d : hw::devices()) {
    if (d.kind != hw::Kind::fpga) continue;
    for (const auto& key : names_of(d)) {
      const std::string k = flat(key);
      if (k.empty() || k.size() <= best_len) continue;
      const bool found = k.size() <= 3 ? whole_word(lower(key)) : t_flat.find(k) != std::string::npos;
      if (found) {
        best = &d;
        best_len = k.size();
      }
    }
  }
  return best;
}

// The precision the GPU baseline ran at, from the GPU's own text; nullopt when it names none.
std::optional<std::string> gpu_scheme(const std::string& text) {
  static const std::regex wa(R"(W(\d+)A(\d+))", std::regex::icase);
  std::smatch m;
  if (std::regex_search(text, m, wa)) return fmt::format("w{}a{}", m[1].str(), m[2].str());
  const std::string t = lower(text);
  if (t.find("smoothquant") != std::string::npos) return std::string("w8a8");
  if (t.find("fp16") != std::string::npos || t.find("half") != std::string::npos) return std::string("fp16");
  if (t.find("bf16") != std::string::npos) return std::string("bf16");
  if (t.find("int8") != std::string::npos) return std::string("int8");
  if (t.find("int4") != std::string::npos || t.find("q4") != std::string::npos || t.find("awq") != std::string::npos ||
      t.find("gptq") != std::string::npos)
    return std::string("w4a16");
  // FP8 (Hopper, Ada) moves the bytes of int8 and runs at the INT8 tensor rate, which equals
  // the FP8 rate on those GPUs (NVIDIA H100 and L40S data sheets).
  if (t.find("fp8") != std::string::npos) return std::string("w8a8");
  if (t.find("q8") != std::string::npos) return std::string("w8a16");  // llama.cpp Q8_0: 8-bit weights
  if (t.find("fp32") != std::string::npos || t.find("float32") != std::string::npos) return std::string("fp32");
  return std::nullopt;
}

struct PublishedDesign {
  arch::Design design;
  std::string model;          // preset
  std::string scheme;         // quant scheme of the workload
  std::string design_source;  // the source whose design this file describes (cross-validation group)
};

struct LoadedDesign {
  std::optional<PublishedDesign> design;
  std::string problem;  // why the file cannot be used (empty when it can or does not exist)
};

// A published design states how it counts its memory: assumptions.memory_convention "device_channels"
// (memory.*_channels are channels as data/devices.json defines them for the device: "32" on
// a card whose database has 64 pseudo-channels is half of them, not "all of them"), what the
// paper says of it (assumptions.memory_as_published), and the width of its off-chip ports
// (memory.port_bits). Throws std::invalid_argument naming the field to add.
void require_stated_memory(const nlohmann::json& j) {
  const hw::Device* dev = j.contains("device") && j["device"].is_string() ? hw::lookup_device(j["device"]) : nullptr;
  std::string channels = "the device's channel count";
  if (dev)
    for (const auto& pool : dev->memory)
      if (pool.channels.has()) {
        channels = fmt::format("{} counts {} {} channels", dev->id, *pool.channels, pool.kind);
        break;
      }
  const nlohmann::json stated = j.value("assumptions", nlohmann::json::object());
  if (!stated.contains("memory_convention"))
    throw std::invalid_argument("assumptions.memory_convention is missing: add \"device_channels\" (memory.*_channels count the "
                                "channels of data/devices.json; " + channels + ")");
  if (stated["memory_convention"] != "device_channels")
    throw std::invalid_argument("assumptions.memory_convention: only \"device_channels\" is understood (memory.*_channels count the "
                                "channels of data/devices.json; " + channels + ")");
  if (!stated.contains("memory_as_published") || !stated["memory_as_published"].is_string() ||
      stated["memory_as_published"].get<std::string>().empty())
    throw std::invalid_argument("assumptions.memory_as_published is missing: add the paper's words for the memory the design uses");
  const nlohmann::json memory = j.value("memory", nlohmann::json::object());
  const bool off_chip = memory.value("weight_channels", 1) > 0 || memory.value("kv_channels", 0) > 0;
  if (off_chip && !memory.contains("port_bits"))
    throw std::invalid_argument("memory.port_bits is missing: add the width in bits of each off-chip port, as the paper states it");
}

// The design file of a source; a file that cannot be read or expressed gives a reason, not
// an exception, so that one bad file skips its rows only.
LoadedDesign load_published(const std::string& dir, const std::string& source_id) {
  LoadedDesign out;
  const std::string path = dir + "/" + source_id + ".json";
  if (!std::filesystem::exists(path)) return out;
  try {
    nlohmann::json j = fpgallm::read_json_file(path, "the published design");
    PublishedDesign p;
    p.design_source = source_id.substr(0, source_id.find('@'));
    const nlohmann::json stated = j.value("assumptions", nlohmann::json::object());
    if (stated.contains("design_source")) {  // a rerun or a re-report of another source's design
      if (!stated["design_source"].is_string() || stated["design_source"].get<std::string>().empty())
        throw std::invalid_argument("assumptions.design_source must name the source_id whose design the file describes");
      p.design_source = stated["design_source"];
    }
    require_stated_memory(j);
    arch::from_json(j, p.design);
    if (auto problems = p.design.model_problems(); !problems.empty()) throw std::invalid_argument(problems.front());
    if (j.contains("model") && j["model"].is_string()) p.model = j["model"];
    if (j.contains("quant") && j["quant"].is_string()) p.scheme = j["quant"];
    if (p.scheme.empty()) throw std::invalid_argument("\"quant\": the workload's scheme (e.g. \"w4a8\") is required");
    graph::parse_scheme(p.scheme);
    out.design = p;
  } catch (const std::exception& e) {
    out.problem = source_id + ".json cannot be used: " + e.what();
  }
  return out;
}

// Lengths of the request a row measured.
struct Request {
  int batch = 1, prompt = 0, generate = 0, context = 0;
};

constexpr int kUnknownContext = 512;  // decode context when a row gives no lengths
constexpr double kMaxCount = 1 << 30;  // the largest batch or length a row may state

// Figures of the row's metric from a predictor (FPGA design or GPU), by lowering the
// workloads it needs: prefill at the prompt, decode at the start, middle and end of the
// generation (the KV traffic grows linearly with the context; Simpson's rule).
template <typename Predict>
double predict_metric(const std::string& metric, const model::Config& cfg, const graph::Precision& prec,
                      const Request& r, Predict&& predict) {
  auto run = [&](int prompt, int context) {
    Scenario s;
    s.batch = r.batch;
    s.prompt = std::max(1, prompt);
    s.context = std::max(1, context);
    return predict(lower(cfg, prec, s));
  };
  if ((metric == "prefill_latency_ms" || metric == "prefill_tokens_per_s") && r.prompt <= 0)
    throw std::invalid_argument(metric + " needs the row's prompt length (prompt_len)");
  if (metric == "prefill_latency_ms") return run(r.prompt, r.prompt + 1).prefill_s * 1e3;
  if (metric == "prefill_tokens_per_s") return r.batch * r.prompt / run(r.prompt, r.prompt + 1).prefill_s;
  if (metric == "ms_per_token") return run(1, r.context).decode_step_s * 1e3;
  if (r.generate <= 0) {  // decode rate at a single context
    if (metric != "decode_tokens_per_s") throw std::invalid_argument(metric + " needs the row's generation length (gen_len)");
    const Prediction p = run(std::max(r.prompt, 1), r.context);
    return p.decode_tokens_per_s;
  }
  const int c0 = r.prompt + 1, c1 = r.prompt + r.generate, cm = (c0 + c1) / 2;
  const Prediction first = run(r.prompt, c0), mid = run(r.prompt, cm), last = run(r.prompt, c1);
  const double mean_step = (first.decode_step_s + 4 * mid.decode_step_s + last.decode_step_s) / 6;
  const double mean_flops = (first.decode.flops + 4 * mid.decode.flops + last.decode.flops) / 6;
  const double decode_s = mean_step * r.generate;
  const double total_s = first.prefill_s + decode_s;
  if (metric == "decode_tokens_per_s") return r.batch * r.generate / decode_s;
  if (metric == "throughput_tokens_per_s") return r.batch * r.generate / total_s;
  if (metric == "end_to_end_latency_ms") return total_s * 1e3;
  if (metric == "achieved_gflops") return (first.prefill.flops + mean_flops * r.generate) / total_s / 1e9;
  throw std::logic_error("validate: unhandled metric " + metric);
}

}  // namespace

std::optional<std::string> identify_model(const std::string& text) {
  const std::string t = lower(text);
  auto alnum = [](const std::string& s) {
    std::string o;
    for (char c : s)
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '.') o += c;
    return o;
  };
  static const std::regex size(R"((\d+(?:\.(\d+))?)\s*([bm])\b)");
  // Each count the text states, with how far a preset may be from it: 15%, or half a unit of
  // its last digit when it is rounded more coarsely than that ("Llama-3.2-1B" is 1.24B).
  struct Stated {
    double count, allowed;
  };
  std::vector<Stated> sizes;
  for (auto it = std::sregex_iterator(t.begin(), t.end(), size); it != std::sregex_iterator(); ++it) {
    const double unit = (*it)[3].str() == "b" ? 1e9 : 1e6;
    const auto stated = fpgallm::parse_double((*it)[1].str());
    if (!stated) continue;
    const double count = *stated * unit;
    const double half_digit = 0.5 * unit * std::pow(10.0, -double((*it)[2].length()));
    sizes.push_back({count, std::max(0.15 * count, half_digit)});
  }
  // How far a preset's parameter count is from the nearest count the text states, in units
  // of what that count allows (within when <= 1; infinity when the text states none).
  auto offset = [&](const model::Preset& p) {
    double best = std::numeric_limits<double>::infinity();
    for (const Stated& s : sizes) best = std::min(best, std::fabs(double(p.config.n_params()) - s.count) / s.allowed);
    return best;
  };
  // 1. A preset's name, ignoring case, spaces and hyphens ("Qwen2.5-7B-Instruct", "LLaMA2 7B"),
  // the longest that occurs; not when a parameter count in the text contradicts it ("GPT2"
  // with 355M is not gpt2's 124M).
  const std::string flat = alnum(t);
  const model::Preset* named = nullptr;
  for (const auto& p : model::presets()) {
    const std::string n = alnum(lower(p.config.name));
    if (flat.find(n) != std::string::npos && (!named || n.size() > alnum(lower(named->config.name)).size())) named = &p;
  }
  if (named && (sizes.empty() || offset(*named) <= 1)) return named->config.name;
  // 2. The family named in words and a parameter count ("Llama 2 110M", "GPT2" with 355M in the
  // params column): the family's preset within what that count allows, the closest if several.
  auto has = [&](const char* w) { return t.find(w) != std::string::npos; };
  std::vector<std::string> prefixes;
  if (has("tinyllama")) prefixes = {"tinyllama"};
  else if (has("deepseek") && has("qwen")) prefixes = {"deepseek-r1-distill-qwen"};
  else if (has("qwen3") || has("qwen 3") || has("qwen-3")) prefixes = {"qwen3"};
  else if (has("qwen")) prefixes = {"qwen2.5"};
  else if (std::regex_search(t, std::regex(R"(llama[\s\-]?3)"))) prefixes = {"llama3"};
  else if (has("mistral")) prefixes = {"mistral"};
  else if (has("llama") || has("vicuna")) prefixes = {"llama2", "stories"};  // LLaMA 1, Vicuna and llama2.c's stories models have Llama 2's shapes
  else if (has("gpt-2") || has("gpt2") || has("gpt 2")) prefixes = {"gpt2"};
  else if (std::regex_search(t, std::regex(R"(\bopt\b)"))) prefixes = {"opt"};
  else if (has("bert")) prefixes = {"bert"};
  if (prefixes.empty()) return std::nullopt;
  const model::Preset* best = nullptr;
  double best_off = 1;
  for (const auto& p : model::presets()) {
    const std::string n = lower(p.config.name);
    if (std::none_of(prefixes.begin(), prefixes.end(), [&](const std::string& f) { return n.rfind(f, 0) == 0; })) continue;
    if (const double off = offset(p); off <= best_off) {
      best_off = off;
      best = &p;
    }
  }
  if (!best) return std::nullopt;
  return best->config.name;
}

double median_abs(const std::vector<double>& errors) {
  if (errors.empty()) return 0;
  std::vector<double> a;
  for (double e : errors) a.push_back(std::fabs(e));
  std::sort(a.begin(), a.end());
  const std::size_t n = a.size();
  return n % 2 ? a[n / 2] : (a[n / 2 - 1] + a[n / 2]) / 2;
}

namespace {

// A published resource count: "574k (44.0%)" -> 574000, "78K" -> 78000, "291" -> 291,
// "39.93%" -> 0.3993 x the device's total. nullopt when the cell holds none.
std::optional<double> resource_count(const std::string& cell, double device_total) {
  static const std::regex count(R"(^\s*~?(\d{1,3}(?:,\d{3})+(?!\d)|\d+(?:\.\d+)?)\s*([kKmM]?)\b(?!\s*%))");
  static const std::regex percent(R"(^\s*~?(\d+(?:\.\d+)?)\s*%)");
  std::smatch m;
  if (std::regex_search(cell, m, percent)) {
    if (device_total <= 0) return std::nullopt;
    const auto percent_used = fpgallm::parse_double(m[1].str());
    if (!percent_used) return std::nullopt;
    return *percent_used / 100 * device_total;
  }
  if (std::regex_search(cell, m, count)) {
    std::string digits = m[1];
    digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());  // "177,000"
    const auto parsed = fpgallm::parse_double(digits);
    if (!parsed) return std::nullopt;
    double v = *parsed;
    const std::string unit = lower(m[2]);
    if (unit == "k") v *= 1e3;
    if (unit == "m") v *= 1e6;
    return v;
  }
  return std::nullopt;
}


// A predicted row as a function of the model's constants.
struct RowModel {
  std::function<double(const Constants&)> predict;
};

// A row's prediction in the fitted constants x: the time the metric measures (a latency,
// or the inverse of a rate) is the time with every fitted constant at 0 plus each constant
// times its slope, since each one is a fixed latency added to the operations' times.
struct LinearRow {
  bool fpga = false;
  bool rate = false;  // the metric is work / time (tok/s, GFLOP/s)
  double measured = 0;
  double base = 0;
  std::vector<double> slope;
  double at(const std::vector<double>& x) const {
    double t = base;
    for (std::size_t k = 0; k < x.size(); ++k) t += slope[k] * x[k];
    return rate ? 1 / t : t;
  }
  double error(const std::vector<double>& x) const { return at(x) / measured - 1; }
};

using Fitted = std::vector<std::pair<std::string, Constant*>>;

Fitted fitted_constants(Constants& c) {
  Fitted out;
  for (auto& [name, ptr] : c.named())
    if (ptr->fit) out.push_back({name, const_cast<Constant*>(ptr)});
  return out;
}

std::vector<double> shipped_values(const Constants& shipped) {
  std::vector<double> x;
  for (const auto& [name, k] : shipped.named())
    if (k->fit) x.push_back(k->value);
  return x;
}

// The grid point with the least mean |log(predicted/measured)| over the FPGA rows of `rows`
// selected by `use` (ties: nearest the derivations in grid steps).
std::vector<double> fit_grid(const std::vector<LinearRow>& rows, const std::vector<bool>& use,
                             const std::vector<ConstantFit>& grids) {
  const std::size_t K = grids.size();
  std::vector<int> steps(K), at(K, 0);
  for (std::size_t k = 0; k < K; ++k) steps[k] = int(std::floor((grids[k].max - grids[k].min) / grids[k].step + 1e-9)) + 1;
  // A constant no row of the fit depends on (a launch cost where no design is host-launched)
  // is not determined by them: it stays at its derivation.
  std::vector<ConstantFit> g = grids;
  for (std::size_t k = 0; k < K; ++k) {
    bool seen = false;
    for (std::size_t i = 0; i < rows.size(); ++i) seen = seen || (use[i] && rows[i].fpga && rows[i].slope[k] != 0);
    if (!seen) {
      g[k].min = g[k].max = g[k].derivation;
      steps[k] = 1;
    }
  }
  std::vector<double> x(K), best(K);
  for (std::size_t k = 0; k < K; ++k) best[k] = grids[k].derivation;
  double best_mean = std::numeric_limits<double>::infinity(), best_distance = best_mean;
  std::vector<double> errors;
  for (;;) {
    for (std::size_t k = 0; k < K; ++k) x[k] = g[k].min + at[k] * g[k].step;
    errors.clear();
    double sum = 0;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (use[i] && rows[i].fpga) {
        errors.push_back(std::fabs(std::log(rows[i].at(x) / rows[i].measured)));
        sum += errors.back();
      }
    if (!errors.empty()) {
      const double mean = sum / double(errors.size());
      double distance = 0;
      for (std::size_t k = 0; k < K; ++k) distance += std::fabs(x[k] - grids[k].derivation) / grids[k].step;
      const double tol = 1e-12;
      const bool better = mean < best_mean - tol || (mean <= best_mean + tol && distance < best_distance);
      if (better) {
        best = x;
        best_mean = mean;
        best_distance = distance;
      }
    }
    std::size_t k = 0;
    while (k < K && ++at[k] == steps[k]) at[k++] = 0;
    if (k == K) break;
  }
  return best;
}

std::vector<LinearRow> linearize(const Validation& v, const std::vector<RowModel>& models, const Constants& shipped) {
  Constants c = shipped;
  const Fitted fitted = fitted_constants(c);
  std::vector<LinearRow> out;
  for (std::size_t i = 0; i < v.rows.size(); ++i) {
    const ValidationRow& r = v.rows[i];
    LinearRow lr;
    lr.fpga = r.kind == "fpga";
    lr.rate = r.unit != "ms";
    lr.measured = r.measured;
    auto time_of = [&](double metric) { return lr.rate ? 1 / metric : metric; };
    for (auto& [name, k] : fitted) k->value = 0;
    lr.base = time_of(models[i].predict(c));
    for (auto& [name, k] : fitted) {
      k->value = k->fit->max > 0 ? k->fit->max : 1;
      lr.slope.push_back((time_of(models[i].predict(c)) - lr.base) / k->value);
      k->value = 0;
    }
    const double recon = lr.at(shipped_values(shipped));
    if (std::fabs(recon - r.predicted) > 1e-6 * std::fabs(r.predicted))
      throw std::logic_error(fmt::format("validate: line {} is not linear in the fitted constants ({} against {})", r.line,
                                         recon, r.predicted));
    out.push_back(lr);
  }
  return out;
}

CrossValidation cross_validate(Validation& v, const std::vector<RowModel>& models, const Constants& shipped,
                               bool by_design) {
  CrossValidation cv;
  cv.grouping = by_design ? "design" : "source";
  auto group_of = [&](const ValidationRow& r) { return by_design ? r.design : r.source_id; };
  std::vector<ConstantFit> grids;
  for (const auto& [name, k] : shipped.named())
    if (k->fit) {
      grids.push_back(*k->fit);
      cv.constants.push_back({name, k->unit, k->value, 0, k->fit->derivation, k->fit->derivation_source, {}, 0});
    }
  const std::vector<LinearRow> rows = linearize(v, models, shipped);
  for (const auto& r : v.rows)
    if (std::find(cv.groups.begin(), cv.groups.end(), group_of(r)) == cv.groups.end()) cv.groups.push_back(group_of(r));
  const std::size_t K = grids.size();
  // Held-out errors of every row with the constants in `fixed` (index -> value) kept there
  // and the others refitted without the row's group.
  auto held_out = [&](const std::map<std::size_t, double>& fixed, std::vector<std::vector<double>>* values) {
    std::vector<ConstantFit> g = grids;
    for (const auto& [k, value] : fixed) g[k] = {value, value, 1, value, g[k].derivation_source};
    std::vector<double> errors(rows.size());
    for (const std::string& group : cv.groups) {
      std::vector<bool> use(rows.size());
      for (std::size_t i = 0; i < rows.size(); ++i) use[i] = group_of(v.rows[i]) != group;
      const std::vector<double> x = fit_grid(rows, use, g);
      if (values) values->push_back(x);
      for (std::size_t i = 0; i < rows.size(); ++i)
        if (!use[i]) errors[i] = rows[i].error(x);
    }
    return errors;
  };
  auto fpga_median = [&](const std::vector<double>& errors) {
    std::vector<double> e;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (rows[i].fpga) e.push_back(errors[i]);
    return median_abs(e);
  };
  std::vector<std::vector<double>> per_group;
  const std::vector<double> errors = held_out({}, &per_group);
  for (std::size_t g = 0; g < cv.groups.size(); ++g) {
    HeldOutGroup h;
    h.name = cv.groups[g];
    std::vector<double> fpga_g, gpu_g;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (group_of(v.rows[i]) == h.name) (rows[i].fpga ? fpga_g : gpu_g).push_back(errors[i]);
    h.fpga_rows = int(fpga_g.size());
    h.gpu_rows = int(gpu_g.size());
    h.median_abs_error_fpga = median_abs(fpga_g);
    h.median_abs_error_gpu = median_abs(gpu_g);
    for (std::size_t k = 0; k < K; ++k) {
      cv.constants[k].without[h.name] = per_group[g][k];
      h.constants[cv.constants[k].name] = per_group[g][k];
    }
    cv.per_group.push_back(h);
  }
  std::vector<double> fpga, gpu;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    (rows[i].fpga ? fpga : gpu).push_back(errors[i]);
    if (by_design) continue;
    v.rows[i].error_held_out = errors[i];
    v.rows[i].predicted_held_out = rows[i].measured * (1 + errors[i]);
  }
  cv.median_abs_error_fpga = median_abs(fpga);
  cv.median_abs_error_gpu = median_abs(gpu);
  cv.median_abs_error = median_abs(errors);
  const std::vector<double> all = fit_grid(rows, std::vector<bool>(rows.size(), true), grids);
  std::vector<double> derivations, refit_errors, derived_errors;
  for (std::size_t k = 0; k < K; ++k) {
    cv.constants[k].fitted = all[k];
    derivations.push_back(grids[k].derivation);
    cv.constants[k].median_abs_error_fpga_at_derivation = fpga_median(held_out({{k, grids[k].derivation}}, nullptr));
  }
  for (const auto& r : rows)
    if (r.fpga) {
      refit_errors.push_back(r.error(all));
      derived_errors.push_back(r.error(derivations));
    }
  cv.median_abs_error_fpga_refit = median_abs(refit_errors);
  cv.median_abs_error_fpga_derivation = median_abs(derived_errors);
  cv.median_abs_error_resource = v.median_abs_error_resource;
  return cv;
}
}  // namespace

Validation validate(const std::string& csv_path, const std::string& designs_dir) {
  return validate(csv_path, designs_dir, constants());
}

Validation validate(const std::string& csv_path, const std::string& designs_dir, const Constants& model_constants) {
  const auto table = fpgallm::read_csv_table(csv_path, {"source_id", "device", "model", "metric", "value", "batch",
                                                        "prompt_len", "gen_len"});
  const auto& header = table.front().second;
  if (!std::filesystem::is_directory(designs_dir))
    throw fpgallm::InputError("--designs", designs_dir + ": not a folder of design files");
  const auto aliases = model_aliases(designs_dir);

  Validation v;
  std::vector<RowModel> models;  // one per row of v.rows
  std::vector<double> fpga_errors, gpu_errors, all_errors;
  std::map<std::string, std::vector<double>> resource_errors;
  std::set<std::string> resources_done;
  for (std::size_t i = 1; i < table.size(); ++i) {
    const int line = table[i].first;
    const auto& cells = table[i].second;
    Record rec;
    for (std::size_t k = 0; k < header.size() && k < cells.size(); ++k) rec[header[k]] = cells[k];
    auto get = [&](const char* key) { return rec.count(key) ? rec[key] : std::string(); };
    const std::string source = get("source_id");
    auto skip = [&](const std::string& kind, const std::string& metric, const std::string& reason) {
      v.skipped.push_back({line, source, kind, metric, reason});
    };
    if (cells.size() != header.size()) {
      skip("row", get("metric"), fmt::format("{} fields, the header has {}", cells.size(), header.size()));
      continue;
    }

    const auto metric = metric_of(get("metric"));
    Request req;
    // A number cell's first number; one beyond a double's range (a cell of 400 digits) is
    // refused naming the file, line and column.
    auto number_cell = [&](const char* column) {
      const std::string cell = get(column);
      const std::optional<double> v = first_number(cell);
      if (v && !std::isfinite(*v))
        throw fpgallm::InputError(csv_path, fmt::format("line {}, column {}: the number in '{}' is beyond a double's range", line,
                                                        column, cell.substr(0, 40) + (cell.size() > 40 ? "..." : "")));
      return v;
    };
    // A count cell (batch, prompt_len, gen_len), refused beyond what a request can hold.
    auto count_cell = [&](const char* column, int fallback) {
      const std::optional<double> v = number_cell(column);
      if (!v) return fallback;
      if (!(*v <= kMaxCount))
        throw fpgallm::InputError(csv_path, fmt::format("line {}, column {}: {:g} is beyond the largest count fpgallm takes ({:g})",
                                                        line, column, *v, kMaxCount));
      return static_cast<int>(*v);
    };
    req.batch = std::max(1, count_cell("batch", 1));
    const std::string prompt_cell = get("prompt_len"), gen_cell = get("gen_len");
    const bool lengths_are_ranges = is_range(prompt_cell) || is_range(gen_cell);
    if (lower(prompt_cell).find("kv length") != std::string::npos) {
      req.context = count_cell("prompt_len", kUnknownContext);
    } else {
      req.prompt = count_cell("prompt_len", 0);
      req.generate = count_cell("gen_len", 0);
      req.context = req.generate > 0 ? req.prompt + req.generate / 2 : (req.prompt > 0 ? req.prompt : kUnknownContext);
    }
    const auto model_name = resolve_model(get("model") + " " + get("params"), aliases);
    // The board the row was measured on, looked up by device id in the row's text.
    const hw::Device* fpga_dev = find_fpga(get("device"));
    // A source measured on several boards has one design file per board: <source_id>@<device>.json.
    LoadedDesign loaded = fpga_dev ? load_published(designs_dir, source + "@" + fpga_dev->id) : LoadedDesign{};
    if (!loaded.design && loaded.problem.empty()) loaded = load_published(designs_dir, source);
    const auto& published = loaded.design;

    // FPGA row.
    [&] {
      const std::string metric_cell = get("metric");
      if (!metric) return skip("fpga", metric_cell, "metric not produced by the model (it predicts times and rates)");
      const std::string value = get("value");
      if (is_bound_or_ratio(value)) return skip("fpga", metric->name, "a bound or a ratio ('" + value + "'), not a measurement");
      if (is_range(value)) return skip("fpga", metric->name, "a range of values, not one measurement");
      auto measured = number_cell("value");
      if (!measured || *measured <= 0) return skip("fpga", metric->name, "no numeric value");
      *measured *= metric->per_published;
      if (lengths_are_ranges) return skip("fpga", metric->name, "one value given for a range of prompt/generation lengths");
      if (!model_name) return skip("fpga", metric->name, "model not identified as a preset (" + get("model") + ")");
      if (!loaded.problem.empty()) return skip("fpga", metric->name, loaded.problem);
      if (!published) return skip("fpga", metric->name, "no design file " + source + ".json in " + designs_dir);
      arch::Design d = published->design;
      if (!fpga_dev) return skip("fpga", metric->name, "device not in data/devices.json: " + get("device"));
      if (const hw::Device* described = hw::lookup_device(d.device); !described || described->id != fpga_dev->id)
        return skip("fpga", metric->name, "the design file describes " + d.device + ", the row " + get("device"));
      const int cards = card_count(get("device"));
      d.device = fpga_dev->id;
      d.batch = req.batch;
      d.parallel.cards = cards;
      if (cards > 1 && d.parallel.split == arch::Split::none) d.parallel.split = arch::Split::tensor;
      if (cards == 1) d.parallel.split = arch::Split::none;
      try {
        const model::Config cfg = *model::find_preset(*model_name);
        const graph::Precision prec = graph::parse_scheme(published->scheme);
        const hw::Device* dev = fpga_dev;
        auto with = [d, dev, cfg, prec, req, name = metric->name](const Constants& c) {
          return predict_metric(name, cfg, prec, req, [&](const Workloads& w) {
            return predict(d, *dev, w, c, Hardware::published_accelerator);
          });
        };
        const double predicted = with(model_constants);
        ValidationRow row{line, source, "fpga", fpga_dev->id, *model_name, published->scheme, metric->name, metric->unit,
                          cards, req.batch, req.prompt, req.generate, *measured, predicted,
                          (predicted - *measured) / *measured, {}, d.kernel_gaps(), published->design_source, 0, 0};
        fpga_errors.push_back(row.error);
        v.rows.push_back(row);
        models.push_back({with});
      } catch (const std::exception& e) {
        return skip("fpga", metric->name, std::string("not predictable: ") + e.what());
      }
    }();

    // Resource rows: the published LUT/FF/DSP/BRAM/URAM of the design, once per source.
    const std::string resource_key = source + "@" + (fpga_dev ? fpga_dev->id : std::string());
    const hw::Device* described = published ? hw::lookup_device(published->design.device) : nullptr;
    if (described && fpga_dev && fpga_dev->id == described->id && !resources_done.count(resource_key)) {
      std::vector<std::pair<hw::Resource, std::string>> cells_of = {{hw::Resource::lut, get("LUT_used")},
                                                                    {hw::Resource::ff, get("FF_used")},
                                                                    {hw::Resource::dsp, get("DSP_used")},
                                                                    {hw::Resource::bram36, get("BRAM_used")},
                                                                    {hw::Resource::uram, get("URAM_used")}};
      bool any = false;
      for (const auto& [r, cell] : cells_of) any = any || !cell.empty();
      if (any) {
        resources_done.insert(resource_key);
        try {
          arch::Design d = published->design;
          d.parallel = {};
          const std::optional<model::Config> sized_for = model_name ? model::find_preset(*model_name) : std::nullopt;
          const hw::Utilization u =
              hw::estimate_resources(d, *fpga_dev, {sized_for ? &*sized_for : nullptr});
          for (const auto& [r, cell] : cells_of) {
            if (cell.empty()) continue;
            const hw::Fabric& fab = fpga_dev->fabric;
            const hw::Figure& total = r == hw::Resource::lut ? fab.lut
                                      : r == hw::Resource::ff  ? fab.ff
                                      : r == hw::Resource::dsp ? fab.dsp
                                      : r == hw::Resource::bram36 ? fab.bram36
                                                                  : fab.uram;
            const auto measured = resource_count(cell, total.or_else(0));
            if (!measured || *measured <= 0) {
              skip("resource", hw::to_string(r), "no count in '" + cell + "'");
              continue;
            }
            const double predicted = u.line(r).used;
            ResourceRow row{line, source, fpga_dev->id, hw::to_string(r), cell, *measured, predicted,
                            (predicted - *measured) / *measured};
            resource_errors[row.resource].push_back(row.error);
            v.resources.push_back(row);
          }
        } catch (const std::exception& e) {
          skip("resource", "resources", std::string("not predictable: ") + e.what());
        }
      }
    }

    // GPU baseline of the same row.
    const std::string gpu_text = get("gpu_baseline_device"), gpu_value = get("gpu_baseline_value");
    if (gpu_text.empty() || gpu_value.empty()) continue;
    [&] {
      if (!metric) return skip("gpu", get("metric"), "metric not produced by the model");
      // "1632.1 GFLOPS summarization / 40.6 GFLOPS generation": two figures, not one.
      static const std::regex two_figures(R"(\d.*\s/\s.*\d)");
      const std::string before_note = gpu_value.substr(0, gpu_value.find('('));
      if (std::regex_search(before_note, two_figures))
        return skip("gpu", metric->name, "two figures in one cell (" + gpu_value + ")");
      if (is_bound_or_ratio(before_note)) return skip("gpu", metric->name, "a bound or a ratio ('" + gpu_value + "'), not a measurement");
      const auto measured = number_cell("gpu_baseline_value");
      if (!measured || *measured <= 0) return skip("gpu", metric->name, "no numeric value");
      if (lengths_are_ranges) return skip("gpu", metric->name, "one value given for a range of lengths");
      if (!model_name) return skip("gpu", metric->name, "model not identified as a preset");
      const hw::Device* gpu = find_gpu(gpu_text);
      if (!gpu) return skip("gpu", metric->name, "GPU not in data/devices.json: " + gpu_text);
      const auto scheme = gpu_scheme(gpu_text);
      if (!scheme) return skip("gpu", metric->name, "the GPU cell names no precision (" + gpu_text + ")");
      const int cards = card_count(gpu_text);
      bool named = false;
      const GpuStack stack = gpu_stack_from_text(gpu_text + " " + gpu_value, &named);
      try {
        const model::Config cfg = *model::find_preset(*model_name);
        const graph::Precision prec = graph::parse_scheme(*scheme);
        // The stacks' bandwidth efficiencies are sourced for 8- and 16-bit kernels; only
        // llama.cpp's (its quantized kernels) covers 4-bit weights. No figure is inherited.
        if (prec.weight_bits <= 4 && stack != GpuStack::llamacpp)
          return skip("gpu", metric->name,
                      fmt::format("no sourced efficiency: the {} stack at {}-bit weights (gpu_{}_bandwidth_efficiency is "
                                  "sourced for 8- and 16-bit kernels only)",
                                  to_string(stack), prec.weight_bits, to_string(stack)));
        auto with = [gpu, cfg, prec, req, cards, stack, name = metric->name](const Constants& c) {
          return predict_metric(name, cfg, prec, req, [&](const Workloads& w) {
            const Prediction p = predict_gpu(*gpu, w, cards, stack, c);
            if (!p.fits_memory) throw std::invalid_argument(p.placement);
            return p;
          });
        };
        const double predicted = with(model_constants);
        ValidationRow row{line, source, "gpu", gpu->id, *model_name, *scheme, metric->name, metric->unit, cards,
                          req.batch, req.prompt, req.generate, *measured, predicted, (predicted - *measured) / *measured,
                          std::string(to_string(stack)) + (named ? "" : " (none named: eager assumed)"), {},
                          published ? published->design_source : source, 0, 0};
        gpu_errors.push_back(row.error);
        v.rows.push_back(row);
        models.push_back({with});
      } catch (const std::exception& e) {
        return skip("gpu", metric->name, std::string("not predictable: ") + e.what());
      }
    }();
  }
  for (const auto& r : v.rows) all_errors.push_back(r.error);
  v.median_abs_error_fpga = median_abs(fpga_errors);
  v.median_abs_error_gpu = median_abs(gpu_errors);
  v.median_abs_error = median_abs(all_errors);
  for (const auto& [kind, errors] : resource_errors) v.median_abs_error_resource[kind] = median_abs(errors);
  v.cross_validation = cross_validate(v, models, model_constants, false);
  v.cross_validation_by_design = cross_validate(v, models, model_constants, true);
  return v;
}

void to_json(nlohmann::json& j, const Validation& v) {
  j = nlohmann::json::object();
  j["rows"] = nlohmann::json::array();
  for (const auto& r : v.rows)
    j["rows"].push_back({{"line", r.line},         {"source_id", r.source_id}, {"kind", r.kind},
                         {"device", r.device},     {"model", r.model},         {"precision", r.precision},
                         {"metric", r.metric},     {"unit", r.unit},           {"cards", r.cards},
                         {"batch", r.batch},       {"prompt", r.prompt},       {"generate", r.generate},
                         {"measured", r.measured}, {"predicted", r.predicted}, {"error", r.error},
                         {"stack", r.stack},       {"kernel_gaps", r.kernel_gaps},
                         {"design", r.design},      {"predicted_held_out", r.predicted_held_out},
                         {"error_held_out", r.error_held_out}});
  j["skipped"] = nlohmann::json::array();
  for (const auto& s : v.skipped)
    j["skipped"].push_back({{"line", s.line}, {"source_id", s.source_id}, {"kind", s.kind}, {"metric", s.metric}, {"reason", s.reason}});
  j["resources"] = nlohmann::json::array();
  for (const auto& r : v.resources)
    j["resources"].push_back({{"line", r.line}, {"source_id", r.source_id}, {"device", r.device}, {"resource", r.resource},
                              {"published", r.published}, {"measured", r.measured}, {"predicted", r.predicted},
                              {"error", r.error}});
  j["median_abs_error_resource"] = v.median_abs_error_resource;
  j["median_abs_error_fpga"] = v.median_abs_error_fpga;
  j["median_abs_error_gpu"] = v.median_abs_error_gpu;
  j["median_abs_error"] = v.median_abs_error;
  auto cv_json = [](const CrossValidation& cv) {
    nlohmann::json constants = nlohmann::json::array();
    for (const auto& k : cv.constants)
      constants.push_back({{"name", k.name},
                           {"unit", k.unit},
                           {"shipped", k.shipped},
                           {"fitted", k.fitted},
                           {"derivation", k.derivation},
                           {"derivation_source", k.derivation_source},
                           {"fitted_without", k.without},
                           {"median_abs_error_fpga_at_derivation", k.median_abs_error_fpga_at_derivation}});
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& h : cv.per_group)
      groups.push_back({{"name", h.name},
                        {"fpga_rows", h.fpga_rows},
                        {"gpu_rows", h.gpu_rows},
                        {"median_abs_error_fpga", h.fpga_rows ? nlohmann::json(h.median_abs_error_fpga) : nlohmann::json()},
                        {"median_abs_error_gpu", h.gpu_rows ? nlohmann::json(h.median_abs_error_gpu) : nlohmann::json()},
                        {"fitted_without", h.constants}});
    return nlohmann::json{{"groups", cv.groups},
                          {"held_out", groups},
                          {"constants", constants},
                          {"median_abs_error_fpga", cv.median_abs_error_fpga},
                          {"median_abs_error_gpu", cv.median_abs_error_gpu},
                          {"median_abs_error", cv.median_abs_error},
                          {"median_abs_error_fpga_refit_in_sample", cv.median_abs_error_fpga_refit},
                          {"median_abs_error_fpga_all_at_derivation", cv.median_abs_error_fpga_derivation},
                          {"median_abs_error_resource", cv.median_abs_error_resource}};
  };
  j["leave_one_source_out"] = cv_json(v.cross_validation);
  j["leave_one_design_out"] = cv_json(v.cross_validation_by_design);
}

}  // namespace perf
