// dist:: in a single process (how every non-mpirun run and the sanitizer suite see it), and
// the ring byte accounting against hand-counted chunks.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mpi/dist.hpp"

TEST(Dist, SingleProcessIsRankZeroOfOne) {
  if (dist::distributed()) GTEST_SKIP() << "launched by mpirun";
  EXPECT_EQ(dist::rank(), 0);
  EXPECT_EQ(dist::size(), 1);
  EXPECT_EQ(dist::allgather("abc"), std::vector<std::string>{"abc"});
  std::int32_t v[2] = {3, -4};
  dist::allreduce_sum(v, 2);
  EXPECT_EQ(v[0], 3);
  EXPECT_EQ(v[1], -4);
  EXPECT_EQ(dist::allreduce_max(2.5f), 2.5f);
  float mine[3] = {1, 2, 3}, all[3] = {};
  dist::allgather(mine, all, {3});
  EXPECT_EQ(all[2], 3.0f);
  dist::barrier();
  EXPECT_EQ(dist::bytes_sent(), 0u);
}

TEST(Dist, RingAllReduceBytesByHand) {
  // 4 ranks, 10 bytes: chunks 3,3,2,2. Rank 0 sends all but chunk 1 (3) in the reduce-
  // scatter (7) and all but chunk 2 (2) in the all-gather (8): 15.
  EXPECT_EQ(dist::ring_allreduce_bytes(10, 0, 4), 15u);
  // Rank 3: all but chunk 0 (3) -> 7, all but chunk 1 (3) -> 7.
  EXPECT_EQ(dist::ring_allreduce_bytes(10, 3, 4), 14u);
  // Divisible sizes give 2 (N-1)/N B on every rank.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(dist::ring_allreduce_bytes(4096, r, 4), 2u * 3 * 1024);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(dist::ring_allreduce_bytes(4096, r, 2), 4096u);
  // One float over 4 ranks: byte chunks 1,1,1,1, 6 bytes from every rank.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(dist::ring_allreduce_bytes(4, r, 4), 6u);
  EXPECT_EQ(dist::ring_allgather_bytes(4096, 1, 4), 3u * 1024);
  EXPECT_EQ(dist::ring_allreduce_bytes(4096, 0, 1), 0u);
}
