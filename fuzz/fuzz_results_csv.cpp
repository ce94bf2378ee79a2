// The published-results CSV reader (RFC 4180). Anything but an InputError naming the file
// is a finding; a table it accepts has a header and rows, and writing those rows back with
// every field quoted parses to the same cells.
#include <cstdio>
#include <string>

#include "fuzz_input.hpp"
#include "util/csv.hpp"
#include "util/error.hpp"

namespace {

std::string quoted(const std::vector<std::string>& row) {
  std::string line;
  for (std::size_t k = 0; k < row.size(); ++k) {
    if (k) line += ',';
    line += '"';
    for (char ch : row[k]) line += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    line += '"';
  }
  return line + "\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::input_file(data, size, ".csv");
  try {
    const auto table = fpgallm::read_csv_table(path, {"source_id", "value"});
    if (table.size() < 2) __builtin_trap();
    std::string again;
    for (const auto& [line, row] : table) again += quoted(row);
    const auto back = fpgallm::parse_csv(again, path);
    if (back.size() != table.size()) __builtin_trap();
    for (std::size_t i = 0; i < back.size(); ++i)
      if (back[i].second != table[i].second) __builtin_trap();
  } catch (const fpgallm::InputError& e) {
    if (e.source() != path) __builtin_trap();
  }
  std::remove(path.c_str());
  return 0;
}
