// GGUF: block formats against hand-computed values, the reader against hand-built bytes
// (independent of our writer), and writer/reader round trips for versions 2 and 3.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "model/gguf.hpp"
#include "model/gguf_llama.hpp"
#include "model/model.hpp"
#include "testing.hpp"
#include "util/error.hpp"

namespace {

using namespace model::gguf;

// Little-endian byte builder for hand-made files.
struct Bytes {
  std::vector<std::uint8_t> b;
  template <typename T>
  Bytes& put(T v) {
    auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<std::uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::string& s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& pad(std::size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
};

TEST(Half, DecodesHandComputedValues) {
  EXPECT_EQ(fp16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xC000), -2.0f);
  EXPECT_EQ(fp16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x3555), 0.333251953125f);   // 1 + 341/1024, times 2^-2
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_float(0x03FF), 1023.0f * std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_float(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(fp16_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_float(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7E00)));
  EXPECT_TRUE(std::signbit(fp16_to_float(0x8000)));
}

// The vector rounding against the scalar conversions, bit for bit: every 4099th float
// bit pattern (both signs, zeros, subnormals, ties, overflow, infinities, NaNs) at every
// offset in a lane of eight.
TEST(Half, RoundingManyHasTheScalarBits) {
  std::vector<float> x;
  for (std::uint64_t b = 0; b <= 0xFFFFFFFFu; b += 4099) x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
  for (float v : {0.0f, -0.0f, 65519.0f, 65520.0f, -65520.0f, std::ldexp(1.0f, -25), std::ldexp(1.5f, -25),
                  1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11), std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()})
    x.push_back(v);
  for (std::size_t skip = 0; skip < 8; ++skip) {
    std::vector<float> out(x.size() - skip);
    model::gguf::round_to_fp16(x.data() + skip, out.data(), out.size());
    for (std::size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(fp16_to_float(float_to_fp16(x[skip + i]))))
          << std::hex << std::bit_cast<std::uint32_t>(x[skip + i]);
  }
}

TEST(Half, EncodesWithRoundToNearestEven) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_fp16(0.1f), 0x2E66);  // 0.0999755859375
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00);  // halfway to 65536 ties to even: infinity
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie, even stays
  EXPECT_EQ(float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie, odd rounds up
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);              // tie to even zero
  EXPECT_EQ(float_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_fp16(std::ldexp(3.0f, -25)), 0x0002);              // 1.5 ulp ties to 2
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(float_to_fp16(std::nanf("")) & 0x7C00, 0x7C00);
  // Every half value survives the round trip.
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;  // NaN payloads
    ASSERT_EQ(float_to_fp16(fp16_to_float(static_cast<std::uint16_t>(h))), h) << h;
  }
}

TEST(BFloat16, HandComputedValues) {
  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xC0A0), -5.0f);
  EXPECT_EQ(bf16_to_float(0x4049), 3.140625f);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie, even stays
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(float_to_bf16(3.14159265f), 0x4049);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(Dequantize, F16AndBF16Bytes) {
  std::vector<std::uint8_t> f16 = {0x00, 0x3C, 0x00, 0xC0, 0x55, 0x35};
  std::vector<float> out(3);
  dequantize(GgmlType::f16, f16, out);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.0f, 0.333251953125f}));
  std::vector<std::uint8_t> bf16 = {0x80, 0x3F, 0xA0, 0xC0};
  std::vector<float> out2(2);
  dequantize(GgmlType::bf16, bf16, out2);
  EXPECT_EQ(out2, (std::vector<float>{1.0f, -5.0f}));
}

TEST(Dequantize, Q8_0Block) {
  // d = 0.5 (fp16 0x3800), q[j] = j - 16: x[j] = 0.5 * (j - 16).
  std::vector<std::uint8_t> block = {0x00, 0x38};
  for (int j = 0; j < 32; ++j) block.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(j - 16)));
  std::vector<float> out(32);
  dequantize(GgmlType::q8_0, block, out);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * (j - 16)) << j;
  EXPECT_THROW(dequantize(GgmlType::q8_0, block, std::span<float>(out).first(16)), std::invalid_argument);
}

TEST(Dequantize, Q4_0AndQ4_1NibbleOrder) {
  // d = 2 (0x4000); qs[j] = j | (15-j) << 4: element j = (j-8)*2, element 16+j = (7-j)*2.
  std::vector<std::uint8_t> q4 = {0x00, 0x40};
  for (int j = 0; j < 16; ++j) q4.push_back(static_cast<std::uint8_t>(j | ((15 - j) << 4)));
  std::vector<float> out(32);
  dequantize(GgmlType::q4_0, q4, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], (j - 8) * 2.0f);
    EXPECT_EQ(out[16 + j], (7 - j) * 2.0f);
  }
  // Q4_1: d = 1 (0x3C00), m = -1 (0xBC00): x = nibble - 1.
  std::vector<std::uint8_t> q41 = {0x00, 0x3C, 0x00, 0xBC};
  for (int j = 0; j < 16; ++j) q41.push_back(static_cast<std::uint8_t>(j | ((15 - j) << 4)));
  dequantize(GgmlType::q4_1, q41, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], j - 1.0f);
    EXPECT_EQ(out[16 + j], 14.0f - j);
  }
}

TEST(Quantize, Q8_0FollowsTheReferenceRounding) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = (j - 16) / 16.0f;  // amax 1 at j = 0
  auto q = quantize(GgmlType::q8_0, x);
  ASSERT_EQ(q.size(), 34u);
  EXPECT_EQ(q[0] | (q[1] << 8), float_to_fp16(1.0f / 127.0f));
  EXPECT_EQ(static_cast<std::int8_t>(q[2]), -127);     // -1
  EXPECT_EQ(static_cast<std::int8_t>(q[2 + 16]), 0);   // 0
  EXPECT_EQ(static_cast<std::int8_t>(q[2 + 20]), 32);  // 0.25 * 127 = 31.75
  std::vector<float> back(32);
  dequantize(GgmlType::q8_0, q, back);
  const float d = fp16_to_float(static_cast<std::uint16_t>(q[0] | (q[1] << 8)));
  for (int j = 0; j < 32; ++j) EXPECT_LE(std::fabs(back[j] - x[j]), d * 0.5f + 1e-6f) << j;
  auto zeros = quantize(GgmlType::q8_0, std::vector<float>(32, 0.0f));
  for (auto b : zeros) EXPECT_EQ(b, 0);
  EXPECT_THROW(quantize(GgmlType::q8_0, std::vector<float>(31, 1.0f)), std::invalid_argument);
}

TEST(Quantize, Q4_0FollowsTheReferenceRounding) {
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;  // largest magnitude, negative: d = -8 / -8 = 1
  x[1] = 7.0f;
  x[17] = 3.4f;
  auto q = quantize(GgmlType::q4_0, x);
  EXPECT_EQ(q[0] | (q[1] << 8), 0x3C00);
  EXPECT_EQ(q[2] & 0x0F, 0);      // -8 -> nibble 0
  EXPECT_EQ(q[3] & 0x0F, 15);     // 7 -> nibble 15
  EXPECT_EQ(q[3] >> 4, 11);       // x[17] = 3.4 -> trunc(3.4 + 8.5) = 11
  EXPECT_EQ(q[4] & 0x0F, 8);      // 0 -> nibble 8
  std::vector<float> back(32);
  dequantize(GgmlType::q4_0, q, back);
  EXPECT_EQ(back[0], -8.0f);
  EXPECT_EQ(back[17], 3.0f);
}

// A two-tensor GGUF built byte by byte from the specification.
std::vector<std::uint8_t> hand_built_gguf(std::uint32_t version) {
  Bytes f;
  f.raw("GGUF").put<std::uint32_t>(version).put<std::uint64_t>(2).put<std::uint64_t>(5);
  f.str("general.architecture").put<std::uint32_t>(8).str("llama");
  f.str("answer").put<std::uint32_t>(4).put<std::uint32_t>(42);
  f.str("neg").put<std::uint32_t>(11).put<std::int64_t>(-7);
  f.str("flag").put<std::uint32_t>(7).put<std::uint8_t>(1);
  f.str("words").put<std::uint32_t>(9).put<std::uint32_t>(8).put<std::uint64_t>(2).str("a").str("bc");
  f.str("m").put<std::uint32_t>(2).put<std::uint64_t>(3).put<std::uint64_t>(2).put<std::uint32_t>(0).put<std::uint64_t>(0);
  f.str("h").put<std::uint32_t>(1).put<std::uint64_t>(4).put<std::uint32_t>(1).put<std::uint64_t>(32);
  f.pad(32);
  for (int i = 0; i < 6; ++i) f.put<float>(static_cast<float>(i) + 0.5f);  // m: 24 bytes
  f.pad(32);
  for (std::uint16_t h : {0x3C00, 0xC000, 0x3800, 0x0000}) f.put<std::uint16_t>(h);
  return f.b;
}

TEST(GgufReader, ReadsHandBuiltFileVersions2And3) {
  for (std::uint32_t version : {2u, 3u}) {
    auto bytes = hand_built_gguf(version);
    Reader r(bytes, "hand.gguf");
    EXPECT_EQ(r.version(), version);
    EXPECT_EQ(r.get_string("general.architecture"), "llama");
    EXPECT_EQ(r.get_int("answer"), 42);
    EXPECT_EQ(r.get_int("neg"), -7);
    EXPECT_TRUE(r.get_bool("flag"));
    EXPECT_EQ(r.get_strings("words"), (std::vector<std::string>{"a", "bc"}));
    EXPECT_EQ(r.data_offset() % 32, 0u);
    ASSERT_EQ(r.tensors().size(), 2u);
    const auto& m = r.tensor("m");
    EXPECT_EQ(m.dims, (std::vector<std::uint64_t>{3, 2}));
    EXPECT_EQ(r.tensor_floats(m), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f}));
    EXPECT_EQ(r.tensor_floats(r.tensor("h")), (std::vector<float>{1.0f, -2.0f, 0.5f, 0.0f}));
    EXPECT_THROW(r.get_string("answer"), fpgallm::InputError);
    EXPECT_THROW(r.get_int("missing"), fpgallm::InputError);
  }
}

TEST(GgufReader, RejectsLiesWithTheFileNamed) {
  auto good = hand_built_gguf(3);
  auto expect_error = [](std::vector<std::uint8_t> b, const std::string& fragment) {
    try {
      Reader r(b, "bad.gguf");
      ADD_FAILURE() << "accepted a bad file; expected: " << fragment;
    } catch (const fpgallm::InputError& e) {
      EXPECT_EQ(e.source(), "bad.gguf");
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  auto bad = good;
  bad[0] = 'X';
  expect_error(bad, "wrong magic");
  bad = good;
  bad[4] = 1;
  expect_error(bad, "version 1");
  bad = good;
  std::uint64_t huge = ~std::uint64_t{0};
  std::memcpy(bad.data() + 8, &huge, 8);
  expect_error(bad, "tensors");
  for (std::size_t cut : {std::size_t{3}, std::size_t{20}, std::size_t{100}, good.size() - 1})
    expect_error(std::vector<std::uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)), "");
}

TEST(GgufWriter, RoundTripsEveryValueTypeInVersions2And3) {
  Writer w;
  w.set("u8", Value::u8(200));
  w.set("u32", Value::u32(4000000000u));
  w.set("u64", Value::u64(1ull << 40));
  w.set("i32", Value::i32(-5));
  w.set("i64", Value::i64(-(1ll << 40)));
  w.set("f32", Value::f32(0.25f));
  w.set("f64", Value::f64(1e-300));
  w.set("b", Value::boolean(false));
  w.set("s", Value::string("héllo"));
  w.set("ss", Value::strings({"x", "", "yz"}));
  w.set("fs", Value::f32s({1.5f, -2.0f}));
  w.set("is", Value::i32s({-1, 7}));
  w.set("general.alignment", Value::u32(64));
  std::vector<float> v(64);
  for (int i = 0; i < 64; ++i) v[i] = i * 0.125f - 3.0f;
  w.add_tensor("q", GgmlType::q8_0, {32, 2}, quantize(GgmlType::q8_0, v));
  w.add_tensor("f", GgmlType::f32, {5}, quantize(GgmlType::f32, std::span<const float>(v).first(5)));
  EXPECT_THROW(w.add_tensor("f", GgmlType::f32, {1}, std::vector<std::uint8_t>(4)), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("g", GgmlType::f32, {2}, std::vector<std::uint8_t>(4)), std::invalid_argument);
  for (std::uint32_t version : {2u, 3u}) {
    auto bytes = w.serialize(version);
    Reader r(bytes, "rt.gguf");
    EXPECT_EQ(r.version(), version);
    EXPECT_EQ(r.alignment(), 64u);
    EXPECT_EQ(r.get_uint("u8"), 200u);
    EXPECT_EQ(r.get_uint("u32"), 4000000000u);
    EXPECT_EQ(r.get_uint("u64"), 1ull << 40);
    EXPECT_EQ(r.get_int("i32"), -5);
    EXPECT_EQ(r.get_int("i64"), -(1ll << 40));
    EXPECT_EQ(r.get_float("f32"), 0.25);
    EXPECT_EQ(r.get_float("f64"), 1e-300);
    EXPECT_FALSE(r.get_bool("b"));
    EXPECT_EQ(r.get_string("s"), "héllo");
    EXPECT_EQ(r.get_strings("ss"), (std::vector<std::string>{"x", "", "yz"}));
    EXPECT_EQ(r.get_floats("fs"), (std::vector<double>{1.5, -2.0}));
    EXPECT_EQ(r.get_ints("is"), (std::vector<std::int64_t>{-1, 7}));
    EXPECT_EQ(r.tensor("q").offset % 64, 0u);
    EXPECT_EQ(r.tensor("f").offset % 64, 0u);
    EXPECT_EQ(r.tensor("f").type, GgmlType::f32);
    EXPECT_EQ(r.tensor_floats(r.tensor("f")), std::vector<float>(v.begin(), v.begin() + 5));
    auto q = r.tensor_floats(r.tensor("q"));
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(q[i], v[i], 3.0f / 127);
  }
}

TEST(GgufWriter, WriteIsAtomicAndNamesTheFile) {
  auto dir = testing_support::scratch_dir("gguf-write");
  Writer w;
  w.set("k", Value::u32(1));
  w.write(dir + "/ok.gguf");
  EXPECT_EQ(Reader(dir + "/ok.gguf").get_int("k"), 1);
  try {
    w.write(dir + "/missing-folder/x.gguf");
    FAIL();
  } catch (const fpgallm::InputError& e) {
    EXPECT_EQ(e.source(), dir + "/missing-folder/x.gguf");
  }
}

}  // namespace
