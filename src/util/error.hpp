#pragma once
// Errors that come from what the user gave us (a file, a flag, a name). The command line
// prints them as one line "fpgallm: <file>: <problem>" and exits with status 2.
#include <stdexcept>
#include <string>

namespace fpgallm {

class InputError : public std::runtime_error {
 public:
  InputError(std::string source, std::string problem);
  const std::string& source() const { return source_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string source_;
  std::string problem_;
};

}  // namespace fpgallm
