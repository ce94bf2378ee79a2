#pragma once
// Each cmd_*.cpp registers one subcommand with FPGALLM_COMMAND; main() builds the app
// from the registry. Command bodies only parse flags and call the modules.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace cli {

using SetupFn = void (*)(CLI::App& root);
bool register_command(const char* name, SetupFn setup);
void setup_commands(CLI::App& root);

// Prints j to stdout (pretty, newline-terminated).
void print_json(const nlohmann::json& j);

// Progress goes to stderr only when it is a terminal, or with --progress (so that a failing
// command's stderr is its one error line).
void set_progress(bool always);
bool progress_enabled();

// Progress on stderr: "\r<label> done/total" when stderr is a terminal, a line every
// ~10% otherwise (with --progress); finish() ends the line.
class Progress {
 public:
  explicit Progress(std::string label, bool quiet = false);
  void update(std::size_t done, std::size_t total);
  void finish();

 private:
  std::string label_;
  bool quiet_;
  bool tty_;
  int last_decile_ = -1;
  bool open_ = false;
};

}  // namespace cli

#define FPGALLM_COMMAND(name, fn) \
  static const bool fpgallm_registered_##fn = ::cli::register_command(name, fn)
