#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <vector>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "mpi/dist.hpp"
#include "util/error.hpp"

namespace cli {

namespace {
struct Entry {
  const char* name;
  SetupFn setup;
};
std::vector<Entry>& registry() {
  static std::vector<Entry> r;
  return r;
}
}  // namespace

bool register_command(const char* name, SetupFn setup) {
  registry().push_back({name, setup});
  return true;
}

void setup_commands(CLI::App& root) {
  auto& r = registry();
  std::sort(r.begin(), r.end(), [](const Entry& a, const Entry& b) { return std::string(a.name) < b.name; });
  for (const auto& e : r) e.setup(root);
}

void print_json(const nlohmann::json& j) { std::cout << j.dump(2) << std::endl; }

Progress::Progress(std::string label, bool quiet)
    : label_(std::move(label)), quiet_(quiet), tty_(::isatty(STDERR_FILENO) != 0) {}

void Progress::update(std::size_t done, std::size_t total) {
  if (quiet_ || total == 0) return;
  if (tty_) {
    std::fprintf(stderr, "\r%s %zu/%zu (%d%%)", label_.c_str(), done, total, static_cast<int>(100 * done / total));
    open_ = true;
  } else {
    int decile = static_cast<int>(10 * done / total);
    if (decile != last_decile_) {
      last_decile_ = decile;
      std::fprintf(stderr, "%s %zu/%zu\n", label_.c_str(), done, total);
    }
  }
  std::fflush(stderr);
}

void Progress::finish() {
  if (open_) std::fprintf(stderr, "\n");
  open_ = false;
}

}  // namespace cli

namespace {

// Under mpirun a rank that fails ends the whole job (dist::abort_job), so the others never
// wait forever in a collective; single-process runs return the status.
int fail(const std::string& line, int code) {
  std::cout.flush();
  if (dist::distributed()) dist::abort_job(fmt::format("{} (rank {} of {})", line, dist::rank(), dist::size()), code);
  std::cerr << line << std::endl;
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fpgallm: take a transformer language model to an FPGA deployment"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fpgallm 0.1.0");
  cli::setup_commands(app);
  dist::size();  // initializes MPI when launched by mpirun
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(fmt::format("fpgallm: {} (see fpgallm --help)", e.what()), 2);
  } catch (const fpgallm::InputError& e) {
    return fail(fmt::format("fpgallm: {}", e.what()), 2);
  } catch (const std::exception& e) {
    return fail(fmt::format("fpgallm: error: {}", e.what()), 1);
  }
  return 0;
}
