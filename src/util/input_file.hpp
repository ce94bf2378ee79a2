#pragma once
// Opening what the user names as an input: only regular files (a FIFO or a device would
// block or never end), opened with O_NONBLOCK so that checking never waits.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fpgallm {

// An open descriptor of the regular file at path (the caller closes it) and its size.
// Throws InputError naming path: missing, unreadable, a folder, or not a regular file.
// The path is noted as an input of this process (see util/output.hpp).
struct OpenedFile {
  int fd = -1;
  std::size_t size = 0;
};
OpenedFile open_regular_file(const std::string& path);

// The whole regular file at path.
std::string read_regular_file(const std::string& path);

// Text as calibration, training or evaluation data must be UTF-8 without NUL bytes:
// throws InputError naming `source` and the byte offset of the first fault.
void require_utf8_text(std::string_view text, const std::string& source);

// The offset of the first byte that is not part of well-formed UTF-8 (overlong forms,
// surrogates and code points past U+10FFFF are malformed), or text.size().
std::size_t utf8_valid_prefix(std::string_view text);

// A byte range [begin, end) a named part of a file occupies (a tensor's data).
struct Extent {
  std::uint64_t begin = 0, end = 0;
  std::string name;
};
// "'a' and 'b' share bytes [x, y)" for the first two extents that overlap (empty extents
// never do), or "" when none does.
std::string overlapping_extents(std::vector<Extent> extents);

}  // namespace fpgallm
