#include "util/error.hpp"

namespace fpgallm {

InputError::InputError(std::string source, std::string problem)
    : std::runtime_error(source.empty() ? problem : source + ": " + problem),
      source_(std::move(source)),
      problem_(std::move(problem)) {}

}  // namespace fpgallm
