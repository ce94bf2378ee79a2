#include <cstdio>
#include <map>

#include "cli/command.hpp"
#include "graph/workload.hpp"
#include "model/model.hpp"
#include "report/format.hpp"
#include "util/error.hpp"

namespace {

struct ProfileArgs {
  std::string model;
  std::string phase = "decode";
  std::string scheme;
  int batch = 1;
  int prompt = 128;
  int context = 0;  // 0 = the model's seq_len
  int seq = 0;      // 0 = the model's seq_len
  bool ops = false;
  bool json = false;
};

void print_row(const char* name, const graph::Totals& t, const graph::Totals& all) {
  std::printf("%-16s %11s %6.1f%% %11s %6.1f%% %11s %11s %9.2f\n", name, report::si(t.flops, "FLOP").c_str(),
              all.flops > 0 ? 100 * t.flops / all.flops : 0, report::si(t.bytes(), "B").c_str(),
              all.bytes() > 0 ? 100 * t.bytes() / all.bytes() : 0, report::si(t.weight_bytes, "B").c_str(),
              report::si(t.kv_bytes, "B").c_str(), t.intensity());
}

void profile(const ProfileArgs& a) {
  model::Model m = model::load_or_preset(a.model);
  const model::Config& c = m.config;
  graph::Shape s;
  try {
    s.phase = graph::phase_from_string(a.phase);
  } catch (const std::invalid_argument& e) {
    throw fpgallm::InputError("--phase", e.what());
  }
  s.batch = a.batch;
  s.prompt = a.prompt;
  s.context = a.context ? a.context : c.seq_len;
  s.seq = a.seq ? a.seq : c.seq_len;
  const std::string scheme = !a.scheme.empty() ? a.scheme : (s.phase == graph::Phase::train ? "fp32" : "int8");
  graph::Precision p = graph::parse_scheme(scheme);
  graph::Workload w = graph::lower(c, s, p);
  const graph::Totals all = w.totals();

  nlohmann::json groups = nlohmann::json::object();
  nlohmann::json kinds = nlohmann::json::object();
  const graph::Group group_list[] = {graph::Group::embedding, graph::Group::attention, graph::Group::feed_forward,
                                     graph::Group::norm,      graph::Group::residual,  graph::Group::classifier,
                                     graph::Group::optimizer};
  std::map<std::string, graph::OpKind> kind_list;
  for (const auto& op : w.ops) kind_list.emplace(graph::to_string(op.kind), op.kind);

  if (a.json) {
    nlohmann::json j = w;
    if (!a.ops) j.erase("ops");
    for (auto g : group_list) {
      graph::Totals t = w.totals(g);
      if (t.flops == 0 && t.bytes() == 0) continue;
      nlohmann::json e = t;
      e["flops_share"] = all.flops > 0 ? t.flops / all.flops : 0;
      e["bytes_share"] = all.bytes() > 0 ? t.bytes() / all.bytes() : 0;
      groups[graph::to_string(g)] = e;
    }
    for (const auto& [name, k] : kind_list) {
      graph::Totals t = w.totals(k);
      nlohmann::json e = t;
      e["flops_share"] = all.flops > 0 ? t.flops / all.flops : 0;
      e["bytes_share"] = all.bytes() > 0 ? t.bytes() / all.bytes() : 0;
      kinds[name] = e;
    }
    j["groups"] = groups;
    j["kinds"] = kinds;
    j["model_weight_bytes"] = w.model_weight_bytes();
    j["flops_per_token"] = all.flops / double(w.tokens());
    cli::print_json(j);
    return;
  }

  std::printf("%s, %s", c.name.c_str(), graph::to_string(s.phase));
  if (s.phase == graph::Phase::prefill) std::printf(" of %d tokens", s.prompt);
  if (s.phase == graph::Phase::decode) std::printf(" of one token at context %d", s.context);
  if (s.phase == graph::Phase::train) std::printf(" step over %d tokens per sequence", s.seq);
  std::printf(", batch %d, %s (weights %s, KV %d-bit)\n", s.batch, graph::to_string(p).c_str(),
              report::si(w.model_weight_bytes(), "B").c_str(), p.kv_bits);
  std::printf("%-16s %11s %7s %11s %7s %11s %11s %9s\n", "", "FLOPs", "share", "bytes", "share", "weights", "KV",
              "FLOP/B");
  for (auto g : group_list) {
    graph::Totals t = w.totals(g);
    if (t.flops == 0 && t.bytes() == 0) continue;
    print_row(graph::to_string(g), t, all);
  }
  std::printf("\n");
  for (const auto& [name, k] : kind_list) print_row(name.c_str(), w.totals(k), all);
  std::printf("\n");
  print_row("total", all, all);
  std::printf("%s per token; bytes count every operand read and result written once (activations included;\n"
              "weights + KV alone: %s, %.2f FLOP/B)\n",
              report::si(all.flops / double(w.tokens()), "FLOP").c_str(), report::si(all.weight_bytes + all.kv_bytes, "B").c_str(),
              all.weight_bytes + all.kv_bytes > 0 ? all.flops / (all.weight_bytes + all.kv_bytes) : 0);
  if (a.ops) {
    std::printf("\n%-24s %-16s %8s %8s %8s %6s %11s %11s %9s\n", "op", "kind", "M", "N", "K", "batch", "FLOPs",
                "bytes", "FLOP/B");
    for (const auto& op : w.ops)
      std::printf("%-24s %-16s %8lld %8lld %8lld %6lld %11s %11s %9.2f\n", op.name.c_str(), graph::to_string(op.kind),
                  static_cast<long long>(op.m), static_cast<long long>(op.n), static_cast<long long>(op.k),
                  static_cast<long long>(op.batch), report::si(op.flops, "").c_str(), report::si(op.bytes(), "B").c_str(),
                  op.intensity());
  }
}

void setup(CLI::App& root) {
  auto a = std::make_shared<ProfileArgs>();
  auto* cmd = root.add_subcommand("profile", "Operations, FLOPs, bytes and arithmetic intensity of a model for one phase");
  cmd->add_option("model", a->model, "Checkpoint or preset name")->required();
  cmd->add_option("--phase", a->phase, "prefill, decode or train")->check(CLI::IsMember({"prefill", "decode", "train"}));
  cmd->add_option("--batch", a->batch, "Sequences");
  cmd->add_option("--prompt", a->prompt, "Prefill: prompt tokens");
  cmd->add_option("--context", a->context, "Decode: positions attended (default: the model's context)");
  cmd->add_option("--seq", a->seq, "Train: tokens per sequence (default: the model's context)");
  cmd->add_option("--scheme", a->scheme, "int8 (default), int4, w4a16, w8a16, fp16, bf16, fp32 (default for train); -g128, -kv16 suffixes");
  cmd->add_flag("--ops", a->ops, "List every operation");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { profile(*a); });
}

}  // namespace

FPGALLM_COMMAND("profile", setup);
