// Placeholder until the GGUF and safetensors readers land (issue 2, in progress).
#include "model/model.hpp"
#include "util/error.hpp"

namespace model {
Model load_gguf(const std::string& path) { throw fpgallm::InputError(path, "GGUF reader not built yet"); }
Model load_safetensors_dir(const std::string& dir) {
  throw fpgallm::InputError(dir, "safetensors reader not built yet");
}
}  // namespace model
