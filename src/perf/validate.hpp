#pragma once
// Checks the performance model against published measurements: every usable row of a CSV
// in the format of data/published_results.csv is predicted with the same model and
// constants, FPGA rows from the published design described in <designs>/<source_id>.json,
// GPU baseline rows from the same workload on the named GPU.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace perf {

struct Constants;

struct ValidationRow {
  int line = 0;               // line in the CSV (header = 1)
  std::string source_id;
  std::string kind;           // "fpga" or "gpu"
  std::string device;         // device id
  std::string model;          // preset name
  std::string precision;
  std::string metric;         // normalized metric name
  std::string unit;
  int cards = 1, batch = 1, prompt = 0, generate = 0;
  double measured = 0;
  double predicted = 0;
  double error = 0;           // (predicted - measured) / measured
  std::string stack;          // GPU rows: the software stack charged
  std::vector<std::string> kernel_gaps;  // FPGA rows: what the kernels could not run (predicted anyway)
  // Leave-one-source-out: the prediction with every fitted constant refitted on the rows of
  // the other sources. `design` is the source whose design the row measures (a rerun or a
  // re-report names the original, design_source), the group of leave-one-design-out.
  std::string design;
  double predicted_held_out = 0;
  double error_held_out = 0;
};

// A constant of data/perf_model.json fitted over the timing rows (Constant::fit).
struct FittedConstant {
  std::string name, unit;
  double shipped = 0;                    // data/perf_model.json
  double fitted = 0;                     // refitted over all rows of this CSV
  double derivation = 0;                 // from the design's structure, no fit
  std::string derivation_source;
  std::map<std::string, double> without;  // group held out -> value fitted on the rest
  // FPGA median |error| with leave-one-source-out refits of every other fitted constant and
  // this one at its derivation: when below the cross-validated median, fitting this constant
  // does not pay on rows the fit never saw.
  double median_abs_error_fpga_at_derivation = 0;
};

// How the model does on sources it was not fitted on: each group's rows (a source's, or
// every source's that measured one design) predicted with the fitted constants refitted
// without that group.
struct HeldOutGroup {
  std::string name;
  int fpga_rows = 0, gpu_rows = 0;
  double median_abs_error_fpga = 0;  // its rows, predicted with the refit on the other groups
  double median_abs_error_gpu = 0;
  std::map<std::string, double> constants;  // fitted constant -> value fitted without this group
};

struct CrossValidation {
  std::string grouping;  // "source" or "design"
  std::vector<FittedConstant> constants;
  std::vector<std::string> groups;
  std::vector<HeldOutGroup> per_group;  // in the order of `groups`
  double median_abs_error_fpga = 0;
  double median_abs_error_gpu = 0;
  double median_abs_error = 0;
  double median_abs_error_fpga_refit = 0;       // in-sample with the refit over all rows
  double median_abs_error_fpga_derivation = 0;  // every fitted constant at its derivation
  // Resource counts: the resource model has no constant fitted to these rows, so the
  // held-out median is the in-sample one (stated, not recomputed).
  std::map<std::string, double> median_abs_error_resource;
};

// The preset a published row's free-text model name (with its params column) means, when
// the alias table (models.json) has no entry: a preset's name in the text ignoring case,
// spaces and hyphens, else the family named in words and a parameter count within 15% of a
// preset of that family ("Llama 2 110M" -> stories110m, "GPT2 355M" -> gpt2-medium).
std::optional<std::string> identify_model(const std::string& text);

// A published resource count of a design against the resource model.
struct ResourceRow {
  int line = 0;
  std::string source_id;
  std::string device;
  std::string resource;       // "lut", "ff", "dsp", "bram36", "uram"
  std::string published;      // the cell as published ("574k (44.0%)", "39.93%")
  double measured = 0;        // count (percentages converted with the device's total)
  double predicted = 0;
  double error = 0;
};

struct SkippedRow {
  int line = 0;
  std::string source_id;
  std::string kind;
  std::string metric;
  std::string reason;
};

struct Validation {
  std::vector<ValidationRow> rows;
  std::vector<SkippedRow> skipped;
  double median_abs_error_fpga = 0;
  double median_abs_error_gpu = 0;
  double median_abs_error = 0;  // all predicted rows
  std::vector<ResourceRow> resources;
  std::map<std::string, double> median_abs_error_resource;  // per resource kind
  CrossValidation cross_validation;            // leave one source out (ValidationRow::*_held_out)
  CrossValidation cross_validation_by_design;  // leave one design out: stricter, a rerun's original held out with it
};

// Never aborts on one row: a row that cannot be predicted (its design file cannot be read
// or expressed, a figure is missing, the value is a bound or a ratio) is skipped with the
// reason. Throws fpgallm::InputError for an unreadable CSV, one without the required
// columns, or one with no data rows.
Validation validate(const std::string& csv_path, const std::string& designs_dir);
// The same with other constants than data/perf_model.json's (their "fit" grids included).
Validation validate(const std::string& csv_path, const std::string& designs_dir, const Constants& c);

double median_abs(const std::vector<double>& errors);

void to_json(nlohmann::json& j, const Validation& v);

}  // namespace perf
