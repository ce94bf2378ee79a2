#include "testing.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace testing_support {

namespace fs = std::filesystem;

std::string source_path(const std::string& relative) { return std::string(FPGALLM_TEST_SOURCE_DIR) + "/" + relative; }
std::string stories260k() { return source_path("models/stories260K.bin"); }
std::string tok512() { return source_path("models/tok512.bin"); }
std::string sample_text() { return source_path("models/tinystories-valid-sample.txt"); }

namespace {
struct ScratchRoot {
  fs::path root;
  ScratchRoot() {
    std::string tmpl = (fs::temp_directory_path() / "fpgallm-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    root = tmpl;
  }
  ~ScratchRoot() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};
ScratchRoot& scratch_root() {
  static ScratchRoot r;
  return r;
}
}  // namespace

std::string scratch_dir(const std::string& name) {
  fs::path p = scratch_root().root / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string sample_lines(std::size_t n) {
  const std::string sample = read_bytes(sample_text());
  std::size_t at = 0;
  for (std::size_t lines = 0; lines < n && at < sample.size(); ++lines)
    at = std::min(sample.find('\n', at), sample.size() - 1) + 1;
  return sample.substr(0, at);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

CommandResult run_fpgallm(const std::string& args, int timeout_s) {
  std::string dir = scratch_dir("cmd-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
  std::string out = dir + "/stdout", err = dir + "/stderr";
  std::string cmd = "timeout " + std::to_string(timeout_s) + " " + FPGALLM_TEST_BINARY + " " + args + " >" + out +
                    " 2>" + err + " </dev/null";
  int raw = std::system(cmd.c_str());
  CommandResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_bytes(out);
  r.err = read_bytes(err);
  return r;
}

double relative_l2(const float* got, const float* want, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    const double d = double(got[i]) - want[i];
    num += d * d;
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

}  // namespace testing_support
