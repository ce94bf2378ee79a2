#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "util/output.hpp"
#include "model/bpe_tokenizer.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "model/save.hpp"
#include "model/synth.hpp"
#include "util/error.hpp"

namespace {

struct SynthArgs {
  std::string preset, output, format, type = "f32", tokenizer;
  unsigned long long seed = 0;
  bool json = false;
};

void synth(const SynthArgs& a) {
  auto config = model::find_preset(a.preset);
  if (!config)
    throw fpgallm::InputError(a.preset, "unknown preset (see `fpgallm presets`)" + model::preset_suggestion(a.preset));
  const model::Format format = model::output_format(a.output, a.format);
  const auto kind = format == model::Format::safetensors ? fpgallm::OutputKind::folder : fpgallm::OutputKind::file;
  fpgallm::check_output(a.output, kind, {}, model::expected_bytes(*config, format, a.type));
  model::require_memory_for(*config, a.preset);
  model::Model m;
  try {
    m = model::synthesize(*config, a.seed);
  } catch (const std::invalid_argument& e) {
    throw fpgallm::InputError(a.preset, e.what());
  }
  m.config.name = config->name;
  // The vocabulary the file carries: a Hugging Face tokenizer.json (or a folder with one)
  // for a byte-level BPE model, else a llama2.c tokenizer.bin.
  std::optional<model::Tokenizer> sentencepiece;
  if (!a.tokenizer.empty()) {
    namespace fs = std::filesystem;
    const std::string json = fs::is_directory(a.tokenizer) ? (fs::path(a.tokenizer) / "tokenizer.json").string() : a.tokenizer;
    if (json.ends_with(".json")) {
      auto t = std::make_shared<model::BpeTokenizer>(model::BpeTokenizer::from_hf_json(json));
      if (t->vocab_size() > m.config.vocab_size)
        throw fpgallm::InputError(json, fmt::format("has {} tokens but the preset's vocabulary has {}", t->vocab_size(),
                                                    m.config.vocab_size));
      m.bpe_tokenizer = std::move(t);
    } else {
      sentencepiece = model::Tokenizer::load_llama2c(a.tokenizer, m.config.vocab_size);
    }
  }
  if (!a.json && cli::progress_enabled()) std::fprintf(stderr, "synthesized %s (%.1fM parameters), writing %s ...\n", config->name.c_str(),
                            config->n_params() / 1e6, a.output.c_str());
  const std::uint64_t bytes = model::save(m, a.output, format, a.type, sentencepiece ? &*sentencepiece : nullptr);
  if (a.json) {
    nlohmann::json j = m.config;
    cli::print_json({{"preset", config->name},
                     {"seed", a.seed},
                     {"output", a.output},
                     {"format", model::to_string(format)},
                     {"type", a.type},
                     {"bytes", bytes},
                     {"config", j}});
    return;
  }
  std::printf("wrote %s (%s, %s, %.2f MB, seed %llu)\n", a.output.c_str(), model::to_string(format), a.type.c_str(),
              bytes / 1e6, a.seed);
}

void setup(CLI::App& root) {
  auto a = std::make_shared<SynthArgs>();
  auto* cmd = root.add_subcommand("synth", "Deterministic random weights of a preset's shape (llama, qwen2, qwen3 presets)");
  cmd->add_option("--preset", a->preset, "Preset name (fpgallm presets)")->required();
  cmd->add_option("-o,--output", a->output, "Output: a .bin or .gguf file, or a folder (safetensors)")->required();
  cmd->add_option("--format,--to", a->format, "Output format (default: from the output name)")
      ->check(CLI::IsMember({"bin", "gguf", "safetensors"}));
  cmd->add_option("--type", a->type, "Matrix storage: f32 (any format); f16, bf16, q8_0, q4_0 (gguf)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"}));
  cmd->add_option("--seed", a->seed, "Generator seed (same seed, same bytes on every machine)");
  cmd->add_option("-z,--tokenizer", a->tokenizer,
                  "Vocabulary to carry: a Hugging Face tokenizer.json (or a folder with one; byte-level BPE, as Qwen's) "
                  "or a llama2.c tokenizer.bin of the preset's vocabulary size");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->footer("Example: fpgallm synth --preset stories110m -o /tmp/stories110m.bin\n"
              "Weights: Irwin-Hall normal-like values from SplitMix64, std 0.02 (see src/model/synth.hpp).");
  cmd->callback([a] { synth(*a); });
}

}  // namespace

FPGALLM_COMMAND("synth", setup);
