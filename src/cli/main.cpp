#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <new>
#include <cstdio>
#include <iostream>
#include <vector>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "model/model.hpp"
#include "mpi/dist.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

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

namespace {
bool g_progress = false;
}  // namespace

void set_progress(bool always) { g_progress = always; }
bool progress_enabled() { return g_progress || ::isatty(STDERR_FILENO) != 0; }

Progress::Progress(std::string label, bool quiet)
    : label_(std::move(label)), quiet_(quiet || !progress_enabled()), tty_(::isatty(STDERR_FILENO) != 0) {}

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

// NaN and infinity pass CLI11's range checks (every comparison with NaN is false), and an
// unsigned option takes "-1" as its largest value: both are refused for every numeric option.
void refuse_impossible_numbers(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    for (CLI::Option* opt : sub->get_options()) {
      const std::string type = opt->get_type_name();
      const bool is_unsigned = type.rfind("UINT", 0) == 0;
      if (!is_unsigned && type.rfind("INT", 0) != 0 && type.rfind("FLOAT", 0) != 0 && type.rfind("NUMBER", 0) != 0)
        continue;
      opt->check(CLI::Validator(
          [is_unsigned](std::string& value) -> std::string {
            const char* s = value.c_str();
            while (std::isspace(static_cast<unsigned char>(*s))) ++s;
            if (is_unsigned && *s == '-') return value + " is negative; expected a number >= 0";
            char* end = nullptr;
            const double v = std::strtod(s, &end);
            if (end != s && !std::isfinite(v)) return value + " is not a finite number";
            return std::string();
          },
          ""));
    }
    refuse_impossible_numbers(*sub);
  }
}

}  // namespace cli

namespace {

// One line, always: a message that spans lines is joined.
std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  for (std::size_t i = 0; (i = s.find('\n', i)) != std::string::npos;) s.replace(i, 1, "; ");
  for (char& ch : s)
    if (ch == '\r') ch = ' ';
  return s;
}

// Under mpirun a rank that fails ends the whole job (dist::abort_job), so the others never
// wait forever in a collective; single-process runs return the status.
int fail(const std::string& message, int code) {
  const std::string line = one_line(message);
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
  bool force = false, progress = false, allow_nonfinite = false;
  app.add_flag("--force", force, "Replace an existing output file (never an input; folders only when fpgallm wrote them)");
  app.add_flag("--progress", progress, "Progress on stderr even when it is not a terminal");
  app.add_flag("--allow-nonfinite", allow_nonfinite, "Load a checkpoint that holds NaN or infinite weights (debugging)");
  app.fallthrough();  // --force and --progress may follow the subcommand
  app.parse_complete_callback([&] {
    fpgallm::set_output_force(force);
    cli::set_progress(progress);
    model::allow_nonfinite(allow_nonfinite);
  });
  cli::setup_commands(app);
  cli::refuse_impossible_numbers(app);
  dist::size();  // initializes MPI when launched by mpirun
  fpgallm::set_output_force(false);
  fpgallm::install_interrupt_cleanup();
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
  } catch (const std::bad_alloc&) {
    return fail("fpgallm: internal error (a bug, please report it): out of memory (std::bad_alloc); the sizes "
                "should have been checked before allocating",
                1);
  } catch (const std::exception& e) {
    return fail(fmt::format("fpgallm: internal error (a bug, please report it): {}", e.what()), 1);
  }
  return 0;
}
