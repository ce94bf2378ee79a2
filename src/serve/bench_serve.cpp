#include "serve/bench_serve.hpp"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/number.hpp"

namespace serve {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr std::size_t kFailuresKept = 8;

struct Endpoint {
  std::string host;
  int port = 80;
  std::string prefix;  // path before /v1/..., without a trailing slash
};

Endpoint parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0)
    throw fpgallm::InputError(url, "the URL must start with http:// (bench-serve speaks plain HTTP)");
  std::string rest = url.substr(scheme.size());
  Endpoint e;
  const auto slash = rest.find('/');
  if (slash != std::string::npos) {
    e.prefix = rest.substr(slash);
    while (!e.prefix.empty() && e.prefix.back() == '/') e.prefix.pop_back();
    rest = rest.substr(0, slash);
  }
  std::string port;
  if (!rest.empty() && rest.front() == '[') {  // [::1]:8080
    const auto close = rest.find(']');
    if (close == std::string::npos) throw fpgallm::InputError(url, "an IPv6 address in the URL lacks its ']'");
    e.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') throw fpgallm::InputError(url, "expected ':PORT' after the IPv6 address");
      port = rest.substr(close + 2);
    }
  } else {
    const auto colon = rest.find(':');
    e.host = rest.substr(0, colon);
    if (colon != std::string::npos) port = rest.substr(colon + 1);
  }
  if (e.host.empty()) throw fpgallm::InputError(url, "the URL names no host");
  if (!port.empty() || rest.find(':') != std::string::npos) {
    const auto p = fpgallm::parse_integer(port, 1, 65535);
    if (!p) throw fpgallm::InputError(url, fmt::format("port '{}' is not 1 to 65535", port));
    e.port = static_cast<int>(*p);
  }
  return e;
}

std::unique_ptr<httplib::Client> client(const Endpoint& e, double timeout_s) {
  auto c = std::make_unique<httplib::Client>(e.host, e.port);
  c->set_connection_timeout(5, 0);
  const auto whole = static_cast<time_t>(timeout_s);
  const auto micro = static_cast<time_t>((timeout_s - std::floor(timeout_s)) * 1e6);
  c->set_read_timeout(whole, micro);
  c->set_write_timeout(whole, micro);
  return c;
}

// The fpgallm_card_* counters of a /metrics page; empty when the server has none.
std::map<std::string, double> card_counters(httplib::Client& c, const Endpoint& e) {
  std::map<std::string, double> out;
  auto res = c.Get(e.prefix + "/metrics");
  if (!res || res->status != 200) return out;
  std::istringstream in(res->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("fpgallm_card_", 0) != 0) continue;
    const auto space = line.find(' ');
    if (space == std::string::npos) continue;
    if (const auto v = fpgallm::parse_double(std::string_view(line).substr(space + 1))) out[line.substr(0, space)] = *v;
  }
  return out;
}

struct Outcome {
  bool ok = false;
  std::string failure;
  double ttft = -1, e2e = 0, per_token = -1;
  std::int64_t prompt_tokens = 0, output_tokens = 0;
  Clock::time_point end;
};

// One streamed request; times from just before it is sent.
Outcome one_request(httplib::Client& c, const Endpoint& e, const LoadOptions& o, int i) {
  json body = {{"model", o.model},
               {"max_tokens", o.max_tokens},
               {"temperature", o.temperature},
               {"seed", o.seed + static_cast<std::uint64_t>(i)},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  const std::string& prompt = o.prompts[static_cast<std::size_t>(i) % o.prompts.size()];
  if (o.chat)
    body["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
  else
    body["prompt"] = prompt;

  Outcome out;
  std::string buffer, error_message;
  bool done = false;
  std::int64_t chunks = 0, usage_tokens = -1;
  Clock::time_point first, last;
  const auto start = Clock::now();
  auto on_event = [&](const std::string& event) {
    if (event.rfind("data: ", 0) != 0) return;
    const std::string data = event.substr(6);
    if (data == "[DONE]") {
      done = true;
      return;
    }
    const json j = json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      error_message = "an event that is not JSON";
      return;
    }
    if (j.contains("error") && j["error"].is_object())
      error_message = j["error"].value("message", std::string("an error event"));
    if (j.contains("usage") && j["usage"].is_object()) {
      usage_tokens = j["usage"].value("completion_tokens", std::int64_t{-1});
      out.prompt_tokens = j["usage"].value("prompt_tokens", std::int64_t{0});
    }
    bool token = j.contains("fpgallm") && j["fpgallm"].is_object() && j["fpgallm"].contains("token");
    if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
      const json& ch = j["choices"][0];
      if (ch.contains("text") && ch["text"].is_string() && !ch["text"].get<std::string>().empty()) token = true;
      if (ch.contains("delta") && ch["delta"].is_object() && ch["delta"].contains("content") &&
          ch["delta"]["content"].is_string() && !ch["delta"]["content"].get<std::string>().empty())
        token = true;
    }
    if (!token) return;
    const auto now = Clock::now();
    if (chunks++ == 0) first = now;
    last = now;
  };
  httplib::Request req;
  req.method = "POST";
  req.path = e.prefix + (o.chat ? "/v1/chat/completions" : "/v1/completions");
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.body = body.dump();
  int status = 0;
  std::string error_body;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    if (status != 200) {
      error_body.append(data, std::min<std::size_t>(n, 4096));
      return true;
    }
    buffer.append(data, n);
    for (std::size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      on_event(buffer.substr(0, end));
      buffer.erase(0, end + 2);
    }
    return true;
  };
  httplib::Result res = c.send(req);
  out.end = Clock::now();
  out.e2e = std::chrono::duration<double>(out.end - start).count();
  if (!res) {
    out.failure = fmt::format("request {}: {}", i, httplib::to_string(res.error()));
    return out;
  }
  if (status != 200) {
    const json j = json::parse(error_body, nullptr, false);
    std::string message = error_body.substr(0, 200);
    if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object())
      message = j["error"].value("message", message);
    out.failure = fmt::format("request {}: HTTP {}: {}", i, status, message);
    return out;
  }
  if (!error_message.empty()) {
    out.failure = fmt::format("request {}: {}", i, error_message);
    return out;
  }
  if (!done) {
    out.failure = fmt::format("request {}: the stream ended without data: [DONE]", i);
    return out;
  }
  out.ok = true;
  out.output_tokens = usage_tokens >= 0 ? usage_tokens : chunks;
  if (chunks > 0) out.ttft = std::chrono::duration<double>(first - start).count();
  if (chunks > 0 && out.output_tokens > 1)
    out.per_token = std::chrono::duration<double>(last - first).count() / static_cast<double>(out.output_tokens - 1);
  return out;
}

double percentile(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(at));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - static_cast<double>(lo));
}

json to_json(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50}, {"p90", d.p90}, {"p99", d.p99}, {"max", d.max}};
}

}  // namespace

Distribution distribution(std::vector<double> samples) {
  Distribution d;
  if (samples.empty()) return d;
  std::sort(samples.begin(), samples.end());
  d.count = static_cast<int>(samples.size());
  double sum = 0;
  for (double s : samples) sum += s;
  d.mean = sum / static_cast<double>(samples.size());
  d.p50 = percentile(samples, 0.50);
  d.p90 = percentile(samples, 0.90);
  d.p99 = percentile(samples, 0.99);
  d.max = samples.back();
  return d;
}

LoadReport run_load(const LoadOptions& options) {
  LoadOptions o = options;
  const Endpoint e = parse_url(o.url);
  if (o.prompts.empty()) throw fpgallm::InputError("--prompts", "no prompt to send");
  auto probe = client(e, std::min(o.timeout_s, 30.0));
  auto models = probe->Get(e.prefix + "/v1/models");
  if (!models)
    throw fpgallm::InputError(o.url, fmt::format("cannot reach the server: {}", httplib::to_string(models.error())));
  if (o.model.empty()) {
    const json j = json::parse(models->body, nullptr, false);
    if (models->status != 200 || j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_array() ||
        j["data"].empty() || !j["data"][0].is_object() || !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
      throw fpgallm::InputError(o.url, "GET /v1/models names no model; give --model");
    o.model = j["data"][0]["id"].get<std::string>();
  }
  const auto card_before = card_counters(*probe, e);

  // Arrival offsets: a Poisson process at --rate, or all at once (the clients then pace
  // themselves, each sending its next request when its last one ends).
  std::vector<double> arrival(static_cast<std::size_t>(o.requests), 0.0);
  if (o.rate > 0) {
    std::mt19937_64 rng(o.seed);
    std::exponential_distribution<double> gap(o.rate);
    double t = 0;
    for (auto& a : arrival) {
      a = t;
      t += gap(rng);
    }
  }

  std::mutex mutex;
  int next = 0;
  std::vector<Outcome> outcomes;
  const auto start = Clock::now();
  std::vector<std::thread> clients;
  for (int k = 0; k < o.concurrency; ++k) {
    clients.emplace_back([&] {
      auto c = client(e, o.timeout_s);
      while (true) {
        int i = 0;
        {
          std::lock_guard lk(mutex);
          if (next >= o.requests) return;
          if (o.duration_s > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= o.duration_s) return;
          i = next++;
        }
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(arrival[static_cast<std::size_t>(i)])));
        Outcome r = one_request(*c, e, o, i);
        std::lock_guard lk(mutex);
        outcomes.push_back(std::move(r));
      }
    });
  }
  for (auto& t : clients) t.join();

  LoadReport rep;
  rep.options = o;
  rep.sent = static_cast<int>(outcomes.size());
  std::vector<double> ttft, per_token, e2e;
  Clock::time_point end = start;
  for (const auto& r : outcomes) {
    end = std::max(end, r.end);
    if (!r.ok) {
      ++rep.failed;
      if (rep.failures.size() < kFailuresKept) rep.failures.push_back(r.failure);
      continue;
    }
    ++rep.completed;
    rep.prompt_tokens += r.prompt_tokens;
    rep.output_tokens += r.output_tokens;
    if (r.ttft >= 0) ttft.push_back(r.ttft);
    if (r.per_token >= 0) per_token.push_back(r.per_token);
    e2e.push_back(r.e2e);
  }
  rep.wall_s = std::chrono::duration<double>(end - start).count();
  if (rep.wall_s > 0) {
    rep.requests_per_s = rep.completed / rep.wall_s;
    rep.output_tokens_per_s = static_cast<double>(rep.output_tokens) / rep.wall_s;
  }
  rep.ttft_s = distribution(ttft);
  rep.per_token_s = distribution(per_token);
  rep.e2e_s = distribution(e2e);

  const auto card_after = card_counters(*probe, e);
  auto delta = [&](const char* name) {
    auto a = card_after.find(name);
    auto b = card_before.find(name);
    return a == card_after.end() ? 0.0 : a->second - (b == card_before.end() ? 0.0 : b->second);
  };
  if (card_after.count("fpgallm_card_busy_seconds_total")) {
    rep.card = true;
    rep.card_busy_s = delta("fpgallm_card_busy_seconds_total");
    rep.card_joules = delta("fpgallm_card_joules_total");
    const double queries = delta("fpgallm_card_queries_total");
    rep.card_queries_per_s = rep.card_busy_s > 0 ? queries / rep.card_busy_s : 0;
    rep.card_queries_per_watt = rep.card_joules > 0 ? queries / rep.card_joules : 0;
  }
  return rep;
}

void to_json(json& j, const LoadReport& r) {
  const LoadOptions& o = r.options;
  j = {{"url", o.url},
       {"model", o.model},
       {"endpoint", o.chat ? "/v1/chat/completions" : "/v1/completions"},
       {"concurrency", o.concurrency},
       {"rate", o.rate},
       {"max_tokens", o.max_tokens},
       {"temperature", o.temperature},
       {"requests", o.requests},
       {"sent", r.sent},
       {"completed", r.completed},
       {"failed", r.failed},
       {"failures", r.failures},
       {"wall_seconds", r.wall_s},
       {"prompt_tokens", r.prompt_tokens},
       {"output_tokens", r.output_tokens},
       {"requests_per_second", r.requests_per_s},
       {"output_tokens_per_second", r.output_tokens_per_s},
       {"time_to_first_token_seconds", to_json(r.ttft_s)},
       {"time_per_output_token_seconds", to_json(r.per_token_s)},
       {"request_seconds", to_json(r.e2e_s)}};
  if (r.card)
    j["card"] = {{"busy_seconds", r.card_busy_s},
                 {"joules", r.card_joules},
                 {"queries_per_second", r.card_queries_per_s},
                 {"queries_per_watt", r.card_queries_per_watt},
                 {"source", "the server's --predict-card counters in /metrics, before and after the run"}};
}

std::string to_text(const LoadReport& r) {
  const LoadOptions& o = r.options;
  std::string s = fmt::format("bench-serve {} (model {}, {}): {} client(s){}, {} request(s) of up to {} tokens at "
                              "temperature {}\n",
                              o.url, o.model, o.chat ? "chat" : "completions", o.concurrency,
                              o.rate > 0 ? fmt::format(", Poisson arrivals at {} requests/s", o.rate) : "", r.sent,
                              o.max_tokens, o.temperature);
  s += fmt::format("  {} completed, {} failed in {:.2f} s\n", r.completed, r.failed, r.wall_s);
  s += fmt::format("  {:<28} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "latency (ms)", "mean", "p50", "p90", "p99", "max");
  auto row = [&](const char* name, const Distribution& d) {
    s += fmt::format("  {:<28} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f}\n", name, d.mean * 1e3, d.p50 * 1e3,
                     d.p90 * 1e3, d.p99 * 1e3, d.max * 1e3);
  };
  row("time to first token", r.ttft_s);
  row("time per output token", r.per_token_s);
  row("end to end", r.e2e_s);
  s += fmt::format("  throughput: {:.2f} requests/s, {:.1f} output tokens/s ({} prompt, {} output tokens)\n",
                   r.requests_per_s, r.output_tokens_per_s, r.prompt_tokens, r.output_tokens);
  if (r.card)
    s += fmt::format("  card (the server's --predict-card): {:.1f} queries/s of card time, {:.2f} queries/J (queries/s "
                     "per W), {:.4f} s busy, {:.4f} J\n",
                     r.card_queries_per_s, r.card_queries_per_watt, r.card_busy_s, r.card_joules);
  for (const auto& f : r.failures) s += "  failure: " + f + "\n";
  return s;
}

}  // namespace serve
