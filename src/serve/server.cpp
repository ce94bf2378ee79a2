// The HTTP side of serve::Server: OpenAI's request and response shapes over cpp-httplib.
#include <httplib.h>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <csignal>
#include <cmath>
#include <ctime>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "serve/scheduler.hpp"
#include "serve/serve.hpp"
#include "util/error.hpp"

namespace serve {

namespace {

using nlohmann::json;

constexpr int kMaxStopStrings = 4;        // OpenAI's limit
constexpr std::size_t kMaxStopBytes = 256;

// A request OpenAI's API would refuse: status, message, the field, a code.
struct BadRequest {
  int status;
  std::string message, param, code;
};

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  const char* type = status == 429 ? "rate_limit_exceeded"
                     : status >= 500 ? "server_error"
                     : status == 404 ? "not_found_error"
                                     : "invalid_request_error";
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

// What the generation endpoints read from the body, checked.
struct Parsed {
  bool chat = false, stream = false;
  std::string prompt;
  std::vector<std::string> stop;
  std::optional<long long> max_tokens;
  double temperature = 1, top_p = 1;
  std::uint64_t seed = 0;
};

[[noreturn]] void bad(const std::string& param, const std::string& message, int status = 400,
                      const std::string& code = "") {
  throw BadRequest{status, message, param, code};
}

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) bad(name, fmt::format("'{}' must be a number", name));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) bad(name, fmt::format("'{}' is {}; it must be between {} and {}", name, x, lo, hi));
  return x;
}

Parsed parse_generation(const json& body, bool chat, const std::string& model_name) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  Parsed p;
  p.chat = chat;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) bad("model", "'model' must be a string");
    if (m->get<std::string>() != model_name)
      bad("model", fmt::format("The model '{}' does not exist; this server serves '{}'", m->get<std::string>(), model_name),
          404, "model_not_found");
  }
  if (const json* s = field(body, "stream")) {
    if (!s->is_boolean()) bad("stream", "'stream' must be a boolean");
    p.stream = s->get<bool>();
  }
  if (const json* n = field(body, "n")) {
    if (!n->is_number_integer() || n->get<long long>() != 1) bad("n", "only n=1 is supported");
  }
  if (chat) {
    const json* msgs = field(body, "messages");
    if (!msgs) bad("messages", "'messages' is required");
    if (!msgs->is_array() || msgs->empty()) bad("messages", "'messages' must be a non-empty array");
    for (std::size_t i = 0; i < msgs->size(); ++i) {
      const json& m = (*msgs)[i];
      const std::string where = fmt::format("messages[{}]", i);
      if (!m.is_object()) bad(where, where + " must be an object");
      const json* role = field(m, "role");
      const json* content = field(m, "content");
      if (!role || !role->is_string()) bad(where + ".role", where + ".role must be a string");
      const std::string r = role->get<std::string>();
      if (r != "system" && r != "user" && r != "assistant")
        bad(where + ".role", fmt::format("{}.role is '{}'; it must be system, user or assistant", where, r));
      if (!content || !content->is_string()) bad(where + ".content", where + ".content must be a string");
    }
    // serve.cpp's chat_prompt puts these into the vocabulary's template.
    p.prompt = msgs->dump();
  } else {
    const json* pr = field(body, "prompt");
    if (!pr) bad("prompt", "'prompt' is required");
    if (pr->is_array() && pr->size() == 1 && (*pr)[0].is_string())
      p.prompt = (*pr)[0].get<std::string>();
    else if (pr->is_string())
      p.prompt = pr->get<std::string>();
    else
      bad("prompt", "'prompt' must be a string (or an array of one string)");
  }
  const char* max_name = chat && field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (const json* mt = field(body, max_name)) {
    if (!mt->is_number_integer()) bad(max_name, fmt::format("'{}' must be an integer", max_name));
    const long long v = mt->is_number_unsigned() && mt->get<unsigned long long>() > (1ull << 62)
                            ? (1ll << 62)
                            : mt->get<long long>();
    if (v < 1) bad(max_name, fmt::format("'{}' is {}; it must be at least 1", max_name, v));
    p.max_tokens = v;
  }
  p.temperature = number(body, "temperature", 1.0, 0.0, 2.0);
  p.top_p = number(body, "top_p", 1.0, 0.0, 1.0);
  if (const json* s = field(body, "seed")) {
    if (!s->is_number_integer() || (s->is_number_integer() && !s->is_number_unsigned() && s->get<long long>() < 0))
      bad("seed", "'seed' must be a non-negative integer");
    p.seed = s->get<std::uint64_t>();
  }
  if (const json* st = field(body, "stop")) {
    auto one = [&](const json& s) {
      if (!s.is_string()) bad("stop", "'stop' must be a string or an array of strings");
      const std::string v = s.get<std::string>();
      if (v.empty() || v.size() > kMaxStopBytes)
        bad("stop", fmt::format("each stop string must be 1 to {} bytes", kMaxStopBytes));
      p.stop.push_back(v);
    };
    if (st->is_array()) {
      if (st->size() > static_cast<std::size_t>(kMaxStopStrings))
        bad("stop", fmt::format("'stop' has {} entries; at most {} are allowed", st->size(), kMaxStopStrings));
      for (auto& s : *st) one(s);
    } else {
      one(*st);
    }
  }
  return p;
}

}  // namespace

Fault parse_fault(const std::string& spec) {
  const auto a = spec.find(':');
  const auto b = a == std::string::npos ? a : spec.find(':', a + 1);
  Fault f;
  try {
    if (b == std::string::npos) throw std::invalid_argument("");
    std::size_t used = 0;
    f.replica = std::stoi(spec.substr(0, a), &used);
    if (used != a) throw std::invalid_argument("");
    f.kind = spec.substr(a + 1, b - a - 1);
    f.steps = std::stol(spec.substr(b + 1), &used);
    if (used != spec.size() - b - 1) throw std::invalid_argument("");
  } catch (const std::exception&) {
    throw fpgallm::InputError("--inject-fault", fmt::format("'{}' is not REPLICA:KIND:STEP (e.g. 1:crash:20)", spec));
  }
  if (f.kind != "crash" && f.kind != "hang" && f.kind != "flip")
    throw fpgallm::InputError("--inject-fault", fmt::format("kind '{}' is not crash, hang or flip", f.kind));
  if (f.replica < 0 || f.steps < 0)
    throw fpgallm::InputError("--inject-fault", "the replica and the step are non-negative");
  return f;
}

struct Server::Impl {
  Options options;
  model::Config config;
  Vocabulary vocab;
  Scheduler scheduler;
  httplib::Server http;
  std::atomic<std::uint64_t> next_id{1};
  std::mt19937_64 seeds{std::random_device{}()};
  std::mutex seed_mutex;

  Impl(Options o, const model::Config& c, Vocabulary v, std::vector<std::unique_ptr<Backend>> replicas)
      : options(std::move(o)), config(c), vocab(v), scheduler(options, c, v, std::move(replicas)) {}

  void reply(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(dump(body), "application/json");
    scheduler.count_response(status);
  }

  // The prompt text of a chat request: the vocabulary's chat template around the one user
  // turn (and system turn), as `run --chat`; a vocabulary without one (llama2.c's) reads the
  // turns' contents one per line.
  std::string chat_text(const std::string& messages_json) {
    const json msgs = json::parse(messages_json);
    std::string system, user, plain;
    int users = 0;
    for (auto& m : msgs) {
      const std::string role = m["role"], content = m["content"];
      plain += (plain.empty() ? "" : "\n") + content;
      if (role == "system") system += content;
      if (role == "user") {
        user = content;
        ++users;
      }
    }
    if (!vocab.bpe) return plain;
    const std::string templated = vocab.bpe->chat_prompt(user, system);
    if (templated.empty()) return plain;
    if (users != 1 || msgs.size() > (system.empty() ? 1u : 2u))
      bad("messages", "the chat template takes one user message (and an optional system message before it)");
    return templated;
  }

  std::shared_ptr<Request> make_request(const Parsed& p) {
    std::vector<int> tokens;
    if (vocab.sentencepiece) {
      tokens = vocab.sentencepiece->encode(p.chat ? chat_text(p.prompt) : p.prompt, true, false);
    } else {
      const bool templated = p.chat && !vocab.bpe->chat_prompt("").empty();
      tokens = vocab.bpe->encode(p.chat ? chat_text(p.prompt) : p.prompt, true, templated);
      if (tokens.empty()) bad(p.chat ? "messages" : "prompt", "the prompt encodes to no tokens");
    }
    const int prompt_tokens = static_cast<int>(tokens.size());
    // llama2.c's loop samples at the last position as well (engine/generate.cpp).
    const int limit = config.seq_len - prompt_tokens + (vocab.sentencepiece ? 1 : 0);
    if (limit < 1)
      bad(p.chat ? "messages" : "prompt",
          fmt::format("This model's maximum context length is {} tokens; the prompt is {} tokens", config.seq_len,
                      prompt_tokens),
          400, "context_length_exceeded");
    if (p.max_tokens && *p.max_tokens > limit)
      bad("max_tokens",
          fmt::format("This model's maximum context length is {} tokens; the prompt is {} tokens, so max_tokens is at "
                      "most {} (it is {})",
                      config.seq_len, prompt_tokens, limit, *p.max_tokens),
          400, "context_length_exceeded");
    const int max_tokens = p.max_tokens ? static_cast<int>(*p.max_tokens) : p.chat ? limit : std::min(16, limit);
    std::uint64_t seed = p.seed;
    if (seed == 0) {
      std::lock_guard lk(seed_mutex);
      while (seed == 0) seed = seeds();
    }
    engine::Sampler sampler(config.vocab_size, static_cast<float>(p.temperature), static_cast<float>(p.top_p), seed);
    auto r = std::make_shared<Request>(std::move(tokens), max_tokens, p.stop, sampler, options.request_timeout_s);
    r->id = next_id++;
    return r;
  }

  json usage(const Request& r) {
    return {{"prompt_tokens", r.prompt_tokens},
            {"completion_tokens", r.generated()},
            {"total_tokens", static_cast<int>(r.tokens.size())}};
  }

  json extra(const Request& r) {
    json j = {{"tokens", std::vector<int>(r.tokens.begin() + r.prompt_tokens, r.tokens.end())},
              {"replica", r.replica},
              {"retries", r.retries}};
    if (scheduler.predicts_card())
      j["card"] = {{"design", scheduler.card_name()}, {"seconds", r.card_seconds}, {"joules", r.card_joules}};
    return j;
  }

  json chunk(const Request& r, bool chat, const std::string& text, const json& finish_reason) {
    json choice = {{"index", 0}, {"finish_reason", finish_reason}};
    if (chat)
      choice["delta"] = text.empty() && !finish_reason.is_null() ? json::object()
                                                                 : json{{"role", "assistant"}, {"content", text}};
    else
      choice.update({{"text", text}, {"logprobs", nullptr}});
    return {{"id", fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", r.id)},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", static_cast<long long>(std::time(nullptr))},
            {"model", options.model_name},
            {"choices", json::array({choice})}};
  }

  static int status_of(Finish f) {
    return f == Finish::timeout ? 504 : f == Finish::failed || f == Finish::cancelled ? 503 : 200;
  }
  static std::string message_of(Finish f) {
    return f == Finish::timeout ? "the request ran past the server's per-request timeout"
           : f == Finish::failed ? "every replica is out of service"
                                 : "the server is stopping";
  }

  void generation(const httplib::Request& req, httplib::Response& res, bool chat) {
    try {
      json body = json::parse(req.body, nullptr, false);
      if (body.is_discarded()) bad("", "the request body is not valid JSON");
      const Parsed p = parse_generation(body, chat, options.model_name);
      auto r = make_request(p);
      if (!scheduler.submit(r))
        return reply(res, 429, error_body(429, "the server's queue is full; retry later", "", "queue_full"));
      if (!p.stream) {
        std::vector<Event> events;
        Finish f = Finish::none;
        while ((f = scheduler.take(*r, events, std::chrono::milliseconds(500))) == Finish::none) {
        }
        if (status_of(f) != 200) return reply(res, status_of(f), error_body(status_of(f), message_of(f), "", to_string(f)));
        json choice = {{"index", 0}, {"finish_reason", to_string(f)}};
        if (chat)
          choice["message"] = {{"role", "assistant"}, {"content", r->text}};
        else
          choice.update({{"text", r->text}, {"logprobs", nullptr}});
        return reply(res, 200,
                     {{"id", fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", r->id)},
                      {"object", chat ? "chat.completion" : "text_completion"},
                      {"created", static_cast<long long>(std::time(nullptr))},
                      {"model", options.model_name},
                      {"choices", json::array({choice})},
                      {"usage", usage(*r)},
                      {"fpgallm", extra(*r)}});
      }
      scheduler.count_response(200);
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [this, r, chat](std::size_t, httplib::DataSink& sink) {
            std::vector<Event> events;
            const Finish f = scheduler.take(*r, events, std::chrono::milliseconds(200));
            for (auto& e : events) {
              json c = chunk(*r, chat, e.text, nullptr);
              if (e.token >= 0) c["fpgallm"] = {{"token", e.token}};
              const std::string line = "data: " + dump(c) + "\n\n";
              if (!sink.write(line.data(), line.size())) return false;
            }
            if (f == Finish::none) return sink.is_writable();
            json last = chunk(*r, chat, "", status_of(f) == 200 ? json(to_string(f)) : json(nullptr));
            last["usage"] = usage(*r);
            last["fpgallm"] = extra(*r);
            if (status_of(f) != 200) last.update(error_body(status_of(f), message_of(f), "", to_string(f)));
            const std::string tail = "data: " + dump(last) + "\n\ndata: [DONE]\n\n";
            sink.write(tail.data(), tail.size());
            sink.done();
            return true;
          },
          [this, r](bool) { scheduler.cancel(*r); });
    } catch (const BadRequest& b) {
      reply(res, b.status, error_body(b.status, b.message, b.param, b.code));
    }
  }

  void routes() {
    http.set_payload_max_length(options.max_body_bytes);
    http.set_read_timeout(static_cast<time_t>(options.read_timeout_s),
                          static_cast<time_t>((options.read_timeout_s - std::floor(options.read_timeout_s)) * 1e6));
    http.set_write_timeout(static_cast<time_t>(options.write_timeout_s),
                           static_cast<time_t>((options.write_timeout_s - std::floor(options.write_timeout_s)) * 1e6));
    http.set_keep_alive_timeout(static_cast<time_t>(std::max(1.0, options.read_timeout_s)));
    const std::size_t threads = static_cast<std::size_t>(options.max_batch) * 4 + options.max_queue + 8;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& s) { generation(q, s, false); });
    http.Post("/v1/chat/completions",
              [this](const httplib::Request& q, httplib::Response& s) { generation(q, s, true); });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& s) {
      reply(s, 200,
            {{"object", "list"},
             {"data", json::array({{{"id", options.model_name},
                                    {"object", "model"},
                                    {"created", 0},
                                    {"owned_by", "fpgallm"},
                                    {"max_model_len", config.seq_len}}})}});
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& s) {
      const bool ok = scheduler.healthy();
      reply(s, ok ? 200 : 503, {{"status", ok ? "ok" : "no replica in service"}});
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& s) {
      s.set_content(scheduler.metrics(), "text/plain; version=0.0.4");
    });
    http.set_error_handler([this](const httplib::Request& q, httplib::Response& s) {
      if (!s.body.empty()) return;
      const std::string message =
          s.status == 413 ? fmt::format("the request body is larger than the server's limit of {} bytes",
                                        options.max_body_bytes)
          : s.status == 404 ? fmt::format("no route {} {}", q.method, q.path)
                            : fmt::format("HTTP {}", s.status);
      s.set_content(dump(error_body(s.status, message, "", "")), "application/json");
      scheduler.count_response(s.status);
    });
    http.set_exception_handler([this](const httplib::Request&, httplib::Response& s, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      reply(s, 500, error_body(500, what, "", ""));
    });
  }
};

namespace {
// SIGINT and SIGTERM stop the server: blocked in every thread (before the scheduler starts
// its own), one thread waits for them (a handler may not take locks).
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}


// cpp-httplib, as Debian builds it, listens with a backlog of 5: a burst of clients
// connecting at once overflows it and some connections break. Linux lets listen() be called
// again on the listening socket with a longer backlog; this finds that socket among this
// process's descriptors by its port.
void widen_backlog(int port) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (fd <= 2) continue;
    int listening = 0;
    socklen_t len = sizeof listening;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    const int p = addr.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
                  : addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                               : -1;
    if (p == port) ::listen(fd, 1024);
  }
  closedir(d);
}

}  // namespace

Server::Server(Options options, const model::Config& config, Vocabulary vocab,
               std::vector<std::unique_ptr<Backend>> replicas) {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  impl_ = std::make_unique<Impl>(std::move(options), config, vocab, std::move(replicas));
  impl_->routes();
}

Server::~Server() = default;

void Server::stop() { impl_->http.stop(); }

void Server::run() {
  auto& o = impl_->options;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : impl_->http.bind_to_port(o.host, o.port) ? o.port : -1;
  if (port <= 0) throw fpgallm::InputError("--port", fmt::format("cannot listen on {}:{}", o.host, o.port));
  widen_backlog(port);
  const sigset_t set = stop_signals();
  std::atomic<bool> done{false};
  std::thread signals([&] {
    int sig = 0;
    sigwait(&set, &sig);
    if (!done) impl_->http.stop();
  });
  if (o.on_listening) o.on_listening(port);
  impl_->http.listen_after_bind();
  done = true;
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
}

}  // namespace serve
