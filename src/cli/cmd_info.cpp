#include <cstdio>

#include "cli/command.hpp"
#include "model/model.hpp"
#include "model/presets.hpp"
#include "report/format.hpp"

namespace {

struct InfoArgs {
  std::string model;
  bool json = false;
};

void info(const InfoArgs& a) {
  model::Model m = model::load_or_preset(a.model);
  const auto& c = m.config;
  nlohmann::json j = c;
  j["source"] = m.has_weights() ? model::to_string(m.source_format) : "preset";
  j["has_weights"] = m.has_weights();
  j["has_tokenizer"] = m.tokenizer.has_value();
  j["fp32_weight_bytes"] = c.n_params() * 4;
  if (a.json) {
    cli::print_json(j);
    return;
  }
  std::printf("model        %s (%s, %s)\n", c.name.c_str(), model::to_string(c.arch), j["source"].get<std::string>().c_str());
  std::printf("dim          %d\nhidden_dim   %d\nlayers       %d\nheads        %d (kv %d, head size %d)\n", c.dim,
              c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim());
  std::printf("vocab        %d\ncontext      %d\nrope theta   %g\nnorm eps     %g\nclassifier   %s\n", c.vocab_size,
              c.seq_len, c.rope_theta, c.norm_eps, c.shared_classifier ? "shared with embedding" : "separate");
  std::printf("parameters   %s (%lld, %s in fp32)\n", report::count(double(c.n_params())).c_str(),
              static_cast<long long>(c.n_params()), report::si(c.n_params() * 4.0, "B").c_str());
}

void setup_info(CLI::App& root) {
  auto a = std::make_shared<InfoArgs>();
  auto* cmd = root.add_subcommand("info", "Shape and size of a model or preset");
  cmd->add_option("model", a->model, "Checkpoint or preset name")->required();
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { info(*a); });
}

void setup_presets(CLI::App& root) {
  auto json = std::make_shared<bool>(false);
  auto* cmd = root.add_subcommand("presets", "List the config-only models known by name");
  cmd->add_flag("--json", *json, "Machine-readable output");
  cmd->callback([json] {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& p : model::presets()) {
      nlohmann::json e = p.config;
      e["source"] = p.source;
      list.push_back(e);
    }
    if (*json) {
      cli::print_json(list);
      return;
    }
    std::printf("%-16s %-6s %6s %6s %6s %6s %4s %7s %7s %7s\n", "name", "arch", "dim", "hidden", "layers", "heads",
                "kv", "vocab", "context", "params");
    for (const auto& p : model::presets()) {
      const auto& c = p.config;
      std::printf("%-16s %-6s %6d %6d %6d %6d %4d %7d %7d %7s\n", c.name.c_str(), model::to_string(c.arch), c.dim,
                  c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len,
                  report::count(double(c.n_params())).c_str());
    }
  });
}

}  // namespace

FPGALLM_COMMAND("info", setup_info);
FPGALLM_COMMAND("presets", setup_presets);
