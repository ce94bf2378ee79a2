// ggml block formats without a llama.cpp-written fixture (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K,
// IQ4_NL, IQ4_XS; the others are checked against llama.cpp's files in
// test_llamacpp_files.cpp): blocks are built here from chosen codes and scales, element by
// element from the layout ggml documents (where element i's bits live), and the decoded
// values compared with the formula evaluated in double. Scales are chosen so that every
// product is exact in float, so the comparison is exact.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "model/ggml_quants.hpp"
#include "model/gguf.hpp"

namespace {

using namespace model::gguf;

std::uint16_t half(float v) {
  const std::uint16_t h = float_to_fp16(v);
  EXPECT_EQ(fp16_to_float(h), v) << "test scale must be an fp16 value";
  return h;
}
void put16(std::vector<std::uint8_t>& b, std::size_t at, std::uint16_t v) {
  b[at] = static_cast<std::uint8_t>(v & 0xFF);
  b[at + 1] = static_cast<std::uint8_t>(v >> 8);
}
void set_bits(std::vector<std::uint8_t>& b, std::size_t byte, int shift, int width, int value) {
  b[byte] = static_cast<std::uint8_t>(b[byte] | ((value & ((1 << width) - 1)) << shift));
}

std::vector<float> decode(GgmlType t, const std::vector<std::uint8_t>& block, int n) {
  EXPECT_EQ(byte_size(t, static_cast<std::uint64_t>(n)), block.size());
  std::vector<float> out(static_cast<std::size_t>(n));
  dequantize(t, block, out);
  return out;
}

// Element j of a 32-element block's 4-bit field: byte j % 16, low nibble for j < 16.
void put_nibble32(std::vector<std::uint8_t>& b, std::size_t qs, int j, int v) {
  set_bits(b, qs + static_cast<std::size_t>(j % 16), j < 16 ? 0 : 4, 4, v);
}

std::mt19937 rng(20261201);
int draw(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

TEST(GgmlQuants, Q4_1) {
  const float d = 0.125f, m = -0.75f;
  std::vector<std::uint8_t> b(20, 0);
  put16(b, 0, half(d));
  put16(b, 2, half(m));
  std::vector<int> q(32);
  for (int j = 0; j < 32; ++j) put_nibble32(b, 4, j, q[j] = draw(0, 15));
  const auto x = decode(GgmlType::q4_1, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(x[j], static_cast<double>(d) * q[j] + m) << j;
}

TEST(GgmlQuants, Q5_0AndQ5_1) {
  for (bool with_min : {false, true}) {
    const float d = 0.0625f, m = 1.5f;
    const std::size_t qh = with_min ? 4 : 2, qs = qh + 4;
    std::vector<std::uint8_t> b(with_min ? 24 : 22, 0);
    put16(b, 0, half(d));
    if (with_min) put16(b, 2, half(m));
    std::vector<int> q(32);
    for (int j = 0; j < 32; ++j) {
      q[j] = draw(0, 31);
      put_nibble32(b, qs, j, q[j] & 15);
      set_bits(b, qh + static_cast<std::size_t>(j / 8), j % 8, 1, q[j] >> 4);  // bit j of the u32 qh
    }
    const auto x = decode(with_min ? GgmlType::q5_1 : GgmlType::q5_0, b, 32);
    for (int j = 0; j < 32; ++j) {
      const double want = with_min ? static_cast<double>(d) * q[j] + m : static_cast<double>(d) * (q[j] - 16);
      EXPECT_EQ(x[j], want) << (with_min ? "Q5_1 " : "Q5_0 ") << j;
    }
  }
}

TEST(GgmlQuants, Iq4Nl) {
  const int table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  const float d = 0.25f;
  std::vector<std::uint8_t> b(18, 0);
  put16(b, 0, half(d));
  std::vector<int> q(32);
  for (int j = 0; j < 32; ++j) put_nibble32(b, 2, j, q[j] = j % 16);  // every code twice
  const auto x = decode(GgmlType::iq4_nl, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(x[j], static_cast<double>(d) * table[q[j]]) << j;
}

TEST(GgmlQuants, Iq4Xs) {
  const int table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  const float d = 0.03125f;
  std::vector<std::uint8_t> b(136, 0);
  put16(b, 0, half(d));
  std::vector<int> ls(8), q(256);
  std::uint16_t scales_h = 0;
  for (int s = 0; s < 8; ++s) {
    ls[s] = s == 0 ? 0 : s == 1 ? 63 : draw(0, 63);  // both extremes: scale -32 and +31
    set_bits(b, 4 + static_cast<std::size_t>(s / 2), 4 * (s % 2), 4, ls[s] & 15);
    scales_h = static_cast<std::uint16_t>(scales_h | ((ls[s] >> 4) << (2 * s)));
  }
  put16(b, 2, scales_h);
  for (int i = 0; i < 256; ++i) put_nibble32(b, 8 + 16 * static_cast<std::size_t>(i / 32), i % 32, q[i] = draw(0, 15));
  const auto x = decode(GgmlType::iq4_xs, b, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(x[i], static_cast<double>(d) * (ls[i / 32] - 32) * table[q[i]]) << i;
}

// K-quant 2-bit fields: element i = 128 h + 32 k + l (l < 32) sits in byte 32 h + l of qs at
// bit shift 2 k; its sub-block of 16 is i / 16.
void put_k2(std::vector<std::uint8_t>& b, std::size_t qs, int i, int v) {
  const int h = i / 128, k = (i % 128) / 32, l = i % 32;
  set_bits(b, qs + static_cast<std::size_t>(32 * h + l), 2 * k, 2, v);
}

TEST(GgmlQuants, Q2_K) {
  const float d = 0.5f, dmin = 0.25f;
  std::vector<std::uint8_t> b(84, 0);
  std::vector<int> sc(16), mn(16), q(256);
  for (int s = 0; s < 16; ++s) {
    sc[s] = draw(0, 15);
    mn[s] = draw(0, 15);
    b[static_cast<std::size_t>(s)] = static_cast<std::uint8_t>(sc[s] | (mn[s] << 4));
  }
  for (int i = 0; i < 256; ++i) put_k2(b, 16, i, q[i] = draw(0, 3));
  put16(b, 80, half(d));
  put16(b, 82, half(dmin));
  const auto x = decode(GgmlType::q2_k, b, 256);
  for (int i = 0; i < 256; ++i)
    EXPECT_EQ(x[i], static_cast<double>(d) * sc[i / 16] * q[i] - static_cast<double>(dmin) * mn[i / 16]) << i;
}

TEST(GgmlQuants, Q3_K) {
  const float d = 0.0078125f;
  std::vector<std::uint8_t> b(110, 0);
  std::vector<int> scale(16), q(256);
  for (int s = 0; s < 16; ++s) {
    const int six = s == 0 ? 0 : s == 15 ? 63 : draw(0, 63);  // scale - 32 spans -32..31
    scale[s] = six - 32;
    // Low 4 bits: byte s (s < 8) or the high nibble of byte s - 8; high 2 bits: byte 8 + s % 4
    // at bit 2 (s / 4).
    set_bits(b, 96 + static_cast<std::size_t>(s % 8), s < 8 ? 0 : 4, 4, six & 15);
    set_bits(b, 96 + 8 + static_cast<std::size_t>(s % 4), 2 * (s / 4), 2, six >> 4);
  }
  for (int i = 0; i < 256; ++i) {
    q[i] = draw(-4, 3);
    const int high = q[i] >= 0 ? 1 : 0;  // the hmask bit set means "no -4"
    const int low = high ? q[i] : q[i] + 4;
    put_k2(b, 32, i, low);
    // hmask: element i = 128 h + 32 k + l uses bit (4 h + k) of byte l.
    set_bits(b, static_cast<std::size_t>(i % 32), 4 * (i / 128) + (i % 128) / 32, 1, high);
  }
  put16(b, 108, half(d));
  const auto x = decode(GgmlType::q3_k, b, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(x[i], static_cast<double>(d) * scale[i / 16] * q[i]) << i;
}

TEST(GgmlQuants, BlockSizesAreGgmls) {
  // (type, elements per block, bytes per block) from ggml's type traits.
  const struct {
    GgmlType t;
    std::uint32_t block, bytes;
  } sizes[] = {{GgmlType::q4_0, 32, 18},   {GgmlType::q4_1, 32, 20},   {GgmlType::q5_0, 32, 22},
               {GgmlType::q5_1, 32, 24},   {GgmlType::q8_0, 32, 34},   {GgmlType::q2_k, 256, 84},
               {GgmlType::q3_k, 256, 110}, {GgmlType::q4_k, 256, 144}, {GgmlType::q5_k, 256, 176},
               {GgmlType::q6_k, 256, 210}, {GgmlType::iq4_nl, 32, 18}, {GgmlType::iq4_xs, 256, 136}};
  for (const auto& s : sizes) {
    const auto tr = type_traits(s.t);
    ASSERT_TRUE(tr.has_value());
    EXPECT_EQ(tr->block, s.block) << tr->name;
    EXPECT_EQ(tr->block_bytes, s.bytes) << tr->name;
    EXPECT_TRUE(tr->dequantizable) << tr->name;
  }
  EXPECT_EQ(type_name(static_cast<GgmlType>(20)), "IQ4_NL");
  EXPECT_EQ(type_name(static_cast<GgmlType>(16)), "IQ2_XXS");  // named, though not decoded
  EXPECT_FALSE(type_traits(GgmlType::iq2_xxs)->dequantizable);
}

}  // namespace
