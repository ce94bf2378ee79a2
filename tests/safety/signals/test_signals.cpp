// Issue 19: SIGINT at 25%, 50% and 75% of quantize, convert, synth and deploy leaves the
// folder exactly as it was (no temporary, lock or half output), or, when the command was
// already done, the complete output; two deploys to one folder: one wins, the other is
// refused with one line, and nothing else is left. Whole commands run: labelled nosan.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "../safety_support.hpp"
#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string expand(std::string s, const std::string& d) {
  for (std::size_t i = 0; (i = s.find("{d}", i)) != std::string::npos;) s.replace(i, 3, d);
  return s;
}

struct Command {
  const char* name;
  const char* args;
  const char* output;  // what a finished run leaves
  const char* remove;  // what to remove after a finished run
};

// deploy writes into folders it makes (and removes again when interrupted).
const Command kCommands[] = {
    {"quantize", "quantize {d}/model.bin --calib {d}/short.txt -z {d}/tok.bin -o {d}/q.gguf", "{d}/q.gguf", "{d}/q.gguf"},
    {"convert", "convert {d}/m15.bin -o {d}/c.gguf", "{d}/c.gguf", "{d}/c.gguf"},
    {"synth", "synth --preset stories15m -o {d}/s.bin", "{d}/s.bin", "{d}/s.bin"},
    {"deploy", "deploy {d}/model.bin --device u280 --text {d}/short.txt -z {d}/tok.bin --sample-steps 4 -o {d}/out/dep",
     "{d}/out/dep/fpgallm-manifest.json", "{d}/out"},
};

class Signals : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = safety::prepare_inputs("signals");
    // Four stories: quantize and deploy take seconds, not minutes (deploy's verification
    // runs the accelerator's C simulation over the held-out half).
    std::string text = testing_support::read_bytes(dir_ + "/text.txt"), shorter;
    for (int line = 0; line < 4 && !text.empty(); ++line) {
      const auto nl = text.find('\n');
      shorter += text.substr(0, nl + 1);
      text.erase(0, nl == std::string::npos ? text.size() : nl + 1);
    }
    testing_support::write_bytes(dir_ + "/short.txt", shorter);
    const auto r = testing_support::run_fpgallm("synth --preset stories15m -o " + dir_ + "/m15.bin", 300);
    ASSERT_EQ(r.status, 0) << r.err;
  }
  static std::string dir_;
};
std::string Signals::dir_;

TEST_F(Signals, InterruptAt25_50_75PercentLeavesNothing) {
  const std::string& d = dir_;
  for (const Command& c : kCommands) {
    const std::string args = expand(c.args, d), output = expand(c.output, d), remove = expand(c.remove, d);
    // How long a whole run takes here.
    const auto t0 = Clock::now();
    const auto full = safety::spawn_fpgallm(args, d + "/../" + std::string(c.name) + "-full");
    const int full_status = safety::wait_child(full);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    ASSERT_TRUE(WIFEXITED(full_status) && WEXITSTATUS(full_status) == 0) << args << ": " << safety::read_file(full.err);
    ASSERT_TRUE(fs::exists(output)) << output;
    fs::remove_all(remove);
    int interrupted = 0;
    for (double fraction : {0.25, 0.5, 0.75}) {
      const std::string before = safety::hash_tree(d);
      const auto child = safety::spawn_fpgallm(args, d + "/../" + std::string(c.name) + "-int");
      std::this_thread::sleep_for(std::chrono::duration<double>(fraction * seconds));
      ::kill(child.pid, SIGINT);
      const int status = safety::wait_child(child);
      if (WIFSIGNALED(status)) {
        EXPECT_EQ(WTERMSIG(status), SIGINT) << args;
        EXPECT_EQ(safety::hash_tree(d), before) << c.name << " interrupted at " << fraction << " left:\n"
                                                << safety::hash_tree(d);
        ++interrupted;
      } else {
        // Done before the signal came: then the whole output is there, and nothing else.
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << args << ": " << safety::read_file(child.err);
        EXPECT_TRUE(fs::exists(output)) << output;
        EXPECT_TRUE(safety::debris(d).empty()) << c.name << ": " << safety::debris(d).front();
        fs::remove_all(remove);
      }
    }
    EXPECT_GE(interrupted, 1) << c.name << " (" << seconds << " s) finished before every signal";
    std::printf("%s: a whole run %.2f s, %d of 3 interrupted\n", c.name, seconds, interrupted);
  }
}

TEST_F(Signals, TwoDeploysToOneFolderOneWinsNoDebris) {
  const std::string& d = dir_;
  fs::remove_all(d + "/out");
  const std::string args = expand(kCommands[3].args, d);
  const auto first = safety::spawn_fpgallm(args, d + "/../deploy-a");
  // The second starts once the first holds the folder.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!fs::exists(d + "/out/dep.fpgallm-lock") && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto second = safety::spawn_fpgallm(args, d + "/../deploy-b");
  const int a = safety::wait_child(first), b = safety::wait_child(second);
  ASSERT_TRUE(WIFEXITED(a) && WIFEXITED(b));
  EXPECT_EQ(WEXITSTATUS(a), 0) << safety::read_file(first.err);
  EXPECT_EQ(WEXITSTATUS(b), 2) << safety::read_file(second.err);
  const std::string err = safety::read_file(second.err);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find(d + "/out/dep"), std::string::npos) << err;
  EXPECT_NE(err.find("another fpgallm"), std::string::npos) << err;
  EXPECT_TRUE(fs::exists(d + "/out/dep/fpgallm-manifest.json"));
  EXPECT_TRUE(safety::debris(d).empty()) << safety::debris(d).front();
  // And a later deploy replaces the finished folder, which is fpgallm's own.
  const auto again = safety::spawn_fpgallm(args, d + "/../deploy-c");
  const int c = safety::wait_child(again);
  EXPECT_TRUE(WIFEXITED(c) && WEXITSTATUS(c) == 0) << safety::read_file(again.err);
  EXPECT_TRUE(safety::debris(d).empty());
}

}  // namespace
