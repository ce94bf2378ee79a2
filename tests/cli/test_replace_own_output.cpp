// Issue 32 (the first hour): `-o` replaces a file fpgallm itself wrote, recognised by its
// content (the size and checksum fpgallm records beside it), and still refuses, without
// --force, a file fpgallm did not write or one changed since fpgallm wrote it.
#include <gtest/gtest.h>

#include <sys/xattr.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using testing_support::read_bytes;
using testing_support::run_fpgallm;
using testing_support::write_bytes;

bool folder_keeps_user_attributes(const std::string& dir) {
  const std::string probe = dir + "/probe";
  write_bytes(probe, "x");
  const bool ok = ::setxattr(probe.c_str(), "user.probe", "1", 1, 0) == 0;
  fs::remove(probe);
  return ok;
}

TEST(ReplaceOwnOutput, PlanTwiceReplacesItsOwnFileAndRefusesAForeignOne) {
  const std::string dir = testing_support::scratch_dir("replace_own");
  if (!folder_keeps_user_attributes(dir)) GTEST_SKIP() << dir << ": this file system keeps no user attributes";
  const std::string out = dir + "/design.json";
  const std::string plan = "plan llama2-7b --device u280 -o " + out;

  auto first = run_fpgallm(plan);
  ASSERT_EQ(first.status, 0) << first.err;
  const std::string written = read_bytes(out);
  auto second = run_fpgallm(plan);
  EXPECT_EQ(second.status, 0) << second.err;
  EXPECT_EQ(read_bytes(out), written);

  // The same bytes in a file fpgallm did not write (a copy holds no record of it).
  const std::string copy = dir + "/copy.json";
  write_bytes(copy, written);
  auto foreign = run_fpgallm("plan llama2-7b --device u280 -o " + copy);
  EXPECT_EQ(foreign.status, 2);
  EXPECT_NE(foreign.err.find(copy), std::string::npos) << foreign.err;
  EXPECT_NE(foreign.err.find("--force"), std::string::npos) << foreign.err;
  EXPECT_EQ(std::count(foreign.err.begin(), foreign.err.end(), '\n'), 1) << foreign.err;

  // fpgallm's file, edited by hand afterwards: no longer what fpgallm wrote.
  {
    std::string edited = written;
    edited.back() = ' ';
    std::FILE* f = std::fopen(out.c_str(), "r+b");  // in place: the recorded attribute stays
    ASSERT_NE(f, nullptr);
    std::fwrite(edited.data(), 1, edited.size(), f);
    std::fclose(f);
    auto changed = run_fpgallm(plan);
    EXPECT_EQ(changed.status, 2) << changed.err;
    EXPECT_EQ(read_bytes(out), edited);
  }
  // --force replaces the foreign file, and what it writes is fpgallm's again.
  auto forced = run_fpgallm("--force " + plan);
  EXPECT_EQ(forced.status, 0) << forced.err;
  EXPECT_EQ(read_bytes(out), written);
  EXPECT_EQ(run_fpgallm(plan).status, 0);
}

}  // namespace
