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
  std::printf("%-5s %-32s %-4s %-9s %-11s %-24s %5s %5s %10s %10s %8s %10s\n", "line", "source", "kind", "device", "model",
              "metric", "cards", "len", "measured", "predicted", "error", "held out");
  for (const auto& r : v.rows) {
    const std::string len = r.prompt || r.generate ? fmt::format("{}:{}", r.prompt, r.generate) : "-";
    std::printf("%-5d %-32s %-4s %-9s %-11s %-24s %5d %5s %10.2f %10.2f %+7.1f%% %+9.1f%%\n", r.line, r.source_id.c_str(),
                r.kind.c_str(), r.device.c_str(), r.model.c_str(), (r.metric + " [" + r.unit + "]").c_str(), r.cards,
                len.c_str(), r.measured, r.predicted, 100 * r.error, 100 * r.error_held_out);
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
  const perf::CrossValidation& cv = v.cross_validation;
  const perf::CrossValidation& cd = v.cross_validation_by_design;
  std::printf("\nfitted constants (least mean |log(predicted/measured)| over the FPGA timing rows, data/perf_model.json \"fit\"):\n");
  std::printf("  %-18s %12s %12s %12s %26s  refitted without each source\n", "constant", "shipped", "refit", "derivation",
              "LOSO FPGA median at deriv.");
  for (const auto& k : cv.constants) {
    std::string without;
    for (const auto& [group, value] : k.without) without += fmt::format("{}{}={:g}", without.empty() ? "" : ", ", group, value);
    std::printf("  %-18s %12g %12g %12g %25.1f%%  %s\n", k.name.c_str(), k.shipped, k.fitted, k.derivation,
                100 * k.median_abs_error_fpga_at_derivation, without.c_str());
  }
  std::printf("  every fitted constant at its derivation: FPGA median %.1f%% (no fit at all)\n",
              100 * cv.median_abs_error_fpga_derivation);
  std::printf("\nleave-one-source-out, each source predicted with the constants refitted on the others:\n");
  std::printf("  %-34s %5s %5s %11s %11s  refitted constants\n", "source held out", "fpga", "gpu", "FPGA median",
              "GPU median");
  for (const auto& h : cv.per_group) {
    std::string fitted;
    for (const auto& [name, value] : h.constants) fitted += fmt::format("{}{}={:g}", fitted.empty() ? "" : ", ", name, value);
    const std::string fpga_median = h.fpga_rows ? fmt::format("{:.1f}%", 100 * h.median_abs_error_fpga) : "-";
    const std::string gpu_median = h.gpu_rows ? fmt::format("{:.1f}%", 100 * h.median_abs_error_gpu) : "-";
    std::printf("  %-34s %5d %5d %11s %11s  %s\n", h.name.c_str(), h.fpga_rows, h.gpu_rows, fpga_median.c_str(),
                gpu_median.c_str(), fitted.c_str());
  }
  std::printf("\nmedian |error|               in-sample  leave-one-source-out  leave-one-design-out\n");
  std::printf("  FPGA timing (%2zu rows)       %6.1f%%  %20.1f%%  %20.1f%%\n", fpga, 100 * v.median_abs_error_fpga,
              100 * cv.median_abs_error_fpga, 100 * cd.median_abs_error_fpga);
  std::printf("  GPU (%2zu rows)               %6.1f%%  %20.1f%%  %20.1f%%   (no GPU constant is fitted)\n", gpu,
              100 * v.median_abs_error_gpu, 100 * cv.median_abs_error_gpu, 100 * cd.median_abs_error_gpu);
  for (const auto& [kind, e] : v.median_abs_error_resource)
    std::printf("  %-6s counts               %6.1f%%  %20.1f%%  %20.1f%%   (the resource model has no constant fitted to these rows)\n",
                kind.c_str(), 100 * e, 100 * cv.median_abs_error_resource.at(kind), 100 * cd.median_abs_error_resource.at(kind));
  std::printf("median |error| over all %zu predicted rows: %.1f%% in-sample, %.1f%% leave-one-source-out, %.1f%% "
              "leave-one-design-out\n", v.rows.size(), 100 * v.median_abs_error, 100 * cv.median_abs_error,
              100 * cd.median_abs_error);
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
