#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "cli/command.hpp"
#include "perf/validate.hpp"
#include "util/paths.hpp"

namespace {

struct ValidateArgs {
  std::string results, designs;
  bool json = false;
};

void run(const ValidateArgs& a) {
  const std::string designs = a.designs.empty() ? fpgallm::data_dir() + "/published" : a.designs;
  const perf::Validation v = perf::validate(a.results, designs);
  if (a.json) {
    cli::print_json(v);
    return;
  }
  std::printf("%-5s %-32s %-4s %-9s %-11s %-24s %5s %5s %10s %10s %8s\n", "line", "source", "kind", "device", "model",
              "metric", "cards", "len", "measured", "predicted", "error");
  for (const auto& r : v.rows) {
    const std::string len = r.prompt || r.generate ? fmt::format("{}:{}", r.prompt, r.generate) : "-";
    std::printf("%-5d %-32s %-4s %-9s %-11s %-24s %5d %5s %10.2f %10.2f %+7.1f%%\n", r.line, r.source_id.c_str(),
                r.kind.c_str(), r.device.c_str(), r.model.c_str(), (r.metric + " [" + r.unit + "]").c_str(), r.cards,
                len.c_str(), r.measured, r.predicted, 100 * r.error);
  }
  if (!v.resources.empty()) {
    std::printf("\nresources (published design files through the resource model):\n");
    for (const auto& r : v.resources)
      std::printf("  line %-3d %-32s %-6s %-7s %-16s %10.0f %10.0f %+7.1f%%\n", r.line, r.source_id.c_str(), r.device.c_str(),
                  r.resource.c_str(), r.published.c_str(), r.measured, r.predicted, 100 * r.error);
  }
  if (!v.skipped.empty()) {
    std::printf("\nskipped (not predictable):\n");
    for (const auto& s : v.skipped)
      std::printf("  line %-3d %-32s %-4s %-24s %s\n", s.line, s.source_id.c_str(), s.kind.c_str(), s.metric.c_str(),
                  s.reason.c_str());
  }
  std::size_t fpga = 0, gpu = 0;
  for (const auto& r : v.rows) (r.kind == "fpga" ? fpga : gpu)++;
  std::printf("\nmedian |error|: FPGA rows %.1f%% (%zu), GPU rows %.1f%% (%zu)\n", 100 * v.median_abs_error_fpga, fpga,
              100 * v.median_abs_error_gpu, gpu);
  for (const auto& [kind, e] : v.median_abs_error_resource) std::printf("median |error| of %s counts: %.1f%%\n", kind.c_str(), 100 * e);
  std::printf("median |error| over all %zu predicted rows: %.1f%%\n", v.rows.size(), 100 * v.median_abs_error);
}

void setup(CLI::App& root) {
  auto a = std::make_shared<ValidateArgs>();
  auto* cmd = root.add_subcommand(
      "validate", "Predict published FPGA/GPU LLM measurements with the performance model and report the error per row");
  cmd->add_option("--results", a->results, "CSV of published results (format of data/published_results.csv)")->required();
  cmd->add_option("--designs", a->designs, "Folder of <source_id>.json design files (default: data/published)");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { run(*a); });
}

}  // namespace

FPGALLM_COMMAND("validate", setup);
