#include "util/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/output.hpp"

namespace fpgallm {

OpenedFile open_regular_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) throw InputError(path, "no such file or directory");
    throw InputError(path, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw InputError(path, std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw InputError(path, "is a directory, expected a file");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path, S_ISFIFO(st.st_mode) ? "is a FIFO, expected a regular file"
                                                : "is a device or socket, expected a regular file");
  }
  // Reads block normally from here on (a regular file never waits anyway).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  note_input(path);
  return {fd, static_cast<std::size_t>(st.st_size)};
}

std::string read_regular_file(const std::string& path) {
  const OpenedFile f = open_regular_file(path);
  std::string s(f.size, '\0');
  std::size_t got = 0;
  while (got < s.size()) {
    const ssize_t n = ::read(f.fd, s.data() + got, s.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::close(f.fd);
      throw InputError(path, err ? std::strerror(err) : "file shrank while being read");
    }
    got += static_cast<std::size_t>(n);
  }
  ::close(f.fd);
  return s;
}

std::size_t utf8_valid_prefix(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k)
      if ((s[i + k] & 0xC0) != 0x80) return i;
    i += len;
  }
  return n;
}

void require_utf8_text(std::string_view text, const std::string& source) {
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw InputError(source, fmt::format("is not text: a NUL byte at offset {}", nul));
  if (const auto bad = utf8_valid_prefix(text); bad != text.size())
    throw InputError(source, fmt::format("is not UTF-8 text: malformed byte 0x{:02X} at offset {}",
                                         static_cast<unsigned char>(text[bad]), bad));
}

std::string overlapping_extents(std::vector<Extent> extents) {
  std::erase_if(extents, [](const Extent& e) { return e.end <= e.begin; });
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < extents.size(); ++i)
    if (extents[i].begin < extents[i - 1].end)
      return fmt::format("'{}' and '{}' share bytes [{}, {})", extents[i - 1].name, extents[i].name, extents[i].begin,
                         std::min(extents[i].end, extents[i - 1].end));
  return "";
}

}  // namespace fpgallm
