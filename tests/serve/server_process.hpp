#pragma once
// `fpgallm serve` as a child process on a free loopback port, and small HTTP helpers.
#include <httplib.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace serve_test {

class ServerProcess {
 public:
  // Starts `fpgallm serve <args> --port 0` and waits (at most 60 s) for the line naming its port.
  explicit ServerProcess(const std::string& args);
  ~ServerProcess();  // SIGTERM, then waits (SIGKILL after 20 s)
  int port() const { return port_; }
  httplib::Client client(int timeout_s = 60) const;
  // Stops the server; its exit status (0 when it stopped cleanly on SIGTERM).
  int stop();

 private:
  int pid_ = -1, port_ = 0, status_ = -1;
};

struct Streamed {
  int status = 0;
  std::vector<int> tokens;        // the "fpgallm.token" of each chunk
  std::string text;               // the chunks' text concatenated
  nlohmann::json last;            // the chunk with the finish_reason
  bool done = false;              // "data: [DONE]" arrived
};
// POSTs `body` (with "stream": true) to `path` and reads the server-sent events.
Streamed stream(const ServerProcess& s, const std::string& path, nlohmann::json body);

// Generated token ids of `fpgallm run MODEL_ARGS -i PROMPT -t TEMP -p 0.9 -s SEED` for `max_tokens`
// tokens after a prompt of `prompt_tokens` (checked against run's).
std::vector<int> run_tokens(const std::string& model_args, const std::string& prompt, int prompt_tokens, int max_tokens,
                            double temperature, unsigned long long seed);

}  // namespace serve_test
