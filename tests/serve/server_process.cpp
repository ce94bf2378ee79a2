#include "server_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "testing.hpp"

namespace serve_test {

ServerProcess::ServerProcess(const std::string& args) {
  int out[2];
  if (pipe(out) != 0) throw std::runtime_error("pipe");
  pid_ = fork();
  if (pid_ == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    const std::string cmd = std::string("exec ") + FPGALLM_TEST_BINARY + " serve " + args + " --port 0";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const std::regex port_line("http://127\\.0\\.0\\.1:([0-9]+)");
  std::smatch m;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[512];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, static_cast<std::size_t>(n));
    if (std::regex_search(seen, m, port_line)) {
      port_ = std::stoi(m[1]);
      break;
    }
  }
  close(out[0]);
  if (port_ == 0) {
    stop();
    throw std::runtime_error("fpgallm serve " + args + " did not start: " + seen);
  }
}

int ServerProcess::stop() {
  if (pid_ <= 0) return status_;
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int st = 0;
  while (waitpid(pid_, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &st, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return status_;
}

ServerProcess::~ServerProcess() { stop(); }

httplib::Client ServerProcess::client(int timeout_s) const {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(timeout_s, 0);
  c.set_write_timeout(timeout_s, 0);
  c.set_connection_timeout(5, 0);
  return c;
}

Streamed stream(const ServerProcess& s, const std::string& path, nlohmann::json body) {
  body["stream"] = true;
  Streamed out;
  std::string buffer;
  auto c = s.client();
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    buffer.append(data, n);
    for (std::size_t e; (e = buffer.find("\n\n")) != std::string::npos;) {
      const std::string event = buffer.substr(0, e);
      buffer.erase(0, e + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string data = event.substr(6);
      if (data == "[DONE]") {
        out.done = true;
        continue;
      }
      const auto j = nlohmann::json::parse(data);
      if (j.contains("fpgallm") && j["fpgallm"].contains("token")) out.tokens.push_back(j["fpgallm"]["token"]);
      const auto& choice = j["choices"][0];
      if (choice.contains("text")) out.text += choice["text"].get<std::string>();
      if (choice.contains("delta") && choice["delta"].contains("content"))
        out.text += choice["delta"]["content"].get<std::string>();
      if (!choice["finish_reason"].is_null() || j.contains("error")) out.last = j;
    }
    return true;
  };
  auto res = c.send(req);
  out.status = res ? res->status : -1;
  return out;
}

std::vector<int> run_tokens(const std::string& model_args, const std::string& prompt, int prompt_tokens, int max_tokens,
                            double temperature, unsigned long long seed) {
  // llama2.c's loop samples at its last position too: -n P + M - 1 positions give M tokens.
  std::ostringstream cmd;
  cmd << "run " << model_args << " -i '" << prompt << "' -t " << temperature << " -p 0.9 -s " << seed << " --json -n ";
  auto r = testing_support::run_fpgallm(cmd.str() + std::to_string(prompt_tokens + max_tokens - 1));
  if (r.status != 0) throw std::runtime_error(r.err);
  const auto j = nlohmann::json::parse(r.out);
  if (j["prompt_tokens"] != prompt_tokens) throw std::runtime_error("run's prompt is " + j["prompt_tokens"].dump() + " tokens");
  std::vector<int> all = j["tokens"];
  return std::vector<int>(all.begin() + prompt_tokens, all.end());
}

}  // namespace serve_test
