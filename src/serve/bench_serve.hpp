#pragma once
// `fpgallm bench-serve URL`: a load generator for an OpenAI-compatible server (fpgallm
// serve, llama-server, vLLM). Streamed requests over a prompt file, at a fixed concurrency
// and, optionally, a Poisson request rate; latencies measured on the client side from the
// server-sent events. Its traffic goes only to the URL given.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace serve {

struct LoadOptions {
  std::string url;               // http://host:port (a path prefix is kept: http://h:p/api)
  std::vector<std::string> prompts;  // request i sends prompts[i % size]
  std::string model;             // empty: the first id of GET /v1/models
  bool chat = false;             // /v1/chat/completions with one user message
  int concurrency = 1;           // requests in flight at most
  double rate = 0;               // requests/s, Poisson arrivals; 0: each client sends its next at once
  int requests = 64;             // requests in all
  double duration_s = 0;         // no request starts after this (0: no limit)
  int max_tokens = 32;
  double temperature = 0;
  std::uint64_t seed = 1;        // request i carries seed + i; the arrival times use it too
  double timeout_s = 300;        // per request
};

// Percentiles by linear interpolation between order statistics (numpy's default).
struct Distribution {
  int count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};
Distribution distribution(std::vector<double> samples);

struct LoadReport {
  LoadOptions options;
  int sent = 0, completed = 0, failed = 0;
  std::vector<std::string> failures;  // the first few, one line each
  double wall_s = 0;                  // first request sent to last response ended
  std::int64_t prompt_tokens = 0, output_tokens = 0;
  double requests_per_s = 0, output_tokens_per_s = 0;
  Distribution ttft_s;       // request sent to its first token's event
  Distribution per_token_s;  // (end - first token) / (tokens - 1), per request with 2+ tokens
  Distribution e2e_s;        // request sent to the end of its stream
  // The server's own --predict-card figures over this run (deltas of its /metrics; absent
  // when it has none): queries per predicted card-busy second and per predicted joule.
  bool card = false;
  double card_busy_s = 0, card_joules = 0, card_queries_per_s = 0, card_queries_per_watt = 0;
};

// Throws fpgallm::InputError naming the URL when it is not http://host[:port][/path] or the
// server cannot be reached before the run; failures during the run are counted, not thrown.
LoadReport run_load(const LoadOptions& options);

void to_json(nlohmann::json& j, const LoadReport& r);
std::string to_text(const LoadReport& r);

}  // namespace serve
