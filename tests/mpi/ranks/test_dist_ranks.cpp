// dist:: collectives across real ranks: the test relaunches this executable under mpiexec
// with 2 and 4 ranks, running only the DistChild cases, which check every collective's
// values and byte counts on every rank.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "mpi/dist.hpp"
#include "mpi_launch.hpp"

namespace {

bool child() { return std::getenv("FPGALLM_DIST_CHILD") != nullptr; }

}  // namespace

TEST(DistChild, Collectives) {
  if (!child()) GTEST_SKIP() << "runs under mpiexec from Dist.CollectivesOn2And4Ranks";
  const int r = dist::rank(), n = dist::size();
  ASSERT_GT(n, 1);
  dist::reset_bytes_sent();

  auto all = dist::allgather(std::string(std::size_t(r + 1), char('a' + r)));
  ASSERT_EQ(int(all.size()), n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(all[std::size_t(i)], std::string(std::size_t(i + 1), char('a' + i)));
  dist::reset_bytes_sent();

  std::vector<std::int32_t> v(10);
  for (int i = 0; i < 10; ++i) v[std::size_t(i)] = (r + 1) * (i - 5) * 1000003;
  dist::allreduce_sum(v.data(), v.size());
  const int tri = n * (n + 1) / 2;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(v[std::size_t(i)], tri * (i - 5) * 1000003);
  EXPECT_EQ(dist::bytes_sent(), dist::ring_allreduce_bytes(40, r, n));

  // fp32 sums in rank order: 1e8 + 1 + ... - 1e8 would differ in another order.
  std::vector<float> f = {r == 0 ? 1e8f : 1.0f, float(r)};
  dist::allreduce_sum(f.data(), f.size());
  float expect = 1e8f;
  for (int i = 1; i < n; ++i) expect += 1.0f;
  EXPECT_EQ(f[0], expect);
  EXPECT_EQ(f[1], float(n * (n - 1) / 2));

  EXPECT_EQ(dist::allreduce_max(float(-r)), 0.0f);
  EXPECT_EQ(dist::allreduce_max(float(r) * 0.5f), float(n - 1) * 0.5f);

  std::vector<int> counts(static_cast<std::size_t>(n));
  int total = 0;
  for (int i = 0; i < n; ++i) counts[std::size_t(i)] = i + 2, total += i + 2;
  std::vector<float> mine(static_cast<std::size_t>(r + 2), float(r)), gathered(static_cast<std::size_t>(total));
  dist::reset_bytes_sent();
  dist::allgather(mine.data(), gathered.data(), counts);
  for (int i = 0, k = 0; i < n; ++i)
    for (int j = 0; j < i + 2; ++j) EXPECT_EQ(gathered[std::size_t(k++)], float(i));
  EXPECT_EQ(dist::bytes_sent(), 4u * std::uint64_t(total - counts[std::size_t((r + 1) % n)]));

  float token = 0;
  dist::reset_bytes_sent();
  if (r == 0) {
    token = 42.0f;
    dist::send(&token, sizeof token, 1, 7);
    EXPECT_EQ(dist::bytes_sent(), 4u);
  } else if (r == 1) {
    dist::recv(&token, sizeof token, 0, 7);
    EXPECT_EQ(token, 42.0f);
  }
  std::int32_t b = r == n - 1 ? 99 : 0;
  dist::broadcast(&b, sizeof b, n - 1);
  EXPECT_EQ(b, 99);
  dist::barrier();
}

TEST(Dist, CollectivesOn2And4Ranks) {
  if (child()) GTEST_SKIP();
  if (!mpi_launch::available()) GTEST_SKIP() << "built without MPI";
  for (int n : {2, 4}) {
    auto r = mpi_launch::run(n, mpi_launch::self_exe() + " --gtest_color=no --gtest_filter=DistChild.*", 60, "FPGALLM_DIST_CHILD=1");
    EXPECT_EQ(r.status, 0) << n << " ranks\n" << r.out << r.err;
    EXPECT_EQ(mpi_launch::count(r.out, "[  PASSED  ] 1 test"), n) << r.out;
  }
}
