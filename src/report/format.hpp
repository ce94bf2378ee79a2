#pragma once
// Numbers for people: every human-readable table and progress line formats through here,
// so that the same quantity reads the same in every command. Two styles: short ones with an
// SI or k/M suffix for tables and progress (si, count, duration), and exact ones with
// thousands separators for reports (whole, fixed, number, seconds, bytes, percent).
#include <string>

namespace report {

// Three significant digits with an SI prefix and the unit: si(274432, "B") = "274 kB",
// si(1.30368e6, "") = "1.30 M", si(0.5, "W") = "0.500 W". |v| < 1 keeps three digits
// without a prefix; 0 is "0" with the unit.
std::string si(double v, const std::string& unit);

// A count with a k/M/B suffix and three significant digits, no space: 1303680 = "1.30M",
// 2.6e5 = "260k", 6.74e9 = "6.74B", below 1000 the integer itself ("512").
std::string count(double v);

// A duration in the largest sensible units: "8 s", "2 min 05 s", "1 h 04 min".
std::string duration(double seconds);

// 1163520 -> "1,163,520"; rounded to a whole number. Non-finite -> "n/a".
std::string whole(double v);
// v with `decimals` digits after the point and thousands separators: 1634.27, 1 -> "1,634.3".
std::string fixed(double v, int decimals);
// About `digits` significant digits, separators in the integer part, never exponent
// notation: 1381.4 -> "1,381"; 0.0123 -> "0.0123"; 5.5 -> "5.5".
std::string number(double v, int digits = 4);
// Seconds in s, ms, us or ns: 0.000612 -> "612 us" (3 significant digits).
std::string seconds(double s);
// Bytes in B, KiB, MiB, GiB: 131072 -> "128 KiB".
std::string bytes(double b);
// A fraction as a percentage with one decimal: 0.1234 -> "12.3%"; below 0.05% (but not
// zero) with two significant digits, 0.000123 -> "0.012%", so a nonzero share never reads 0.
std::string percent(double fraction);

}  // namespace report
