#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "deploy/deploy.hpp"
#include "model/model.hpp"
#include "util/error.hpp"

namespace {

struct DeployArgs {
  deploy::Options o;
  std::string budget = "1";
  bool json = false;
};

void run(DeployArgs& a) {
  a.o.budget = cli::parse_budget(a.budget);
  if (a.o.text.empty()) {
    const model::Manifest manifest = model::manifest_for(a.o.model);
    if (manifest.text.empty())
      throw fpgallm::InputError("--text", fmt::format("{} names no text (no \"text\" in a manifest beside it): pass "
                                                      "--text FILE, one story per line", a.o.model));
    a.o.text = manifest.text;
  }
  cli::Progress progress("", a.json);
  std::string label;
  auto on_step = [&](int i, int n, const std::string& name) {
    progress.finish();
    if (!a.json && cli::progress_enabled()) std::fprintf(stderr, "step %d/%d %s\n", i, n, name.c_str());
  };
  auto on_progress = [&](const std::string& what, std::size_t done, std::size_t total) {
    if (what != label) {
      progress.finish();
      progress = cli::Progress("  " + what, a.json);
      label = what;
    }
    progress.update(done, total);
  };
  deploy::Result r = deploy::run(a.o, on_step, on_progress);
  progress.finish();
  if (a.json) {
    cli::print_json({{"out_dir", r.out_dir}, {"summary", r.summary}});
    return;
  }
  const auto& s = r.summary;
  const auto& p = s["predicted"];
  std::printf("deployed %s on %s into %s\n", s["model"]["config"]["name"].get<std::string>().c_str(),
              s["device"]["name"].get<std::string>().c_str(), r.out_dir.c_str());
  std::string chosen = s["quantization"]["chosen"].get<std::string>();
  if (chosen.rfind("w4", 0) == 0) chosen += " by " + s["quantization"]["chosen_method"].get<std::string>();
  std::printf("  quantization   %s, held-out perplexity %.4f (fp32 %.4f)%s\n", chosen.c_str(),
              s["verify"]["accel_perplexity"].get<double>(),
              s["quantization"]["fp32_perplexity"].get<double>(),
              s["quantization"]["budget_met"].get<bool>() ? "" : "  (budget NOT met)");
  std::printf("  design         %dx%d MACs at %.0f MHz, %s\n", s["design"]["matrix_unit"]["rows"].get<int>(),
              s["design"]["matrix_unit"]["cols"].get<int>(), s["design"]["clock_mhz"].get<double>(),
              s["design"]["style"].get<std::string>().c_str());
  const std::string power = p["watts"].is_number()
                                ? fmt::format("{:.1f} W, {:.3f} mJ/token", p["watts"].get<double>(),
                                              1e3 * p["joules_per_token"].get<double>())
                                : std::string("power unknown");
  std::printf("  predicted      %.1f tokens/s decode, %.2f ms to first token (%s), %s\n",
              p["decode_tokens_per_s"].get<double>(), 1e3 * p["time_to_first_token_s"].get<double>(),
              p.contains("prefill_path") ? p["prefill_path"].get<std::string>().c_str() : "prefill", power.c_str());
  std::printf("  simulated      %.1f tokens/s decode\n", s["simulated"]["decode"]["tokens_per_s"].get<double>());
  std::printf("  greedy sample  %d of %d tokens equal the fp32 model's, the first %d in a row\n",
              s["verify"]["greedy_same_as_fp32"].get<int>(), s["verify"]["greedy_tokens"].get<int>(),
              s["verify"]["greedy_common_prefix_with_fp32"].get<int>());
  for (const auto& st : r.steps) std::printf("  step %-10s %.2f s\n", st.name.c_str(), st.seconds);
  std::printf("report: %s/report.html\n", r.out_dir.c_str());
}

void setup(CLI::App& root) {
  auto a = std::make_shared<DeployArgs>();
  auto* cmd = root.add_subcommand("deploy", "The whole flow: quantize, plan, simulate, emit, verify, report");
  cmd->add_option("model", a->o.model, "Checkpoint")->required();
  cmd->add_option("--device", a->o.device, "FPGA card (fpgallm devices)")->required();
  cmd->add_option("-o,--output", a->o.out_dir, "Output folder (replaced only when every step succeeded)")->required();
  cmd->add_option("--text", a->o.text, "Calibration and held-out text, one story per line (default: the \"text\" "
                                      "of the model's manifest, <stem>.manifest.json beside it)");
  cmd->add_option("-z,--tokenizer", a->o.tokenizer, cli::kTokenizerHelp);
  cmd->add_option("--budget", a->budget, cli::kBudgetHelp);
  cmd->add_option("--context", a->o.context, "Context the design is sized for (default: the model's)")->check(cli::kNonNegative);
  cmd->add_option("--sample-steps", a->o.sample_steps, "Greedy sample length")->check(CLI::Range(2, 100000));
  cmd->add_option("--qat-steps", a->o.qat_steps,
                  "Where a scheme's post-training methods all miss the budget, try this many steps of quantization-aware "
                  "training next (default 0: not tried; docs/training.md)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { run(*a); });
}

}  // namespace

FPGALLM_COMMAND("deploy", setup);
