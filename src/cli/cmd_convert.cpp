#include <cstdio>
#include <optional>

#include "cli/command.hpp"
#include "util/output.hpp"
#include "model/model.hpp"
#include "model/save.hpp"

namespace {

struct ConvertArgs {
  std::string model, output, to, type = "f32", tokenizer;
  bool json = false;
};

void convert(const ConvertArgs& a) {
  const model::Format format = model::output_format(a.output, a.to);
  const auto kind = format == model::Format::safetensors ? fpgallm::OutputKind::folder : fpgallm::OutputKind::file;
  fpgallm::check_output(a.output, kind, {a.model, a.tokenizer});
  model::Model m = model::load(a.model);
  fpgallm::check_output(a.output, kind, {}, model::expected_bytes(m.config, format, a.type));
  std::optional<model::Tokenizer> tok;
  if (!a.tokenizer.empty()) tok = model::Tokenizer::load_llama2c(a.tokenizer, m.config.vocab_size);
  else if (m.tokenizer) tok = m.tokenizer;
  if (tok && format == model::Format::llama2c && cli::progress_enabled())
    std::fprintf(stderr, "note: a llama2.c .bin does not hold a tokenizer; keep the tokenizer file beside it\n");
  const std::uint64_t bytes = model::save(m, a.output, format, a.type, tok ? &*tok : nullptr);
  const bool with_tokenizer = tok && format != model::Format::llama2c;
  if (a.json) {
    cli::print_json({{"input", a.model},
                     {"input_format", model::to_string(m.source_format)},
                     {"output", a.output},
                     {"format", model::to_string(format)},
                     {"type", a.type},
                     {"bytes", bytes},
                     {"tokenizer", with_tokenizer}});
    return;
  }
  std::printf("wrote %s (%s, %s, %.2f MB%s)\n", a.output.c_str(), model::to_string(format), a.type.c_str(), bytes / 1e6,
              with_tokenizer ? ", with tokenizer" : "");
}

void setup(CLI::App& root) {
  auto a = std::make_shared<ConvertArgs>();
  auto* cmd = root.add_subcommand("convert", "Convert a checkpoint between llama2.c .bin, GGUF and a safetensors folder");
  cmd->add_option("model", a->model, "Checkpoint: llama2.c .bin, .gguf, or a safetensors folder")->required();
  cmd->add_option("-o,--output", a->output, "Output: a .bin or .gguf file, or a folder (safetensors)")->required();
  cmd->add_option("--to", a->to, "Output format (default: from the output name)")
      ->check(CLI::IsMember({"bin", "gguf", "safetensors"}));
  cmd->add_option("--type", a->type, "Storage: f32 (any format); f16, bf16 (gguf matrices, safetensors); q8_0, q4_0 (gguf)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"}));
  cmd->add_option("-z,--tokenizer", a->tokenizer,
                  "llama2.c tokenizer .bin to store with the model (GGUF metadata, or tokenizer.bin in a folder)");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->footer("Example: fpgallm convert models/stories260K.bin -z models/tok512.bin -o /tmp/s.gguf --type q8_0");
  cmd->callback([a] { convert(*a); });
}

}  // namespace

FPGALLM_COMMAND("convert", setup);
