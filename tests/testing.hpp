#pragma once
// Shared helpers for the GoogleTest suites: paths of bundled files, a scratch directory,
// and running the fpgallm binary as a user would.
#include <string>

namespace testing_support {

std::string source_path(const std::string& relative);  // <repo>/<relative>
std::string stories260k();                             // models/stories260K.bin
std::string tok512();                                  // models/tok512.bin
std::string sample_text();                             // models/tinystories-valid-sample.txt

// A fresh empty directory under the system temp dir, removed when the process exits.
std::string scratch_dir(const std::string& name);

struct CommandResult {
  int status = -1;      // exit status
  std::string out;      // stdout
  std::string err;      // stderr
};
// Runs `fpgallm <args>` (args passed through the shell), with a time limit in seconds.
CommandResult run_fpgallm(const std::string& args, int timeout_s = 120);

void write_bytes(const std::string& path, const std::string& bytes);
std::string read_bytes(const std::string& path);
// The first n lines of the sample text (each with its newline): n stories.
std::string sample_lines(std::size_t n);
// ||got - want|| / ||want|| over n values, in double.
double relative_l2(const float* got, const float* want, int n);

}  // namespace testing_support
