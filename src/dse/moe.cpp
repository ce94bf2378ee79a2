#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dse/dse.hpp"

namespace dse {

MoeAnalysis analyze_moe(const Request& request, const hw::Device& device, const perf::Workloads& w, int cards) {
  const model::Config& c = request.config;
  MoeAnalysis m;
  if (!c.moe()) return m;
  m.moe = true;
  m.cards = std::max(1, cards);
  m.stored_bytes = w.decode.model_weight_bytes();
  m.read_bytes_per_step = w.decode.totals().weight_bytes;
  m.read_fraction = m.read_bytes_per_step / m.stored_bytes;
  const double tokens = double(w.decode.tokens());
  m.experts_per_step = graph::experts_touched(c.n_experts, c.n_experts_active, tokens);
  const double need = m.stored_bytes + w.decode.kv_cache_bytes(request.scenario.context);
  const double capacity = device.memory_capacity_gb() * 1e9, bandwidth = device.memory_bandwidth_gbps() * 1e9;
  m.cards_for_capacity = capacity > 0 ? static_cast<int>(std::ceil(need / capacity)) : 0;
  if (bandwidth > 0) {
    m.step_read_s = m.read_bytes_per_step / (bandwidth * m.cards);
    m.dense_read_s = m.stored_bytes / (bandwidth * m.cards);
  }
  m.capacity_bound = m.read_fraction < 0.5;

  const int moe_layers = c.n_layers - c.n_dense_layers;
  const double act_bytes = w.decode.precision.act_bits / 8.0;
  m.experts_per_card = (c.n_experts + m.cards - 1) / m.cards;
  // A token's k experts land on cards as k tokens that each pick one of `cards` "experts".
  m.cards_per_token = graph::experts_touched(m.cards, 1, c.n_experts_active);
  // Expert parallel: each MoE block sends the token's activations to every other card that
  // holds one of its experts and gets one result back (dim values each way).
  const double remote = m.cards_per_token - m.cards_per_token / m.cards;  // expected cards other than the token's own
  m.expert_parallel_bytes_per_token = moe_layers * remote * 2.0 * c.dim * act_bytes;
  // Layer split: whole blocks (all their experts) per card; one activation vector crosses each boundary.
  m.layer_split_bytes_per_token = (m.cards - 1) * c.dim * act_bytes;

  const double gb = 1e9;
  m.notes.push_back(fmt::format(
      "mixture of experts: {} of {} experts (each [{}x{}] x3) per token in {} of {} blocks{}; the cards store all experts, "
      "{:.2f} GB, and a decode step of batch {} reads {:.2f} GB of weights ({:.1f}%, {:.1f} experts per block)",
      c.n_experts_active, c.n_experts, c.expert_hidden_dim, c.dim, moe_layers, c.n_layers,
      c.n_shared_experts ? fmt::format(" plus {} shared", c.n_shared_experts) : "", m.stored_bytes / gb,
      request.scenario.batch, m.read_bytes_per_step / gb, 100 * m.read_fraction, m.experts_per_step));
  m.notes.push_back(fmt::format(
      "{}: holding weights + KV cache ({:.2f} GB) takes {} card(s) of {:.1f} GB; on {} card(s) a step reads its {:.2f} GB in "
      "{:.3f} ms at peak bandwidth, where a dense model storing as much would need {:.3f} ms.{}",
      m.capacity_bound ? "capacity-bound" : "bandwidth-bound (most stored weights are read every step)", need / gb,
      m.cards_for_capacity, capacity / gb, m.cards, m.read_bytes_per_step / gb, 1e3 * m.step_read_s, 1e3 * m.dense_read_s,
      m.capacity_bound ? " The cards' memory capacity, not their bandwidth, decides how many this model needs." : ""));
  if (m.cards > 1)
    m.notes.push_back(fmt::format(
        "expert placement over {} cards: expert parallel ({} experts of every block per card) sends a token's activations to "
        "{:.2f} cards per block on average, {:.0f} bytes per token over {} blocks, and balances the experts' reads across cards; "
        "a layer split (whole blocks per card) sends {:.0f} bytes per token, but each card's reads follow the routing of its blocks only",
        m.cards, m.experts_per_card, m.cards_per_token, m.expert_parallel_bytes_per_token, moe_layers,
        m.layer_split_bytes_per_token));
  else
    m.notes.push_back(fmt::format(
        "expert placement: one card holds all {} experts of each block; with more cards, expert parallelism ({} per card on 2) "
        "spreads the routed reads over the cards' memory",
        c.n_experts, (c.n_experts + 1) / 2));
  return m;
}

void to_json(nlohmann::json& j, const MoeAnalysis& m) {
  j = nlohmann::json{{"stored_bytes", m.stored_bytes},
                     {"read_bytes_per_step", m.read_bytes_per_step},
                     {"read_fraction", m.read_fraction},
                     {"experts_per_step", m.experts_per_step},
                     {"cards_for_capacity", m.cards_for_capacity},
                     {"step_read_s", m.step_read_s},
                     {"dense_read_s", m.dense_read_s},
                     {"bound", m.capacity_bound ? "capacity" : "bandwidth"},
                     {"cards", m.cards},
                     {"experts_per_card", m.experts_per_card},
                     {"cards_per_token", m.cards_per_token},
                     {"expert_parallel_bytes_per_token", m.expert_parallel_bytes_per_token},
                     {"layer_split_bytes_per_token", m.layer_split_bytes_per_token},
                     {"notes", m.notes}};
}

}  // namespace dse
