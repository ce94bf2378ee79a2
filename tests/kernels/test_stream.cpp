// kernels::Fifo, the C-simulation stand-in for hls::stream: first in, first out, whatever
// the mix of writes and reads, against a plain counter; reading an empty FIFO stops the
// simulation, as the hardware would stall there.
#include <gtest/gtest.h>

#include "kernels/matrix_unit.hpp"
#include "kernels/stream.hpp"

namespace {

TEST(Stream, FirstInFirstOutAcrossRefillsAndCompaction) {
  kernels::Fifo<int, 4> f("counter");
  EXPECT_TRUE(f.empty());
  int written = 0, read = 0;
  // Producer ahead of the consumer by a growing margin, never drained (compaction runs),
  // then drained, then refilled.
  for (int round = 0; round < 40; ++round) {
    for (int i = 0; i < 500; ++i) f.write(written++);
    for (int i = 0; i < 300; ++i) ASSERT_EQ(f.read(), read++);
    ASSERT_EQ(f.size(), static_cast<std::size_t>(written - read));
  }
  while (!f.empty()) {
    int v = -1;
    f >> v;
    ASSERT_EQ(v, read++);
  }
  EXPECT_EQ(read, written);
  int v = -1;
  EXPECT_FALSE(f.read_nb(v));
  f << 7;
  EXPECT_TRUE(f.write_nb(8));
  EXPECT_TRUE(f.read_nb(v));
  EXPECT_EQ(v, 7);
  f.read(v);
  EXPECT_EQ(v, 8);
  EXPECT_TRUE(f.empty());
  EXPECT_FALSE(f.full());
}

TEST(Stream, WideWordsKeepEveryLane) {
  kernels::Fifo<kernels::WeightStep<2>, 4> f;
  for (int s = 0; s < 3; ++s) {
    kernels::WeightStep<2> w;
    for (int k = 0; k < 2; ++k)
      for (int l = 0; l < 64; ++l) w.word[k].lane[l] = static_cast<kernels::i8>(s * 37 + k * 64 + l);
    f.write(w);
  }
  for (int s = 0; s < 3; ++s) {
    const kernels::WeightStep<2> w = f.read();
    for (int k = 0; k < 2; ++k)
      for (int l = 0; l < 64; ++l) ASSERT_EQ(w.word[k].lane[l], static_cast<kernels::i8>(s * 37 + k * 64 + l));
  }
}

TEST(StreamDeathTest, ReadingAnEmptyFifoStops) {
  kernels::Fifo<int> f("acc");
  EXPECT_DEATH(f.read(), "kernels::Fifo acc: read while empty");
}

}  // namespace
