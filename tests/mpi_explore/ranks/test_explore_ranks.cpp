// `mpirun -np N fpgallm explore` over every decoder preset and several kinds of card gives
// the bytes a single process prints (apart from the "timing" fields of --json), and
// reports its ranks, wall time and speed-up.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mpi_launch.hpp"
#include "testing.hpp"

namespace {

// HBM and DDR Alveo cards, an edge card that fits only small models, a card without
// memory figures, and two GPUs: every branch of the search, in a few seconds.
const std::string kSweep = " explore --all-presets --devices u50,u200,kv260,v80,a100-80gb,l4";

nlohmann::json without_timing(const std::string& out) {
  nlohmann::json j = nlohmann::json::parse(out);
  j.erase("timing");
  return j;
}

TEST(MpiExplore, RanksPrintWhatOneProcessPrints) {
  if (!mpi_launch::available()) GTEST_SKIP() << "built without MPI";
  const auto one_json = testing_support::run_fpgallm(kSweep + " --json");
  ASSERT_EQ(one_json.status, 0) << one_json.err;
  const auto one_text = testing_support::run_fpgallm(kSweep);
  ASSERT_EQ(one_text.status, 0) << one_text.err;
  const nlohmann::json expect = without_timing(one_json.out);
  ASSERT_GT(expect.at("models").size(), 5u);
  EXPECT_EQ(nlohmann::json::parse(one_json.out).at("timing").at("ranks"), 1);
  for (int n : {2, 4}) {
    const auto j = mpi_launch::run(n, mpi_launch::fpgallm() + kSweep + " --json", 240);
    ASSERT_EQ(j.status, 0) << n << " ranks: " << j.err;
    EXPECT_EQ(without_timing(j.out).dump(), expect.dump()) << n << " ranks";
    const auto timing = nlohmann::json::parse(j.out).at("timing");
    EXPECT_EQ(timing.at("ranks"), n);
    EXPECT_EQ(timing.at("rank_explore_cpu_s").size(), std::size_t(n));
    EXPECT_GT(timing.at("speedup").get<double>(), 0);
    EXPECT_NE(j.err.find("speed-up"), std::string::npos) << j.err;
    const auto t = mpi_launch::run(n, mpi_launch::fpgallm() + kSweep, 240);
    ASSERT_EQ(t.status, 0) << n << " ranks: " << t.err;
    EXPECT_EQ(t.out, one_text.out) << n << " ranks";
  }
}

// Bad input on every rank ends the job with one clear line and exit status 2, no hang.
TEST(MpiExplore, BadDeviceEndsTheJob) {
  if (!mpi_launch::available()) GTEST_SKIP() << "built without MPI";
  const auto r = mpi_launch::run(2, mpi_launch::fpgallm() + " explore stories15m --devices u280,nosuchcard", 60);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("nosuchcard"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 50);
}

}  // namespace
