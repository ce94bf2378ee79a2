// `mpirun -np N fpgallm run|eval --backend accel` with design.parallel = {N, tensor|pipeline}
// against the same command on one process: the same greedy tokens and the same perplexity
// (bit-exact int8 arithmetic, so equal doubles), each rank's shard of the weights and KV
// cache, and a failing rank (bad per-rank input, killed process) ending the whole job.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "arch/design.hpp"
#include "model/model.hpp"
#include "mpi_launch.hpp"
#include "quant/quant.hpp"
#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Files shared by the cases (each ctest case is its own process): built once under the
// build folder, renamed into place so parallel cases never see half a file.
std::string fixtures() {
  static const std::string dir = [] {
    const std::string d = fs::absolute("mpi_fixtures").string();
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

template <class Make>
std::string fixture(const std::string& name, Make make) {
  const std::string path = fixtures() + "/" + name;
  if (fs::exists(path)) return path;
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  make(tmp);
  fs::rename(tmp, path);
  return path;
}

std::string quantized(const std::string& model_path, const std::string& name) {
  return fixture(name, [&](const std::string& out) {
    const model::Model m = model::load(model_path);
    quant::save_gguf(quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w8a8, 32)), out);
  });
}

std::string design(int cards, const std::string& split) {
  return fixture("design-" + std::to_string(cards) + split + ".json", [&](const std::string& out) {
    json d = arch::Design{};  // a design file states every section (the default design's)
    if (cards > 1) d["parallel"] = {{"cards", cards}, {"split", split}};
    testing_support::write_bytes(out, d.dump());
  });
}

// A llama2.c tokenizer of 32000 pieces: tok512's, then placeholders (the synthesized
// stories42m has the 32000-token vocabulary of the real one).
std::string tok32k() {
  return fixture("tok32k.bin", [](const std::string& out) {
    const std::string src = testing_support::read_bytes(testing_support::tok512());
    const std::int32_t max_len = 8;  // "<t31999>"
    std::string dst(reinterpret_cast<const char*>(&max_len), 4);
    std::size_t off = 4;
    for (int i = 0; i < 512; ++i) {
      std::int32_t len;
      std::memcpy(&len, src.data() + off + 4, 4);
      dst += src.substr(off, 8 + std::size_t(len));
      off += 8 + std::size_t(len);
    }
    for (int i = 512; i < 32000; ++i) {
      const std::string piece = "<t" + std::to_string(i) + ">";
      const float score = -1e6f;
      const std::int32_t len = std::int32_t(piece.size());
      dst.append(reinterpret_cast<const char*>(&score), 4).append(reinterpret_cast<const char*>(&len), 4) += piece;
    }
    testing_support::write_bytes(out, dst);
  });
}

struct Model {
  std::string path, tokenizer, quant;
};

const Model& stories260k() {
  static const Model m{testing_support::stories260k(), testing_support::tok512(),
                       quantized(testing_support::stories260k(), "stories260k-w8a8.gguf")};
  return m;
}

const Model& stories42m() {
  static const Model m = [] {
    const std::string path = fixture("stories42m.gguf", [](const std::string& out) {
      auto r = testing_support::run_fpgallm("synth --preset stories42m --type q8_0 -o " + out + ".gguf", 120);
      ASSERT_EQ(r.status, 0) << r.err;
      fs::rename(out + ".gguf", out);
    });
    return Model{path, tok32k(), quantized(path, "stories42m-w8a8.gguf")};
  }();
  return m;
}

// The eval text: the first story of the bundled sample.
std::string short_text() {
  return fixture("short.txt", [](const std::string& out) {
    const std::string all = testing_support::read_bytes(testing_support::sample_text());
    std::size_t end = 0;
    end = all.find('\n') + 1;
    testing_support::write_bytes(out, all.substr(0, end));
  });
}

std::string args(const Model& m, const std::string& cmd, const std::string& design_file, std::string text = "") {
  if (text.empty()) text = short_text();
  std::string a = cmd + " " + m.path + " -z " + m.tokenizer + " --quant " + m.quant + " --backend accel --design " +
                  design_file + " --json";
  return cmd == "run" ? a + " -t 0 -n 32 -i 'Once upon a time'" : a + " --text " + text;
}

json one_process(const Model& m, const std::string& cmd) {
  auto r = testing_support::run_fpgallm(args(m, cmd, design(1, "none")), 120);
  EXPECT_EQ(r.status, 0) << r.err;
  return json::parse(r.out);
}

json ranks(const Model& m, const std::string& cmd, int n, const std::string& split) {
  auto r = mpi_launch::run(n, mpi_launch::fpgallm() + " " + args(m, cmd, design(n, split)), 120);
  EXPECT_EQ(r.status, 0) << r.err;
  return json::parse(r.out);  // rank 0 alone prints
}

// `weights_split_evenly`: the model's heads, hidden width and vocabulary divide by n (its
// split part is then 1/n per card). `with_eval`: also the perplexity (the one-process eval
// runs the fp32 simulated quantization beside the kernels: too slow for stories42m here).
void same_as_one_process(const Model& m, int n, const std::string& split, bool weights_split_evenly,
                         bool with_eval = true) {
  const json one = one_process(m, "run");
  const json got = ranks(m, "run", n, split);
  EXPECT_EQ(got["tokens"], one["tokens"]);
  EXPECT_EQ(got["text"], one["text"]);
  ASSERT_EQ(got["cards"], n);
  ASSERT_EQ(got["ranks"].size(), std::size_t(n));
  const std::uint64_t whole = one["whole_weight_bytes"];
  EXPECT_EQ(one["ranks"][0]["weight_bytes"], whole);
  std::uint64_t sum = 0, kv = 0;
  for (const auto& r : got["ranks"]) {
    const std::uint64_t w = r["weight_bytes"], rep = r["replicated_weight_bytes"];
    sum += w - rep;
    kv += std::uint64_t(r["kv_bytes"]);
    if (weights_split_evenly) {
      // The card's own share of what is split is 1/N of it (heads, hidden and vocabulary
      // divide evenly here), besides the replicated embedding and norms.
      const double share = double(w - rep) / double(whole - rep);
      EXPECT_NEAR(share, 1.0 / n, 0.02 / n) << r.dump();
    }
    EXPECT_GT(std::uint64_t(r["sent_bytes"]), 0u) << r.dump();
    EXPECT_GT(std::uint64_t(r["peak_rss_bytes"]), 0u);
  }
  const std::uint64_t rep = got["ranks"][0]["replicated_weight_bytes"];
  EXPECT_EQ(sum + rep, whole) << "every weight is on exactly one card, besides the replicated part";
  EXPECT_EQ(kv, std::uint64_t(one["ranks"][0]["kv_bytes"])) << "the KV cache is split, not copied";

  if (!with_eval) return;
  const json one_eval = one_process(m, "eval");
  const json got_eval = ranks(m, "eval", n, split);
  EXPECT_EQ(got_eval["perplexity"].get<double>(), one_eval["perplexity"].get<double>());
  EXPECT_EQ(got_eval["tokens"], one_eval["tokens"]);
}

}  // namespace

class MultiCard : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("FPGALLM_DIST_CHILD")) GTEST_SKIP();
    if (!mpi_launch::available()) GTEST_SKIP() << "built without MPI";
  }
};

TEST_F(MultiCard, Stories260kTensor2) { same_as_one_process(stories260k(), 2, "tensor", false); }
TEST_F(MultiCard, Stories260kTensor4) { same_as_one_process(stories260k(), 4, "tensor", false); }
TEST_F(MultiCard, Stories260kPipeline2) { same_as_one_process(stories260k(), 2, "pipeline", false); }
TEST_F(MultiCard, Stories260kPipeline4) { same_as_one_process(stories260k(), 4, "pipeline", false); }
TEST_F(MultiCard, Stories42mTensor2) { same_as_one_process(stories42m(), 2, "tensor", true, false); }
TEST_F(MultiCard, Stories42mTensor4) { same_as_one_process(stories42m(), 4, "tensor", true, false); }
TEST_F(MultiCard, Stories42mPipeline4) { same_as_one_process(stories42m(), 4, "pipeline", false, false); }

TEST_F(MultiCard, RankCountMustMatchTheDesign) {
  auto r = mpi_launch::run(4, mpi_launch::fpgallm() + " " + args(stories260k(), "run", design(2, "tensor")), 60);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("parallel.cards is 2 but the job has 4 rank(s)"), std::string::npos) << r.err;
  // Every rank fails the same check; the job prints rank 0's line once (mpirun adds its own
  // banner about MPI_Abort unless run with -q).
  EXPECT_EQ(mpi_launch::count(r.err, "fpgallm:"), 1) << r.err;
  EXPECT_NE(r.err.find("(rank 0 of 4)"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(MultiCard, OneRanksBadInputEndsTheJob) {
  // Rank 1 alone reads a malformed design ({rank} in the name): it must not leave rank 0
  // waiting in a collective.
  const std::string dir = testing_support::scratch_dir("mpi-bad-input");
  testing_support::write_bytes(dir + "/d0.json", testing_support::read_bytes(design(2, "tensor")));
  testing_support::write_bytes(dir + "/d1.json", "{\"parallel\": {\"cards\": 2, ");
  auto r = mpi_launch::run(2, mpi_launch::fpgallm() + " " + args(stories260k(), "run", dir + "/d{rank}.json"), 60);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_LT(r.seconds, 50);
  EXPECT_NE(r.err.find("d1.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(rank 1 of 2)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("d0.json"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(MultiCard, KilledRankEndsTheJob) {
  // A long eval on 2 ranks; rank 1's process is killed with SIGKILL once it runs.
  const std::string dir = testing_support::scratch_dir("mpi-kill");
  const std::string marker = "kill-" + std::to_string(::getpid());
  const std::string cmd = "env FPGALLM_DIST_CHILD=" + marker + " " + mpi_launch::mpiexec(2) + mpi_launch::fpgallm() +
                          " " + args(stories260k(), "eval", design(2, "tensor"), testing_support::sample_text()) + " >" + dir + "/out 2>" + dir + "/err </dev/null";
  const pid_t job = ::fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Rank 1: the process whose environment has the marker and OMPI_COMM_WORLD_RANK=1.
  pid_t victim = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (!victim && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string env;
      try {
        env = testing_support::read_bytes(e.path().string() + "/environ");
      } catch (...) {
        continue;
      }
      env.push_back('\0');
      if (env.find("FPGALLM_DIST_CHILD=" + marker + '\0') != std::string::npos &&
          env.find(std::string("OMPI_COMM_WORLD_RANK=1") + '\0') != std::string::npos) {
        const std::string comm = testing_support::read_bytes(e.path().string() + "/comm");
        if (comm.rfind("fpgallm", 0) == 0) victim = pid_t(std::stol(name));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(victim, 0) << "rank 1 never started";
  std::this_thread::sleep_for(std::chrono::seconds(2));  // into the collectives
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(job, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - killed < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (done == 0) {
    ::kill(-job, SIGKILL);
    ::waitpid(job, &status, 0);
    FAIL() << "the job hung after rank 1 was killed";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << status;
  const std::string err = testing_support::read_bytes(dir + "/err");
  EXPECT_NE(err.find("signal 9"), std::string::npos) << err;
}
