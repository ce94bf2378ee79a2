// The deployment report: one self-contained HTML page (no scripts, no external files)
// rendered from the deployment summary, with the plots inline as SVG.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "deploy/deploy.hpp"
#include "report/format.hpp"
#include "report/svg.hpp"

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

using report::whole;
using report::number;

std::string num(double v, int digits = 4) { return number(v, digits); }

// A power or energy figure of a prediction (null where the device has none) in `unit`.
std::string power_figure(const nlohmann::json& v, double scale, const char* unit) {
  return v.is_number() ? fmt::format("{} {}", num(scale * v.get<double>(), 3), unit) : std::string("unknown");
}

std::string row(std::initializer_list<std::string> cells, bool header = false) {
  std::string s = "<tr>";
  for (const auto& c : cells) s += header ? "<th>" + c + "</th>" : "<td>" + c + "</td>";
  return s + "</tr>\n";
}

// A row whose cells after the first are numbers (right-aligned).
std::string number_row(const std::string& first, std::initializer_list<std::string> cells, const std::string& attrs = "") {
  std::string s = "<tr" + attrs + "><td>" + first + "</td>";
  for (const auto& c : cells) s += "<td class=\"n\">" + c + "</td>";
  return s + "</tr>\n";
}

double f64(const json& j, const char* key) { return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0; }

// "blk.3.wq" -> 3; -1 for operations outside the blocks.
int layer_of(const std::string& op) {
  if (op.rfind("blk.", 0) != 0) return -1;
  return std::atoi(op.c_str() + 4);
}

// Predicted and simulated time of each transformer block in one decode step.
std::string layer_chart(const json& predicted, const json& simulated) {
  std::map<int, double> pred_s, sim_s;
  for (const auto& o : predicted["decode_ops"]) pred_s[layer_of(o["name"].get<std::string>())] += f64(o, "time_s");
  const double f = simulated["clock_mhz"].get<double>() * 1e6;
  for (const auto& l : simulated["layers"]) sim_s[l["layer"].get<int>()] += l["cycles"].get<double>() / f;
  std::vector<report::BarRow> rows;
  std::set<int> layers;
  for (const auto& [l, v] : pred_s) layers.insert(l);
  for (const auto& [l, v] : sim_s) layers.insert(l);
  for (int l : layers)
    if (l >= 0) rows.push_back({fmt::format("layer {}", l), {1e6 * pred_s[l], 1e6 * sim_s[l]}});
  if (layers.count(-1)) rows.push_back({"outside the layers", {1e6 * pred_s[-1], 1e6 * sim_s[-1]}});
  return report::bar_chart_svg("Decode step: time per transformer layer", {"predicted", "simulated"}, rows, "us");
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

// What the analytical prediction and the simulation each assume, and how far apart they are.
std::string why_differ(const json& s) {
  const auto& p = s["predicted"];
  const auto& b = p["decode_breakdown"];
  const auto& simd = s["simulated"]["decode"];
  const double pred = p["decode_tokens_per_s"].get<double>(), sim = simd["tokens_per_s"].get<double>();
  const double step = f64(b, "seconds");
  const bool resident = s["design"].value("style", "") == "dataflow";  // weights on chip: no weight tiles to load
  std::string h = "<div id=\"why-differ\"><p><b>Why the predicted and the simulated decode rates differ.</b> Both describe "
                  "the same design running the same model; they differ in what they assume.</p>\n<ul>\n";
  h += fmt::format(
      "<li><b>Predicted</b> ({} tokens/s, {} per token) is fpgallm's analytical model (<code>perf::predict</code>). Per "
      "operation of the decode step it takes the larger of the compute time and the off-chip transfer time ({}), adds a "
      "fixed issue cost per operation ({} operations: {}, "
      "{} of the step) and the PCIe transfers of the token and the logits ({}). It assumes off-chip memory streams at its "
      "sustained efficiency with no request latency, buffers deep enough for any number of tiles in flight, and the "
      "matrix unit's pipeline filled once per operation.</li>\n",
      num(pred), report::seconds(step),
      resident ? "this dataflow design keeps the weights on chip, so only the KV cache moves off chip"
               : "the weight buffer double-buffers tiles, so loads overlap compute",
      p["decode_ops"].size(), report::seconds(f64(b, "fixed_s")),
      report::percent(step > 0 ? f64(b, "fixed_s") / step : 0), report::seconds(f64(b, "host_s")));
  h += fmt::format(
      "<li><b>Simulated</b> ({} tokens/s, {} per token) is the cycle-level simulator (<code>sim::simulate</code>). It "
      "executes the accelerator's own instruction list ({} instructions: norms folded into the matmuls, attention as one "
      "instruction) tile by tile: {}, and each tile pays the matrix unit's pipeline fill and its store stage.</li>\n",
      num(sim), report::seconds(simd["seconds"].get<double>()), simd["instructions"].get<int>(),
      resident ? "the weights are read from on-chip buffers, each block of the KV cache waits for its memory request"
               : "each tile load waits for its memory request to return and for free space in the weight buffer");
  if (s["simulated"].contains("decode_idealized")) {
    const double ideal = s["simulated"]["decode_idealized"]["tokens_per_s"].get<double>();
    auto times = [](double a, double b) { return b > 0 ? number(a / b, 3) + "&times;" : std::string("n/a"); };
    h += fmt::format(
        "<li><b>The difference</b>: the simulator with the analytical model's idealizations switched on (no request "
        "latency, unbounded buffers, one pipeline fill per instruction, no store stage) runs {} tokens/s, {} the "
        "prediction; what remains between those two is how many instructions are issued and what each costs. Request "
        "latency, buffer depth and the per-tile pipeline fill then take it to the simulated {} tokens/s ({} the "
        "idealized rate). docs/performance-model.md, \"Simulator vs analytical model\", has this comparison for every "
        "preset.</li>\n",
        num(ideal), times(ideal, pred), num(sim), times(sim, ideal));
  }
  return h + "</ul></div>\n";
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
svg{max-width:100%;height:auto} .note{font-size:.88em;color:#555} #why-differ{background:#f7f9fc;border-left:3px solid #3b7dd8;padding:.2em 1em;margin:1em 0}
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
  if (p.contains("prefill_path"))
    h += fmt::format("<div class=\"kpi\">time to first token on the card ({} tokens; {})<b id=\"ttft\">{} ms</b></div>",
                     p["prompt"].get<int>(), p["prefill_path"].get<std::string>(),
                     num(1e3 * p["time_to_first_token_s"].get<double>()));
  else
    h += fmt::format("<div class=\"kpi\">time to first token ({} tokens)<b id=\"ttft\">{} ms</b></div>", p["prompt"].get<int>(), num(1e3 * p["time_to_first_token_s"].get<double>()));
  h += fmt::format("<div class=\"kpi\">board power<b id=\"watts\">{}</b></div>", power_figure(p["watts"], 1, "W"));
  h += fmt::format("<div class=\"kpi\">energy<b id=\"joules\">{}</b></div>", power_figure(p["joules_per_token"], 1e3, "mJ/token"));
  h += fmt::format("<div class=\"kpi\">held-out perplexity (accelerator)<b id=\"accel-ppl\">{:.4f}</b></div>", v["accel_perplexity"].get<double>());
  h += "</div>\n";
  h += why_differ(s);

  h += "<h2>Model</h2>\n<table>\n";
  h += row({"file", esc(str(s["model"]["file"]))});
  h += row({"architecture", esc(str(cfg["arch"]))});
  h += row({"dim / hidden / layers", fmt::format("{} / {} / {}", cfg["dim"].get<int>(), cfg["hidden_dim"].get<int>(), cfg["n_layers"].get<int>())});
  h += row({"heads (kv heads)", fmt::format("{} ({})", cfg["n_heads"].get<int>(), cfg["n_kv_heads"].get<int>())});
  h += row({"vocabulary / context", fmt::format("{} / {}", cfg["vocab_size"].get<int>(), cfg["seq_len"].get<int>())});
  h += row({"parameters", whole(cfg["n_params"].get<double>())});
  h += "</table>\n";

  h += "<h2>Quantization</h2>\n";
  h += fmt::format("<p>Calibrated on {} stories of <code>{}</code>, measured on the other {} ({} tokens). "
                   "Budget: held-out perplexity at most {:.2f}% above fp32 ({:.4f}). Schemes the accelerator's matrix "
                   "unit implements, tried in order of weight bytes, 4-bit weights by each method in order of cost "
                   "(round to nearest, then AWQ and GPTQ with searched group scales); the first within budget is deployed. "
                   "<span class=\"{}\">{}</span></p>\n",
                   s["text"]["calibration_stories"].get<int>(), esc(str(s["text"]["file"])),
                   s["text"]["held_out_stories"].get<int>(), s["text"]["held_out_tokens"].get<int>(),
                   100 * q["budget"].get<double>(), q["fp32_perplexity"].get<double>(),
                   q["budget_met"].get<bool>() ? "ok" : "bad",
                   q["budget_met"].get<bool>() ? "Budget met." : "No scheme met the budget: the one with the smallest loss is deployed.");
  h += "<table>\n" + row({"scheme", "method", "held-out perplexity", "vs fp32", "linear weight bytes",
                           "quantize cost (passes over the calibration half; seconds in deploy.log)", "within budget",
                           "deployed"}, true);
  h += row({"fp32", "", fmt::format("{:.4f}", q["fp32_perplexity"].get<double>()), "", report::bytes(q["fp32_weight_bytes"].get<double>()), "", "", ""});
  for (const auto& r : q["candidates"]) {
    std::string name = str(r["scheme"]);
    if (r["group"].get<int>() > 0) name += fmt::format(" (g{})", r["group"].get<int>());
    const int qat_steps = r.value("qat_steps", 0);
    h += row({esc(name),
              esc(str(r["method"])) + (r["search_scales"].get<bool>() ? ", searched scales" : "") +
                  (qat_steps > 0 ? fmt::format(", {} steps", qat_steps) : ""),
              fmt::format("{:.4f} &plusmn; {:.4f}", r["perplexity"].get<double>(), r["perplexity_err"].get<double>()),
              fmt::format("{:+.3f}%", 100 * r["rel_increase"].get<double>()), report::bytes(r["weight_bytes"].get<double>()),
              fmt::format("{}", r["calibration_passes"].get<int>()), r["meets_budget"].get<bool>() ? "yes" : "no",
              r["deployed"].get<bool>() ? "&#10003;" : ""});
  }
  h += "</table>\n";
  for (const auto& sk : q["skipped"])
    h += fmt::format("<p>Not tried: {}, {}.</p>\n", esc(str(sk["scheme"])), esc(str(sk["reason"])));

  h += "<h2>Chosen design</h2>\n<table>\n";
  h += row({"style", esc(str(d["style"]))});
  h += row({"clock", fmt::format("{} MHz", num(d["clock_mhz"].get<double>()))});
  h += row({"matrix unit", fmt::format("{} x {} MACs, {}-bit weights, {}-bit activations, {}-bit accumulators",
                                       d["matrix_unit"]["rows"].get<int>(), d["matrix_unit"]["cols"].get<int>(),
                                       d["matrix_unit"]["weight_bits"].get<int>(), d["matrix_unit"]["act_bits"].get<int>(),
                                       d["matrix_unit"]["acc_bits"].get<int>())});
  h += row({"vector unit", fmt::format("{} lanes", d["vector_unit"]["lanes"].get<int>())});
  h += row({"weight tile", fmt::format("{} x {}", d["tiling"]["tile_rows"].get<int>(), d["tiling"]["tile_cols"].get<int>())});
  h += row({"buffers (weights / activations / KV)", fmt::format("{} / {} / {}", report::bytes(d["buffers"]["weight_bytes"].get<double>()),
                                                                 report::bytes(d["buffers"]["activation_bytes"].get<double>()),
                                                                 report::bytes(d["buffers"]["kv_bytes"].get<double>()))});
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
    h += row({esc(str(l["resource"])), num(l["used"].get<double>(), 6), whole(l["available"].get<double>()),
              bar(l["used"].get<double>(), l["available"].get<double>(), l["ceiling"].get<double>()),
              l["fits"].get<bool>() ? "yes" : "<span class=\"bad\">no</span>"});
  }
  h += "</table>\n<p>Bars: share of what the platform shell leaves; the black mark is the timing-closure ceiling.</p>\n";
  if (s["resources"].contains("parts")) {  // the estimate by unit, each unit's terms in a title
    h += "<table id=\"resources-by-unit\">\n" + row({"unit", "DSP", "LUT", "FF", "BRAM36", "URAM", "AXI masters"}, true);
    for (const auto& p : s["resources"]["parts"]) {
      std::string terms;
      double axi = 0;
      if (p.contains("terms"))
        for (const auto& t : p["terms"]) {
          terms += fmt::format("{} x {}: {} [{}]\n", num(t["count"].get<double>()), str(t["what"]), str(t["formula"]),
                               str(t["source"]));
          if (t["what"] == "m_axi adapters") axi += t["count"].get<double>();
        }
      h += "<tr title=\"" + esc(terms) + "\"><td>" + esc(str(p["name"])) + "</td><td>" + whole(p["dsp"].get<double>()) +
           "</td><td>" + whole(p["lut"].get<double>()) + "</td><td>" + whole(p["ff"].get<double>()) + "</td><td>" +
           num(p["bram36"].get<double>()) + "</td><td>" + whole(p["uram"].get<double>()) + "</td><td>" +
           (axi > 0 ? whole(axi) : std::string()) + "</td></tr>\n";
    }
    h += "</table>\n<p>The estimate by unit: what the emitted kernels instantiate (hover a unit for its terms, each "
         "with its formula and the source line it is read from; src/hw/unit_resources.cpp).</p>\n";
  }
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
    h += number_row(esc(str((*ph)["stage"])), {whole((*ph)["tokens"].get<double>()), whole((*ph)["cycles"].get<double>()),
                                               report::seconds((*ph)["seconds"].get<double>()), num((*ph)["tokens_per_s"].get<double>())});
  h += "</table>\n<p>Per unit, one decode step (cycles of the design clock; each row adds up to the step's " +
       whole(simd["cycles"].get<double>()) + " cycles):</p>\n<table id=\"sim-units\">\n" +
       row({"unit", "busy", "waiting for memory", "waiting for a dependency", "waiting for buffer space", "idle", "busy share",
            "carrying data"}, true);
  const double step_cycles = simd["cycles"].get<double>();
  for (const auto& u : simd["units"]) {
    const auto& st = u["cycles"];
    const bool port = u.contains("kind") ? u["kind"] == "memory" || u["kind"] == "host_link" || u["kind"] == "card_link"
                                         : false;
    h += number_row(esc(str(u["name"])),
                    {whole(f64(st, "busy")), whole(f64(st, "wait_memory")), whole(f64(st, "wait_dependency")),
                     whole(f64(st, "wait_buffer")), whole(f64(st, "idle")),
                     report::percent(step_cycles > 0 ? f64(st, "busy") / step_cycles : 0),
                     port ? report::percent(u["utilization"].get<double>()) : "&ndash;"},
                    " data-unit=\"" + esc(str(u["name"])) + "\"");
  }
  h += "</table>\n<p class=\"note\">A compute unit is <i>busy</i> while it works, <i>waiting for memory</i> while its next "
       "task needs a load still in flight, <i>waiting for a dependency</i> while it needs another unit's result (the "
       "controller: the instruction in flight), <i>waiting for buffer space</i> while a load has no free buffer. A port "
       "(memory channels, PCIe) is <i>busy</i> while a request is outstanding, request latency included; <i>carrying "
       "data</i> is the share of the step its channels actually move bytes at their sustained bandwidth. A PCIe link "
       "spends most of a transfer of a few bytes on its fixed latency, so it can be busy for thousands of cycles while "
       "carrying data well under 1% of the step.</p>\n";
  h += "<p>The full timeline is <code>trace_decode.json</code> (open it in ui.perfetto.dev or chrome://tracing).</p>\n";
  h += "<div id=\"layers\">" + layer_chart(p, simd) + "</div>\n";
  h += "<p class=\"note\">Predicted: the analytical model's operations of each layer; simulated: each layer's "
       "instructions from first start to last end. Outside the layers: the embedding, the final norm and the "
       "classifier.</p>\n";

  if (p.contains("power")) {
    const auto& pw = p["power"];
    h += "<h2>Power while decoding</h2>\n";
    const std::vector<report::BarRow> parts = {
        {"static (board at idle)", {f64(pw, "static_w")}}, {"DSP (matrix unit)", {f64(pw, "dsp_w")}},
        {"block RAM and UltraRAM", {f64(pw, "bram_w")}},    {"logic (LUT, FF, routing)", {f64(pw, "logic_w")}},
        {"off-chip memory traffic", {f64(pw, "memory_w")}}};
    h += "<div id=\"power-chart\">" + report::bar_chart_svg(fmt::format("Board power: {} W per card", num(f64(pw, "total_w"), 3)),
                                                              {}, parts, "W") + "</div>\n";
    h += "<table id=\"power\">\n" + row({"component", "watts", "share"}, true);
    for (const auto& part : parts)
      h += number_row(part.label, {num(part.values[0], 3), report::percent(part.values[0] / f64(pw, "total_w"))});
    h += number_row("<b>total per card</b>", {num(f64(pw, "total_w"), 3), "100.0%"});
    h += "</table>\n<ul class=\"note\">";
    for (const auto& a : pw["assumptions"]) h += "<li>" + esc(str(a)) + "</li>";
    h += "</ul>\n";
  }

  h += "<h2>Against GPUs (same workload)</h2>\n<table id=\"gpus\">\n" +
       row({"target", "decode tokens/s", "time to first token", "board power", "energy per token", "USD per M tokens"}, true);
  h += row({"<b>" + esc(str(s["device"]["name"])) + "</b> (this design)", num(p["decode_tokens_per_s"].get<double>()),
            fmt::format("{} ms", num(1e3 * p["prefill_s"].get<double>())), power_figure(p["watts"], 1, "W"), power_figure(p["joules_per_token"], 1e3, "mJ"),
            p["usd_per_mtoken"].get<double>() > 0 ? num(p["usd_per_mtoken"].get<double>(), 3) : "n/a"});
  for (const auto& g : s["gpu_baselines"])
    h += row({esc(str(g["name"])), num(g["decode_tokens_per_s"].get<double>()), fmt::format("{} ms", num(1e3 * g["prefill_s"].get<double>())),
              power_figure(g["watts"], 1, "W"), power_figure(g["joules_per_token"], 1e3, "mJ"),
              g["usd_per_mtoken"].get<double>() > 0 ? num(g["usd_per_mtoken"].get<double>(), 3) : "n/a"});
  h += "</table>\n";

  h += "<h2>Verification through the accelerator's kernels</h2>\n<table id=\"verify\">\n";
  h += row({"held-out perplexity, accelerator backend (C simulation of the HLS kernels)",
            fmt::format("{:.6f} &plusmn; {:.4f}", v["accel_perplexity"].get<double>(), v["accel_perplexity_err"].get<double>())});
  h += row({"held-out perplexity, simulated quantization (fp32 engine)", fmt::format("{:.6f}", v["simulated_quant_perplexity"].get<double>())});
  h += row({"relative difference", fmt::format("{:+.4f}%", 100 * v["accel_vs_simulated_rel"].get<double>())});
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
