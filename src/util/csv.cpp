#include "util/csv.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/input_file.hpp"

namespace fpgallm {

// RFC 4180 CSV: quoted fields may hold commas, doubled quotes and newlines.
CsvRows parse_csv(std::string_view text, const std::string& path) {
  CsvRows rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  int line = 1, row_line = 1;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // the UTF-8 byte-order mark spreadsheets write
  auto check_length = [&] {
    if (field.size() > kMaxCsvCell)
      throw fpgallm::InputError(path, fmt::format("line {}, column {}: a cell longer than {} bytes", row_line, row.size() + 1, kMaxCsvCell));
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    check_length();
    if (quoted) {
      if (ch == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (ch == '\n') ++line;
        field += ch;
      }
      continue;
    }
    if (ch == '"') {
      quoted = true;
      any = true;
    } else if (ch == ',') {
      row.push_back(field);
      field.clear();
      any = true;
    } else if (ch == '\n' || ch == '\r') {
      if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        row.push_back(field);
        rows.emplace_back(row_line, row);
      }
      row.clear();
      field.clear();
      any = false;
      ++line;
      row_line = line;
    } else {
      field += ch;
      any = true;
    }
  }
  check_length();
  if (quoted) throw fpgallm::InputError(path, fmt::format("line {}: unterminated quoted field", row_line));
  if (any || !field.empty()) {
    row.push_back(field);
    rows.emplace_back(row_line, row);
  }
  return rows;
}

CsvRows read_csv_table(const std::string& path, const std::vector<std::string>& required_columns) {
  return check_csv_table(parse_csv(read_regular_file(path), path), path, required_columns);
}

CsvRows check_csv_table(CsvRows table, const std::string& path, const std::vector<std::string>& required_columns) {
  if (table.empty()) throw InputError(path, "empty CSV");
  for (auto& name : table.front().second) {  // " device " is the column device
    const auto first = name.find_first_not_of(" \t"), last = name.find_last_not_of(" \t");
    name = first == std::string::npos ? std::string() : name.substr(first, last - first + 1);
  }
  const auto& header = table.front().second;
  for (const auto& required : required_columns)
    if (std::find(header.begin(), header.end(), required) == header.end())
      throw InputError(path, fmt::format("missing column '{}'", required));
  if (table.size() < 2) throw InputError(path, "has a header but no rows");
  return table;
}

}  // namespace fpgallm
