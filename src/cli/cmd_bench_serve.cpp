#include <cstdio>

#include "cli/command.hpp"
#include "serve/bench_serve.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"

namespace {

struct BenchServeArgs {
  serve::LoadOptions o;
  std::string prompts;
  bool json = false;
};

// One prompt per line; empty lines are skipped.
std::vector<std::string> read_prompts(const std::string& path) {
  const std::string text = fpgallm::read_regular_file(path);
  fpgallm::require_utf8_text(text, path);
  std::vector<std::string> out;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.push_back(std::move(line));
    at = end + 1;
  }
  if (out.empty()) throw fpgallm::InputError(path, "the prompt file has no prompt (one per line)");
  return out;
}

void bench_serve(BenchServeArgs& a) {
  a.o.prompts = read_prompts(a.prompts);
  const serve::LoadReport r = serve::run_load(a.o);
  if (a.json)
    cli::print_json(r);
  else
    std::fputs(serve::to_text(r).c_str(), stdout);
}

void setup(CLI::App& root) {
  auto a = std::make_shared<BenchServeArgs>();
  auto* cmd = root.add_subcommand(
      "bench-serve", "Load an OpenAI-compatible server with streamed requests; latency percentiles and throughput");
  cmd->add_option("url", a->o.url, "The server, http://HOST:PORT (its traffic goes there only)")->required();
  cmd->add_option("--prompts", a->prompts, "Text file, one prompt per line (request i sends line i mod lines)")
      ->required();
  cmd->add_option("--model", a->o.model, "Model id (default: the first of GET /v1/models)");
  cmd->add_flag("--chat", a->o.chat, "Send chat requests (one user message) instead of completions");
  cmd->add_option("--concurrency,-c", a->o.concurrency, "Requests in flight at most")->check(CLI::Range(1, 4096));
  cmd->add_option("--rate", a->o.rate, "Requests/s, Poisson arrivals (0: each client sends its next one at once)")
      ->check(cli::between(0, 1e6));
  cmd->add_option("--requests,-n", a->o.requests, "Requests in all")->check(CLI::Range(1, 10000000));
  cmd->add_option("--duration", a->o.duration_s, "Seconds after which no request starts (0: no limit)")
      ->check(cli::between(0, 1e7));
  cmd->add_option("--max-tokens", a->o.max_tokens, "max_tokens of each request")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature,-t", a->o.temperature, "Temperature of each request")->check(cli::between(0, 2));
  cmd->add_option("--seed,-s", a->o.seed, "Request i carries seed + i; the arrival times use it too");
  cmd->add_option("--timeout", a->o.timeout_s, "Seconds a request may take")->check(cli::between(0.001, 1e6));
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { bench_serve(*a); });
}

}  // namespace

FPGALLM_COMMAND("bench-serve", setup);
