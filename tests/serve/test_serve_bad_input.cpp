// Every malformed request gets a 4xx with OpenAI's JSON error shape, and the server stays
// healthy: broken JSON, wrong types, out-of-range values, a body over the limit, an unknown
// model, too many stop strings, a full queue, a timeout, a slowloris client and a client
// that leaves mid-stream.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <thread>

#include "server_process.hpp"
#include "testing.hpp"

using nlohmann::json;
using serve_test::ServerProcess;

namespace {

struct Bad {
  std::string path, body;
};

std::vector<Bad> malformed() {
  const std::string c = "/v1/completions", chat = "/v1/chat/completions";
  std::string many_stops = "{\"prompt\":\"a\",\"stop\":[";
  for (int i = 0; i < 100000; ++i) many_stops += std::string(i ? "," : "") + "\"s\"";
  many_stops += "]}";
  return {
      {c, "{"},
      {c, "not json"},
      {c, ""},
      {c, "[1,2"},
      {c, "{\"prompt\": \"a\",}"},
      {c, "\"just a string\""},
      {c, "[]"},
      {c, "42"},
      {c, "{}"},
      {c, "{\"prompt\": 5}"},
      {c, "{\"prompt\": [1, 2]}"},
      {c, "{\"prompt\": {\"a\": 1}}"},
      {c, "{\"prompt\": null}"},
      {c, "{\"prompt\": \"a\", \"max_tokens\": \"ten\"}"},
      {c, "{\"prompt\": \"a\", \"max_tokens\": 1.5}"},
      {c, "{\"prompt\": \"a\", \"max_tokens\": 0}"},
      {c, "{\"prompt\": \"a\", \"max_tokens\": -3}"},
      {c, "{\"prompt\": \"a\", \"max_tokens\": 1000000000}"},
      {c, "{\"prompt\": \"a\", \"max_tokens\": 100000000000000000000000}"},
      {c, "{\"prompt\": \"a\", \"temperature\": -0.5}"},
      {c, "{\"prompt\": \"a\", \"temperature\": \"hot\"}"},
      {c, "{\"prompt\": \"a\", \"temperature\": 1e308}"},
      {c, "{\"prompt\": \"a\", \"top_p\": 1.5}"},
      {c, "{\"prompt\": \"a\", \"top_p\": -1}"},
      {c, "{\"prompt\": \"a\", \"seed\": -1}"},
      {c, "{\"prompt\": \"a\", \"seed\": \"x\"}"},
      {c, "{\"prompt\": \"a\", \"seed\": 0.5}"},
      {c, "{\"prompt\": \"a\", \"stop\": 3}"},
      {c, "{\"prompt\": \"a\", \"stop\": [\"\"]}"},
      {c, "{\"prompt\": \"a\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}"},
      {c, "{\"prompt\": \"a\", \"stop\": [1]}"},
      {c, "{\"prompt\": \"a\", \"stop\": \"" + std::string(300, 'x') + "\"}"},
      {c, many_stops},
      {c, "{\"prompt\": \"a\", \"n\": 2}"},
      {c, "{\"prompt\": \"a\", \"stream\": \"yes\"}"},
      {c, "{\"prompt\": \"a\", \"model\": \"gpt-4\"}"},
      {c, "{\"prompt\": \"a\", \"model\": 7}"},
      {c, "{\"prompt\": \"" + std::string(5000, 'a') + " " + std::string(5000, 'b') + "\"}"},  // past the context
      {chat, "{}"},
      {chat, "{\"messages\": []}"},
      {chat, "{\"messages\": \"hi\"}"},
      {chat, "{\"messages\": [1]}"},
      {chat, "{\"messages\": [{\"role\": \"user\"}]}"},
      {chat, "{\"messages\": [{\"role\": \"wizard\", \"content\": \"hi\"}]}"},
      {chat, "{\"messages\": [{\"role\": \"user\", \"content\": 3}]}"},
      {chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 1000000000}"},
      {chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"temperature\": -1}"},
      {"/v1/nothing", "{}"},
      {c, std::string(10 << 20, ' ')},  // a 10 MB body
  };
}

int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Seconds until the server closes `fd` (reads until EOF), at most `limit`.
double seconds_until_closed(int fd, double limit) {
  const auto start = std::chrono::steady_clock::now();
  char buf[4096];
  while (true) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (t > limit) return t;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    if (read(fd, buf, sizeof buf) <= 0) return t;
  }
}

double metric(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\n" + name + " ([0-9.e+-]+)\n"))) return -1;
  return std::stod(m[1]);
}

void expect_error_json(int status, const std::string& body, const std::string& what) {
  EXPECT_GE(status, 400) << what;
  EXPECT_LT(status, 500) << what;
  const json j = json::parse(body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << what << ": " << body.substr(0, 200);
  ASSERT_TRUE(j.contains("error")) << what;
  EXPECT_FALSE(j["error"]["message"].get<std::string>().empty()) << what;
  EXPECT_TRUE(j["error"].contains("type") && j["error"].contains("param") && j["error"].contains("code")) << what;
}

}  // namespace

TEST(ServeBadInput, FortyNineMalformedRequestsGetJsonErrorsAndTheServerStaysHealthy) {
  ServerProcess s(testing_support::stories260k() + " --read-timeout 1");
  const auto bad = malformed();
  ASSERT_GE(bad.size(), 40u);
  auto c = s.client();
  for (const auto& b : bad) {
    auto r = c.Post(b.path, b.body, "application/json");
    const std::string what = b.path + " " + b.body.substr(0, 80);
    ASSERT_TRUE(r) << what << ": no response";
    expect_error_json(r->status, r->body, what);
  }
  // The readable messages name the problem.
  auto r = c.Post("/v1/completions", "{\"prompt\": \"a\", \"max_tokens\": 1000000000}", "application/json");
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("maximum context length is 512"),
            std::string::npos);
  EXPECT_EQ(c.Post("/v1/completions", "{\"prompt\": \"a\", \"model\": \"gpt-4\"}", "application/json")->status, 404);
  EXPECT_EQ(c.Post("/v1/completions", std::string(10 << 20, ' '), "application/json")->status, 413);

  // A slowloris client (half a request line, then silence) is cut off by the read timeout,
  // and meanwhile the server answers others.
  std::vector<int> slow;
  for (int i = 0; i < 4; ++i) {
    const int fd = connect_loopback(s.port());
    ASSERT_GE(fd, 0);
    const std::string part = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le";
    ASSERT_EQ(write(fd, part.data(), part.size()), static_cast<ssize_t>(part.size()));
    slow.push_back(fd);
  }
  EXPECT_EQ(c.Get("/health")->status, 200);
  for (int fd : slow) {
    EXPECT_LT(seconds_until_closed(fd, 10), 5) << "a silent client holds its connection";
    close(fd);
  }

  // A client that leaves mid-stream: its generation stops and its slot is freed.
  {
    const int fd = connect_loopback(s.port());
    const std::string body = "{\"prompt\": \"Once\", \"max_tokens\": 500, \"stream\": true, \"temperature\": 0}";
    const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
    char buf[256];
    ASSERT_GT(read(fd, buf, sizeof buf), 0);  // the stream began
    close(fd);
  }
  double batch = -1, tokens = -1;
  for (int i = 0; i < 100; ++i) {
    const std::string m = c.Get("/metrics")->body;
    batch = metric(m, "fpgallm_batch_size");
    tokens = metric(m, "fpgallm_generated_tokens_total");
    if (batch == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(batch, 0) << "the left stream still runs";
  EXPECT_LT(tokens, 500) << "the left stream ran to its end";

  // Still healthy, and still right.
  EXPECT_EQ(c.Get("/health")->status, 200);
  auto ok = c.Post("/v1/completions", "{\"prompt\": \"Once upon a time\", \"max_tokens\": 4, \"temperature\": 0}",
                   "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body)["usage"]["completion_tokens"], 4);
  const std::string m = c.Get("/metrics")->body;
  EXPECT_EQ(metric(m, "fpgallm_kv_pages_used"), 0);
  EXPECT_EQ(s.stop(), 0) << "the server did not stop cleanly";
}

TEST(ServeBadInput, AFullQueueGets429AndASlowRequestTimesOut) {
  // Replica 0 hangs at its first step (the watchdog is far away): one request holds the only
  // slot, one waits in the queue of one, the next is refused; both time out.
  ServerProcess s(testing_support::stories260k() +
                  " --max-batch 1 --max-queue 1 --request-timeout 1 --watchdog 600 --inject-fault 0:hang:0");
  const std::string body = "{\"prompt\": \"a\", \"max_tokens\": 4}";
  std::vector<int> statuses(2, 0);
  std::vector<std::string> bodies(2);
  std::vector<std::thread> held;
  for (int i = 0; i < 2; ++i) {
    held.emplace_back([&, i] {
      auto r = s.client().Post("/v1/completions", body, "application/json");
      if (r) {
        statuses[std::size_t(i)] = r->status;
        bodies[std::size_t(i)] = r->body;
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
  }
  auto r = s.client().Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  expect_error_json(r->status, r->body, "queue full");
  for (auto& t : held) t.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(statuses[std::size_t(i)], 504);
    EXPECT_NE(bodies[std::size_t(i)].find("timeout"), std::string::npos);
  }
}
