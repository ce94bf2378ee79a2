#include "report/format.hpp"

#include <fmt/format.h>

#include <cmath>

namespace report {

namespace {

// v scaled by powers of 1000 to [1, 1000) and the index of the power; a value that
// rounds to 1000 at three digits moves up one prefix.
std::pair<double, int> scaled(double v, int max_power) {
  double a = std::fabs(v);
  int i = 0;
  while (i < max_power && a >= 999.5) {
    a /= 1000;
    ++i;
  }
  return {std::copysign(a, v), i};
}

std::string three_digits(double a) {
  const double m = std::fabs(a);
  return m >= 99.95 ? fmt::format("{:.0f}", a) : m >= 9.995 ? fmt::format("{:.1f}", a) : fmt::format("{:.2f}", a);
}

}  // namespace

std::string si(double v, const std::string& unit) {
  static const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  const std::string sep = unit.empty() ? "" : " ";
  if (v == 0 || !std::isfinite(v)) return fmt::format("{:g}{}{}", v, sep, unit);
  if (std::fabs(v) < 1) return fmt::format("{:.3g}{}{}", v, sep, unit);
  const auto [a, i] = scaled(v, 6);
  return three_digits(a) + (i || !unit.empty() ? " " : "") + prefixes[i] + unit;
}

std::string count(double v) {
  static const char* suffixes[] = {"", "k", "M", "B", "T"};
  if (!std::isfinite(v)) return fmt::format("{:g}", v);
  if (std::fabs(v) < 999.5) return fmt::format("{:.0f}", v);
  const auto [a, i] = scaled(v, 4);
  return three_digits(a) + suffixes[i];
}

std::string duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {:02d} s", s / 60, s % 60);
  return fmt::format("{} h {:02d} min", s / 3600, (s % 3600) / 60);
}

}  // namespace report
