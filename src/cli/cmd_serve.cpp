#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "arch/design.hpp"
#include "calib/simulated.hpp"
#include "cli/accel_backend.hpp"
#include "cli/command.hpp"
#include "cli/quant_eval.hpp"
#include "model/model.hpp"
#include "quant/quant.hpp"
#include "serve/serve.hpp"
#include "util/error.hpp"

namespace {

struct ServeArgs {
  std::string model, quant, backend = "ref", design, model_name, fault;
  serve::Options o;
  int replicas = 1;
  bool predict_card = false;
};

template <class T>
void add_bytes(std::vector<std::span<std::byte>>& out, std::vector<T>& v) {
  if (!v.empty()) out.push_back(std::as_writable_bytes(std::span(v)));
}

std::vector<std::span<std::byte>> weight_bytes(model::Weights& w) {
  std::vector<std::span<std::byte>> out;
  add_bytes(out, w.token_embedding);
  for (auto& l : w.layers)
    for (auto* v : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w1, &l.w2, &l.w3}) add_bytes(out, *v);
  add_bytes(out, w.final_norm);
  add_bytes(out, w.classifier);
  return out;
}

std::vector<std::span<std::byte>> weight_bytes(quant::QuantModel& qm) {
  std::vector<std::span<std::byte>> out;
  for (auto& l : qm.linears) {
    add_bytes(out, l.int8.q);
    add_bytes(out, l.int8.scale);
    add_bytes(out, l.int4.packed);
    add_bytes(out, l.int4.scale);
    add_bytes(out, l.f32);
    add_bytes(out, l.f16);
  }
  add_bytes(out, qm.token_embedding);
  return out;
}

// One replica: its own copy of the weights (so that a fault in one leaves the others
// intact) and a new engine transformer, with its own KV cache, per sequence.
std::unique_ptr<serve::Backend> make_replica(const ServeArgs& a, const std::string& qfile) {
  auto m = std::make_shared<model::Model>(model::load(a.model));
  const model::Config& c = m->config;
  const std::uint64_t fp32_kv = std::uint64_t(c.n_layers) * std::uint64_t(c.kv_dim()) * 2 * sizeof(float);
  if (a.backend == "accel") {
    std::shared_ptr<cli::AccelBackend> accel = cli::make_accel(*m, qfile, a.design);
    if (accel->design.parallel.cards != 1) throw fpgallm::InputError("--design", "serve runs one-card designs");
    // m keeps its fp32 weights: each new AccelTransformer's base Transformer checks them.
    const std::uint64_t kv = accel->transformer->kv_bytes() / std::uint64_t(c.seq_len);
    auto owner = std::make_shared<std::pair<std::shared_ptr<model::Model>, std::shared_ptr<cli::AccelBackend>>>(m, accel);
    return serve::single_sequence_backend(
        [m, accel] { return std::make_unique<engine::AccelTransformer>(*m, accel->card_qm, accel->design); },
        weight_bytes(accel->card_qm), kv, owner);
  }
  if (!qfile.empty()) {
    std::shared_ptr<cli::LoadedQuant> q = cli::load_quant(*m, qfile);
    auto owner = std::make_shared<std::pair<std::shared_ptr<model::Model>, std::shared_ptr<cli::LoadedQuant>>>(m, q);
    auto spans = weight_bytes(q->base.weights);
    for (auto s : weight_bytes(q->qm)) spans.push_back(s);
    return serve::single_sequence_backend(
        [q] { return std::make_unique<calib::SimulatedTransformer>(q->base, q->qm.plan, q->qm.linears); }, spans,
        fp32_kv, owner);
  }
  return serve::single_sequence_backend([m] { return std::make_unique<engine::Transformer>(*m); },
                                        weight_bytes(m->weights), fp32_kv, m);
}

void run(ServeArgs& a) {
  if (a.backend != "accel" && !a.design.empty() && !a.predict_card)
    throw fpgallm::InputError("--design", "a design is run by --backend accel or predicted by --predict-card");
  if (a.predict_card && a.design.empty())
    throw fpgallm::InputError("--predict-card", "give --design DESIGN.json (from fpgallm plan or deploy) for the card");
  if (a.o.host != "127.0.0.1" && a.o.host != "localhost" && a.o.host != "::1")
    std::fprintf(stderr, "serve: listening on %s, beyond this machine: the server has no authentication\n",
                 a.o.host.c_str());
  if (!a.fault.empty()) {
    a.o.fault = serve::parse_fault(a.fault);
    if (a.o.fault->replica >= a.replicas)
      throw fpgallm::InputError("--inject-fault", fmt::format("replica {} does not exist (--replicas {})",
                                                              a.o.fault->replica, a.replicas));
  }
  const std::string qfile = a.quant.empty() && quant::is_quantized_gguf(a.model) ? a.model : a.quant;
  model::Model vocab_model = model::load(a.model);
  std::optional<model::Tokenizer> tok;
  serve::Vocabulary vocab;
  if (vocab_model.bpe_tokenizer) {
    vocab.bpe = vocab_model.bpe_tokenizer.get();
  } else {
    tok = model::tokenizer_for(vocab_model, "");
    vocab.sentencepiece = &*tok;
  }
  std::vector<std::unique_ptr<serve::Backend>> replicas;
  for (int i = 0; i < a.replicas; ++i) replicas.push_back(make_replica(a, qfile));
  if (a.predict_card) {
    a.o.card = serve::card_model(vocab_model.config, arch::load(a.design), a.design);
    a.o.card_name = a.design;
  }
  vocab_model.weights = model::Weights{};
  a.o.model_name = a.model_name.empty() ? std::filesystem::path(a.model).stem().string() : a.model_name;
  a.o.on_listening = [&](int port) {
    std::printf("serve: %s on http://%s:%d (%d replica(s), batch up to %d, backend %s)\n", a.o.model_name.c_str(),
                a.o.host.c_str(), port, a.replicas, a.o.max_batch, a.backend.c_str());
    std::fflush(stdout);
  };
  serve::Server server(a.o, vocab_model.config, vocab, std::move(replicas));
  server.run();
}

void setup(CLI::App& root) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = root.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API (docs/serving.md)");
  cmd->add_option("model", a->model, "Checkpoint: llama2.c .bin, .gguf, or a safetensors folder")->required();
  cmd->add_option("--quant", a->quant, "Quantized model (.gguf from fpgallm quantize)");
  cmd->add_option("--backend", a->backend, "ref: the reference engine; accel: the accelerator's kernels (needs --quant)")
      ->check(CLI::IsMember({"ref", "accel"}));
  cmd->add_option("--design", a->design, cli::design_help());
  cmd->add_option("--host", a->o.host, "Address to listen on (default 127.0.0.1, this machine only)");
  cmd->add_option("--port", a->o.port, "TCP port (0: any free port, printed on stdout)")->check(CLI::Range(0, 65535));
  cmd->add_option("--model-name", a->model_name, "Model id of the API (default: the file's stem)");
  cmd->add_option("--max-batch", a->o.max_batch, "Sequences per replica's running batch")->check(CLI::Range(1, 1024));
  cmd->add_option("--latency-target-ms", a->o.latency_target_ms,
                  "Per-token step time the batch may grow to (0: grow to --max-batch)")
      ->check(cli::kNonNegative);
  cmd->add_option("--max-queue", a->o.max_queue, "Requests waiting for a slot; more get 429")->check(CLI::Range(0, 100000));
  cmd->add_option("--max-body-bytes", a->o.max_body_bytes, "Largest request body (413 beyond)")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30));
  cmd->add_option("--request-timeout", a->o.request_timeout_s, "Seconds a request may take in all (504 beyond)")
      ->check(cli::kPositive);
  cmd->add_option("--read-timeout", a->o.read_timeout_s, "Seconds a client may leave the connection silent")
      ->check(cli::kPositive);
  cmd->add_option("--write-timeout", a->o.write_timeout_s, "Seconds a write to a client may block")->check(cli::kPositive);
  cmd->add_option("--kv-page", a->o.kv_page_positions, "Positions per KV-cache page")->check(CLI::Range(1, 65536));
  cmd->add_option("--kv-pages", a->o.kv_pages, "KV-cache pages per replica (0: every slot's whole context)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--replicas", a->replicas, "Backends, each with its own copy of the weights")->check(CLI::Range(1, 64));
  cmd->add_option("--watchdog", a->o.watchdog_s, "Seconds a batch step may take before its replica is failed")
      ->check(cli::kPositive);
  cmd->add_option("--scrub-every", a->o.scrub_every_steps,
                  "Checksum the weights every N batch steps, before the step's tokens are delivered (0: at load only)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_flag("--predict-card", a->predict_card,
                "Add the --design card's simulated time and energy to every response, and queries/s and queries/W to /metrics");
  cmd->add_option("--inject-fault", a->fault, "REPLICA:KIND:STEP, KIND crash|hang|flip: make a replica fail (tests)");
  cmd->callback([a] { run(*a); });
}

}  // namespace

FPGALLM_COMMAND("serve", setup);
