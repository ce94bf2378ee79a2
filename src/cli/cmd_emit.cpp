// fpgallm emit MODEL|PRESET --design design.json [--quant QFILE] -o DIR: the Vitis project.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/command.hpp"
#include "util/output.hpp"
#include "cli/quant_eval.hpp"
#include "codegen/codegen.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "model/synth.hpp"
#include "quant/quant.hpp"
#include "util/error.hpp"

namespace {

struct EmitArgs {
  std::string model, design, quant, output;
  int steps = 4;
  bool json = false;
};

void print(const EmitArgs& a, const codegen::EmitResult& r);

void run(const EmitArgs& a) {
  fpgallm::check_output(a.output, fpgallm::OutputKind::folder, {a.model, a.design, a.quant});
  const model::Model m = model::load_or_preset(a.model);
  const arch::Design d = arch::load(a.design);
  if (!m.has_weights()) {
    // A preset: the project's kernel, interfaces and schedule are the preset's; the golden
    // vectors come from a small synthesized model of the preset's block (Qwen's biases,
    // per-head norms and a head width other than dim / heads) run on the same kernel and design.
    if (!a.quant.empty()) throw fpgallm::InputError("--quant", "a preset has no weights to quantize");
    model::Config sc = *model::find_preset("stories260k");
    // No more KV heads than the kernel has (Qwen2.5-0.5B has 2); 8 query heads share them.
    sc.n_kv_heads = std::min(sc.n_kv_heads, m.config.n_kv_heads);
    std::string source = "a stories260k-shaped model with synthesized weights (fpgallm synth, seed 1), W8A8";
    if (sc.n_kv_heads != 4) source = fmt::format("a stories260k-shaped model with {} KV heads, synthesized weights (fpgallm synth, seed 1), W8A8", sc.n_kv_heads);
    if (m.config.arch == model::Arch::qwen2 || m.config.arch == model::Arch::qwen3) {
      sc.arch = m.config.arch;
      sc.qkv_bias = m.config.qkv_bias;
      sc.qk_norm = m.config.qk_norm;
      sc.rope_theta = m.config.rope_theta;
      sc.norm_eps = m.config.norm_eps;
      if (m.config.head_size) sc.head_size = 2 * sc.dim / sc.n_heads;
      source = fmt::format("a stories260k-shaped {} block ({} KV heads{}) with synthesized weights (fpgallm synth, "
                           "seed 1), W8A8",
                           model::to_string(sc.arch), sc.n_kv_heads,
                           sc.head_size ? fmt::format(", heads of {}", sc.head_size) : "");
    }
    const model::Model small = model::synthesize(sc, 1);
    const quant::QuantModel sq = quant::quantize_model(small, quant::uniform_plan(small.config, quant::Scheme::w8a8, 32));
    print(a, codegen::emit(m.config, small, sq, d, a.output, codegen::EmitOptions{a.steps}, source));
    return;
  }
  std::unique_ptr<cli::LoadedQuant> q;
  quant::QuantModel uniform;
  const quant::QuantModel* qm = nullptr;
  const model::Model* base = &m;
  if (!a.quant.empty()) {
    q = cli::load_quant(m, a.quant);
    qm = &q->qm;
    base = &q->base;
  } else {
    // Without a plan: every linear layer int8 weights, int8 dynamic activations.
    model::require_finite(m, a.model, model::kCannotQuantizeNonFinite);
    uniform = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32));
    qm = &uniform;
  }
  print(a, codegen::emit(*base, *qm, d, a.output, codegen::EmitOptions{a.steps}));
}

void print(const EmitArgs& a, const codegen::EmitResult& r) {
  if (a.json) {
    cli::print_json({{"dir", r.dir},
                     {"files", r.files},
                     {"instructions", r.instructions},
                     {"weight_bytes", r.weight_bytes},
                     {"weight_channels", r.weight_channels},
                     {"schedule_cycles", r.schedule_cycles},
                     {"param_floats", r.param_floats},
                     {"golden_steps", r.golden_steps}});
  } else {
    std::printf("wrote %s: %zu files, %d instructions per decode step, %lld weight bytes, %d golden decode steps\n",
                r.dir.c_str(), r.files.size(), r.instructions, static_cast<long long>(r.weight_bytes), r.golden_steps);
    std::printf("C simulation: make -C %s csim\n", r.dir.c_str());
  }
}

void setup(CLI::App& root) {
  auto a = std::make_shared<EmitArgs>();
  auto* cmd = root.add_subcommand("emit", "Write the Vitis HLS project of a design (kernel, host, testbench, golden vectors)");
  cmd->add_option("model", a->model,
                  "Checkpoint: llama2.c .bin, .gguf, a safetensors folder, or a preset name (golden vectors from "
                  "a small synthesized model)")->required();
  cmd->add_option("--design", a->design, "design.json (from fpgallm plan)")->required();
  cmd->add_option("--quant", a->quant, "Quantized model (.gguf from fpgallm quantize); default: int8 weights and activations");
  cmd->add_option("-o,--output", a->output, "Project folder to write (replaced if it exists)")->required();
  cmd->add_option("--golden-steps", a->steps, "Decode steps recorded as golden vectors")->check(CLI::Range(1, 4096));
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { run(*a); });
}

}  // namespace

FPGALLM_COMMAND("emit", setup);
