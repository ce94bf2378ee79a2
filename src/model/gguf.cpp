#include "model/gguf.hpp"
#include "model/ggml_quants.hpp"

#include <cpuid.h>
#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <stdexcept>
#include <unordered_set>

#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/mapped_file.hpp"
#include "util/output.hpp"

static_assert(std::endian::native == std::endian::little, "GGUF I/O assumes a little-endian host");

namespace model::gguf {

const char* to_string(ValueType t) {
  switch (t) {
    case ValueType::u8: return "u8";
    case ValueType::i8: return "i8";
    case ValueType::u16: return "u16";
    case ValueType::i16: return "i16";
    case ValueType::u32: return "u32";
    case ValueType::i32: return "i32";
    case ValueType::f32: return "f32";
    case ValueType::boolean: return "bool";
    case ValueType::string: return "string";
    case ValueType::array: return "array";
    case ValueType::u64: return "u64";
    case ValueType::i64: return "i64";
    case ValueType::f64: return "f64";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------
// ggml types

std::optional<TypeTraits> type_traits(GgmlType t) {
  switch (t) {
    case GgmlType::f32: return TypeTraits{"F32", 1, 4, true};
    case GgmlType::f16: return TypeTraits{"F16", 1, 2, true};
    case GgmlType::bf16: return TypeTraits{"BF16", 1, 2, true};
    case GgmlType::q4_0: return TypeTraits{"Q4_0", 32, 18, true};
    case GgmlType::q4_1: return TypeTraits{"Q4_1", 32, 20, true};
    case GgmlType::q5_0: return TypeTraits{"Q5_0", 32, 22, true};
    case GgmlType::q5_1: return TypeTraits{"Q5_1", 32, 24, true};
    case GgmlType::q8_0: return TypeTraits{"Q8_0", 32, 34, true};
    case GgmlType::q8_1: return TypeTraits{"Q8_1", 32, 36, false};
    case GgmlType::q2_k: return TypeTraits{"Q2_K", 256, 84, true};
    case GgmlType::q3_k: return TypeTraits{"Q3_K", 256, 110, true};
    case GgmlType::q4_k: return TypeTraits{"Q4_K", 256, 144, true};
    case GgmlType::q5_k: return TypeTraits{"Q5_K", 256, 176, true};
    case GgmlType::q6_k: return TypeTraits{"Q6_K", 256, 210, true};
    case GgmlType::q8_k: return TypeTraits{"Q8_K", 256, 292, false};
    case GgmlType::iq2_xxs: return TypeTraits{"IQ2_XXS", 256, 66, false};
    case GgmlType::iq2_xs: return TypeTraits{"IQ2_XS", 256, 74, false};
    case GgmlType::iq3_xxs: return TypeTraits{"IQ3_XXS", 256, 98, false};
    case GgmlType::iq1_s: return TypeTraits{"IQ1_S", 256, 50, false};
    case GgmlType::iq4_nl: return TypeTraits{"IQ4_NL", 32, 18, true};
    case GgmlType::iq3_s: return TypeTraits{"IQ3_S", 256, 110, false};
    case GgmlType::iq2_s: return TypeTraits{"IQ2_S", 256, 82, false};
    case GgmlType::iq4_xs: return TypeTraits{"IQ4_XS", 256, 136, true};
    case GgmlType::i8: return TypeTraits{"I8", 1, 1, false};
    case GgmlType::i16: return TypeTraits{"I16", 1, 2, false};
    case GgmlType::i32: return TypeTraits{"I32", 1, 4, false};
    case GgmlType::i64: return TypeTraits{"I64", 1, 8, false};
    case GgmlType::f64: return TypeTraits{"F64", 1, 8, false};
    case GgmlType::iq1_m: return TypeTraits{"IQ1_M", 256, 56, false};
    case GgmlType::tq1_0: return TypeTraits{"TQ1_0", 256, 54, false};
    case GgmlType::tq2_0: return TypeTraits{"TQ2_0", 256, 66, false};
  }
  return std::nullopt;
}

std::string type_name(GgmlType t) {
  if (auto tr = type_traits(t)) return tr->name;
  return fmt::format("type {}", static_cast<std::uint32_t>(t));
}

std::string dequantizable_type_names() {
  std::string names;
  for (std::uint32_t t = 0; t < 64; ++t)
    if (auto tr = type_traits(static_cast<GgmlType>(t)); tr && tr->dequantizable)
      names += (names.empty() ? "" : ", ") + std::string(tr->name);
  return names;
}

std::optional<std::uint64_t> byte_size(GgmlType t, std::uint64_t n_elements) {
  auto tr = type_traits(t);
  if (!tr || n_elements % tr->block != 0) return std::nullopt;
  std::uint64_t blocks = n_elements / tr->block;
  if (blocks > std::numeric_limits<std::uint64_t>::max() / tr->block_bytes) return std::nullopt;
  return blocks * tr->block_bytes;
}

// ---------------------------------------------------------------------------------------
// half precision

float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t mant = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in fp32
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  std::uint32_t bits;
  if (exp == 0x1F)
    bits = sign | 0x7F800000u | (mant << 13);  // inf or NaN
  else
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  return std::bit_cast<float>(bits);
}

std::uint16_t float_to_fp16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00u;   // NaN
  if (abs >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds to infinity
  if (abs < 0x38800000u) {                        // below 2^-14: a half subnormal
    if (abs < 0x33000000u) return sign;           // below 2^-25 (2^-25 itself ties to 0)
    const std::uint32_t e = abs >> 23;
    const std::uint32_t m = (abs & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // value / 2^-24 = m >> shift
    std::uint32_t q = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  std::uint32_t h = (((abs >> 23) - 112u) << 10) | ((abs & 0x7FFFFFu) >> 13);
  const std::uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

namespace {

void round_to_fp16_scalar(const float* x, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = fp16_to_float(float_to_fp16(x[i]));
}

// vcvtps2ph with round to nearest even is float_to_fp16 but for a NaN's payload: lanes of
// eight with a NaN go the scalar way.
__attribute__((target("avx,f16c"))) void round_to_fp16_f16c(const float* x, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
      round_to_fp16_scalar(x + i, out + i, 8);
      continue;
    }
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)));
  }
  round_to_fp16_scalar(x + i, out + i, n - i);
}

}  // namespace

void round_to_fp16(const float* x, float* out, std::size_t n) {
  // F16C is CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know it);
  // "avx" also checks that the OS saves the YMM registers.
  static const bool f16c = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0 && __builtin_cpu_supports("avx");
  }();
  if (f16c) return round_to_fp16_f16c(x, out, n);
  round_to_fp16_scalar(x, out, n);
}

float bf16_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// ---------------------------------------------------------------------------------------
// blocks

namespace {

constexpr int kQK = 32;

std::uint16_t load_u16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
void store_u16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v & 0xFF);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}

// Float to a small integer in [lo, hi] by truncation toward zero after clamping (NaN -> lo),
// which is what llama.cpp's casts do for the in-range values they produce.
int clamp_trunc(float v, float lo, float hi) {
  if (!(v >= lo)) return static_cast<int>(lo);
  if (v > hi) return static_cast<int>(hi);
  return static_cast<int>(v);
}

}  // namespace

void dequantize(GgmlType type, std::span<const std::uint8_t> bytes, std::span<float> out) {
  auto tr = type_traits(type);
  if (!tr || !tr->dequantizable) throw std::invalid_argument("cannot dequantize ggml " + type_name(type));
  auto need = byte_size(type, out.size());
  if (!need || *need != bytes.size())
    throw std::invalid_argument(fmt::format("{} elements of {} do not fit {} bytes", out.size(), tr->name, bytes.size()));
  const std::uint8_t* p = bytes.data();
  const std::size_t n = out.size();
  switch (type) {
    case GgmlType::f32:
      std::memcpy(out.data(), p, n * 4);
      return;
    case GgmlType::f16:
      for (std::size_t i = 0; i < n; ++i) out[i] = fp16_to_float(load_u16(p + 2 * i));
      return;
    case GgmlType::bf16:
      for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_float(load_u16(p + 2 * i));
      return;
    default:
      if (dequantize_blocks(type, p, n / tr->block, out.data())) return;
      break;
  }
  throw std::invalid_argument("cannot dequantize ggml " + type_name(type));
}

std::vector<std::uint8_t> quantize(GgmlType type, std::span<const float> x) {
  auto size = byte_size(type, x.size());
  auto tr = type_traits(type);
  if (!tr || !tr->dequantizable) throw std::invalid_argument("cannot quantize to ggml " + type_name(type));
  if (!size) throw std::invalid_argument(fmt::format("{} values are not a whole number of {} blocks", x.size(), tr->name));
  std::vector<std::uint8_t> out(*size);
  std::uint8_t* p = out.data();
  const std::size_t n = x.size();
  switch (type) {
    case GgmlType::f32:
      std::memcpy(p, x.data(), n * 4);
      break;
    case GgmlType::f16:
      for (std::size_t i = 0; i < n; ++i) store_u16(p + 2 * i, float_to_fp16(x[i]));
      break;
    case GgmlType::bf16:
      for (std::size_t i = 0; i < n; ++i) store_u16(p + 2 * i, float_to_bf16(x[i]));
      break;
    case GgmlType::q8_0:
      for (std::size_t b = 0; b < n / kQK; ++b, p += 34) {
        const float* v = x.data() + b * kQK;
        float amax = 0.0f;
        for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(v[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        store_u16(p, float_to_fp16(d));
        for (int j = 0; j < kQK; ++j) {
          const float r = std::round(v[j] * id);
          p[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(clamp_trunc(r, -127.0f, 127.0f)));
        }
      }
      break;
    case GgmlType::q4_0:
      for (std::size_t b = 0; b < n / kQK; ++b, p += 18) {
        const float* v = x.data() + b * kQK;
        float amax = 0.0f, max = 0.0f;  // max: the value of largest magnitude, with its sign
        for (int j = 0; j < kQK; ++j)
          if (amax < std::fabs(v[j])) {
            amax = std::fabs(v[j]);
            max = v[j];
          }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        store_u16(p, float_to_fp16(d));
        for (int j = 0; j < kQK / 2; ++j) {
          const int lo = clamp_trunc(v[j] * id + 8.5f, 0.0f, 15.0f);
          const int hi = clamp_trunc(v[j + 16] * id + 8.5f, 0.0f, 15.0f);
          p[2 + j] = static_cast<std::uint8_t>(lo | (hi << 4));
        }
      }
      break;
    case GgmlType::q4_1:
      for (std::size_t b = 0; b < n / kQK; ++b, p += 20) {
        const float* v = x.data() + b * kQK;
        float lo_v = std::numeric_limits<float>::max(), hi_v = -std::numeric_limits<float>::max();
        for (int j = 0; j < kQK; ++j) {
          lo_v = std::min(lo_v, v[j]);
          hi_v = std::max(hi_v, v[j]);
        }
        const float d = (hi_v - lo_v) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        store_u16(p, float_to_fp16(d));
        store_u16(p + 2, float_to_fp16(lo_v));
        for (int j = 0; j < kQK / 2; ++j) {
          const int lo = clamp_trunc((v[j] - lo_v) * id + 0.5f, 0.0f, 15.0f);
          const int hi = clamp_trunc((v[j + 16] - lo_v) * id + 0.5f, 0.0f, 15.0f);
          p[4 + j] = static_cast<std::uint8_t>(lo | (hi << 4));
        }
      }
      break;
    default: throw std::invalid_argument("cannot quantize to ggml " + type_name(type));
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// values

std::size_t Value::size() const {
  switch (element) {
    case ValueType::u8:
    case ValueType::u16:
    case ValueType::u32:
    case ValueType::u64:
    case ValueType::boolean: return u.size();
    case ValueType::i8:
    case ValueType::i16:
    case ValueType::i32:
    case ValueType::i64: return i.size();
    case ValueType::f32:
    case ValueType::f64: return f.size();
    case ValueType::string: return s.size();
    case ValueType::array: return 0;
  }
  return 0;
}

namespace {
Value scalar(ValueType t) {
  Value v;
  v.type = v.element = t;
  return v;
}
Value array_of(ValueType t) {
  Value v;
  v.type = ValueType::array;
  v.element = t;
  return v;
}
}  // namespace

Value Value::u8(std::uint8_t x) { auto v = scalar(ValueType::u8); v.u = {x}; return v; }
Value Value::u32(std::uint32_t x) { auto v = scalar(ValueType::u32); v.u = {x}; return v; }
Value Value::u64(std::uint64_t x) { auto v = scalar(ValueType::u64); v.u = {x}; return v; }
Value Value::i32(std::int32_t x) { auto v = scalar(ValueType::i32); v.i = {x}; return v; }
Value Value::i64(std::int64_t x) { auto v = scalar(ValueType::i64); v.i = {x}; return v; }
Value Value::f32(float x) { auto v = scalar(ValueType::f32); v.f = {x}; return v; }
Value Value::f64(double x) { auto v = scalar(ValueType::f64); v.f = {x}; return v; }
Value Value::boolean(bool x) { auto v = scalar(ValueType::boolean); v.u = {x ? 1u : 0u}; return v; }
Value Value::string(std::string x) { auto v = scalar(ValueType::string); v.s = {std::move(x)}; return v; }
Value Value::strings(std::vector<std::string> x) { auto v = array_of(ValueType::string); v.s = std::move(x); return v; }
Value Value::f32s(const std::vector<float>& x) {
  auto v = array_of(ValueType::f32);
  v.f.assign(x.begin(), x.end());
  return v;
}
Value Value::i32s(const std::vector<std::int32_t>& x) {
  auto v = array_of(ValueType::i32);
  v.i.assign(x.begin(), x.end());
  return v;
}
Value Value::u32s(const std::vector<std::uint32_t>& x) {
  auto v = array_of(ValueType::u32);
  v.u.assign(x.begin(), x.end());
  return v;
}

// ---------------------------------------------------------------------------------------
// reader

struct Reader::Mapping {
  fpgallm::MappedFile file;
};

Reader::Reader(const std::string& path) : mapping_(std::make_unique<Mapping>(Mapping{fpgallm::MappedFile(path)})), source_(path) {
  bytes_ = mapping_->file.bytes();
  parse();
}

Reader::Reader(std::span<const std::uint8_t> bytes, std::string source) : bytes_(bytes), source_(std::move(source)) {
  parse();
}

Reader::~Reader() = default;
Reader::Reader(Reader&&) noexcept = default;

void Reader::fail(const std::string& problem) const { throw fpgallm::InputError(source_, problem); }

namespace {

std::size_t min_element_bytes(ValueType t) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean: return 1;
    case ValueType::u16:
    case ValueType::i16: return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32: return 4;
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64:
    case ValueType::string: return 8;
    case ValueType::array: return 12;
  }
  return 1;
}

bool valid_value_type(std::uint32_t t) { return t <= 12; }

// Reads one element of scalar type t into v.
void read_element(fpgallm::ByteReader& in, ValueType t, Value& v, const std::string& key) {
  switch (t) {
    case ValueType::u8: v.u.push_back(in.read<std::uint8_t>("metadata value")); return;
    case ValueType::i8: v.i.push_back(in.read<std::int8_t>("metadata value")); return;
    case ValueType::u16: v.u.push_back(in.read<std::uint16_t>("metadata value")); return;
    case ValueType::i16: v.i.push_back(in.read<std::int16_t>("metadata value")); return;
    case ValueType::u32: v.u.push_back(in.read<std::uint32_t>("metadata value")); return;
    case ValueType::i32: v.i.push_back(in.read<std::int32_t>("metadata value")); return;
    case ValueType::u64: v.u.push_back(in.read<std::uint64_t>("metadata value")); return;
    case ValueType::i64: v.i.push_back(in.read<std::int64_t>("metadata value")); return;
    case ValueType::f32: v.f.push_back(in.read<float>("metadata value")); return;
    case ValueType::f64: v.f.push_back(in.read<double>("metadata value")); return;
    case ValueType::boolean: {
      auto b = in.read<std::uint8_t>("metadata value");
      if (b > 1) in.fail(fmt::format("metadata key '{}': boolean byte {} is neither 0 nor 1", key, b));
      v.u.push_back(b);
      return;
    }
    case ValueType::string: {
      auto len = in.read<std::uint64_t>("string length");
      if (len > in.remaining())
        in.fail(fmt::format("metadata key '{}': string of {} bytes at offset {} runs past the end of the file", key, len,
                            in.offset()));
      v.s.push_back(in.read_string(static_cast<std::size_t>(len), "string"));
      return;
    }
    case ValueType::array: break;
  }
  in.fail(fmt::format("metadata key '{}': nested arrays are not supported", key));
}

std::string read_gguf_string(fpgallm::ByteReader& in, const char* what) {
  auto len = in.read<std::uint64_t>(what);
  if (len > in.remaining())
    in.fail(fmt::format("{} of {} bytes at offset {} runs past the end of the file", what, len, in.offset() - 8));
  return in.read_string(static_cast<std::size_t>(len), what);
}

}  // namespace

void Reader::parse() {
  fpgallm::ByteReader in(bytes_, source_);
  if (bytes_.size() < 4 || std::memcmp(bytes_.data(), "GGUF", 4) != 0) fail("not a GGUF file (wrong magic)");
  in.skip(4, "magic");
  version_ = in.read<std::uint32_t>("version");
  if (version_ == 1) fail("GGUF version 1 is not supported (versions 2 and 3 are)");
  if (version_ != 2 && version_ != 3)
    fail(fmt::format("unsupported GGUF version {} (versions 2 and 3 are read; a big-endian file?)", version_));
  const auto n_tensors = in.read<std::uint64_t>("tensor count");
  const auto n_kv = in.read<std::uint64_t>("metadata count");
  // Each key/value takes at least 13 bytes and each tensor info at least 28: a count that
  // the rest of the file cannot hold is a lie, caught before anything is allocated.
  if (n_kv > in.remaining() / 13)
    fail(fmt::format("header claims {} metadata entries, more than the file's {} bytes can hold", n_kv, bytes_.size()));
  if (n_tensors > in.remaining() / 28)
    fail(fmt::format("header claims {} tensors, more than the file's {} bytes can hold", n_tensors, bytes_.size()));

  std::unordered_set<std::string> keys;
  metadata_.reserve(static_cast<std::size_t>(n_kv));
  for (std::uint64_t k = 0; k < n_kv; ++k) {
    std::string key = read_gguf_string(in, "metadata key");
    if (!keys.insert(key).second) fail(fmt::format("duplicate metadata key '{}'", key));
    const auto raw_type = in.read<std::uint32_t>("metadata value type");
    if (!valid_value_type(raw_type)) fail(fmt::format("metadata key '{}' has unknown value type {}", key, raw_type));
    Value v;
    v.type = v.element = static_cast<ValueType>(raw_type);
    if (v.type == ValueType::array) {
      const auto raw_elem = in.read<std::uint32_t>("array element type");
      if (!valid_value_type(raw_elem))
        fail(fmt::format("metadata key '{}' has unknown array element type {}", key, raw_elem));
      v.element = static_cast<ValueType>(raw_elem);
      if (v.element == ValueType::array) fail(fmt::format("metadata key '{}': nested arrays are not supported", key));
      const auto count = in.read<std::uint64_t>("array length");
      if (count > in.remaining() / min_element_bytes(v.element))
        fail(fmt::format("metadata key '{}': array of {} elements runs past the end of the file", key, count));
      for (std::uint64_t e = 0; e < count; ++e) read_element(in, v.element, v, key);
    } else {
      read_element(in, v.type, v, key);
    }
    metadata_.emplace_back(std::move(key), std::move(v));
  }

  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::u32) fail("general.alignment must be a u32");
    alignment_ = a->u[0];
    if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
      fail(fmt::format("general.alignment {} is not a power of two", alignment_));
  }

  std::unordered_set<std::string> names;
  tensors_.reserve(static_cast<std::size_t>(n_tensors));
  for (std::uint64_t t = 0; t < n_tensors; ++t) {
    TensorInfo ti;
    ti.name = read_gguf_string(in, "tensor name");
    if (!names.insert(ti.name).second) fail(fmt::format("duplicate tensor '{}'", ti.name));
    const auto n_dims = in.read<std::uint32_t>("tensor rank");
    if (n_dims < 1 || n_dims > 4) fail(fmt::format("tensor '{}' has {} dimensions (1 to 4 allowed)", ti.name, n_dims));
    ti.n_elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto dim = in.read<std::uint64_t>("tensor dimension");
      if (dim == 0 || dim > (std::uint64_t{1} << 62) / ti.n_elements)
        fail(fmt::format("tensor '{}' dimension {} = {} is zero or makes the element count overflow", ti.name, d, dim));
      ti.dims.push_back(dim);
      ti.n_elements *= dim;
    }
    const auto raw_type = in.read<std::uint32_t>("tensor type");
    ti.type = static_cast<GgmlType>(raw_type);
    auto tr = type_traits(ti.type);
    if (!tr) fail(fmt::format("tensor '{}' has unknown ggml type {}", ti.name, raw_type));
    if (ti.dims[0] % tr->block != 0)
      fail(fmt::format("tensor '{}': first dimension {} is not a multiple of the {} block size {}", ti.name, ti.dims[0],
                       tr->name, tr->block));
    ti.n_bytes = *byte_size(ti.type, ti.n_elements);
    ti.offset = in.read<std::uint64_t>("tensor offset");
    if (ti.offset % alignment_ != 0)
      fail(fmt::format("tensor '{}' offset {} is not a multiple of the alignment {}", ti.name, ti.offset, alignment_));
    tensors_.push_back(std::move(ti));
  }

  data_offset_ = (in.offset() + alignment_ - 1) / alignment_ * alignment_;
  if (!tensors_.empty() && data_offset_ > bytes_.size())
    fail(fmt::format("truncated: data section would start at {}, file has {} bytes", data_offset_, bytes_.size()));
  const std::uint64_t data_size = bytes_.size() > data_offset_ ? bytes_.size() - data_offset_ : 0;
  for (const auto& ti : tensors_) {
    if (ti.offset > data_size || ti.n_bytes > data_size - ti.offset)
      fail(fmt::format("tensor '{}' ({} bytes at data offset {}) runs past the end of the file ({} data bytes)", ti.name,
                       ti.n_bytes, ti.offset, data_size));
  }
  std::vector<fpgallm::Extent> extents;
  for (const auto& ti : tensors_) extents.push_back({ti.offset, ti.offset + ti.n_bytes, ti.name});
  if (auto overlap = fpgallm::overlapping_extents(std::move(extents)); !overlap.empty())
    fail("tensors overlap: " + overlap);
}

const Value* Reader::find(const std::string& key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

namespace {
bool is_unsigned(ValueType t) {
  return t == ValueType::u8 || t == ValueType::u16 || t == ValueType::u32 || t == ValueType::u64;
}
bool is_signed(ValueType t) {
  return t == ValueType::i8 || t == ValueType::i16 || t == ValueType::i32 || t == ValueType::i64;
}
bool is_float(ValueType t) { return t == ValueType::f32 || t == ValueType::f64; }
}  // namespace

std::optional<std::int64_t> Reader::int_or_none(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_array()) fail(fmt::format("metadata key '{}' is an array, expected an integer", key));
  if (is_signed(v->type)) return v->i[0];
  if (is_unsigned(v->type)) {
    if (v->u[0] > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail(fmt::format("metadata key '{}' value {} is out of range", key, v->u[0]));
    return static_cast<std::int64_t>(v->u[0]);
  }
  fail(fmt::format("metadata key '{}' is a {}, expected an integer", key, to_string(v->type)));
}

std::int64_t Reader::get_int(const std::string& key) const {
  auto v = int_or_none(key);
  if (!v) fail(fmt::format("metadata key '{}' is missing", key));
  return *v;
}

std::uint64_t Reader::get_uint(const std::string& key) const {
  const Value* v = find(key);
  if (v && !v->is_array() && is_unsigned(v->type)) return v->u[0];
  auto i = get_int(key);
  if (i < 0) fail(fmt::format("metadata key '{}' is negative ({})", key, i));
  return static_cast<std::uint64_t>(i);
}

std::optional<double> Reader::float_or_none(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_array() && is_float(v->type)) return v->f[0];
  return static_cast<double>(get_int(key));
}

double Reader::get_float(const std::string& key) const {
  auto v = float_or_none(key);
  if (!v) fail(fmt::format("metadata key '{}' is missing", key));
  return *v;
}

bool Reader::get_bool(const std::string& key) const {
  const Value* v = find(key);
  if (!v) fail(fmt::format("metadata key '{}' is missing", key));
  if (v->type != ValueType::boolean) fail(fmt::format("metadata key '{}' is a {}, expected a bool", key, to_string(v->type)));
  return v->u[0] != 0;
}

const std::string& Reader::get_string(const std::string& key) const {
  const Value* v = find(key);
  if (!v) fail(fmt::format("metadata key '{}' is missing", key));
  if (v->type != ValueType::string)
    fail(fmt::format("metadata key '{}' is a {}, expected a string", key, to_string(v->type)));
  return v->s[0];
}

const std::vector<std::string>& Reader::get_strings(const std::string& key) const {
  const Value* v = find(key);
  if (!v) fail(fmt::format("metadata key '{}' is missing", key));
  if (!v->is_array() || v->element != ValueType::string)
    fail(fmt::format("metadata key '{}' is not an array of strings", key));
  return v->s;
}

std::vector<double> Reader::get_floats(const std::string& key) const {
  const Value* v = find(key);
  if (!v) fail(fmt::format("metadata key '{}' is missing", key));
  if (!v->is_array()) fail(fmt::format("metadata key '{}' is not an array", key));
  if (is_float(v->element)) return v->f;
  std::vector<double> out;
  if (is_signed(v->element)) out.assign(v->i.begin(), v->i.end());
  else if (is_unsigned(v->element)) out.assign(v->u.begin(), v->u.end());
  else fail(fmt::format("metadata key '{}' is not a numeric array", key));
  return out;
}

std::vector<std::int64_t> Reader::get_ints(const std::string& key) const {
  const Value* v = find(key);
  if (!v) fail(fmt::format("metadata key '{}' is missing", key));
  if (!v->is_array()) fail(fmt::format("metadata key '{}' is not an array", key));
  if (is_signed(v->element)) return v->i;
  if (!is_unsigned(v->element)) fail(fmt::format("metadata key '{}' is not an integer array", key));
  std::vector<std::int64_t> out;
  out.reserve(v->u.size());
  for (auto x : v->u) {
    if (x > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail(fmt::format("metadata key '{}' holds {} (out of range)", key, x));
    out.push_back(static_cast<std::int64_t>(x));
  }
  return out;
}

const TensorInfo* Reader::find_tensor(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorInfo& Reader::tensor(const std::string& name) const {
  if (const TensorInfo* t = find_tensor(name)) return *t;
  fail(fmt::format("tensor '{}' is missing", name));
}

std::span<const std::uint8_t> Reader::tensor_bytes(const TensorInfo& t) const {
  return bytes_.subspan(static_cast<std::size_t>(data_offset_ + t.offset), static_cast<std::size_t>(t.n_bytes));
}

std::vector<float> Reader::tensor_floats(const TensorInfo& t) const {
  auto tr = type_traits(t.type);
  if (!tr || !tr->dequantizable)
    fail(fmt::format("tensor '{}' has ggml type {}, which fpgallm cannot dequantize ({})", t.name, type_name(t.type),
                     dequantizable_type_names()));
  const std::span<const std::uint8_t> bytes = tensor_bytes(t);
  const auto n = static_cast<std::size_t>(t.n_elements);
  if (t.type == GgmlType::f32 && bytes.size() == n * sizeof(float) &&
      reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(float) == 0) {
    return fpgallm::copy_weights(reinterpret_cast<const float*>(bytes.data()), n);  // no zero fill first
  }
  std::vector<float> out(n);
  dequantize(t.type, bytes, out);
  return out;
}

// ---------------------------------------------------------------------------------------
// writer

void Writer::set(const std::string& key, Value v) {
  if (v.is_array() && v.element == ValueType::array) throw std::invalid_argument("GGUF: nested arrays are not supported");
  if (!v.is_array() && v.size() != 1) throw std::invalid_argument("GGUF: scalar value '" + key + "' needs one element");
  if (key == "general.alignment") {
    if (v.type != ValueType::u32 || v.u[0] == 0 || (v.u[0] & (v.u[0] - 1)) != 0)
      throw std::invalid_argument("general.alignment must be a u32 power of two");
  }
  for (auto& [k, old] : metadata_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  metadata_.emplace_back(key, std::move(v));
}

namespace {
void check_tensor(const std::string& name, GgmlType type, const std::vector<std::uint64_t>& dims, std::size_t n_bytes) {
  if (dims.empty() || dims.size() > 4) throw std::invalid_argument("GGUF tensor '" + name + "': 1 to 4 dimensions");
  std::uint64_t n = 1;
  for (auto d : dims) {
    if (d == 0 || d > (std::uint64_t{1} << 62) / n)
      throw std::invalid_argument("GGUF tensor '" + name + "': zero or overflowing dimension");
    n *= d;
  }
  auto tr = type_traits(type);
  if (!tr) throw std::invalid_argument("GGUF tensor '" + name + "': unknown ggml type");
  if (dims[0] % tr->block != 0)
    throw std::invalid_argument(fmt::format("GGUF tensor '{}': first dimension {} is not a multiple of the {} block {}",
                                            name, dims[0], tr->name, tr->block));
  if (byte_size(type, n) != n_bytes)
    throw std::invalid_argument(
        fmt::format("GGUF tensor '{}': {} bytes do not hold {} elements of {}", name, n_bytes, n, tr->name));
}
}  // namespace

void Writer::add_tensor(std::string name, GgmlType type, std::vector<std::uint64_t> dims,
                        std::vector<std::uint8_t> bytes) {
  check_tensor(name, type, dims, bytes.size());
  for (const auto& t : tensors_)
    if (t.name == name) throw std::invalid_argument("GGUF: duplicate tensor '" + name + "'");
  tensors_.push_back(Tensor{std::move(name), type, std::move(dims), std::move(bytes), {}});
  tensors_.back().view = tensors_.back().owned;  // a moved vector keeps its buffer
}

void Writer::add_tensor_view(std::string name, GgmlType type, std::vector<std::uint64_t> dims,
                             std::span<const std::uint8_t> bytes) {
  check_tensor(name, type, dims, bytes.size());
  for (const auto& t : tensors_)
    if (t.name == name) throw std::invalid_argument("GGUF: duplicate tensor '" + name + "'");
  tensors_.push_back(Tensor{std::move(name), type, std::move(dims), {}, bytes});
}

std::uint64_t Writer::alignment() const {
  for (const auto& [k, v] : metadata_)
    if (k == "general.alignment") return v.u[0];
  return kDefaultAlignment;
}

namespace {

template <typename Sink>
void put_raw(Sink& sink, const void* p, std::size_t n) {
  sink.put(static_cast<const std::uint8_t*>(p), n);
}
template <typename Sink, typename T>
void put(Sink& sink, T v) {
  put_raw(sink, &v, sizeof v);
}
template <typename Sink>
void put_string(Sink& sink, const std::string& s) {
  put<Sink, std::uint64_t>(sink, s.size());
  put_raw(sink, s.data(), s.size());
}
template <typename Sink>
void put_element(Sink& sink, ValueType t, const Value& v, std::size_t k) {
  switch (t) {
    case ValueType::u8: put(sink, static_cast<std::uint8_t>(v.u[k])); return;
    case ValueType::boolean: put(sink, static_cast<std::uint8_t>(v.u[k] ? 1 : 0)); return;
    case ValueType::i8: put(sink, static_cast<std::int8_t>(v.i[k])); return;
    case ValueType::u16: put(sink, static_cast<std::uint16_t>(v.u[k])); return;
    case ValueType::i16: put(sink, static_cast<std::int16_t>(v.i[k])); return;
    case ValueType::u32: put(sink, static_cast<std::uint32_t>(v.u[k])); return;
    case ValueType::i32: put(sink, static_cast<std::int32_t>(v.i[k])); return;
    case ValueType::u64: put(sink, static_cast<std::uint64_t>(v.u[k])); return;
    case ValueType::i64: put(sink, static_cast<std::int64_t>(v.i[k])); return;
    case ValueType::f32: put(sink, static_cast<float>(v.f[k])); return;
    case ValueType::f64: put(sink, static_cast<double>(v.f[k])); return;
    case ValueType::string: put_string(sink, v.s[k]); return;
    case ValueType::array: break;
  }
  throw std::invalid_argument("GGUF: nested arrays are not supported");
}

struct VectorSink {
  std::vector<std::uint8_t> out;
  void put(const std::uint8_t* p, std::size_t n) { out.insert(out.end(), p, p + n); }
  std::uint64_t written() const { return out.size(); }
};

// Buffered writes into an atomic output file (util/output.hpp).
struct FileSink {
  fpgallm::OutputFile& f;
  std::vector<std::uint8_t> buf = {};
  std::uint64_t count = 0;
  void put(const std::uint8_t* p, std::size_t n) {
    count += n;
    if (buf.size() + n > (1u << 20)) flush();
    if (n >= (1u << 20)) f.write(p, n);
    else buf.insert(buf.end(), p, p + n);
  }
  void flush() {
    f.write(buf.data(), buf.size());
    buf.clear();
  }
  std::uint64_t written() const { return count; }
};

template <typename Sink>
void pad_to(Sink& sink, std::uint64_t alignment) {
  static const std::uint8_t zeros[256] = {};
  std::uint64_t pad = (alignment - sink.written() % alignment) % alignment;
  while (pad > 0) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(pad, sizeof zeros));
    sink.put(zeros, n);
    pad -= n;
  }
}

}  // namespace

template <typename Sink>
void Writer::emit(Sink& sink, std::uint32_t version) const {
  if (version != 2 && version != 3) throw std::invalid_argument("GGUF writer: version must be 2 or 3");
  const std::uint64_t align = alignment();
  put_raw(sink, "GGUF", 4);
  put(sink, version);
  put<Sink, std::uint64_t>(sink, tensors_.size());
  put<Sink, std::uint64_t>(sink, metadata_.size());
  for (const auto& [key, v] : metadata_) {
    put_string(sink, key);
    put(sink, static_cast<std::uint32_t>(v.type));
    if (v.is_array()) {
      put(sink, static_cast<std::uint32_t>(v.element));
      put<Sink, std::uint64_t>(sink, v.size());
      for (std::size_t k = 0; k < v.size(); ++k) put_element(sink, v.element, v, k);
    } else {
      put_element(sink, v.type, v, 0);
    }
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(sink, t.name);
    put(sink, static_cast<std::uint32_t>(t.dims.size()));
    for (auto d : t.dims) put(sink, d);
    put(sink, static_cast<std::uint32_t>(t.type));
    put(sink, offset);
    offset += (t.view.size() + align - 1) / align * align;
  }
  pad_to(sink, align);
  for (const auto& t : tensors_) {
    put_raw(sink, t.view.data(), t.view.size());
    pad_to(sink, align);
  }
}

std::vector<std::uint8_t> Writer::serialize(std::uint32_t version) const {
  VectorSink sink;
  emit(sink, version);
  return std::move(sink.out);
}

void Writer::write(const std::string& path, std::uint32_t version) const {
  fpgallm::OutputFile out(path);
  FileSink sink{out};
  emit(sink, version);
  sink.flush();
  out.commit();
}

}  // namespace model::gguf
