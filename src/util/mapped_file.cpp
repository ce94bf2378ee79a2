#include "util/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fmt/format.h>

#include "util/input_file.hpp"

namespace fpgallm {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const OpenedFile f = open_regular_file(path);
  const int fd = f.fd;
  size_ = f.size;
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw InputError(path, fmt::format("cannot map file: {}", std::strerror(err)));
    }
    data_ = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

namespace {

// The whole pages inside [p, p + n).
std::span<std::uint8_t> whole_pages(const void* p, std::size_t n) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + n) / page * page;
  if (end <= begin) return {};
  return {reinterpret_cast<std::uint8_t*>(begin), end - begin};
}

// madvise(advice) over `pages` in pieces of whole huge pages, one piece per OpenMP thread:
// the kernel maps (and zeroes) each thread's pages at once.
void advise_in_parallel(std::span<std::uint8_t> pages, int advice) {
  constexpr std::size_t kPiece = std::size_t(2) << 20;
  const std::size_t pieces = (pages.size() + kPiece - 1) / kPiece;
#pragma omp parallel for schedule(static) if (pieces > 1)
  for (std::size_t i = 0; i < pieces; ++i)
    ::madvise(pages.data() + i * kPiece, std::min(kPiece, pages.size() - i * kPiece), advice);
}

}  // namespace

std::vector<float> copy_weights(const float* first, std::size_t n) {
  std::vector<float> out;
  out.reserve(n);
  // Advice only: where the kernel refuses any of it (older kernels, THP off), the copy below
  // faults page by page as before.
  const auto dst = whole_pages(out.data(), n * sizeof(float));
  if (!dst.empty()) ::madvise(dst.data(), dst.size(), MADV_HUGEPAGE);
#ifdef MADV_POPULATE_READ
  if (auto src = whole_pages(first, n * sizeof(float)); !src.empty()) advise_in_parallel(src, MADV_POPULATE_READ);
#endif
#ifdef MADV_POPULATE_WRITE
  if (!dst.empty()) advise_in_parallel(dst, MADV_POPULATE_WRITE);  // reserved, not yet constructed: bytes only
#endif
  out.assign(first, first + n);
  return out;
}

void ByteReader::fail(const std::string& problem) const { throw InputError(source_, problem); }

void ByteReader::require(std::size_t n, const char* what) const {
  if (n > remaining())
    fail(fmt::format("truncated: {} needs {} bytes at offset {}, file has {}", what, n, offset_,
                     bytes_.size()));
}

void ByteReader::seek(std::size_t offset, const char* what) {
  if (offset > bytes_.size())
    fail(fmt::format("{} at offset {} is past the end of the file ({} bytes)", what, offset,
                     bytes_.size()));
  offset_ = offset;
}

void ByteReader::skip(std::size_t n, const char* what) {
  require(n, what);
  offset_ += n;
}

std::string ByteReader::read_string(std::size_t n, const char* what) {
  require(n, what);
  std::string s(reinterpret_cast<const char*>(bytes_.data() + offset_), n);
  offset_ += n;
  return s;
}

std::span<const std::uint8_t> ByteReader::read_span(std::size_t n, const char* what) {
  require(n, what);
  auto s = bytes_.subspan(offset_, n);
  offset_ += n;
  return s;
}

}  // namespace fpgallm
