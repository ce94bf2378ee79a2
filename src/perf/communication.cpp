// Card-to-card communication of the multi-card executor (issue 10, contract B), counted
// once for the analytical model and the simulator.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>

#include "model/model.hpp"
#include "perf/perf.hpp"

namespace perf {

const char* to_string(Collective c) {
  switch (c) {
    case Collective::all_reduce_sum: return "all_reduce_sum";
    case Collective::all_reduce_max: return "all_reduce_max";
    case Collective::all_gather: return "all_gather";
    case Collective::send: return "send";
  }
  return "?";
}

int Transfer::steps(int cards) const {
  if (cards <= 1) return 0;
  switch (kind) {
    case Collective::all_reduce_sum:
    case Collective::all_reduce_max: return 2 * (cards - 1);
    case Collective::all_gather: return cards - 1;
    case Collective::send: return 1;
  }
  return 0;
}

double Transfer::chunk_bytes(int cards) const {
  if (cards <= 1) return 0;
  return kind == Collective::send ? bytes : bytes / cards;
}

double Transfer::bytes_sent(int cards, int card) const {
  if (cards <= 1) return 0;
  if (kind == Collective::send) return card == from ? bytes : 0;
  return steps(cards) * chunk_bytes(cards);
}

double Transfer::seconds(int cards, double link_bytes_per_s, double hop_s) const {
  if (cards <= 1) return 0;
  return steps(cards) * (hop_s + chunk_bytes(cards) / link_bytes_per_s);
}

std::pair<int, int> pipeline_layers(int n_layers, int cards, int card) {
  const auto first = [&](int k) { return int(std::int64_t(k) * n_layers / cards); };
  return {first(card), first(card + 1)};
}

std::vector<Transfer> card_transfers(const model::Config& c, const arch::Parallelism& par, int tokens,
                                     int logits_tokens, bool dynamic_act_scale) {
  std::vector<Transfer> out;
  const int n = par.cards;
  if (n <= 1 || par.split == arch::Split::none) return out;
  constexpr double kWord = 4;  // int32 partial sums, fp32 scales, activations and logits
  if (par.split == arch::Split::tensor) {
    for (int l = 0; l < c.n_layers; ++l)
      for (model::Linear which : {model::Linear::wo, model::Linear::w2}) {
        const std::string linear = model::linear_name(l, which);
        if (dynamic_act_scale)
          out.push_back({linear + " input scale", Collective::all_reduce_max, l, linear, true, kWord * tokens});
        out.push_back({linear + " partial sums", Collective::all_reduce_sum, l, linear, false,
                       kWord * tokens * c.dim});
      }
    out.push_back({"logits", Collective::all_gather, -1, model::linear_name(-1, model::Linear::cls), false,
                   kWord * logits_tokens * c.vocab_size});
    return out;
  }
  for (int k = 0; k + 1 < n; ++k) {
    Transfer t{fmt::format("x {}->{}", k, k + 1), Collective::send, pipeline_layers(c.n_layers, n, k + 1).first, "",
               false, kWord * tokens * c.dim};
    t.from = k;
    t.to = k + 1;
    out.push_back(t);
  }
  Transfer logits{fmt::format("logits {}->0", n - 1), Collective::send, -1, "", false, kWord * logits_tokens * c.vocab_size};
  logits.from = n - 1;
  logits.to = 0;
  out.push_back(logits);
  return out;
}

std::vector<double> bytes_sent_per_card(const std::vector<Transfer>& transfers, int cards) {
  std::vector<double> sent(std::max(cards, 0), 0.0);
  for (const auto& t : transfers)
    for (int k = 0; k < cards; ++k) sent[k] += t.bytes_sent(cards, k);
  return sent;
}

Link card_link(const hw::Device& dev, const Constants& c) {
  Link l;
  l.bytes_per_s = (dev.card_link_gbps.has() ? *dev.card_link_gbps : c.link_gbps_default.value) * 1e9;
  l.bandwidth_source = dev.card_link_gbps.has() ? dev.card_link_gbps.source : c.link_gbps_default.source;
  l.hop_s = c.link_hop_s.value;
  l.hop_source = c.link_hop_s.source;
  return l;
}

void to_json(nlohmann::json& j, const Transfer& t) {
  j = {{"name", t.name}, {"kind", to_string(t.kind)}, {"layer", t.layer}, {"bytes", t.bytes}};
  if (t.kind == Collective::send) {
    j["from"] = t.from;
    j["to"] = t.to;
  }
}

nlohmann::json communication_json(const std::vector<Transfer>& transfers, int cards, int tokens) {
  const double per = tokens > 0 ? 1.0 / tokens : 0;
  std::vector<double> sent = bytes_sent_per_card(transfers, cards);
  double total = 0;
  for (double& b : sent) {
    b *= per;
    total += b;
  }
  // One line per (kind, message size, direction): how many per token and what each card sends.
  std::map<std::tuple<int, double, int, int>, int> groups;
  for (const auto& t : transfers) ++groups[{int(t.kind), t.bytes * per, t.from, t.to}];
  nlohmann::json lines = nlohmann::json::array();
  for (const auto& [key, count] : groups) {
    const auto& [kind, bytes, from, to] = key;
    Transfer t;
    t.kind = Collective(kind);
    t.bytes = bytes;
    t.from = from;
    t.to = to;
    nlohmann::json line = {{"kind", to_string(t.kind)}, {"bytes", bytes}, {"count", count}};
    if (t.kind == Collective::send) {
      line["from"] = from;
      line["to"] = to;
    } else {
      line["bytes_sent_per_card"] = t.bytes_sent(cards, 0);
    }
    lines.push_back(line);
  }
  return {{"per_card_bytes_per_token", sent}, {"total_bytes_per_token", total}, {"collectives_per_token", lines}};
}

}  // namespace perf
