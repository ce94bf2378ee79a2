#pragma once
// Numbers for people: counts with thousands separators (never "1.16352e+06"), whole cycles,
// times and byte sizes in a unit that keeps 3-4 significant digits, and percentages.
#include <string>

namespace report {

// 1163520 -> "1,163,520"; rounded to a whole number. Non-finite -> "n/a".
std::string count(double v);
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
