#pragma once
// `run|eval --backend accel`: the quantized model through the accelerator's kernels
// (engine::AccelTransformer), shared by cmd_run.cpp and cmd_eval.cpp. Under mpirun with a
// design of design.parallel.cards = ranks, each rank runs one card holding only its shard
// (engine/shard.hpp), exchanging activations with src/mpi's collectives.
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/quant_eval.hpp"
#include "engine/accel.hpp"
#include "engine/shard.hpp"

namespace cli {

// This process's card: the whole model, or this rank's shard and its link.
struct AccelBackend {
  arch::Design design;
  std::string design_source;
  quant::QuantModel card_qm;  // the model (one card) or this card's shard
  std::unique_ptr<engine::CardLink> link;  // null on one card
  std::unique_ptr<engine::AccelTransformer> transformer;
  std::uint64_t whole_weight_bytes = 0;  // the whole quantized model's resident weights
  std::uint64_t weight_bytes = 0;        // this card's
  std::uint64_t replicated_weight_bytes = 0;  // of which every card holds a copy

  // Every rank's figures (call on every rank; collective): weight, KV and link bytes,
  // bytes sent per token, peak RSS. Rank 0 prints them under --json.
  nlohmann::json card_report() const;
};

// The accelerator backend for `qfile` (empty: the --quant missing error) quantized from
// `m`, on the design in `design_file` (empty: the default design; "{rank}" in the name is
// replaced by the rank, for per-rank files). The whole quantized model is read, this card's
// part kept and the rest released. Throws InputError naming the flag or file and the first
// problem: a design the kernels cannot run, mpirun -np differing from parallel.cards,
// ranks whose designs differ, a split that does not divide the model.
std::unique_ptr<AccelBackend> make_accel(const model::Model& m, const std::string& qfile,
                                         const std::string& design_file);

// Help of --design for --backend accel, with the default design in the user's words.
std::string design_help();

// eval --backend accel: perplexity through the kernels beside the simulated quantization
// of the same file on the same tokens (the held-out half when the text is the model's
// calibration text), and their relative difference. Output on rank 0. Releases m's fp32
// weights (the kernels run the quantized copy).
void eval_accel(model::Model& m, const model::Tokenizer& tok, const std::string& text_file,
                const std::string& qfile, const std::string& design_file, bool json);

}  // namespace cli
