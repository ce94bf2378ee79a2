// The multi-card accelerator backend without MPI: N cards run in N threads of one process
// over an in-process link, each holding only its shard (engine/shard.hpp). Every card's
// logits must equal the single-card backend's bit for bit with int8 weights (tensor and
// pipeline), and within the stated fp32 bound with int4 weights split by columns.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "engine/accel.hpp"
#include "engine/shard.hpp"
#include "model/model.hpp"
#include "model/synth.hpp"
#include "model/presets.hpp"
#include "mpi/dist.hpp"
#include "quant/quant.hpp"
#include "testing.hpp"
#include "util/error.hpp"

namespace {

// The cards of one process: collectives meet at a barrier, each card reads every card's
// buffer, then (after a second barrier) writes its own result.
struct Hub {
  explicit Hub(int n) : cards(n), meet(n), slots(static_cast<std::size_t>(n)) {}
  int cards;
  std::barrier<> meet;
  std::vector<const void*> slots;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::pair<int, int>, std::deque<std::vector<float>>> mail;
};

class ThreadLink : public engine::CardLink {
 public:
  ThreadLink(Hub& hub, int card) : hub_(hub), card_(card) {}
  int card() const override { return card_; }
  int cards() const override { return hub_.cards; }
  void allreduce_sum(std::int32_t* d, std::size_t n) override { reduce(d, n, [](auto a, auto b) { return a + b; }); }
  void allreduce_sum(float* d, std::size_t n) override { reduce(d, n, [](auto a, auto b) { return a + b; }); }
  void allreduce_max(float* d, std::size_t n) override {
    reduce(d, n, [](float a, float b) { return std::max(a, b); });
  }
  void allgather(const float* mine, float* all, const std::vector<int>& counts) override {
    std::vector<float> out;
    exchange(mine, [&] {
      for (int k = 0; k < hub_.cards; ++k) {
        const float* p = static_cast<const float*>(hub_.slots[std::size_t(k)]);
        out.insert(out.end(), p, p + counts[std::size_t(k)]);
      }
    });
    std::copy(out.begin(), out.end(), all);
    sent_ += 4 * std::uint64_t(out.size() - std::size_t(counts[std::size_t((card_ + 1) % hub_.cards)]));
  }
  void send(const float* d, std::size_t n, int to) override {
    std::lock_guard<std::mutex> lock(hub_.mu);
    hub_.mail[{card_, to}].emplace_back(d, d + n);
    sent_ += 4 * n;
    hub_.cv.notify_all();
  }
  void recv(float* d, std::size_t n, int from) override {
    std::unique_lock<std::mutex> lock(hub_.mu);
    auto& q = hub_.mail[{from, card_}];
    hub_.cv.wait(lock, [&] { return !q.empty(); });
    ASSERT_EQ(q.front().size(), n);
    std::copy(q.front().begin(), q.front().end(), d);
    q.pop_front();
  }
  void host_broadcast(float* d, std::size_t n) override {
    std::vector<float> out;
    exchange(d, [&] {
      const float* p = static_cast<const float*>(hub_.slots[0]);
      out.assign(p, p + n);
    });
    std::copy(out.begin(), out.end(), d);
  }
  std::uint64_t bytes_sent() const override { return sent_; }

 private:
  template <class F>
  void exchange(const void* mine, F read) {
    hub_.slots[std::size_t(card_)] = mine;
    hub_.meet.arrive_and_wait();
    read();
    hub_.meet.arrive_and_wait();
  }
  template <class T, class Op>
  void reduce(T* d, std::size_t n, Op op) {
    std::vector<T> out(n);
    exchange(d, [&] {
      for (std::size_t i = 0; i < n; ++i) {
        T v = static_cast<const T*>(hub_.slots[0])[i];
        for (int k = 1; k < hub_.cards; ++k) v = op(v, static_cast<const T*>(hub_.slots[std::size_t(k)])[i]);
        out[i] = v;
      }
    });
    std::copy(out.begin(), out.end(), d);
    sent_ += dist::ring_allreduce_bytes(n * sizeof(T), card_, hub_.cards);
  }
  Hub& hub_;
  int card_;
  std::uint64_t sent_ = 0;
};

const model::Model& stories() {
  static const model::Model m = model::load(testing_support::stories260k());
  return m;
}

const std::vector<int> kTokens = {1, 403, 407, 261, 378, 429, 270, 306, 395, 285, 271, 280, 446, 263, 275, 352, 300, 301, 46, 13};

arch::Design design(int cards, arch::Split split) {
  arch::Design d;
  d.kv_bits = 32;
  d.parallel.cards = cards;
  d.parallel.split = cards > 1 ? split : arch::Split::none;
  return d;
}

// Logits [tokens][vocab] of the single card, decoding kTokens one by one.
std::vector<float> single_card(const model::Model& m, const quant::QuantModel& qm, const std::vector<int>& tokens) {
  engine::AccelTransformer t(m, qm, design(1, arch::Split::none));
  std::vector<float> out;
  for (std::size_t p = 0; p < tokens.size(); ++p) {
    const float* l = t.forward(tokens[p], int(p));
    out.insert(out.end(), l, l + m.config.vocab_size);
  }
  return out;
}

struct CardRun {
  std::vector<float> logits;
  std::uint64_t weight_bytes = 0, kv_bytes = 0, sent = 0, replicated = 0;
};

// Every card's logits, decoding `tokens` (prefill of the first `prefill` tokens first).
std::vector<CardRun> cards_run(const model::Model& m, const quant::QuantModel& qm, int cards, arch::Split split,
                               const std::vector<int>& tokens, int prefill = 0) {
  Hub hub(cards);
  std::vector<CardRun> runs(static_cast<std::size_t>(cards));
  std::vector<std::thread> threads;
  const arch::Design d = design(cards, split);
  for (int k = 0; k < cards; ++k)
    threads.emplace_back([&, k] {
      ThreadLink link(hub, k);
      const auto share = engine::card_share(qm.config, qm.plan, d, k);
      const auto shard = engine::shard_model(qm, share);
      engine::AccelTransformer t(m, shard, d, share, &link);
      auto& r = runs[std::size_t(k)];
      r.weight_bytes = engine::resident_weight_bytes(shard);
      r.kv_bytes = t.kv_bytes();
      r.replicated = engine::replicated_weight_bytes(shard, share);
      const int v = m.config.vocab_size;
      if (prefill > 0) {
        const float* l = t.prefill(std::vector<int>(tokens.begin(), tokens.begin() + prefill), 0);
        r.logits.assign(std::size_t(prefill - 1) * v, 0.0f);  // only the last prefill token's logits exist
        r.logits.insert(r.logits.end(), l, l + v);
      }
      for (std::size_t p = std::size_t(prefill); p < tokens.size(); ++p) {
        const float* l = t.forward(tokens[p], int(p));
        r.logits.insert(r.logits.end(), l, l + v);
      }
      r.sent = link.bytes_sent();
    });
  for (auto& th : threads) th.join();
  return runs;
}

const quant::QuantModel& w8a8() {
  static const quant::QuantModel q =
      quant::quantize_model(stories(), quant::uniform_plan(stories().config, quant::Scheme::w8a8, 32));
  return q;
}

}  // namespace

TEST(ShardedEngine, TensorAndPipelineEqualOneCardBitForBit) {
  const auto one = single_card(stories(), w8a8(), kTokens);
  const auto& c = stories().config;
  const std::uint64_t whole = engine::resident_weight_bytes(w8a8());
  for (arch::Split split : {arch::Split::tensor, arch::Split::pipeline})
    for (int cards : {2, 4}) {
      const auto runs = cards_run(stories(), w8a8(), cards, split, kTokens);
      std::uint64_t weights = 0, kv = 0;
      for (int k = 0; k < cards; ++k) {
        const auto& r = runs[std::size_t(k)];
        ASSERT_EQ(r.logits.size(), one.size());
        EXPECT_EQ(std::memcmp(r.logits.data(), one.data(), one.size() * 4), 0)
            << arch::to_string(split) << " " << cards << " cards, card " << k;
        weights += r.weight_bytes;
        kv += r.kv_bytes;
      }
      // Each card's KV cache is 1/N of the whole (fp32 K and V, layers x context x kv_dim).
      EXPECT_EQ(kv, 2ull * 4 * c.n_layers * c.seq_len * c.kv_dim()) << cards;
      if (split == arch::Split::tensor) {
        // Replicated: the fp32 embedding and norms and the per-row scales of wo and w2.
        const std::uint64_t replicated_once = 4ull * (std::uint64_t(c.vocab_size) * c.dim + 2ull * c.n_layers * c.dim + c.dim) +
                                              2ull * 4 * c.n_layers * c.dim;
        EXPECT_EQ(weights, whole + (cards - 1) * replicated_once) << cards;
        EXPECT_EQ(runs[0].replicated, replicated_once);
        // Per card per token: 2 all-reduces of dim int32 + 2 of one float per layer, one
        // all-gather of the logits (ring counts).
        const std::uint64_t per_token = std::uint64_t(c.n_layers) * (2 * 2 * (cards - 1) * c.dim * 4 / cards + 2 * 2 * (cards - 1) * 4 / cards) +
                                        std::uint64_t(cards - 1) * c.vocab_size * 4 / cards;
        for (int k = 0; k < cards; ++k)
          EXPECT_NEAR(double(runs[std::size_t(k)].sent) / kTokens.size(), double(per_token), 4.0) << cards << " " << k;
      } else {
        EXPECT_EQ(weights, whole) << cards;
        // x to the next card per token; the last card sends the logits to card 0.
        for (int k = 0; k < cards; ++k)
          EXPECT_EQ(runs[std::size_t(k)].sent,
                    kTokens.size() * 4 * std::uint64_t(k + 1 < cards ? c.dim : c.vocab_size)) << cards << " " << k;
      }
    }
}

TEST(ShardedEngine, PrefillOnCardsEqualsOneCard) {
  const auto one = single_card(stories(), w8a8(), kTokens);
  const std::size_t v = std::size_t(stories().config.vocab_size);
  for (arch::Split split : {arch::Split::tensor, arch::Split::pipeline}) {
    const auto runs = cards_run(stories(), w8a8(), 2, split, kTokens, 12);
    for (const auto& r : runs)
      EXPECT_EQ(std::memcmp(r.logits.data() + 11 * v, one.data() + 11 * v, (kTokens.size() - 11) * v * 4), 0)
          << arch::to_string(split);
  }
}

TEST(ShardedEngine, Int8KvCacheAndStaticScales) {
  quant::Plan plan = quant::uniform_plan(stories().config, quant::Scheme::w8a8, 32);
  plan.kv8 = true;
  for (auto& lp : plan.layers) lp.act = quant::ActFormat::int8_static, lp.act_scale = 0.05f;
  const auto qm = quant::quantize_model(stories(), plan);
  engine::AccelTransformer t(stories(), qm, [] { auto d = design(1, arch::Split::none); d.kv_bits = 8; return d; }());
  std::vector<float> one;
  for (std::size_t p = 0; p < kTokens.size(); ++p) {
    const float* l = t.forward(kTokens[p], int(p));
    one.insert(one.end(), l, l + stories().config.vocab_size);
  }
  Hub hub(2);
  std::vector<std::vector<float>> got(2);
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k)
    threads.emplace_back([&, k] {
      ThreadLink link(hub, k);
      auto d = design(2, arch::Split::tensor);
      d.kv_bits = 8;
      const auto share = engine::card_share(qm.config, qm.plan, d, k);
      const auto shard = engine::shard_model(qm, share);
      engine::AccelTransformer card(stories(), shard, d, share, &link);
      for (std::size_t p = 0; p < kTokens.size(); ++p) {
        const float* l = card.forward(kTokens[p], int(p));
        got[std::size_t(k)].insert(got[std::size_t(k)].end(), l, l + stories().config.vocab_size);
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(std::memcmp(g.data(), one.data(), one.size() * 4), 0);
}

TEST(ShardedEngine, SplitsThatDoNotDivideAreInputErrors) {
  const auto& c = stories().config;
  EXPECT_THROW(engine::card_share(c, w8a8().plan, design(8, arch::Split::tensor), 0), fpgallm::InputError);  // 4 KV heads
  EXPECT_THROW(engine::card_share(c, w8a8().plan, design(6, arch::Split::pipeline), 0), fpgallm::InputError);  // 5 layers
  const auto w4 = quant::uniform_plan(c, quant::Scheme::w4a8, 32);
  EXPECT_THROW(engine::card_share(c, w4, design(2, arch::Split::tensor), 0), fpgallm::InputError);  // 86 w2 columns
  const auto s = engine::card_share(c, w8a8().plan, design(4, arch::Split::pipeline), 3);
  EXPECT_EQ(s.layer_begin, 3);
  EXPECT_EQ(s.layer_end, 5);
  EXPECT_FALSE(s.embedding);
  EXPECT_TRUE(s.classifier);
}

TEST(ShardedEngine, Int4TensorSplitWithinTheBound) {
  // A small synthesized shape whose per-card wo and w2 columns are whole 32-column groups.
  model::Config c;
  c.name = "int4-shard";
  c.dim = 128, c.hidden_dim = 256, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.vocab_size = 512;
  c.seq_len = 64;
  const model::Model m = model::synthesize(c, 7);
  const auto qm = quant::quantize_model(m, quant::uniform_plan(m.config, quant::Scheme::w4a8, 32));
  auto d1 = design(1, arch::Split::none);
  d1.matrix_unit.weight_bits = 4;
  engine::AccelTransformer one(m, qm, d1);
  const std::vector<int> tokens(kTokens.begin(), kTokens.begin() + 12);
  std::vector<float> ref;
  for (std::size_t p = 0; p < tokens.size(); ++p) {
    const float* l = one.forward(tokens[p], int(p));
    ref.insert(ref.end(), l, l + c.vocab_size);
  }
  Hub hub(2);
  std::vector<std::vector<float>> got(2);
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k)
    threads.emplace_back([&, k] {
      ThreadLink link(hub, k);
      auto d = design(2, arch::Split::tensor);
      d.matrix_unit.weight_bits = 4;
      const auto share = engine::card_share(qm.config, qm.plan, d, k);
      const auto shard = engine::shard_model(qm, share);
      engine::AccelTransformer card(m, shard, d, share, &link);
      for (std::size_t p = 0; p < tokens.size(); ++p) {
        const float* l = card.forward(tokens[p], int(p));
        got[std::size_t(k)].insert(got[std::size_t(k)].end(), l, l + c.vocab_size);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(got[0], got[1]) << "every card ends with the same logits";
  for (std::size_t p = 0; p < tokens.size(); ++p) {
    const float* a = ref.data() + p * c.vocab_size;
    const float* b = got[0].data() + p * c.vocab_size;
    float worst = 0, scale = 0;
    for (int i = 0; i < c.vocab_size; ++i) worst = std::max(worst, std::fabs(a[i] - b[i])), scale = std::max(scale, std::fabs(a[i]));
    EXPECT_LE(worst, 1e-5f * scale) << "position " << p;
    EXPECT_EQ(std::max_element(a, a + c.vocab_size) - a, std::max_element(b, b + c.vocab_size) - b) << p;
  }
}
