#pragma once
// RFC 4180 CSV (quoted fields may hold commas, doubled quotes and newlines), as the
// published-results table is written.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fpgallm {

// The longest cell a CSV read by fpgallm may hold, in bytes (the published-results table's
// longest is about 300). Bounds what the readers' regular expressions scan.
inline constexpr std::size_t kMaxCsvCell = 4096;

// Rows with the line each starts on (1-based); blank lines are skipped.
using CsvRows = std::vector<std::pair<int, std::vector<std::string>>>;

// Throws InputError naming path for an unterminated quoted field, and naming path, line and
// column for a cell longer than kMaxCsvCell.
CsvRows parse_csv(std::string_view text, const std::string& path);

// A table: a header holding every required column and at least one row; otherwise an
// InputError naming path.
CsvRows check_csv_table(CsvRows table, const std::string& path, const std::vector<std::string>& required_columns);

// The regular file at path, parsed and checked as above.
CsvRows read_csv_table(const std::string& path, const std::vector<std::string>& required_columns);

}  // namespace fpgallm
