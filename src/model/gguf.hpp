#pragma once
// GGUF (ggml's model file format, versions 2 and 3): a memory-mapped reader that exposes
// every metadata key/value and tensor, a writer, and ggml's tensor types: F32, F16, BF16
// and the block formats of ggml_quants.hpp are dequantized; F32, F16, BF16, Q8_0, Q4_0 and
// Q4_1 are also quantized as llama.cpp's reference code does.
//
// Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 key/value count;
// key/values (string key, u32 value type, value); tensor infos (string name, u32 n_dims,
// u64 dims[n_dims], u32 ggml type, u64 offset); zero padding to `general.alignment`
// (default 32); the data section, each tensor at its offset from the section's start (a
// multiple of the alignment). Strings are u64 length + bytes (no terminator). dims[0] is
// the fastest-varying dimension: a row-major [rows][cols] matrix has dims {cols, rows}.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace model::gguf {

inline constexpr std::uint32_t kDefaultAlignment = 32;

enum class ValueType : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
const char* to_string(ValueType t);

// ggml tensor types. Other numeric values may appear in files; see type_traits().
enum class GgmlType : std::uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15,
  iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22, iq4_xs = 23,
  i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, iq1_m = 29, bf16 = 30, tq1_0 = 34, tq2_0 = 35,
};

struct TypeTraits {
  const char* name;        // "F32", "Q8_0", ...
  std::uint32_t block;     // elements per block
  std::uint32_t block_bytes;
  bool dequantizable;      // supported by dequantize()
};
// Traits of a ggml type, or nullopt for a type number this code does not know.
std::optional<TypeTraits> type_traits(GgmlType t);
// "Q8_0", or "type 123" for an unknown number.
std::string type_name(GgmlType t);
// The names of the types dequantize() reads, comma-separated (for error messages).
std::string dequantizable_type_names();
// Bytes of n elements of type t; nullopt for an unknown type or n not a multiple of the block.
std::optional<std::uint64_t> byte_size(GgmlType t, std::uint64_t n_elements);

// One metadata value: a scalar (one element) or an array of scalars (nested arrays are
// rejected). Elements live in the vector of their kind: unsigned integers and booleans in
// `u`, signed integers in `i`, f32/f64 in `f`, strings in `s`.
struct Value {
  ValueType type = ValueType::u32;        // array: element type is `element`
  ValueType element = ValueType::u32;     // the scalar type (== type unless an array)
  std::vector<std::uint64_t> u;
  std::vector<std::int64_t> i;
  std::vector<double> f;
  std::vector<std::string> s;

  bool is_array() const { return type == ValueType::array; }
  std::size_t size() const;  // elements (1 for a scalar)

  static Value u8(std::uint8_t v);
  static Value u32(std::uint32_t v);
  static Value u64(std::uint64_t v);
  static Value i32(std::int32_t v);
  static Value i64(std::int64_t v);
  static Value f32(float v);
  static Value f64(double v);
  static Value boolean(bool v);
  static Value string(std::string v);
  static Value strings(std::vector<std::string> v);
  static Value f32s(const std::vector<float>& v);
  static Value i32s(const std::vector<std::int32_t>& v);
  static Value u32s(const std::vector<std::uint32_t>& v);
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::f32;
  std::vector<std::uint64_t> dims;  // dims[0] fastest-varying
  std::uint64_t offset = 0;         // from the start of the data section
  std::uint64_t n_elements = 0;
  std::uint64_t n_bytes = 0;
};

// A parsed GGUF file. Every count, length, dimension and offset is checked against the
// file; problems throw fpgallm::InputError naming the file. Tensor bytes are views into
// the mapping, valid while the Reader lives.
class Reader {
 public:
  explicit Reader(const std::string& path);
  // Parses bytes owned by the caller (fuzzing, tests); `source` names them in errors.
  Reader(std::span<const std::uint8_t> bytes, std::string source);
  ~Reader();
  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) = delete;

  const std::string& source() const { return source_; }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }  // file offset of the data section

  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(const std::string& key) const;
  // Typed access: throw InputError("<file>", "metadata key: ...") when missing or of the
  // wrong kind. Integers of any width and sign convert when the value fits.
  std::int64_t get_int(const std::string& key) const;
  std::uint64_t get_uint(const std::string& key) const;
  double get_float(const std::string& key) const;  // f32, f64 or any integer
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const std::vector<std::string>& get_strings(const std::string& key) const;  // string array
  std::vector<double> get_floats(const std::string& key) const;               // numeric array
  std::vector<std::int64_t> get_ints(const std::string& key) const;           // integer array
  std::optional<std::int64_t> int_or_none(const std::string& key) const;
  std::optional<double> float_or_none(const std::string& key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;
  const TensorInfo& tensor(const std::string& name) const;  // throws InputError if absent
  std::span<const std::uint8_t> tensor_bytes(const TensorInfo& t) const;
  // The tensor as fp32 (dequantized); throws InputError for a type dequantize() lacks.
  std::vector<float> tensor_floats(const TensorInfo& t) const;

  [[noreturn]] void fail(const std::string& problem) const;

 private:
  void parse();
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
  std::span<const std::uint8_t> bytes_;
  std::string source_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = kDefaultAlignment;
  std::uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<TensorInfo> tensors_;
};

// Builds a GGUF file in memory order: metadata in insertion order (set() replaces a key in
// place), tensors in insertion order at aligned offsets. write() is atomic (a temporary
// file renamed over the target), so a failed write leaves nothing behind.
class Writer {
 public:
  void set(const std::string& key, Value v);  // "general.alignment" (u32) sets the alignment
  // dims[0] fastest-varying; bytes.size() must equal byte_size(type, prod(dims)).
  void add_tensor(std::string name, GgmlType type, std::vector<std::uint64_t> dims, std::vector<std::uint8_t> bytes);
  // As add_tensor, without copying: `bytes` must stay valid until write() returns.
  void add_tensor_view(std::string name, GgmlType type, std::vector<std::uint64_t> dims,
                       std::span<const std::uint8_t> bytes);
  // version 2 or 3 (identical layouts for little-endian files).
  void write(const std::string& path, std::uint32_t version = 3) const;
  // The whole file as bytes (tests, fuzz seeds).
  std::vector<std::uint8_t> serialize(std::uint32_t version = 3) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<std::uint64_t> dims;
    std::vector<std::uint8_t> owned;
    std::span<const std::uint8_t> view;
  };
  std::uint64_t alignment() const;
  template <typename Sink>
  void emit(Sink& sink, std::uint32_t version) const;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<Tensor> tensors_;
};

// IEEE half and bfloat16 conversions (round to nearest even; NaN stays NaN).
float fp16_to_float(std::uint16_t h);
std::uint16_t float_to_fp16(float f);
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);
// out[i] = fp16_to_float(float_to_fp16(x[i])) for i < n, the same bits, 8 at a time with
// F16C where the CPU has it (out may be x).
void round_to_fp16(const float* x, float* out, std::size_t n);

// Block layouts: ggml_quants.hpp.
// dequantize: out.size() elements from bytes; throws std::invalid_argument when the type is
// not dequantizable or the sizes disagree.
void dequantize(GgmlType type, std::span<const std::uint8_t> bytes, std::span<float> out);
// quantize: F32, F16, BF16, Q8_0, Q4_0, Q4_1 with llama.cpp's reference rounding; the
// element count must be a multiple of the block size (std::invalid_argument otherwise).
std::vector<std::uint8_t> quantize(GgmlType type, std::span<const float> values);

}  // namespace model::gguf
