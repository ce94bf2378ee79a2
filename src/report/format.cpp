#include "report/format.hpp"

#include <fmt/format.h>

#include <algorithm>
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

// Inserts ',' every three digits of the integer part of a plain decimal string.
std::string group(const std::string& s) {
  const std::size_t sign = (!s.empty() && s[0] == '-') ? 1 : 0;
  std::size_t end = s.find('.');
  if (end == std::string::npos) end = s.size();
  std::string out = s.substr(0, sign);
  const std::string digits = s.substr(sign, end - sign);
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out + s.substr(end);
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

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  std::string s = fmt::format("{:.{}f}", v, decimals < 0 ? 0 : decimals);
  if (s == "-0" || s.find_first_not_of("-0.") == std::string::npos) s = s[0] == '-' ? s.substr(1) : s;
  return group(s);
}

std::string whole(double v) { return fixed(std::round(v), 0); }

std::string number(double v, int digits) {
  if (!std::isfinite(v)) return "n/a";
  if (v == 0) return "0";
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  const int decimals = std::max(0, digits - 1 - magnitude);
  std::string s = fixed(v, decimals);
  if (s.find('.') != std::string::npos) {  // drop trailing zeros of the fraction
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string seconds(double s) {
  if (!std::isfinite(s)) return "n/a";
  const double a = std::fabs(s);
  if (a == 0) return "0 s";
  if (a >= 1) return number(s, 4) + " s";
  if (a >= 1e-3) return number(s * 1e3, 3) + " ms";
  if (a >= 1e-6) return number(s * 1e6, 3) + " us";
  return number(s * 1e9, 3) + " ns";
}

std::string bytes(double b) {
  if (!std::isfinite(b)) return "n/a";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (std::fabs(b) >= 1024 && i < 4) {
    b /= 1024;
    ++i;
  }
  return (i == 0 ? whole(b) : number(b, 3)) + " " + units[i];
}

std::string percent(double fraction) {
  if (!std::isfinite(fraction)) return "n/a";
  const double p = 100 * fraction;
  if (p != 0 && std::fabs(p) < 0.05) return number(p, 2) + "%";
  return fixed(p, 1) + "%";
}

}  // namespace report
