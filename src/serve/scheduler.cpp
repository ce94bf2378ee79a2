#include "serve/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "model/utf8.hpp"
#include "util/error.hpp"

namespace serve {

const char* to_string(Finish f) {
  switch (f) {
    case Finish::none: return "none";
    case Finish::stop: return "stop";
    case Finish::length: return "length";
    case Finish::timeout: return "timeout";
    case Finish::cancelled: return "cancelled";
    case Finish::failed: return "failed";
  }
  return "?";
}

Request::Request(std::vector<int> prompt, int max_tokens_, std::vector<std::string> stop_, engine::Sampler sampler_,
                 double timeout_s)
    : tokens(std::move(prompt)), max_tokens(max_tokens_), stop(std::move(stop_)), sampler(std::move(sampler_)) {
  prompt_tokens = static_cast<int>(tokens.size());
  arrived = Clock::now();
  deadline = arrived + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
}

Histogram::Histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}

void Histogram::add(double v) {
  const auto i = static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin());
  ++counts[i];
  sum += v;
  ++count;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    cumulative += counts[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count, name, sum, name, count);
}

namespace {

std::vector<double> latency_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

// FNV-1a over 64-bit words (the tail bytewise): a checksum, not a cryptographic hash.
std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t h) {
  constexpr std::uint64_t prime = 0x100000001b3ull;
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = (h ^ w) * prime;
  }
  for (; i < bytes.size(); ++i) h = (h ^ static_cast<std::uint64_t>(bytes[i])) * prime;
  return h;
}

// Bytes of `s` up to the last complete UTF-8 character (an unfinished one is kept back).
std::size_t complete_utf8_prefix(const std::string& s) {
  std::size_t n = s.size();
  for (std::size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    const std::size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return back < len ? n - back : n;
  }
  return n;
}

}  // namespace

struct Scheduler::Running {
  std::shared_ptr<Request> req;
  std::unique_ptr<Sequence> seq;
  int pos = 0;    // the position the next step runs
  int pages = 0;  // KV pages held
  // Copied under the mutex before a step, so the step needs no lock.
  int token = 0;
  bool replaying = false;
  engine::Sampler sampler{1, 0, 1, 1};
  int next = -1;
};

struct Scheduler::Replica {
  int index = 0;
  std::unique_ptr<Backend> backend;
  std::uint64_t weights_checksum = 0;
  bool healthy = true;
  std::string why;
  std::vector<std::shared_ptr<Request>> holding;
  int pages_total = 0, pages_used = 0, batch = 0, open_sequences = 0;
  long steps = 0;
  double seconds_per_sequence = 0;  // running mean of step time / batch
  std::atomic<std::int64_t> step_started_ns{0};
  std::atomic<bool> abandoned{false};
  std::thread thread;
};

Scheduler::Scheduler(const Options& o, const model::Config& config, Vocabulary vocab,
                     std::vector<std::unique_ptr<Backend>> replicas)
    : options_(o), config_(config), vocab_(vocab), ttft_(latency_buckets()), per_token_(latency_buckets()),
      e2e_(latency_buckets()) {
  const int pages_per_context = (config_.seq_len + o.kv_page_positions - 1) / o.kv_page_positions;
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    auto rep = std::make_unique<Replica>();
    rep->index = static_cast<int>(i);
    rep->backend = std::move(replicas[i]);
    rep->pages_total = o.kv_pages > 0 ? o.kv_pages : o.max_batch * pages_per_context;
    replicas_.push_back(std::move(rep));
  }
  for (auto& rep : replicas_) rep->weights_checksum = checksum(*rep);
  for (auto& rep : replicas_) rep->thread = std::thread([this, r = rep.get()] { work(*r); });
  watchdog_ = std::thread([this] { watch(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lk(mutex_);
    stopping_ = true;
    for (auto& rep : replicas_) rep->abandoned = true;
    for (auto& r : queue_) end(*r, Finish::cancelled);
    queue_.clear();
  }
  work_cv_.notify_all();
  event_cv_.notify_all();
  for (auto& rep : replicas_) rep->thread.join();
  watchdog_.join();
}

std::uint64_t Scheduler::checksum(Replica& rep) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (auto span : rep.backend->weights()) h = fnv1a(span, h);
  return h;
}

bool Scheduler::submit(const std::shared_ptr<Request>& r) {
  {
    std::lock_guard lk(mutex_);
    ++requests_;
    if (static_cast<int>(queue_.size()) >= options_.max_queue || stopping_) {
      ++rejected_;
      return false;
    }
    queue_.push_back(r);
    prompt_tokens_ += static_cast<std::uint64_t>(r->prompt_tokens);
  }
  work_cv_.notify_all();
  return true;
}

Finish Scheduler::take(Request& r, std::vector<Event>& out, std::chrono::milliseconds wait) {
  std::unique_lock lk(mutex_);
  event_cv_.wait_for(lk, wait, [&] { return !r.events.empty() || r.finish != Finish::none; });
  out.assign(std::make_move_iterator(r.events.begin()), std::make_move_iterator(r.events.end()));
  r.events.clear();
  return r.finish;
}

void Scheduler::cancel(Request& r) {
  std::lock_guard lk(mutex_);
  r.cancelled = true;
  auto it = std::find_if(queue_.begin(), queue_.end(), [&](auto& q) { return q.get() == &r; });
  if (it != queue_.end()) {
    queue_.erase(it);
    end(r, Finish::cancelled);
  }
}

bool Scheduler::healthy() {
  std::lock_guard lk(mutex_);
  return std::any_of(replicas_.begin(), replicas_.end(), [](auto& rep) { return rep->healthy; });
}

void Scheduler::count_response(int status) {
  std::lock_guard lk(mutex_);
  ++responses_[status];
}

void Scheduler::deliver(Request& r, int token, const std::string& piece, bool final) {
  r.pending_bytes += piece;
  const std::size_t complete = final ? r.pending_bytes.size() : complete_utf8_prefix(r.pending_bytes);
  r.text += model::valid_utf8(std::string_view(r.pending_bytes).substr(0, complete));
  r.pending_bytes.erase(0, complete);
  std::size_t longest = 0;
  for (auto& s : r.stop) longest = std::max(longest, s.size());
  const std::size_t from = r.emitted > longest ? r.emitted - longest : 0;
  std::size_t cut = std::string::npos;
  for (auto& s : r.stop) cut = std::min(cut, r.text.find(s, from));
  std::size_t safe = r.text.size();
  if (cut != std::string::npos) {
    r.text.resize(cut);
    safe = cut;
  } else if (!final) {
    // Keep back a tail that may be the start of a stop string.
    for (auto& s : r.stop)
      for (std::size_t k = std::min(s.size() - 1, r.text.size()); k > 0; --k)
        if (r.text.compare(r.text.size() - k, k, s, 0, k) == 0) {
          safe = std::min(safe, r.text.size() - k);
          break;
        }
  }
  safe = std::max(safe, r.emitted);
  r.events.push_back(Event{token, r.text.substr(r.emitted, safe - r.emitted)});
  r.emitted = safe;
  if (cut != std::string::npos && r.finish == Finish::none) {
    r.pending_bytes.clear();
    end(r, Finish::stop);
  }
  event_cv_.notify_all();
}

void Scheduler::end(Request& r, Finish f) {
  if (r.finish != Finish::none) return;
  if (f == Finish::stop || f == Finish::length) {
    if (!r.pending_bytes.empty() || r.emitted < r.text.size()) deliver(r, -1, "", true);
    if (r.finish != Finish::none) return;  // a stop string in the flushed tail
    ++completed_;
    e2e_.add(std::chrono::duration<double>(Clock::now() - r.arrived).count());
    if (options_.card) ++card_queries_;
  }
  r.finish = f;
  event_cv_.notify_all();
}

void Scheduler::give_back_pages(Replica& rep, Running& run) {
  rep.pages_used -= run.pages;
  run.pages = 0;
}

void Scheduler::commit(Replica& rep, Running& run, int next) {
  ++run.pos;
  if (next < 0) return;
  Request& r = *run.req;
  r.tokens.push_back(next);
  r.sampler = run.sampler;
  ++generated_tokens_;
  const auto now = Clock::now();
  if (r.first_token_s < 0) {
    r.first_token_s = std::chrono::duration<double>(now - r.arrived).count();
    ttft_.add(r.first_token_s);
  } else {
    per_token_.add(std::chrono::duration<double>(now - r.last_token_at).count());
  }
  r.last_token_at = now;
  (void)rep;
  const std::size_t n = r.tokens.size();
  if (vocab_.sentencepiece) {
    if (next == model::Tokenizer::kBos) return end(r, Finish::stop);
    deliver(r, next, vocab_.sentencepiece->printable(r.tokens[n - 2], next), false);
  } else {
    const auto& bpe = *vocab_.bpe;
    if (bpe.is_end(next) || next >= bpe.vocab_size()) return end(r, Finish::stop);
    deliver(r, next, bpe.is_special(next) ? std::string() : bpe.decode(next), false);
  }
  // llama2.c's loop samples at the last position too; a byte-level BPE loop stops once the
  // tokens fill the context (engine/generate.cpp).
  const bool context_full = vocab_.sentencepiece ? static_cast<int>(n) - 1 >= config_.seq_len
                                                 : static_cast<int>(n) >= config_.seq_len;
  if (r.generated() >= r.max_tokens || context_full) end(r, Finish::length);
}

void Scheduler::fail(Replica& rep, const std::string& why) {
  if (!rep.healthy) return;
  rep.healthy = false;
  rep.why = why;
  rep.abandoned = true;
  std::fprintf(stderr, "serve: replica %d out of service: %s\n", rep.index, why.c_str());
  for (auto it = rep.holding.rbegin(); it != rep.holding.rend(); ++it) {
    Request& r = **it;
    if (r.finish != Finish::none || r.cancelled) continue;
    ++r.retries;
    ++retries_;
    queue_.push_front(*it);
  }
  rep.holding.clear();
  rep.pages_used = rep.batch = rep.open_sequences = 0;
  if (std::none_of(replicas_.begin(), replicas_.end(), [](auto& x) { return x->healthy; })) {
    for (auto& r : queue_) end(*r, Finish::failed);
    queue_.clear();
  }
  work_cv_.notify_all();
}

void Scheduler::work(Replica& rep) {
  std::vector<Running> batch;
  std::vector<Position> positions;
  std::vector<Running*> stepping;
  std::vector<const float*> logits;
  std::vector<float> scratch(static_cast<std::size_t>(config_.vocab_size));
  const int page = options_.kv_page_positions;
  std::vector<CardStep> card_step;
  while (true) {
    stepping.clear();
    {
      std::unique_lock lk(mutex_);
      if (stopping_ || !rep.healthy) return;
      const auto now = Clock::now();
      for (auto it = batch.begin(); it != batch.end();) {
        Request& r = *it->req;
        if (r.finish == Finish::none && (r.cancelled || now > r.deadline))
          end(r, r.cancelled ? Finish::cancelled : Finish::timeout);
        if (r.finish == Finish::none) {
          ++it;
          continue;
        }
        give_back_pages(rep, *it);
        std::erase(rep.holding, it->req);
        it = batch.erase(it);
      }
      int target = options_.max_batch;
      if (options_.latency_target_ms > 0 && rep.seconds_per_sequence > 0)
        target = std::clamp(static_cast<int>(options_.latency_target_ms * 1e-3 / rep.seconds_per_sequence), 1,
                            options_.max_batch);
      while (static_cast<int>(batch.size()) < target && !queue_.empty() && rep.pages_used < rep.pages_total) {
        auto r = queue_.front();
        queue_.pop_front();
        r->replica = rep.index;
        rep.holding.push_back(r);
        batch.push_back(Running{r, nullptr});
      }
      rep.batch = static_cast<int>(batch.size());
      if (batch.empty()) {
        work_cv_.wait_for(lk, std::chrono::milliseconds(100));
        continue;
      }
      for (auto& run : batch) {
        const int need = run.pos / page + 1;
        if (need > run.pages) {
          if (rep.pages_used >= rep.pages_total) continue;  // waits for a page
          ++run.pages;
          ++rep.pages_used;
        }
        const Request& r = *run.req;
        run.token = r.tokens[static_cast<std::size_t>(run.pos)];
        run.replaying = run.pos + 1 < static_cast<int>(r.tokens.size());
        if (!run.replaying) run.sampler = r.sampler;
        stepping.push_back(&run);
      }
      if (stepping.empty()) {
        // Every sequence waits for a page: the newest that holds pages gives them back and
        // runs again later from its delivered tokens. One sequence alone that fills the pool
        // ends there, as at the end of the context.
        auto victim = std::find_if(batch.rbegin(), batch.rend(), [](const Running& r) { return r.pages > 0; });
        if (victim == batch.rend()) continue;
        give_back_pages(rep, *victim);
        std::erase(rep.holding, victim->req);
        if (std::count_if(batch.begin(), batch.end(), [](const Running& r) { return r.pages > 0; }) == 0) {
          end(*victim->req, Finish::length);
        } else {
          ++preemptions_;
          queue_.push_front(victim->req);
        }
        batch.erase(std::next(victim).base());
        continue;
      }
    }
    try {
      for (auto* run : stepping)
        if (!run->seq) {
          run->seq = rep.backend->open();
          std::lock_guard lk(mutex_);
          ++rep.open_sequences;
        }
      if (options_.fault && options_.fault->replica == rep.index && options_.fault->steps == rep.steps) {
        const std::string& kind = options_.fault->kind;
        if (kind == "crash") throw std::runtime_error("injected crash");
        if (kind == "flip") {
          auto spans = rep.backend->weights();
          spans.front()[spans.front().size() / 2] ^= std::byte{0x10};
        }
        if (kind == "hang") {
          rep.step_started_ns = Clock::now().time_since_epoch().count();
          while (!rep.abandoned) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      }
      positions.clear();
      for (auto* run : stepping) positions.push_back(Position{run->seq.get(), run->token, run->pos});
      const auto start = Clock::now();
      rep.step_started_ns = start.time_since_epoch().count();
      rep.backend->step(positions, logits);
      rep.step_started_ns = 0;
      const double step_s = std::chrono::duration<double>(Clock::now() - start).count();
      ++rep.steps;
      if (options_.scrub_every_steps > 0 && rep.steps % options_.scrub_every_steps == 0 &&
          checksum(rep) != rep.weights_checksum)
        throw std::runtime_error("weight checksum mismatch");
      for (std::size_t i = 0; i < stepping.size(); ++i) {
        Running& run = *stepping[i];
        run.next = -1;
        if (run.replaying) continue;
        std::copy(logits[i], logits[i] + config_.vocab_size, scratch.begin());
        run.next = run.sampler.sample(scratch.data());
      }
      // On the card each sequence's position is one call of the kernels at its own context,
      // the batch's calls one after the other: the step takes their sum, and each request
      // waits for all of it and pays for its own call's energy.
      card_step.clear();
      double card_seconds = 0, card_joules = 0;
      if (options_.card) {
        for (auto* run : stepping) {
          card_step.push_back(options_.card(run->pos + 1));
          card_seconds += card_step.back().seconds;
          card_joules += card_step.back().seconds * card_step.back().watts;
        }
      }
      std::lock_guard lk(mutex_);
      if (!rep.healthy) return;  // the watchdog gave this batch to another replica
      const double n = static_cast<double>(stepping.size());
      rep.seconds_per_sequence = rep.seconds_per_sequence > 0 ? 0.9 * rep.seconds_per_sequence + 0.1 * step_s / n
                                                              : step_s / n;
      card_busy_s_ += card_seconds;
      card_joules_ += card_joules;
      if (card_seconds > 0) card_watts_ = card_joules / card_seconds;
      for (std::size_t i = 0; i < stepping.size(); ++i) {
        Running* run = stepping[i];
        if (options_.card) {
          run->req->card_seconds += card_seconds;
          run->req->card_joules += card_step[i].seconds * card_step[i].watts;
        }
        if (run->req->finish == Finish::none) commit(rep, *run, run->next);
        // A sequence that ended here gives its pages back before its client hears of the
        // end, so /metrics read after a response never counts them.
        if (run->req->finish != Finish::none) give_back_pages(rep, *run);
      }
    } catch (const std::exception& e) {
      std::lock_guard lk(mutex_);
      fail(rep, e.what());
      return;
    }
  }
}

void Scheduler::watch() {
  const auto period = std::chrono::milliseconds(std::clamp(static_cast<int>(options_.watchdog_s * 250), 5, 250));
  std::unique_lock lk(mutex_);
  while (!stopping_) {
    work_cv_.wait_for(lk, period);
    const auto now = Clock::now().time_since_epoch().count();
    for (auto& rep : replicas_) {
      const std::int64_t started = rep->step_started_ns;
      if (rep->healthy && started != 0 &&
          std::chrono::duration<double>(Clock::duration(now - started)).count() > options_.watchdog_s)
        fail(*rep, fmt::format("a batch step ran past the watchdog's {} s", options_.watchdog_s));
    }
    // Requests past their deadline, waiting or running (a worker stuck in a step cannot end them).
    const auto t = Clock::now();
    for (auto& rep : replicas_)
      for (auto& r : rep->holding)
        if (t > r->deadline) end(*r, Finish::timeout);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (t > (*it)->deadline) {
        end(**it, Finish::timeout);
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

std::string Scheduler::metrics() {
  std::lock_guard lk(mutex_);
  std::string out;
  auto gauge = [&](const std::string& name, const std::string& help, const std::string& type, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, v);
  };
  out += "# HELP fpgallm_responses_total HTTP responses by status\n# TYPE fpgallm_responses_total counter\n";
  for (auto& [status, n] : responses_) out += fmt::format("fpgallm_responses_total{{status=\"{}\"}} {}\n", status, n);
  gauge("fpgallm_requests_total", "Generation requests received", "counter", static_cast<double>(requests_));
  gauge("fpgallm_requests_rejected_total", "Requests refused because the queue was full (429)", "counter",
        static_cast<double>(rejected_));
  gauge("fpgallm_requests_completed_total", "Requests that finished (stop or length)", "counter",
        static_cast<double>(completed_));
  gauge("fpgallm_retries_total", "Requests moved to another replica after theirs failed", "counter",
        static_cast<double>(retries_));
  gauge("fpgallm_preemptions_total", "Sequences that gave their KV pages back to run again later", "counter",
        static_cast<double>(preemptions_));
  gauge("fpgallm_prompt_tokens_total", "Prompt tokens of the requests queued", "counter",
        static_cast<double>(prompt_tokens_));
  gauge("fpgallm_generated_tokens_total", "Tokens sampled", "counter", static_cast<double>(generated_tokens_));
  gauge("fpgallm_queue_depth", "Requests waiting for a batch slot", "gauge", static_cast<double>(queue_.size()));
  int batch = 0, healthy = 0, pages_total = 0, pages_used = 0, open = 0;
  for (auto& rep : replicas_) {
    batch += rep->batch;
    healthy += rep->healthy;
    pages_total += rep->healthy ? rep->pages_total : 0;
    pages_used += rep->pages_used;
    open += rep->open_sequences;
  }
  gauge("fpgallm_batch_size", "Sequences in the running batches, all replicas", "gauge", batch);
  gauge("fpgallm_replicas_healthy", "Replicas in service", "gauge", healthy);
  gauge("fpgallm_replicas", "Replicas started", "gauge", static_cast<double>(replicas_.size()));
  const std::uint64_t per_position = replicas_.empty() ? 0 : replicas_[0]->backend->kv_bytes_per_position();
  gauge("fpgallm_kv_page_positions", "Positions per KV-cache page", "gauge", options_.kv_page_positions);
  gauge("fpgallm_kv_page_bytes", "Bytes of one KV-cache page", "gauge",
        static_cast<double>(per_position * static_cast<std::uint64_t>(options_.kv_page_positions)));
  gauge("fpgallm_kv_pages_total", "KV-cache pages of the replicas in service", "gauge", pages_total);
  gauge("fpgallm_kv_pages_used", "KV-cache pages held by running sequences", "gauge", pages_used);
  gauge("fpgallm_kv_allocated_bytes",
        "Bytes the engine holds for open sequences (one whole-context cache each on the single-sequence backend)",
        "gauge", static_cast<double>(per_position) * config_.seq_len * open);
  ttft_.write(out, "fpgallm_time_to_first_token_seconds", "From arrival to the first sampled token");
  per_token_.write(out, "fpgallm_time_per_output_token_seconds", "Between consecutive sampled tokens of a request");
  e2e_.write(out, "fpgallm_request_seconds", "From arrival to the finish, finished requests");
  if (options_.card) {
    gauge("fpgallm_card_predicted_watts", "Predicted board power of the card while decoding (the last batch step's, energy-weighted over its calls)",
          "gauge", card_watts_);
    gauge("fpgallm_card_busy_seconds_total", "Predicted card time of the batch steps run, all replicas (one kernel call per sequence and position)", "counter", card_busy_s_);
    gauge("fpgallm_card_joules_total", "Predicted card energy of the batch steps run", "counter", card_joules_);
    gauge("fpgallm_card_queries_total", "Requests finished, counted for the card figures", "counter",
          static_cast<double>(card_queries_));
    gauge("fpgallm_card_queries_per_second", "Finished requests per predicted card-busy second", "gauge",
          card_busy_s_ > 0 ? static_cast<double>(card_queries_) / card_busy_s_ : 0);
    gauge("fpgallm_card_queries_per_watt", "Finished requests per predicted joule (queries/s per W)", "gauge",
          card_joules_ > 0 ? static_cast<double>(card_queries_) / card_joules_ : 0);
  }
  return out;
}

}  // namespace serve
