#pragma once
// Each cmd_*.cpp registers one subcommand with FPGALLM_COMMAND; main() builds the app
// from the registry. Command bodies only parse flags and call the modules.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <chrono>
#include <string>

namespace cli {

using SetupFn = void (*)(CLI::App& root);
bool register_command(const char* name, SetupFn setup);
void setup_commands(CLI::App& root);

// Help of -z,--tokenizer in every command that reads text.
inline constexpr const char* kTokenizerHelp =
    "Tokenizer .bin (default: the one inside the model, else the one named by its manifest, <stem>.manifest.json "
    "beside it, else tokenizer.bin beside it)";

// Number checks whose errors say the bound as people write it ("--steps: -1 is below the
// minimum 0"), where CLI11's own print every digit of the largest double.
CLI::Validator at_least(double min);          // min <= value
CLI::Validator above(double min);             // min < value
CLI::Validator between(double lo, double hi);  // lo <= value <= hi
inline const CLI::Validator kNonNegative = at_least(0);
inline const CLI::Validator kPositive = above(0);

// --budget of quantize and deploy: "1", "1%" or "0.5 %" (percent) -> 0.01 / 0.005, between
// -100 and 1000 percent; a negative budget asks for an improvement over fp32.
double parse_budget(const std::string& s);
inline constexpr const char* kBudgetHelp =
    "Allowed increase of the held-out perplexity over fp32, in percent: 1 and 1% mean the same";

// Prints j to stdout (pretty, newline-terminated).
void print_json(const nlohmann::json& j);

// Progress goes to stderr only when it is a terminal, or with --progress (so that a failing
// command's stderr is its one error line).
void set_progress(bool always);
bool progress_enabled();

// Progress on stderr with an estimate of the time left (from the rate so far):
// "\r<label> done/total (p%), 12 s so far, about 40 s left" when stderr is a terminal, a
// line every ~10% otherwise; finish() ends the line.
class Progress {
 public:
  explicit Progress(std::string label, bool quiet = false);
  void update(std::size_t done, std::size_t total);
  void finish();

 private:
  std::string line(std::size_t done, std::size_t total) const;
  std::string label_;
  bool quiet_;
  bool tty_;
  int last_decile_ = -1;
  bool open_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace cli

#define FPGALLM_COMMAND(name, fn) \
  static const bool fpgallm_registered_##fn = ::cli::register_command(name, fn)
