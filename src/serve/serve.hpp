#pragma once
// `fpgallm serve`: an OpenAI-compatible HTTP server (cpp-httplib) over the engine, with
// continuous batching (sequences join and leave the running batch at token boundaries),
// a paged KV-cache pool, Prometheus /metrics, several replicas with a watchdog, weight
// checksums and retry from the last delivered token. docs/serving.md describes it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "arch/design.hpp"
#include "engine/transformer.hpp"
#include "model/bpe_tokenizer.hpp"
#include "model/tokenizer.hpp"

namespace serve {

// One sequence's state on a backend (its KV cache).
class Sequence {
 public:
  virtual ~Sequence() = default;
};

// One position of one running sequence in a batch step.
struct Position {
  Sequence* sequence;
  int token;
  int pos;
};

// One replica's engine. step() advances every sequence of the batch by one position and
// returns each one's logits (valid until the next step). The single-sequence backend below
// gives each sequence a Transformer of its own (its KV cache) and runs a step through
// engine::Transformer::forward_batch: matrix-matrix products over the batch for the fp32
// reference, one forward() per sequence for the other engines.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::unique_ptr<Sequence> open() = 0;
  virtual void step(std::span<const Position> batch, std::vector<const float*>& logits) = 0;
  // The bytes of the weights this replica computes with (checksummed at load and by the
  // scrub; --inject-fault flip changes one of them).
  virtual std::vector<std::span<std::byte>> weights() = 0;
  // Bytes of KV cache one position of one sequence takes.
  virtual std::uint64_t kv_bytes_per_position() const = 0;
};

// The engine's single-sequence API: one engine::Transformer (one KV cache of the model's
// whole context) per sequence. `owner` keeps alive what the transformers read.
std::unique_ptr<Backend> single_sequence_backend(std::function<std::unique_ptr<engine::Transformer>()> new_transformer,
                                                 std::vector<std::span<std::byte>> weights,
                                                 std::uint64_t kv_bytes_per_position, std::shared_ptr<void> owner);

// The vocabulary requests are tokenized with: exactly one is set.
struct Vocabulary {
  const model::Tokenizer* sentencepiece = nullptr;  // llama2.c's
  const model::BpeTokenizer* bpe = nullptr;
};

// --inject-fault REPLICA:KIND:STEP: replica REPLICA fails after STEP batch steps, by an
// exception in its worker (crash), a step that does not return before the watchdog (hang),
// or one flipped weight byte (flip).
struct Fault {
  int replica = 0;
  std::string kind;
  long steps = 0;
};
Fault parse_fault(const std::string& spec);  // throws fpgallm::InputError("--inject-fault", ...)

// --predict-card: what one token of one sequence costs on the card of a design, at the
// position count it attends. The emitted kernels run one token per call, so a batch step of
// n sequences is n such calls, one after the other.
struct CardStep {
  double seconds = 0;  // sim::simulate of one decode step at this context
  double watts = 0;    // perf::predict's board power while decoding at this context
};
using CardModel = std::function<CardStep(int context)>;
// The card model of `design` (which names its device) running `config`: each context
// simulated once, then cached (thread-safe). Throws fpgallm::InputError(design_source, ...)
// when the design has no device or the simulator refuses it.
CardModel card_model(const model::Config& config, const arch::Design& design, const std::string& design_source);

struct Options {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  std::string model_name;
  int max_batch = 8;               // sequences per replica's running batch
  double latency_target_ms = 0;    // per-token step time the batch may grow to (0: no target)
  int max_queue = 64;              // waiting requests; more get 429
  std::size_t max_body_bytes = 1 << 20;
  double request_timeout_s = 300;
  double read_timeout_s = 5, write_timeout_s = 5;
  int kv_page_positions = 16;      // positions per KV page
  int kv_pages = 0;                // pages per replica (0: every slot's whole context)
  double watchdog_s = 10;          // a batch step longer than this fails its replica
  int scrub_every_steps = 64;      // weight checksum every N steps, before the step's tokens are delivered
  std::optional<Fault> fault;
  CardModel card;                  // empty: no card prediction
  std::string card_name;           // the design the card figures are for
  std::function<void(int port)> on_listening;
};

class Server {
 public:
  Server(Options options, const model::Config& config, Vocabulary vocab, std::vector<std::unique_ptr<Backend>> replicas);
  ~Server();
  // Binds, then serves until stop() or SIGINT/SIGTERM. Throws fpgallm::InputError("--port") when it cannot bind.
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace serve
