#pragma once
// RFC 4180 CSV (quoted fields may hold commas, doubled quotes and newlines), as the
// published-results table is written.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fpgallm {

// Rows with the line each starts on (1-based); blank lines are skipped.
using CsvRows = std::vector<std::pair<int, std::vector<std::string>>>;

// Throws InputError naming path for an unterminated quoted field.
CsvRows parse_csv(std::string_view text, const std::string& path);

// A table: a header holding every required column and at least one row; otherwise an
// InputError naming path.
CsvRows check_csv_table(CsvRows table, const std::string& path, const std::vector<std::string>& required_columns);

// The regular file at path, parsed and checked as above.
CsvRows read_csv_table(const std::string& path, const std::vector<std::string>& required_columns);

}  // namespace fpgallm
