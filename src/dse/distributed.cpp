#include "dse/distributed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace dse {

using nlohmann::json;

double item_cost(const Request& req, const perf::Workloads& w, const hw::Device& dev) {
  const double layers = req.config.n_layers + 2;
  if (dev.kind == hw::Kind::gpu) return layers;
  if (dev.memory.empty() || !dev.memory.front().bandwidth_gbps.has()) return 0.1;
  const double need = w.decode.model_weight_bytes() + w.decode.kv_cache_bytes(req.scenario.context);
  const double cap = dev.memory_capacity_gb() * 1e9;
  int tries = 0;
  for (int cards = 1; cards <= req.max_cards; cards *= 2) {
    ++tries;
    if (cap > 0 && need <= cap * cards) break;
  }
  return 40 * layers * tries;
}

std::vector<int> partition(const std::vector<double>& costs, int parts) {
  if (parts < 1) throw std::invalid_argument("partition: parts must be at least 1");
  std::vector<int> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return costs[a] > costs[b]; });
  std::vector<double> load(parts, 0.0);
  std::vector<int> owner(costs.size(), 0);
  for (int i : order) {
    const int p = int(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = p;
    load[p] += costs[i];
  }
  return owner;
}

std::vector<int> items_of(const std::vector<int>& owners, int part) {
  std::vector<int> out;
  for (std::size_t i = 0; i < owners.size(); ++i)
    if (owners[i] == part) out.push_back(int(i));
  return out;
}

namespace {

json phase_wire(const perf::PhaseTime& ph, bool with_ops) {
  json j = {ph.seconds, ph.flops, ph.offchip_bytes, ph.compute_s, ph.memory_s, ph.fixed_s, ph.link_s, ph.host_s};
  json ops = json::array();
  if (with_ops)
    for (const auto& o : ph.ops)
      ops.push_back({o.name, int(o.kind), o.layer, o.flops, o.offchip_bytes, o.compute_s, o.memory_s, o.fixed_s,
                     o.link_s, o.time_s, int(o.bound)});
  return {{"t", j}, {"ops", ops}};
}

perf::PhaseTime phase_from(const json& j) {
  perf::PhaseTime ph;
  const auto& t = j.at("t");
  ph.seconds = t.at(0);
  ph.flops = t.at(1);
  ph.offchip_bytes = t.at(2);
  ph.compute_s = t.at(3);
  ph.memory_s = t.at(4);
  ph.fixed_s = t.at(5);
  ph.link_s = t.at(6);
  ph.host_s = t.at(7);
  for (const auto& o : j.at("ops")) {
    perf::OpTime x;
    x.name = o.at(0);
    x.kind = graph::OpKind(o.at(1).get<int>());
    x.layer = o.at(2);
    x.flops = o.at(3);
    x.offchip_bytes = o.at(4);
    x.compute_s = o.at(5);
    x.memory_s = o.at(6);
    x.fixed_s = o.at(7);
    x.link_s = o.at(8);
    x.time_s = o.at(9);
    x.bound = perf::Bound(o.at(10).get<int>());
    ph.ops.push_back(std::move(x));
  }
  return ph;
}

// brief: the figures alone, without the assumptions, notes and collectives (the Pareto
// front's designs: explore shows their figures and nothing else).
json prediction_wire(const perf::Prediction& p, bool with_ops, bool brief = false) {
  json a = json::array();
  json t = json::array();
  if (!brief) {
    for (const auto& x : p.assumptions) a.push_back({x.name, x.value, x.unit, x.source});
    for (const auto& x : p.decode_transfers)
      t.push_back({x.name, int(x.kind), x.layer, x.linear, x.before, x.bytes, x.from, x.to});
  }
  return {{"id", {p.target, p.device, p.split, p.precision, p.placement}},
          {"kind", int(p.kind)},
          {"cards", p.cards},
          {"scenario", {p.scenario.batch, p.scenario.prompt, p.scenario.context}},
          {"fits", p.fits_memory},
          {"f",
           {p.weight_bytes, p.kv_bytes, p.capacity_bytes, p.peak_ops_per_s, p.peak_bytes_per_s, p.prefill_s,
            p.decode_step_s, p.decode_tokens_per_s, p.prefill_tokens_per_s, p.watts,
            p.joules_per_token, p.usd_per_mtoken}},
          {"prefill_path", p.prefill_path},
          {"prefill", phase_wire(p.prefill, with_ops)},
          {"decode", phase_wire(p.decode, with_ops)},
          {"link", p.link_bytes_per_token},
          {"transfers", t},
          {"assumptions", a},
          {"power",
           {p.power.static_w, p.power.dsp_w, p.power.bram_w, p.power.logic_w, p.power.memory_w, p.power.total_w}},
          {"power_assumptions", brief ? std::vector<std::string>{} : p.power.assumptions},
          {"notes", brief ? std::vector<std::string>{} : p.notes}};
}

perf::Prediction prediction_from(const json& j) {
  perf::Prediction p;
  const auto& id = j.at("id");
  p.target = id.at(0);
  p.device = id.at(1);
  p.split = id.at(2);
  p.precision = id.at(3);
  p.placement = id.at(4);
  p.kind = hw::Kind(j.at("kind").get<int>());
  p.cards = j.at("cards");
  p.scenario = {j.at("scenario").at(0), j.at("scenario").at(1), j.at("scenario").at(2)};
  p.fits_memory = j.at("fits");
  const auto& f = j.at("f");
  double* slots[] = {&p.weight_bytes,   &p.kv_bytes,      &p.capacity_bytes,      &p.peak_ops_per_s,
                     &p.peak_bytes_per_s, &p.prefill_s,   &p.decode_step_s,       &p.decode_tokens_per_s,
                     &p.prefill_tokens_per_s, &p.watts, &p.joules_per_token, &p.usd_per_mtoken};
  if (f.size() != std::size(slots)) throw std::invalid_argument("prediction figures");
  for (std::size_t i = 0; i < std::size(slots); ++i) *slots[i] = f[i].get<double>();
  p.prefill_path = j.at("prefill_path").get<std::string>();
  p.prefill = phase_from(j.at("prefill"));
  p.decode = phase_from(j.at("decode"));
  p.link_bytes_per_token = j.at("link").get<std::vector<double>>();
  for (const auto& x : j.at("transfers")) {
    perf::Transfer t;
    t.name = x.at(0);
    t.kind = perf::Collective(x.at(1).get<int>());
    t.layer = x.at(2);
    t.linear = x.at(3);
    t.before = x.at(4);
    t.bytes = x.at(5);
    t.from = x.at(6);
    t.to = x.at(7);
    p.decode_transfers.push_back(std::move(t));
  }
  for (const auto& x : j.at("assumptions")) p.assumptions.push_back({x.at(0), x.at(1), x.at(2), x.at(3)});
  const auto& w = j.at("power");
  double* watts[] = {&p.power.static_w, &p.power.dsp_w, &p.power.bram_w, &p.power.logic_w, &p.power.memory_w,
                     &p.power.total_w};
  if (w.size() != std::size(watts)) throw std::invalid_argument("prediction power");
  for (std::size_t i = 0; i < std::size(watts); ++i) *watts[i] = w[i].get<double>();
  p.power.assumptions = j.at("power_assumptions").get<std::vector<std::string>>();
  p.notes = j.at("notes").get<std::vector<std::string>>();
  return p;
}

json candidate_wire(const Candidate& c, bool with_ops, bool brief = false) {
  return {{"design", c.design}, {"prediction", prediction_wire(c.prediction, with_ops, brief)}, {"binding", c.binding},
          {"binding_fraction", c.binding_fraction}, {"price_usd", c.price_usd}};
}

Candidate candidate_from(const json& j) {
  Candidate c;
  c.design = j.at("design").get<arch::Design>();
  c.prediction = prediction_from(j.at("prediction"));
  c.binding = j.at("binding");
  c.binding_fraction = j.at("binding_fraction");
  c.price_usd = j.at("price_usd");
  return c;
}

}  // namespace

std::string serialize(const std::vector<Item>& items, bool with_ops) {
  json out = json::array();
  for (const auto& it : items) {
    const DeviceResult& r = it.result;
    json ranked = json::array(), pareto = json::array();
    if (!r.ranked.empty()) ranked.push_back(candidate_wire(r.ranked.front(), with_ops));
    for (const auto& c : r.pareto) pareto.push_back(candidate_wire(c, false, true));
    out.push_back({{"index", it.index},
                   {"seconds", it.seconds},
                   {"device", r.device},
                   {"kind", int(r.kind)},
                   {"ranked", ranked},
                   {"pareto", pareto},
                   {"counts", {r.evaluated, r.rejected_resources, r.rejected_memory}},
                   {"why_not", r.why_not},
                   {"method", r.method}});
  }
  const std::vector<std::uint8_t> bytes = json::to_cbor(out);
  return std::string(bytes.begin(), bytes.end());
}

std::vector<Item> deserialize(const std::string& bytes) {
  std::vector<Item> items;
  try {
    const json in = json::from_cbor(bytes);
    for (const auto& j : in) {
      Item it;
      it.index = j.at("index");
      it.seconds = j.at("seconds");
      DeviceResult& r = it.result;
      r.device = j.at("device");
      r.kind = hw::Kind(j.at("kind").get<int>());
      for (const auto& c : j.at("ranked")) r.ranked.push_back(candidate_from(c));
      for (const auto& c : j.at("pareto")) r.pareto.push_back(candidate_from(c));
      r.evaluated = j.at("counts").at(0);
      r.rejected_resources = j.at("counts").at(1);
      r.rejected_memory = j.at("counts").at(2);
      r.why_not = j.at("why_not").get<std::vector<std::string>>();
      r.method = j.at("method").get<std::vector<std::string>>();
      items.push_back(std::move(it));
    }
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("dse::deserialize: not a serialized exploration (") + e.what() + ")");
  }
  return items;
}

std::vector<Item> merge(const std::vector<std::vector<Item>>& parts, int count) {
  std::vector<Item> out(std::max(count, 0));
  std::vector<bool> seen(out.size(), false);
  for (const auto& part : parts)
    for (const auto& it : part) {
      if (it.index < 0 || it.index >= count) throw std::invalid_argument(fmt::format("merge: item {} outside 0..{}", it.index, count - 1));
      if (seen[it.index]) throw std::invalid_argument(fmt::format("merge: item {} explored twice", it.index));
      seen[it.index] = true;
      out[it.index] = it;
    }
  for (int i = 0; i < count; ++i)
    if (!seen[i]) throw std::invalid_argument(fmt::format("merge: item {} missing", i));
  return out;
}

}  // namespace dse
