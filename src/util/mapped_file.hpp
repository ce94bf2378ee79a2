#pragma once
// A read-only memory map of a whole file, with bounds-checked access for parsers.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace fpgallm {

class MappedFile {
 public:
  // Throws InputError naming the path when the file is missing or unreadable.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;

  const std::string& path() const { return path_; }
  std::size_t size() const { return size_; }
  const std::uint8_t* data() const { return data_; }
  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }

 private:
  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

// A model's weights, copied out of a mapped file: n floats in a fresh vector whose pages the
// kernel may back with transparent huge pages, with the source pages mapped in one call
// (MADV_POPULATE_READ) rather than faulted in one by one. Loading a large model is then a
// copy, not a page-fault storm (a fault per 4 KiB of source and destination).
std::vector<float> copy_weights(const float* first, std::size_t n);

// Sequential reader over a byte range; every read is checked against the end, and a
// read past it throws InputError("<path>", "truncated: ...").
class ByteReader {
 public:
  ByteReader(std::span<const std::uint8_t> bytes, std::string source)
      : bytes_(bytes), source_(std::move(source)) {}

  std::size_t offset() const { return offset_; }
  std::size_t remaining() const { return bytes_.size() - offset_; }
  const std::string& source() const { return source_; }
  void seek(std::size_t offset, const char* what);
  void skip(std::size_t n, const char* what);

  template <typename T>
  T read(const char* what) {
    require(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }
  std::string read_string(std::size_t n, const char* what);
  std::span<const std::uint8_t> read_span(std::size_t n, const char* what);
  [[noreturn]] void fail(const std::string& problem) const;

 private:
  void require(std::size_t n, const char* what) const;
  std::span<const std::uint8_t> bytes_;
  std::string source_;
  std::size_t offset_ = 0;
};

}  // namespace fpgallm
