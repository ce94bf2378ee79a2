#include "model/save.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "model/gguf_llama.hpp"
#include "model/safetensors.hpp"
#include "util/error.hpp"

namespace model {

namespace fs = std::filesystem;

Format output_format(const std::string& output, const std::string& requested) {
  if (requested == "bin") return Format::llama2c;
  if (requested == "gguf") return Format::gguf;
  if (requested == "safetensors") return Format::safetensors;
  if (!requested.empty()) throw fpgallm::InputError(requested, "unknown output format (bin, gguf, safetensors)");
  const fs::path p(output);
  if (output.ends_with('/') || !p.has_extension()) return Format::safetensors;
  if (p.extension() == ".bin") return Format::llama2c;
  if (p.extension() == ".gguf") return Format::gguf;
  throw fpgallm::InputError(output, "cannot tell the format from the name (.bin, .gguf, or a folder); pass --to");
}

std::uint64_t expected_bytes(const Config& c, Format format, const std::string& type) {
  double bits = 32;
  if (format == Format::gguf) {
    if (type == "f16" || type == "bf16") bits = 16;
    else if (type == "q8_0") bits = 8.5;  // 32 int8 and one f16 scale per block
    else if (type == "q4_0") bits = 4.5;
  }
  return static_cast<std::uint64_t>(static_cast<double>(std::max<std::int64_t>(c.n_params(), 0)) * bits / 8);
}

void require_memory_for(const Config& c, const std::string& source) {
  const double need = 4.0 * static_cast<double>(c.n_params());
  const double have = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (have > 0 && need > have)
    throw fpgallm::InputError(source, fmt::format("needs {:.1f} GB of memory for its fp32 weights; this machine has "
                                                  "{:.1f} GB",
                                                  need / 1e9, have / 1e9));
}

std::uint64_t save(const Model& m, const std::string& output, Format format, const std::string& type,
                   const Tokenizer* tokenizer) {
  if (!m.has_weights()) throw fpgallm::InputError(output, "the model has no weights to write");
  switch (format) {
    case Format::llama2c:
      if (type != "f32") throw fpgallm::InputError(output, "a llama2.c .bin holds f32 weights only");
      save_llama2c(m, output);
      return fs::file_size(output);
    case Format::gguf: {
      gguf::GgmlType t;
      if (type == "f32") t = gguf::GgmlType::f32;
      else if (type == "f16") t = gguf::GgmlType::f16;
      else if (type == "bf16") t = gguf::GgmlType::bf16;
      else if (type == "q8_0") t = gguf::GgmlType::q8_0;
      else if (type == "q4_0") t = gguf::GgmlType::q4_0;
      else throw fpgallm::InputError(type, "unknown storage type (f32, f16, bf16, q8_0, q4_0)");
      save_gguf(m, output, t, tokenizer);
      return fs::file_size(output);
    }
    case Format::safetensors: {
      if (type != "f32" && type != "f16" && type != "bf16")
        throw fpgallm::InputError(type, "safetensors stores f32, f16 or bf16");
      save_safetensors_dir(m, output, tokenizer, type == "f16" ? "F16" : type == "bf16" ? "BF16" : "F32");
      std::uint64_t bytes = 0;
      for (const auto& e : fs::directory_iterator(output))
        if (e.is_regular_file()) bytes += e.file_size();
      return bytes;
    }
  }
  return 0;
}

}  // namespace model
