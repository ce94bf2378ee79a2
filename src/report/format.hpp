#pragma once
// Numbers for people: every human-readable table and progress line formats through here,
// so that the same quantity reads the same in every command.
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

}  // namespace report
