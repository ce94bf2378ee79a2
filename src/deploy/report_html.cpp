// The deployment report: one self-contained HTML page (no scripts, no external files)
// rendered from the deployment summary, with the plots inline as SVG.
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "deploy/deploy.hpp"

namespace deploy {

namespace {

using nlohmann::json;

std::string esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string str(const json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

// A number with a sensible number of significant digits and SI-style thousands.
std::string num(double v, int digits = 4) {
  if (!std::isfinite(v)) return "n/a";
  if (v == 0) return "0";
  return fmt::format("{:.{}g}", v, digits);
}

std::string row(std::initializer_list<std::string> cells, bool header = false) {
  std::string s = "<tr>";
  for (const auto& c : cells) s += header ? "<th>" + c + "</th>" : "<td>" + c + "</td>";
  return s + "</tr>\n";
}

std::string bar(double used, double available, double ceiling) {
  const double pct = available > 0 ? 100.0 * used / available : 0;
  const double ceil_pct = available > 0 ? 100.0 * ceiling / available : 0;
  const char* color = used <= ceiling ? "#3b7dd8" : "#d83b3b";
  return fmt::format(
      "<div class=\"bar\"><div class=\"fill\" style=\"width:{:.1f}%;background:{}\"></div>"
      "<div class=\"ceil\" style=\"left:{:.1f}%\" title=\"timing-closure ceiling\"></div></div>",
      std::min(pct, 100.0), color, std::min(ceil_pct, 100.0));
}

}  // namespace

std::string report_html(const json& s, const std::string& roofline_svg, const std::string& pareto_svg) {
  const auto& cfg = s["model"]["config"];
  const auto& q = s["quantization"];
  const auto& d = s["design"];
  const auto& p = s["predicted"];
  const auto& v = s["verify"];
  const auto& simd = s["simulated"]["decode"];
  const auto& simp = s["simulated"]["prefill"];
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  h += fmt::format("<title>fpgallm deployment: {} on {}</title>\n", esc(str(cfg["name"])), esc(str(s["device"]["name"])));
  h += R"(<style>
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0;font-size:.92em} td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f4f6f8} td.n{text-align:right;font-variant-numeric:tabular-nums}
.bar{position:relative;width:260px;height:14px;background:#eee;border-radius:3px} .fill{height:14px;border-radius:3px}
.ceil{position:absolute;top:-2px;width:2px;height:18px;background:#222}
.kpi{display:inline-block;margin:0 1.5em 1em 0} .kpi b{display:block;font-size:1.5em}
.ok{color:#197a2e} .bad{color:#b3261e} pre{white-space:pre-wrap;background:#f7f7f7;padding:.6em;border-radius:4px}
svg{max-width:100%;height:auto}
</style></head><body>
)";
  h += fmt::format("<h1>{} on {}</h1>\n", esc(str(cfg["name"])), esc(str(s["device"]["name"])));
  h += fmt::format("<p>Deployment written by <code>fpgallm deploy</code>: quantized model, chosen design, simulation, "
                   "Vitis HLS project ({}) and this report. Predictions are from fpgallm's analytical model and "
                   "cycle-level simulator; nothing here was measured on an FPGA.</p>\n",
                   s["emit"]["dir"].is_null() ? "not emitted by this build" : "<code>hls/</code>");

  h += "<div>";
  h += fmt::format("<div class=\"kpi\">predicted decode<b id=\"decode-tps\">{} tokens/s</b></div>", num(p["decode_tokens_per_s"].get<double>()));
  h += fmt::format("<div class=\"kpi\">simulated decode<b id=\"sim-decode-tps\">{} tokens/s</b></div>", num(simd["tokens_per_s"].get<double>()));
  h += fmt::format("<div class=\"kpi\">time to first token ({} tokens)<b>{} ms</b></div>", p["prompt"].get<int>(), num(1e3 * p["prefill_s"].get<double>()));
  h += fmt::format("<div class=\"kpi\">board power<b id=\"watts\">{} W</b></div>", num(p["watts"].get<double>(), 3));
  h += fmt::format("<div class=\"kpi\">energy<b id=\"joules\">{} mJ/token</b></div>", num(1e3 * p["joules_per_token"].get<double>(), 3));
  h += fmt::format("<div class=\"kpi\">held-out perplexity (accelerator)<b id=\"accel-ppl\">{:.4f}</b></div>", v["accel_perplexity"].get<double>());
  h += "</div>\n";

  h += "<h2>Model</h2>\n<table>\n";
  h += row({"file", esc(str(s["model"]["file"]))});
  h += row({"architecture", esc(str(cfg["arch"]))});
  h += row({"dim / hidden / layers", fmt::format("{} / {} / {}", cfg["dim"].get<int>(), cfg["hidden_dim"].get<int>(), cfg["n_layers"].get<int>())});
  h += row({"heads (kv heads)", fmt::format("{} ({})", cfg["n_heads"].get<int>(), cfg["n_kv_heads"].get<int>())});
  h += row({"vocabulary / context", fmt::format("{} / {}", cfg["vocab_size"].get<int>(), cfg["seq_len"].get<int>())});
  h += row({"parameters", num(cfg["n_params"].get<double>(), 6)});
  h += "</table>\n";

  h += "<h2>Quantization</h2>\n";
  h += fmt::format("<p>Calibrated on {} stories of <code>{}</code>, measured on the other {} ({} tokens). "
                   "Budget: held-out perplexity at most {:.2f}% above fp32 ({:.4f}). Schemes the accelerator's matrix "
                   "unit implements, tried in order of weight bytes; the first within budget is deployed. "
                   "<span class=\"{}\">{}</span></p>\n",
                   s["text"]["calibration_stories"].get<int>(), esc(str(s["text"]["file"])),
                   s["text"]["held_out_stories"].get<int>(), s["text"]["held_out_tokens"].get<int>(),
                   100 * q["budget"].get<double>(), q["fp32_perplexity"].get<double>(),
                   q["budget_met"].get<bool>() ? "ok" : "bad",
                   q["budget_met"].get<bool>() ? "Budget met." : "No scheme met the budget: the one with the smallest loss is deployed.");
  h += "<table>\n" + row({"scheme", "held-out perplexity", "vs fp32", "linear weight bytes", "within budget", "deployed"}, true);
  h += row({"fp32", fmt::format("{:.4f}", q["fp32_perplexity"].get<double>()), "", num(q["fp32_weight_bytes"].get<double>(), 6), "", ""});
  for (const auto& r : q["candidates"]) {
    std::string name = str(r["scheme"]);
    if (r["group"].get<int>() > 0) name += fmt::format(" (g{})", r["group"].get<int>());
    h += row({esc(name), fmt::format("{:.4f} &plusmn; {:.4f}", r["perplexity"].get<double>(), r["perplexity_err"].get<double>()),
              fmt::format("{:+.3f}%", 100 * r["rel_increase"].get<double>()), num(r["weight_bytes"].get<double>(), 6),
              r["meets_budget"].get<bool>() ? "yes" : "no", str(r["scheme"]) == str(q["chosen"]) ? "&#10003;" : ""});
  }
  h += "</table>\n";

  h += "<h2>Chosen design</h2>\n<table>\n";
  h += row({"style", esc(str(d["style"]))});
  h += row({"clock", fmt::format("{} MHz", num(d["clock_mhz"].get<double>()))});
  h += row({"matrix unit", fmt::format("{} x {} MACs, {}-bit weights, {}-bit activations, {}-bit accumulators",
                                       d["matrix_unit"]["rows"].get<int>(), d["matrix_unit"]["cols"].get<int>(),
                                       d["matrix_unit"]["weight_bits"].get<int>(), d["matrix_unit"]["act_bits"].get<int>(),
                                       d["matrix_unit"]["acc_bits"].get<int>())});
  h += row({"vector unit", fmt::format("{} lanes", d["vector_unit"]["lanes"].get<int>())});
  h += row({"weight tile", fmt::format("{} x {}", d["tiling"]["tile_rows"].get<int>(), d["tiling"]["tile_cols"].get<int>())});
  h += row({"buffers (weights / activations / KV)", fmt::format("{} / {} / {} bytes", d["buffers"]["weight_bytes"].get<long>(),
                                                                 d["buffers"]["activation_bytes"].get<long>(), d["buffers"]["kv_bytes"].get<long>())});
  h += row({"memory channels (weights / KV / activations)", fmt::format("{} / {} / {}", d["memory"]["weight_channels"].get<int>(),
                                                                         d["memory"]["kv_channels"].get<int>(), d["memory"]["activation_channels"].get<int>())});
  h += row({"batch / context", fmt::format("{} / {}", d["batch"].get<int>(), d["context"].get<int>())});
  h += row({"cards", fmt::format("{} ({})", d["parallel"]["cards"].get<int>(), esc(str(d["parallel"]["split"])))});
  h += "</table>\n";
  h += fmt::format("<p>{} designs fit of {} evaluated; ranked by decode tokens/s{}.</p>\n",
                   s["design_rank"]["candidates_fitting"].get<int>(), s["design_rank"]["evaluated"].get<int>(),
                   s["design_rank"]["skipped_not_in_c_simulation"].get<int>() > 0
                       ? fmt::format(" ({} better-ranked designs skipped: their unit shapes are not among the kernel "
                                     "instances of the C simulation, so they could not be verified)",
                                     s["design_rank"]["skipped_not_in_c_simulation"].get<int>())
                       : "");
  if (!s["design_rank"]["method"].empty()) {
    h += "<p>How the planner decided:</p><ul>";
    for (const auto& m : s["design_rank"]["method"]) h += "<li>" + esc(str(m)) + "</li>";
    h += "</ul>\n";
  }

  h += "<h2>Resource utilization</h2>\n<table id=\"resources\">\n" + row({"resource", "used", "available", "", "fits"}, true);
  for (const auto& l : s["resources"]["lines"]) {
    h += row({esc(str(l["resource"])), num(l["used"].get<double>(), 6), num(l["available"].get<double>(), 6),
              bar(l["used"].get<double>(), l["available"].get<double>(), l["ceiling"].get<double>()),
              l["fits"].get<bool>() ? "yes" : "<span class=\"bad\">no</span>"});
  }
  h += "</table>\n<p>Bars: share of what the platform shell leaves; the black mark is the timing-closure ceiling.</p>\n";
  if (s["resources"].contains("parts")) {  // which figures a synthesis mapping checked
    std::string checked, model_only;
    for (const auto& p : s["resources"]["parts"]) {
      const std::string how = p["checked"].get<std::string>();
      if (!how.empty())
        checked += "<li>" + esc(str(p["name"])) + ": " + esc(how) + "</li>";
      else
        model_only += (model_only.empty() ? "" : ", ") + esc(str(p["name"]));
    }
    h += "<p id=\"resource-checks\">Checked against a synthesis mapping:</p><ul>" +
         (checked.empty() ? std::string("<li>none</li>") : checked) + "</ul>\n<p>Model only: " + model_only + ".</p>\n";
  }

  h += "<h2>Roofline and design space</h2>\n";
  h += "<div>" + roofline_svg + "</div>\n<div>" + pareto_svg + "</div>\n";

  h += "<h2>Simulated timeline</h2>\n<table>\n" + row({"phase", "tokens", "cycles", "time", "tokens/s"}, true);
  for (const auto* ph : {&simd, &simp})
    h += row({esc(str((*ph)["stage"])), std::to_string((*ph)["tokens"].get<int>()), num((*ph)["cycles"].get<double>(), 8),
              fmt::format("{} ms", num(1e3 * (*ph)["seconds"].get<double>())), num((*ph)["tokens_per_s"].get<double>())});
  h += "</table>\n<p>Per unit, decode (cycles):</p>\n<table>\n" + row({"unit", "busy", "memory", "dependency", "buffer", "idle", "utilization"}, true);
  for (const auto& u : simd["units"]) {
    const auto& st = u["cycles"];
    h += row({esc(str(u["name"])), num(st.value("busy", 0.0), 8), num(st.value("memory", 0.0), 8),
              num(st.value("dependency", 0.0), 8), num(st.value("buffer", 0.0), 8), num(st.value("idle", 0.0), 8),
              fmt::format("{:.1f}%", 100 * u["utilization"].get<double>())});
  }
  h += "</table>\n<p>The full timeline is <code>trace_decode.json</code> (open it in ui.perfetto.dev or chrome://tracing).</p>\n";

  h += "<h2>Against GPUs (same workload)</h2>\n<table id=\"gpus\">\n" +
       row({"target", "decode tokens/s", "time to first token", "board power", "energy per token", "USD per M tokens"}, true);
  h += row({"<b>" + esc(str(s["device"]["name"])) + "</b> (this design)", num(p["decode_tokens_per_s"].get<double>()),
            fmt::format("{} ms", num(1e3 * p["prefill_s"].get<double>())), fmt::format("{} W", num(p["watts"].get<double>(), 3)),
            fmt::format("{} mJ", num(1e3 * p["joules_per_token"].get<double>(), 3)),
            p["usd_per_mtoken"].get<double>() > 0 ? num(p["usd_per_mtoken"].get<double>(), 3) : "n/a"});
  for (const auto& g : s["gpu_baselines"])
    h += row({esc(str(g["name"])), num(g["decode_tokens_per_s"].get<double>()), fmt::format("{} ms", num(1e3 * g["prefill_s"].get<double>())),
              fmt::format("{} W", num(g["watts"].get<double>(), 3)), fmt::format("{} mJ", num(1e3 * g["joules_per_token"].get<double>(), 3)),
              g["usd_per_mtoken"].get<double>() > 0 ? num(g["usd_per_mtoken"].get<double>(), 3) : "n/a"});
  h += "</table>\n";

  h += "<h2>Verification through the accelerator's kernels</h2>\n<table id=\"verify\">\n";
  h += row({"held-out perplexity, accelerator backend (C simulation of the HLS kernels)",
            fmt::format("{:.6f} &plusmn; {:.4f}", v["accel_perplexity"].get<double>(), v["accel_perplexity_err"].get<double>())});
  h += row({"held-out perplexity, simulated quantization (fp32 engine)", fmt::format("{:.6f}", v["simulated_quant_perplexity"].get<double>())});
  h += row({"relative difference", fmt::format("{:+.2e}", v["accel_vs_simulated_rel"].get<double>())});
  h += row({"greedy tokens identical to the fp32 model", fmt::format("{} of {} (first {} in a row)", v["greedy_same_as_fp32"].get<int>(),
                                                                      v["greedy_tokens"].get<int>(), v["greedy_common_prefix_with_fp32"].get<int>())});
  h += "</table>\n<p>Greedy sample through the accelerator backend:</p>\n<pre id=\"sample\">" + esc(str(v["greedy_text"])) + "</pre>\n";

  h += "<h2>Assumptions</h2>\n<table>\n" + row({"assumption", "value", "source"}, true);
  for (const auto& a : d["assumptions"])
    h += row({esc(str(a["name"])), esc(num(a["value"].get<double>()) + " " + str(a["unit"])), esc(str(a["source"]))});
  h += "</table>\n<ul>\n";
  for (const auto& a : s["resources"]["assumptions"]) h += "<li>" + esc(str(a)) + "</li>\n";
  for (const auto& n : p["notes"]) h += "<li>" + esc(str(n)) + "</li>\n";
  for (const auto& n : simd["notes"]) h += "<li>" + esc(str(n)) + "</li>\n";
  h += "</ul>\n<h2>Files</h2>\n<ul>\n";
  for (const auto& f : s["files"]) h += "<li><code>" + esc(str(f)) + "</code></li>\n";
  h += "</ul>\n</body></html>\n";
  return h;
}

}  // namespace deploy
