#pragma once
// Numbers read from user text (CSV cells, option values, names) through std::from_chars:
// a value out of range is a nullopt the caller refuses in its own words, never an
// out_of_range exception (std::stoi/std::stod) that ends as an internal error.
#include <limits>
#include <optional>
#include <string_view>

namespace fpgallm {

// All of text (an optional leading '+' or '-', decimal or exponent form) as a finite double;
// nullopt when text is empty, has anything after the number, or is beyond a double's range.
std::optional<double> parse_double(std::string_view text);

// All of text (decimal digits with an optional sign) as an integer in [lo, hi]; nullopt
// otherwise, overflow included.
std::optional<long long> parse_integer(std::string_view text, long long lo = std::numeric_limits<long long>::min(),
                                       long long hi = std::numeric_limits<long long>::max());

}  // namespace fpgallm
