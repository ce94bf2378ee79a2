#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>
#include <cmath>
#include <cstdlib>
#include <new>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "model/model.hpp"
#include "mpi/dist.hpp"
#include "report/format.hpp"
#include "util/error.hpp"
#include "util/number.hpp"
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

namespace {

// The number in s, or nullopt when s is not entirely one.
std::optional<double> number(const std::string& s) {
  if (auto v = fpgallm::parse_double(s)) return v;
  // inf, nan and numbers beyond a double's range are numbers, refused as not finite ones.
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() + s.size() && !std::isfinite(v)) return v;
  return std::nullopt;
}

CLI::Validator bound(std::function<std::string(double)> check, std::string description) {
  return CLI::Validator(
      [check = std::move(check)](std::string& s) -> std::string {
        const auto v = number(s);
        if (!v) return fmt::format("'{}' is not a number", s);
        return std::isfinite(*v) ? check(*v) : fmt::format("{} is not a finite number", s);
      },
      std::move(description));
}

}  // namespace

CLI::Validator at_least(double min) {
  return bound([min](double v) { return v >= min ? "" : fmt::format("{:g} is below the minimum {:g}", v, min); },
               fmt::format(">= {:g}", min));
}

CLI::Validator above(double min) {
  return bound([min](double v) { return v > min ? "" : fmt::format("{:g} must be above {:g}", v, min); },
               fmt::format("> {:g}", min));
}

CLI::Validator between(double lo, double hi) {
  return bound([lo, hi](double v) { return v >= lo && v <= hi ? "" : fmt::format("{:g} is not between {:g} and {:g}", v, lo, hi); },
               fmt::format("{:g} to {:g}", lo, hi));
}

double parse_budget(const std::string& s) {
  std::string t;
  for (char ch : s)
    if (ch != '%' && ch != ' ') t += ch;
  const auto v = t.empty() ? std::nullopt : number(t);
  if (v && !std::isfinite(*v)) throw fpgallm::InputError("--budget", "'" + s + "' is not a finite number");
  if (!v || !(*v >= -100) || *v > 1000)
    throw fpgallm::InputError("--budget", "'" + s + "' is not a percentage between -100 and 1000");
  return *v / 100.0;
}

void print_json(const nlohmann::json& j) { std::cout << j.dump(2) << std::endl; }

namespace {
bool g_progress = false;
}  // namespace

void set_progress(bool always) { g_progress = always; }
bool progress_enabled() { return g_progress || ::isatty(STDERR_FILENO) != 0; }

Progress::Progress(std::string label, bool quiet)
    : label_(std::move(label)), quiet_(quiet || !progress_enabled()), tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

std::string Progress::line(std::size_t done, std::size_t total) const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string s = fmt::format("{} {}/{} ({}%), {} so far", label_, done, total, 100 * done / total, report::duration(elapsed));
  if (done > 0 && done < total) s += ", about " + report::duration(elapsed * double(total - done) / double(done)) + " left";
  return s;
}

void Progress::update(std::size_t done, std::size_t total) {
  if (quiet_ || total == 0) return;
  if (tty_) {
    std::fprintf(stderr, "\r%s\033[K", line(done, total).c_str());
    open_ = true;
  } else {
    int decile = static_cast<int>(10 * done / total);
    if (decile != last_decile_) {
      last_decile_ = decile;
      std::fprintf(stderr, "%s\n", line(done, total).c_str());
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
      const bool is_integer = is_unsigned || type.rfind("INT", 0) == 0;
      if (!is_unsigned && type.rfind("INT", 0) != 0 && type.rfind("FLOAT", 0) != 0 && type.rfind("NUMBER", 0) != 0)
        continue;
      opt->check(CLI::Validator(
          [is_unsigned, is_integer](std::string& value) -> std::string {
            const char* s = value.c_str();
            while (std::isspace(static_cast<unsigned char>(*s))) ++s;
            if (is_unsigned && *s == '-') return value + " is negative; expected a number >= 0";
            // A whole number beyond 64 bits, which a conversion would saturate or wrap.
            const std::string_view digits = std::string_view(s).substr(*s == '+' || *s == '-' ? 1 : 0);
            if (is_integer && !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
              unsigned long long u = 0;
              const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), u);
              if (ec != std::errc() || (!is_unsigned && u > 9223372036854775807ull))
                return value + " is beyond the range of a 64-bit integer";
            }
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

// Help in the user's words: each option's default at the end of its description, "(default
// 256)", unless the description says what the default is itself ("default: the model's").
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string out;
    if (opt->get_type_size() != 0) {
      if (!opt->get_type_name().empty()) out += " " + get_label(opt->get_type_name());
      if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
      if (opt->get_required()) out += " " + get_label("REQUIRED");
    }
    for (const CLI::Option* o : opt->get_excludes()) out += " " + get_label("Excludes") + ": " + o->get_name();
    return out;
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string d = opt->get_description();
    const std::string def = opt->get_default_str();
    if (opt->get_type_size() != 0 && !def.empty() && d.find("default") == std::string::npos) d += " (default " + def + ")";
    return d;
  }
};

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
  app.option_defaults()->always_capture_default();  // every option's help shows its default
  app.formatter(std::make_shared<HelpFormatter>());
  bool force = false, progress = false, allow_nonfinite = false;
  app.add_flag("--force", force, "Replace an existing output file fpgallm did not write (never an input; folders only when fpgallm wrote them)");
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
