// Attention over the KV cache against a double-precision two-pass softmax reference, for
// fp32, fp16 and int8 caches (the reference reads the same stored values), grouped-query
// heads, several context lengths that cross KV blocks; prefill blocks must equal decode
// steps bit for bit.
//
// Bound (u = 2^-24, n = keys, D = head_dim, L = lanes): every output element satisfies
//   |out - ref| <= (n + D/L + log2 L + 16) u * sum_p softmax_p |v_p[i]| ,
// the error of a weighted mean whose weights carry the table exp's 2 ulp and the running
// rescaling, and whose scores carry the dot product's depth.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/attention.hpp"

namespace {

constexpr double kU = 1.0 / 16777216.0;
using V = kernels::VectorUnitConfig<16, 8, 256>;
using Decode = kernels::AttentionConfig<V, 64, 32, 1, 1024, 16>;
using Prefill = kernels::AttentionConfig<V, 64, 32, 8, 1024, 16>;
// A head size that is not a whole number of lane groups (stories15m's 48 on the 32 lanes
// `fpgallm plan stories15m --device u280` picks), and one narrower than the lanes.
using Lanes32 = kernels::VectorUnitConfig<32, 8, 288>;
using Head48 = kernels::AttentionConfig<Lanes32, 48, 32, 1, 1024, 16>;
using Head24 = kernels::AttentionConfig<Lanes32, 24, 32, 1, 1024, 16>;

struct Cache {
  int kv_dim, kv_heads, ctx;
  std::vector<float> kf, vf;
  std::vector<std::uint16_t> kh, vh;
  std::vector<kernels::i8> kq, vq;
  std::vector<float> ks, vs;
  Cache(int kvd, int kvh, int c)
      : kv_dim(kvd), kv_heads(kvh), ctx(c), kf(std::size_t(c) * kvd), vf(kf.size()), kh(kf.size()), vh(kf.size()),
        kq(kf.size()), vq(kf.size()), ks(std::size_t(c) * kvh), vs(ks.size()) {}
  template <int BITS>
  kernels::KvCache<BITS> view() {
    if constexpr (BITS == 32) return {kf.data(), vf.data(), nullptr, nullptr, kv_dim, kv_heads};
    if constexpr (BITS == 16) return {kh.data(), vh.data(), nullptr, nullptr, kv_dim, kv_heads};
    if constexpr (BITS == 8) return {kq.data(), vq.data(), ks.data(), vs.data(), kv_dim, kv_heads};
  }
  // The value attention reads back for element i of position p.
  template <int BITS>
  double k_at(int p, int i) const {
    const std::size_t o = std::size_t(p) * kv_dim + i;
    if constexpr (BITS == 32) return kf[o];
    if constexpr (BITS == 16) return kernels::half_to_float(kh[o]);
    return double(float(kq[o]) * ks[std::size_t(p) * kv_heads + i / (kv_dim / kv_heads)]);
  }
  template <int BITS>
  double v_at(int p, int i) const {
    const std::size_t o = std::size_t(p) * kv_dim + i;
    if constexpr (BITS == 32) return vf[o];
    if constexpr (BITS == 16) return kernels::half_to_float(vh[o]);
    return double(float(vq[o]) * vs[std::size_t(p) * kv_heads + i / (kv_dim / kv_heads)]);
  }
};

template <int BITS, class ACFG = Decode>
void check_decode(int n_heads, int kv_heads, int head_dim, int ctx, unsigned seed) {
  constexpr int kLanes = ACFG::vector_unit::lanes;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  const int kv_dim = kv_heads * head_dim, q_dim = n_heads * head_dim;
  Cache c(kv_dim, kv_heads, ctx);
  std::vector<float> k(kv_dim), v(kv_dim), q(q_dim), out(q_dim);
  for (int p = 0; p < ctx; ++p) {
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    kernels::kv_store<ACFG, BITS>(c.view<BITS>(), k.data(), v.data(), 1, p, head_dim);
  }
  for (auto& x : q) x = nd(rng);
  const int pos = ctx - 1;
  kernels::attention<ACFG, BITS>(out.data(), q.data(), c.view<BITS>(), 1, pos, n_heads, head_dim, 0, n_heads);
  const int kv_mul = n_heads / kv_heads;
  for (int h = 0; h < n_heads; ++h) {
    const int off = (h / kv_mul) * head_dim;
    std::vector<double> s(ctx);
    double m = -1e300;
    for (int p = 0; p < ctx; ++p) {
      double d = 0;
      for (int i = 0; i < head_dim; ++i) d += double(q[h * head_dim + i]) * c.k_at<BITS>(p, off + i);
      s[p] = d / std::sqrt(double(head_dim));
      m = std::max(m, s[p]);
    }
    double z = 0;
    for (double& x : s) z += (x = std::exp(x - m));
    const double bound = (ctx + double(head_dim) / kLanes + std::log2(double(kLanes)) + 16) * kU;
    for (int i = 0; i < head_dim; ++i) {
      double ref = 0, mag = 0;
      for (int p = 0; p < ctx; ++p) {
        ref += s[p] / z * c.v_at<BITS>(p, off + i);
        mag += s[p] / z * std::fabs(c.v_at<BITS>(p, off + i));
      }
      ASSERT_LE(std::fabs(out[h * head_dim + i] - ref), bound * mag)
          << "bits " << BITS << " ctx " << ctx << " head " << h << " i " << i;
    }
  }
}

TEST(Attention, DecodeMatchesDoubleReference) {
  unsigned seed = 1;
  for (int ctx : {1, 5, 32, 33, 100, 300}) {
    check_decode<32>(8, 4, 8, ctx, seed++);
    check_decode<32>(4, 4, 64, ctx, seed++);
    check_decode<16>(8, 2, 16, ctx, seed++);
    check_decode<8>(8, 4, 8, ctx, seed++);
    check_decode<8>(6, 3, 64, ctx, seed++);
    check_decode<8, Head48>(6, 6, 48, ctx, seed++);
    check_decode<32, Head48>(6, 3, 48, ctx, seed++);
    check_decode<16, Head24>(4, 2, 24, ctx, seed++);
  }
}

template <int BITS>
void check_prefill_equals_decode(int start, int block, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  const int n_heads = 8, kv_heads = 2, hd = 16, kv_dim = kv_heads * hd, q_dim = n_heads * hd;
  // `start`: tokens already in the cache.
  const int ctx = start + block;
  std::vector<float> k(std::size_t(ctx) * kv_dim), v(k.size()), q(std::size_t(block) * q_dim);
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  for (auto& x : q) x = nd(rng);
  Cache a(kv_dim, kv_heads, ctx), b(kv_dim, kv_heads, ctx);
  // a: decode, one token at a time.
  std::vector<float> dec(q.size()), pre(q.size());
  for (int p = 0; p < ctx; ++p) {
    kernels::kv_store<Decode, BITS>(a.view<BITS>(), &k[std::size_t(p) * kv_dim], &v[std::size_t(p) * kv_dim], 1, p, hd);
    if (p >= start) {
      const int t = p - start;
      kernels::attention<Decode, BITS>(&dec[std::size_t(t) * q_dim], &q[std::size_t(t) * q_dim], a.view<BITS>(), 1, p,
                                       n_heads, hd, 0, n_heads);
    }
  }
  // b: the first `start` positions one by one, then the block at once.
  for (int p = 0; p < start; ++p)
    kernels::kv_store<Decode, BITS>(b.view<BITS>(), &k[std::size_t(p) * kv_dim], &v[std::size_t(p) * kv_dim], 1, p, hd);
  kernels::kv_store<Prefill, BITS>(b.view<BITS>(), &k[std::size_t(start) * kv_dim], &v[std::size_t(start) * kv_dim], block,
                                   start, hd);
  kernels::attention<Prefill, BITS>(pre.data(), q.data(), b.view<BITS>(), block, start, n_heads, hd, 0, n_heads);
  ASSERT_EQ(std::memcmp(dec.data(), pre.data(), dec.size() * 4), 0) << "block " << block << " bits " << BITS;
}

TEST(Attention, PrefillBlockEqualsDecodeStepsBitForBit) {
  for (int block : {1, 3, 8}) {
    check_prefill_equals_decode<32>(37, block, 50 + block);
    check_prefill_equals_decode<16>(37, block, 60 + block);
    check_prefill_equals_decode<8>(37, block, 70 + block);
  }
  // Blocks whose first queries end before a KV block that the later ones reach (positions
  // 60..67 and 61..65 around the KV block edge at 64).
  const int around_edge[2][2] = {{60, 8}, {61, 5}};
  for (const auto& sb : around_edge) {
    check_prefill_equals_decode<32>(sb[0], sb[1], 80 + sb[0]);
    check_prefill_equals_decode<16>(sb[0], sb[1], 90 + sb[0]);
    check_prefill_equals_decode<8>(sb[0], sb[1], 100 + sb[0]);
  }
}

TEST(Attention, HeadRangesComposeToTheWhole) {
  // The backend splits heads over threads; any split gives the same bits.
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  const int n_heads = 8, kv_heads = 4, hd = 8, ctx = 70;
  Cache c(kv_heads * hd, kv_heads, ctx);
  for (auto& x : c.kf) x = nd(rng);
  for (auto& x : c.vf) x = nd(rng);
  std::vector<float> q(n_heads * hd), whole(q.size()), parts(q.size());
  for (auto& x : q) x = nd(rng);
  kernels::attention<Decode, 32>(whole.data(), q.data(), c.view<32>(), 1, ctx - 1, n_heads, hd, 0, n_heads);
  kernels::attention<Decode, 32>(parts.data(), q.data(), c.view<32>(), 1, ctx - 1, n_heads, hd, 0, 3);
  kernels::attention<Decode, 32>(parts.data(), q.data(), c.view<32>(), 1, ctx - 1, n_heads, hd, 3, n_heads);
  EXPECT_EQ(std::memcmp(whole.data(), parts.data(), whole.size() * 4), 0);
}

}  // namespace
