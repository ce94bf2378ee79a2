#pragma once
// Multi-card execution of the accelerator backend (docs/accelerator.md, "Multi-card"):
// which part of a quantized model each of design.parallel.cards cards holds, and the link
// the cards exchange activations over. The engine does not know MPI: src/mpi implements
// CardLink for mpirun (one rank = one card), tests implement it in one process.
//
// Tensor split (Megatron-style): wq, wk, wv by heads (n_heads/N query and n_kv_heads/N KV
// heads per card, with their KV cache); wo by input columns (the card's heads) with an
// all-reduce of the int32 partial accumulators; w1, w3 by output rows (hidden/N), w2 by
// input columns with an all-reduce as for wo; the dynamic int8 scales of att and hb from
// an all-reduce max of one float per token; the classifier by vocabulary rows, then an
// all-gather of the fp32 logits. Embedding, norms and residuals are replicated.
// Pipeline split: card k holds layers [k L / N, (k+1) L / N) and their KV cache, card 0
// the embedding, the last card the final norm and classifier; x (fp32) goes from card k
// to k+1, the logits from the last card back to card 0.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "arch/design.hpp"
#include "model/config.hpp"
#include "quant/quant.hpp"

namespace engine {

// The card-to-card network as seen by one card. Sums and maxima are element-wise and give
// the same values on every card; fp32 sums are added in card order.
class CardLink {
 public:
  virtual ~CardLink() = default;
  virtual int card() const = 0;
  virtual int cards() const = 0;
  virtual void allreduce_sum(std::int32_t* data, std::size_t n) = 0;
  virtual void allreduce_sum(float* data, std::size_t n) = 0;
  virtual void allreduce_max(float* data, std::size_t n) = 0;
  // all = the cards' blocks in card order; `mine` holds counts[card()] values.
  virtual void allgather(const float* mine, float* all, const std::vector<int>& counts) = 0;
  virtual void send(const float* data, std::size_t n, int to) = 0;
  virtual void recv(float* data, std::size_t n, int from) = 0;
  // Host-side copy of card 0's logits to every card's host process, so that each process
  // samples the same token (one host drives all cards in a real deployment; not card
  // traffic, not counted as such).
  virtual void host_broadcast(float* data, std::size_t n) = 0;
  // Bytes this card has sent over the card links (the ring counts of src/mpi/dist.hpp).
  virtual std::uint64_t bytes_sent() const = 0;
};

// What card `card` of design.parallel.cards holds.
struct CardShare {
  arch::Split split = arch::Split::none;
  int card = 0, cards = 1;
  // Tensor split (the whole model otherwise).
  int q_heads = 0, kv_heads = 0;  // per card
  int hidden = 0;                 // per card
  int vocab_begin = 0, vocab_end = 0;
  std::vector<int> vocab_counts;  // every card's classifier rows
  // Pipeline split (all layers otherwise).
  int layer_begin = 0, layer_end = 0;
  bool embedding = true, classifier = true;

  bool holds_layer(int layer) const { return layer >= layer_begin && layer < layer_end; }
};

// Throws fpgallm::InputError("design", ...) when the split cannot divide this model (the
// cards must divide n_kv_heads and hidden_dim for tensor, and with int4 weights the
// per-card columns of wo and w2 must be whole scale groups; at most n_layers cards for
// pipeline) or `card` is out of range.
CardShare card_share(const model::Config& c, const quant::Plan& plan, const arch::Design& d, int card);

// The card's part of `full` (same config and plan; linears sliced as above, those of other
// cards' layers empty). Per-row scales are those of the full rows, so each card computes
// exactly the rows or partial sums the single card would.
quant::QuantModel shard_model(const quant::QuantModel& full, const CardShare& share);

// Bytes of the weights a card holds: quantized linears (codes and scales), fp32 embedding,
// norms.
std::uint64_t resident_weight_bytes(const quant::QuantModel& qm);
// The part of a card's resident weights that every card of a tensor split holds (fp32
// embedding and norms; the per-row scales of column-split int8 wo and w2); 0 otherwise.
std::uint64_t replicated_weight_bytes(const quant::QuantModel& card_qm, const CardShare& share);

}  // namespace engine
