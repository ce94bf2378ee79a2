#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "arch/design.hpp"
#include "testing.hpp"
#include "util/error.hpp"

namespace {

TEST(Design, DefaultsAreValidAndRoundTrip) {
  arch::Design d;
  EXPECT_TRUE(d.problems().empty());
  auto dir = testing_support::scratch_dir("design");
  d.matrix_unit.rows = 64;
  d.parallel = {2, arch::Split::tensor};
  arch::save(d, dir + "/d.json");
  auto back = arch::load(dir + "/d.json");
  EXPECT_EQ(nlohmann::json(back), nlohmann::json(d));
}

TEST(Design, RejectsWhatTheKernelsCannotImplement) {
  arch::Design d;
  d.tiling.tile_rows = 48;  // not a multiple of 32 rows
  ASSERT_FALSE(d.problems().empty());
  EXPECT_NE(d.problems()[0].find("tiling.tile_rows"), std::string::npos);
  d = arch::Design{};
  d.matrix_unit.weight_bits = 3;
  EXPECT_NE(d.problems().at(0).find("weight_bits"), std::string::npos);
}

TEST(Design, LoadNamesTheFileAndTheField) {
  auto dir = testing_support::scratch_dir("design-bad");
  testing_support::write_bytes(dir + "/a.json", R"({"matrix_unit": {"rows": 0}})");
  try {
    arch::load(dir + "/a.json");
    FAIL();
  } catch (const fpgallm::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("matrix_unit.rows"), std::string::npos);
  }
  testing_support::write_bytes(dir + "/b.json", R"({"matrix_unit": {"rowz": 4}})");
  EXPECT_THROW(arch::load(dir + "/b.json"), fpgallm::InputError);
  testing_support::write_bytes(dir + "/c.json", R"({"clock_mhz": )");
  EXPECT_THROW(arch::load(dir + "/c.json"), fpgallm::InputError);
  testing_support::write_bytes(dir + "/d.json", R"({"parallel": {"cards": 2, "split": "diagonal"}})");
  EXPECT_THROW(arch::load(dir + "/d.json"), fpgallm::InputError);
}

}  // namespace
