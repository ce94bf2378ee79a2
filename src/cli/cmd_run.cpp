#include <chrono>

#include <fmt/format.h>
#include <cstdio>
#include <ctime>
#include <optional>

#include "arch/design.hpp"
#include "cli/command.hpp"
#include "cli/quant_eval.hpp"
#include "cli/accel_backend.hpp"
#include "engine/generate.hpp"
#include "model/model.hpp"
#include "mpi/dist.hpp"
#include "quant/quant.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"

namespace {

struct RunArgs {
  std::string model, tokenizer, prompt, prompt_file, quant, backend = "ref", design;
  int steps = 256;
  float temperature = 1.0f, topp = 0.9f;
  unsigned long long seed = 0;
  bool json = false, chat = false, special_as_text = false;
};

// The prompt from --prompt-file FILE, or from stdin for -i -; read whole, in one pass.
std::string prompt_text(const RunArgs& a) {
  if (!a.prompt_file.empty()) {
    if (!a.prompt.empty()) throw fpgallm::InputError("--prompt-file", "give the prompt by -i or by --prompt-file, not both");
    return fpgallm::read_regular_file(a.prompt_file);
  }
  if (a.prompt != "-") return a.prompt;
  std::string text;
  char buf[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) text.append(buf, n);
  if (std::ferror(stdin)) throw fpgallm::InputError("-i -", "cannot read the prompt from stdin");
  return text;
}

void run(const RunArgs& args) {
  RunArgs a = args;
  a.prompt = prompt_text(args);
  model::Model m = model::load(a.model);
  const bool bpe = m.bpe_tokenizer && a.tokenizer.empty();
  std::optional<model::Tokenizer> tok;
  std::vector<int> bpe_prompt;
  if (bpe) {
    std::string text = a.prompt;
    if (a.chat) {
      text = m.bpe_tokenizer->chat_prompt(a.prompt);
      if (text.empty()) throw fpgallm::InputError(a.model, "--chat: the vocabulary has no ChatML or Llama 3 chat tokens");
    }
    if (a.chat && a.special_as_text)
      throw fpgallm::InputError("--special-as-text", "--chat writes its template's special tokens into the prompt; give one or the other");
    bpe_prompt = m.bpe_tokenizer->encode(text, true, !a.special_as_text);
    if (bpe_prompt.empty()) throw fpgallm::InputError("--prompt", "is empty (a byte-level BPE model without bos needs a prompt)");
  } else {
    if (a.chat) throw fpgallm::InputError("--chat", "needs a model with a byte-level BPE vocabulary (chat special tokens)");
    tok = model::tokenizer_for(m, a.tokenizer);
  }
  if (a.backend != "accel" && !a.design.empty()) throw fpgallm::InputError("--design", "a design is run by --backend accel");
  // Every rank samples the same tokens: the seed is rank 0's.
  std::uint64_t seed = a.seed ? a.seed : static_cast<std::uint64_t>(std::time(nullptr));
  if (dist::distributed()) dist::broadcast(&seed, sizeof seed, 0);
  std::unique_ptr<cli::AccelBackend> accel;
  std::unique_ptr<cli::LoadedQuant> q;
  std::unique_ptr<engine::Transformer> plain;
  // A file from `fpgallm quantize` on its own runs as the quantized model it describes.
  const std::string qfile = a.quant.empty() && quant::is_quantized_gguf(a.model) ? a.model : a.quant;
  if (a.backend == "accel") {
    accel = cli::make_accel(m, qfile, a.design);
    m.weights = model::Weights{};  // the kernels run the quantized copy: release the fp32 one
  } else if (!qfile.empty()) {
    q = cli::load_quant(m, qfile);
  } else {
    plain = std::make_unique<engine::Transformer>(m);
  }
  engine::Transformer& t = accel ? *accel->transformer : q ? *q->transformer : *plain;
  engine::Sampler sampler(m.config.vocab_size, a.temperature, a.topp, seed);
  const bool printer = dist::rank() == 0;
  auto on_piece = [&](const std::string& piece) {
    if (a.json || !printer) return;
    std::fputs(piece.c_str(), stdout);
    std::fflush(stdout);
  };
  engine::Generation g;
  try {
    g = bpe ? engine::generate(t, *m.bpe_tokenizer, sampler, bpe_prompt, a.steps, on_piece)
            : engine::generate(t, *tok, sampler, a.prompt, a.steps, on_piece);
  } catch (const fpgallm::InputError& e) {
    // The engine names the prompt as -i; it may have come from a file.
    if (e.source() != "-i" || args.prompt_file.empty()) throw;
    throw fpgallm::InputError(args.prompt_file, e.problem());
  }
  const double steps_after_first = static_cast<double>(g.tokens.size()) - 2;
  const double tps = g.seconds_after_first > 0 ? steps_after_first / g.seconds_after_first : 0;
  const nlohmann::json cards = accel ? accel->card_report() : nlohmann::json::object();
  if (!printer) return;
  if (a.json) {
    nlohmann::json j = {{"model", a.model},
                        {"backend", a.backend},
                        {"prompt_tokens", g.prompt_tokens},
                        {"tokens", g.tokens},
                        {"text", g.text},
                        {"tokens_per_s", tps}};
    j.update(cards);
    cli::print_json(j);
  } else {
    std::printf("\n");
    if (a.steps > m.config.seq_len) {
      const bool story_ended = g.tokens.back() == model::Tokenizer::kBos;
      std::fprintf(stderr, "run: -n %d is more than the model's context length, %d positions: generation stops there%s\n",
                   a.steps, m.config.seq_len,
                   story_ended ? fmt::format(" (this one ended earlier, at position {}, where the model began a new "
                                             "story)", g.tokens.size() - 1).c_str()
                               : " (it did)");
    }
    std::fprintf(stderr, "achieved tok/s: %f\n", tps);
  }
}

void setup(CLI::App& root) {
  auto a = std::make_shared<RunArgs>();
  auto* cmd = root.add_subcommand("run", "Generate text from a model (llama2.c-compatible sampling)");
  cmd->add_option("model", a->model, "Checkpoint: llama2.c .bin, .gguf, or a safetensors folder")->required();
  cmd->add_option("-z,--tokenizer", a->tokenizer, cli::kTokenizerHelp);
  cmd->add_option("-i,--prompt", a->prompt, "Prompt text (- reads it from stdin)");
  cmd->add_option("--prompt-file", a->prompt_file, "A file whose whole text is the prompt");
  cmd->add_option("-n,--steps", a->steps, "Positions to run, prompt included (0 = the model's context; generation stops at the model's context)")->check(cli::kNonNegative);
  cmd->add_option("-t,--temperature", a->temperature, "0 = greedy")->check(cli::between(0.0, 100.0));
  cmd->add_option("-p,--topp", a->topp, "Nucleus sampling threshold (1 = off)")->check(cli::between(0.0, 1.0));
  cmd->add_option("-s,--seed", a->seed, "Random seed (0 = from the clock)");
  cmd->add_option("--backend", a->backend, "ref: the fp32 engine (simulated quantization with --quant); accel: the "
                                          "accelerator's HLS kernels in C simulation (needs --quant)")
      ->check(CLI::IsMember({"ref", "accel"}));
  cmd->add_option("--design", a->design, cli::design_help());
  cmd->add_option("--quant", a->quant, "Quantized model (.gguf from fpgallm quantize), run by simulated quantization");
  cmd->add_flag("--chat", a->chat, "Wrap the prompt in the model's chat template (ChatML for Qwen, Llama 3's) as one user turn");
  cmd->add_flag("--special-as-text", a->special_as_text,
                "Encode special tokens written in the prompt (<|im_start|>...) as text; by default they are their ids, "
                "as Hugging Face's tokenizers and llama.cpp take a prompt (byte-level BPE models)");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { run(*a); });
}

}  // namespace

FPGALLM_COMMAND("run", setup);
