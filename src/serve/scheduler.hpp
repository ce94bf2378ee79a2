#pragma once
// The continuous-batching scheduler behind serve::Server (internal to src/serve): a bounded
// queue of requests, one worker per replica advancing its running batch one token per step,
// a paged KV pool per replica, a watchdog, the weight scrub and retry on another replica.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/sampler.hpp"
#include "serve/serve.hpp"

namespace serve {

using Clock = std::chrono::steady_clock;

// What a worker hands the HTTP side: the text and token ids one committed token added.
struct Event {
  int token = -1;
  std::string text;
};

enum class Finish { none, stop, length, timeout, cancelled, failed };
const char* to_string(Finish f);

struct Request {
  std::uint64_t id = 0;
  std::vector<int> tokens;  // prompt followed by the generated tokens
  int prompt_tokens = 0;
  int max_tokens = 0;
  std::vector<std::string> stop;
  engine::Sampler sampler;
  Clock::time_point arrived, deadline;
  // Written by the worker holding the request, read by the HTTP thread, under Scheduler::mutex.
  std::deque<Event> events;
  std::string pending_bytes;  // bytes of an unfinished UTF-8 character
  std::string text;           // generated text so far (stop strings cut)
  std::size_t emitted = 0;    // bytes of text handed out as events
  Finish finish = Finish::none;
  bool cancelled = false;
  int retries = 0;
  int replica = -1;
  double first_token_s = -1;
  Clock::time_point last_token_at;
  double card_seconds = 0, card_joules = 0;

  Request(std::vector<int> prompt, int max_tokens, std::vector<std::string> stop, engine::Sampler sampler,
          double timeout_s);
  int generated() const { return static_cast<int>(tokens.size()) - prompt_tokens; }
};

// Prometheus histogram with fixed bucket bounds (seconds).
struct Histogram {
  std::vector<double> bounds;
  std::vector<std::uint64_t> counts;  // per bucket, plus +Inf
  double sum = 0;
  std::uint64_t count = 0;
  explicit Histogram(std::vector<double> b);
  void add(double v);
  void write(std::string& out, const std::string& name, const std::string& help) const;
};

class Scheduler {
 public:
  Scheduler(const Options& o, const model::Config& config, Vocabulary vocab,
            std::vector<std::unique_ptr<Backend>> replicas);
  ~Scheduler();

  // Queues a request; false when the queue is full.
  bool submit(const std::shared_ptr<Request>& r);
  // Waits up to `wait` for events or the finish; moves the events out. Returns the finish.
  Finish take(Request& r, std::vector<Event>& out, std::chrono::milliseconds wait);
  void cancel(Request& r);
  bool healthy();
  std::string metrics();
  void count_response(int status);
  std::string card_name() const { return options_.card_name; }
  bool predicts_card() const { return static_cast<bool>(options_.card); }

 private:
  struct Running;
  struct Replica;
  void work(Replica& rep);
  void watch();
  void fail(Replica& rep, const std::string& why);  // under mutex_
  void commit(Replica& rep, Running& run, int next);  // under mutex_
  void give_back_pages(Replica& rep, Running& run);  // under mutex_
  void deliver(Request& r, int token, const std::string& piece, bool final);  // under mutex_
  void end(Request& r, Finish f);  // under mutex_
  std::uint64_t checksum(Replica& rep);

  Options options_;
  model::Config config_;
  Vocabulary vocab_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::mutex mutex_;
  std::condition_variable work_cv_, event_cv_;
  std::deque<std::shared_ptr<Request>> queue_;
  bool stopping_ = false;
  std::thread watchdog_;
  // Metrics (under mutex_).
  std::map<int, std::uint64_t> responses_;
  std::uint64_t requests_ = 0, rejected_ = 0, retries_ = 0, generated_tokens_ = 0, prompt_tokens_ = 0,
                completed_ = 0, card_queries_ = 0, preemptions_ = 0;
  double card_busy_s_ = 0, card_joules_ = 0, card_watts_ = 0;
  Histogram ttft_, per_token_, e2e_;
};

}  // namespace serve
