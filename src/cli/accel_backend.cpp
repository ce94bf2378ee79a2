#include "cli/accel_backend.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "arch/design.hpp"
#include "calib/calib.hpp"
#include "cli/command.hpp"
#include "engine/perplexity.hpp"
#include "mpi/dist.hpp"
#include "util/error.hpp"

namespace cli {

std::string design_help() {
  const arch::Design d;
  return fmt::format("design.json of the accelerator for --backend accel (default: a {}x{} matrix unit of {}-bit MACs at "
                     "{:.0f} MHz, {} vector lanes, one card; 4-bit weights when --quant holds int4 layers, the KV cache as --quant's plan stores it)",
                     d.matrix_unit.rows, d.matrix_unit.cols, d.matrix_unit.weight_bits, d.clock_mhz, d.vector_unit.lanes);
}

namespace {

// The card network of an mpirun job: one rank per card. Host-side broadcasts (each
// process's copy of card 0's logits) are not card traffic and are not counted.
class MpiCardLink : public engine::CardLink {
 public:
  MpiCardLink() : start_(dist::bytes_sent()) {}
  int card() const override { return dist::rank(); }
  int cards() const override { return dist::size(); }
  void allreduce_sum(std::int32_t* d, std::size_t n) override { dist::allreduce_sum(d, n); }
  void allreduce_sum(float* d, std::size_t n) override { dist::allreduce_sum(d, n); }
  void allreduce_max(float* d, std::size_t n) override { dist::allreduce_max(d, n); }
  void allgather(const float* mine, float* all, const std::vector<int>& counts) override {
    dist::allgather(mine, all, counts);
  }
  void send(const float* d, std::size_t n, int to) override { dist::send(d, n * sizeof(float), to, kTag); }
  void recv(float* d, std::size_t n, int from) override { dist::recv(d, n * sizeof(float), from, kTag); }
  void host_broadcast(float* d, std::size_t n) override {
    const std::uint64_t before = dist::bytes_sent();
    dist::broadcast(d, n * sizeof(float), 0);
    host_ += dist::bytes_sent() - before;
  }
  std::uint64_t bytes_sent() const override { return dist::bytes_sent() - start_ - host_; }

 private:
  static constexpr int kTag = 10;
  std::uint64_t start_ = 0, host_ = 0;
};

std::string rank_path(std::string path) {
  for (std::size_t p = path.find("{rank}"); p != std::string::npos; p = path.find("{rank}"))
    path.replace(p, 6, std::to_string(dist::rank()));
  return path;
}

quant::QuantModel load_checked(const model::Model& m, const std::string& qfile) {
  if (qfile.empty())
    throw fpgallm::InputError("--backend accel",
                              "the accelerator runs a quantized model: give --quant QFILE (from fpgallm quantize)");
  quant::QuantModel qm = quant::load_gguf(qfile);
  const auto &a = qm.config, &b = m.config;
  if (a.dim != b.dim || a.hidden_dim != b.hidden_dim || a.n_layers != b.n_layers || a.n_heads != b.n_heads ||
      a.n_kv_heads != b.n_kv_heads || a.vocab_size != b.vocab_size || a.seq_len != b.seq_len)
    throw fpgallm::InputError(qfile, "quantized model does not have the shape of " + m.source_path);
  return qm;
}

std::uint64_t rss_bytes() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return std::uint64_t(resident) * std::uint64_t(sysconf(_SC_PAGESIZE));
}

std::uint64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return std::uint64_t(u.ru_maxrss) * 1024;  // kilobytes on Linux
}

}  // namespace

std::unique_ptr<AccelBackend> make_accel(const model::Model& m, const std::string& qfile,
                                         const std::string& design_file) {
  if (!m.weights.rope_freq_factors.empty())
    throw fpgallm::InputError(m.source_path, "the accelerator kernels do not run RoPE scaling yet");
  auto b = std::make_unique<AccelBackend>();
  const std::string path = rank_path(design_file);
  b->design = path.empty() ? arch::Design{} : arch::load(path);
  b->design_source = path.empty() ? "default design" : path;
  const int cards = b->design.parallel.cards;
  if (cards != dist::size())
    throw fpgallm::InputError(
        "--design", fmt::format("{}: parallel.cards is {} but the job has {} rank(s) (run it with mpirun -np {})",
                                b->design_source, cards, dist::size(), cards));
  if (dist::distributed()) {
    const nlohmann::json mine = b->design;
    const auto designs = dist::allgather(mine.dump());
    for (int r = 1; r < dist::size(); ++r)
      if (designs[std::size_t(r)] != designs[0])
        throw fpgallm::InputError("--design", fmt::format("{}: rank {}'s design differs from rank 0's (one design "
                                                          "describes all the cards)", b->design_source, r));
  }
  quant::QuantModel whole = load_checked(m, qfile);
  if (path.empty()) {
    // The default design runs what the file holds: 4-bit weight operands for int4 layers,
    // the KV cache in int8 only when the plan quantizes it.
    if (std::any_of(whole.plan.layers.begin(), whole.plan.layers.end(),
                    [](const quant::LayerPlan& l) { return l.weight == quant::WeightFormat::int4; }))
      b->design.matrix_unit.weight_bits = 4;
    b->design.kv_bits = whole.plan.kv8 ? 8 : 32;
  }
  if (auto p = engine::accel_problems(whole, b->design); !p.empty()) throw fpgallm::InputError(b->design_source, p.front());
  b->whole_weight_bytes = engine::resident_weight_bytes(whole);
  if (cards == 1) {
    b->card_qm = std::move(whole);
    b->transformer = std::make_unique<engine::AccelTransformer>(m, b->card_qm, b->design);
  } else {
    engine::CardShare share;
    try {
      share = engine::card_share(whole.config, whole.plan, b->design, dist::rank());
    } catch (const fpgallm::InputError& e) {
      throw fpgallm::InputError(b->design_source, e.problem());
    }
    b->card_qm = engine::shard_model(whole, share);
    whole = quant::QuantModel{};  // release the other cards' weights
    b->link = std::make_unique<MpiCardLink>();
    b->transformer = std::make_unique<engine::AccelTransformer>(m, b->card_qm, b->design, share, b->link.get());
  }
  b->weight_bytes = engine::resident_weight_bytes(b->card_qm);
  b->replicated_weight_bytes = engine::replicated_weight_bytes(b->card_qm, b->transformer->share());
  return b;
}

nlohmann::json AccelBackend::card_report() const {
  const auto& s = transformer->share();
  const std::uint64_t sent = link ? link->bytes_sent() : 0;
  const std::uint64_t tokens = transformer->tokens_run();
  nlohmann::json mine = {{"rank", dist::rank()},
                         {"weight_bytes", weight_bytes},
                         {"replicated_weight_bytes", replicated_weight_bytes},
                         {"kv_bytes", transformer->kv_bytes()},
                         {"sent_bytes", sent},
                         {"tokens", tokens},
                         {"sent_bytes_per_token", tokens ? double(sent) / double(tokens) : 0.0},
                         {"peak_rss_bytes", peak_rss_bytes()},
                         {"rss_bytes", rss_bytes()},
                         {"layers", {s.layer_begin, s.layer_end}},
                         {"heads", s.q_heads},
                         {"kv_heads", s.kv_heads},
                         {"hidden", s.hidden},
                         {"vocab", {s.vocab_begin, s.vocab_end}}};
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : dist::allgather(mine.dump())) ranks.push_back(nlohmann::json::parse(r));
  return {{"cards", design.parallel.cards},
          {"split", arch::to_string(design.parallel.split)},
          {"whole_weight_bytes", whole_weight_bytes},
          {"ranks", ranks}};
}

void eval_accel(model::Model& m, const model::Tokenizer& tok, const std::string& text_file,
                const std::string& qfile, const std::string& design_file, bool json) {
  auto accel = make_accel(m, qfile, design_file);
  m.weights = model::Weights{};
  const std::string text = engine::read_text_file(text_file);
  const auto& qm = accel->card_qm;
  const bool calibration_text = qm.calibration_fnv1a != 0 && quant::fnv1a64(text) == qm.calibration_fnv1a;
  const auto seqs = calibration_text ? calib::split_text(tok, text, text_file).held_out
                                     : engine::tokenize_stories(tok, engine::split_stories(text));
  const bool quiet = json || dist::rank() != 0;
  cli::Progress pa("eval: accelerator tokens", quiet);
  const auto acc =
      engine::perplexity(*accel->transformer, seqs, [&](std::size_t d, std::size_t n) { pa.update(d, n); });
  pa.finish();
  const nlohmann::json cards = accel->card_report();
  if (dist::rank() != 0) return;
  // The simulated quantization of the whole model, on the host of rank 0 only.
  accel.reset();
  auto q = load_quant(m, qfile);
  cli::Progress ps("eval: simulated quantization tokens", quiet);
  const auto sim = engine::perplexity(*q->transformer, seqs, [&](std::size_t d, std::size_t n) { ps.update(d, n); });
  ps.finish();
  const double rel = (acc.perplexity - sim.perplexity) / sim.perplexity;
  if (json) {
    nlohmann::json j = {{"model", m.source_path},
                        {"quant", qfile},
                        {"design", design_file.empty() ? "default" : design_file},
                        {"text", text_file},
                        {"part", calibration_text ? "held-out" : "all"},
                        {"backend", "accel"},
                        {"perplexity", acc.perplexity},
                        {"perplexity_err", acc.perplexity_err},
                        {"nll_mean", acc.nll_mean},
                        {"simulated_perplexity", sim.perplexity},
                        {"simulated_nll_mean", sim.nll_mean},
                        {"rel_diff_vs_simulated", rel},
                        {"tokens", acc.tokens},
                        {"sequences", acc.sequences}};
    j.update(cards);
    print_json(j);
  } else {
    std::printf("%s on the accelerator (C simulation): perplexity %.6f +/- %.4f over %zu tokens (%zu stories, %s)\n",
                qfile.c_str(), acc.perplexity, acc.perplexity_err, acc.tokens, acc.sequences,
                calibration_text ? "held-out half" : "whole file");
    std::printf("simulated quantization of the same plan: %.6f; relative difference %.3g\n", sim.perplexity, rel);
  }
}

}  // namespace cli
