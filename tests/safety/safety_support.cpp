#include "safety_support.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "testing.hpp"

extern char** environ;

namespace safety {

namespace fs = std::filesystem;

std::uint64_t fnv1a64(const std::string& bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string read_file(const std::string& path) { return testing_support::read_bytes(path); }

std::string hash_tree(const std::string& dir) {
  std::vector<std::string> lines;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = fs::relative(it->path(), dir).generic_string();
    struct stat st {};
    ::lstat(it->path().c_str(), &st);
    if (S_ISREG(st.st_mode))
      lines.push_back(fmt::format("f {} {} {:016x}", rel, st.st_size, fnv1a64(read_file(it->path().string()))));
    else if (S_ISDIR(st.st_mode))
      lines.push_back("d " + rel);
    else
      lines.push_back(fmt::format("o {} {:o}", rel, st.st_mode & S_IFMT));
  }
  std::sort(lines.begin(), lines.end());
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return all;
}

std::vector<std::string> debris(const std::string& dir) {
  std::vector<std::string> found;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (name.find(".tmp.") != std::string::npos || name.find(".fpgallm-lock") != std::string::npos ||
        name.find(".tmp-") != std::string::npos || name.find(".old-") != std::string::npos)
      found.push_back(it->path().string());
  }
  return found;
}

void write_fpgallm_folder(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  fs::create_directories(dir);
  nlohmann::json listed = nlohmann::json::object();
  for (const auto& [name, bytes] : files) {
    fs::create_directories((fs::path(dir) / name).parent_path());
    testing_support::write_bytes(dir + "/" + name, bytes);
    listed[name] = {{"bytes", bytes.size()}, {"fnv1a64", fmt::format("{:016x}", fnv1a64(bytes))}};
  }
  testing_support::write_bytes(dir + "/fpgallm-manifest.json",
                               nlohmann::json{{"written_by", "fpgallm"}, {"files", listed}}.dump(2));
}

std::string prepare_inputs(const std::string& name) {
  const std::string d = testing_support::scratch_dir(name);
  fs::copy_file(testing_support::stories260k(), d + "/model.bin");
  fs::copy_file(testing_support::tok512(), d + "/tok.bin");
  fs::copy_file(testing_support::sample_text(), d + "/text.txt");
  fs::copy_file(testing_support::source_path("data/designs/u280-overlay-64x64.json"), d + "/design.json");
  testing_support::write_bytes(d + "/notes.txt", "a user's notes, not fpgallm's\n");
  testing_support::write_bytes(d + "/notes.gguf", "a user's file that happens to end in .gguf\n");
  fs::create_directories(d + "/foreign");
  testing_support::write_bytes(d + "/foreign/thesis.tex", "\\documentclass{article}\n");
  ::mkfifo((d + "/fifo").c_str(), 0644);
  return d;
}

Child spawn_fpgallm(const std::string& args, const std::string& log_prefix) {
  std::vector<std::string> words = {FPGALLM_TEST_BINARY};
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  Child c;
  c.out = log_prefix + ".out";
  c.err = log_prefix + ".err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, c.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, c.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  if (posix_spawn(&c.pid, argv[0], &fa, &attr, argv.data(), environ) != 0) c.pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return c;
}

int wait_child(const Child& c) {
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace safety
