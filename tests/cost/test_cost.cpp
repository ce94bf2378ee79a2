// Cost formulas against hand-computed cases, and the command line's required figures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cost/cost.hpp"
#include "testing.hpp"

namespace {

TEST(Electricity, TwentyCardsAt150And400Watts) {
  // 20 cards x 0.15 kW x (24 h x 300 days = 7200 h) = 21,600 kWh; x 1.2 = 25,920.
  EXPECT_DOUBLE_EQ(cost::energy_kwh(20, 150, 7200), 21600.0);
  EXPECT_DOUBLE_EQ(cost::electricity_cost(20, 150, 7200, 1.2), 25920.0);
  // 20 x 0.4 kW x 7200 h = 57,600 kWh; x 1.2 = 69,120.
  EXPECT_DOUBLE_EQ(cost::electricity_cost(20, 400, 7200, 1.2), 69120.0);
}

TEST(Tco, HandComputedWithPueAndMaintenance) {
  // 4 cards, 200 W, 5,000 each, 2 years at 12 h/day, 0.25 per kWh, PUE 1.5, 10%/year.
  cost::Cluster c{"fpga", 4, 200, 5000, 1.5};
  cost::Operation op;
  op.days = 730;
  op.hours_per_day = 12;
  op.price_per_kwh = 0.25;
  op.pue = 1.5;
  op.maintenance_fraction_per_year = 0.10;
  const cost::Tco t = cost::tco(c, op);
  // hours = 730 x 12 = 8760; energy = 4 x 0.2 x 8760 = 7008 kWh.
  EXPECT_DOUBLE_EQ(t.operating_hours, 8760);
  EXPECT_NEAR(t.energy_kwh, 7008, 1e-9);
  EXPECT_NEAR(t.electricity, 1752, 1e-9);     // 7008 x 0.25
  EXPECT_NEAR(t.cooling, 876, 1e-9);          // 0.5 x 7008 x 0.25
  EXPECT_NEAR(t.hardware, 20000, 1e-9);       // 4 x 5000
  EXPECT_NEAR(t.maintenance, 4000, 1e-9);     // 20000 x 0.1 x 2 years
  EXPECT_NEAR(t.total, 26628, 1e-9);
  ASSERT_TRUE(t.rental.has_value());
  EXPECT_NEAR(*t.rental, 52560, 1e-9);        // 4 x 1.5 x 8760
}

TEST(ClusterSizing, CeilOfTargetOverPerCard) {
  EXPECT_EQ(cost::cards_for_throughput(1000, 100), 10);
  EXPECT_EQ(cost::cards_for_throughput(1001, 100), 11);
  EXPECT_EQ(cost::cards_for_throughput(10, 10.0 / 3.0), 3);
  EXPECT_THROW(cost::cards_for_throughput(10, 0), std::invalid_argument);
}

TEST(CostPerMillion, HandComputed) {
  // 1,000 tokens/s for 10 h = 36 M tokens; 720 / 36 = 20 per million.
  EXPECT_NEAR(cost::cost_per_million(720, 1000, 10), 20.0, 1e-12);
}

TEST(BreakEven, FpgaDearerToBuyCheaperToRun) {
  // Target 1,000 tokens/s. FPGA: 100 tok/s/card -> 10 cards x 8,000 = 80,000, 100 W each.
  // GPU: 500 tok/s/card -> 2 cards x 10,000 = 20,000, 700 W each. Price 0.5/kWh, PUE 1.
  // Opex/h: FPGA 10 x 0.1 kW x 0.5 = 0.5; GPU 2 x 0.7 x 0.5 = 0.7.
  // Crossover: (80,000 - 20,000) / (0.7 - 0.5) = 300,000 h = 12,500 days at 24 h/day.
  cost::Operation op;
  op.days = 365;
  op.price_per_kwh = 0.5;
  cost::Side f{{"fpga", 0, 100, 8000, {}}, 100};
  cost::Side g{{"gpu", 0, 700, 10000, {}}, 500};
  const cost::BreakEven b = cost::break_even(f, g, 1000, op);
  EXPECT_EQ(b.fpga_cards, 10);
  EXPECT_EQ(b.gpu_cards, 2);
  EXPECT_NEAR(b.fpga_opex_per_hour, 0.5, 1e-12);
  EXPECT_NEAR(b.gpu_opex_per_hour, 0.7, 1e-12);
  ASSERT_TRUE(b.crossover_hours.has_value());
  EXPECT_NEAR(*b.crossover_hours, 300000, 1e-6);
  EXPECT_NEAR(*b.crossover_days(), 12500, 1e-9);
  EXPECT_EQ(b.cheaper_at_start, "gpu");
  EXPECT_EQ(b.cheaper_long_run, "fpga");
}

TEST(BreakEven, MaintenanceEntersTheRunningCost) {
  // As above with 5%/year maintenance at 24 h/day (8760 h/year):
  // FPGA opex/h = 0.5 + 80,000 x 0.05 / 8760; GPU = 0.7 + 20,000 x 0.05 / 8760.
  cost::Operation op;
  op.price_per_kwh = 0.5;
  op.maintenance_fraction_per_year = 0.05;
  cost::Side f{{"fpga", 0, 100, 8000, {}}, 100};
  cost::Side g{{"gpu", 0, 700, 10000, {}}, 500};
  const cost::BreakEven b = cost::break_even(f, g, 1000, op);
  const double fo = 0.5 + 4000.0 / 8760, go = 0.7 + 1000.0 / 8760;
  EXPECT_NEAR(b.fpga_opex_per_hour, fo, 1e-12);
  EXPECT_NEAR(b.gpu_opex_per_hour, go, 1e-12);
  // FPGA now costs more per hour too: no crossover, GPU is never more expensive.
  EXPECT_FALSE(b.crossover_hours.has_value());
  EXPECT_EQ(b.cheaper_long_run, "gpu");
}

TEST(BreakEven, SizesByThroughputNotCardCount) {
  // Equal card price and power, FPGA 4x slower: four times the cards, never cheaper.
  cost::Operation op;
  op.price_per_kwh = 0.2;
  cost::Side f{{"fpga", 0, 100, 1000, {}}, 25};
  cost::Side g{{"gpu", 0, 100, 1000, {}}, 100};
  const cost::BreakEven b = cost::break_even(f, g, 400, op);
  EXPECT_EQ(b.fpga_cards, 16);
  EXPECT_EQ(b.gpu_cards, 4);
  EXPECT_FALSE(b.crossover_hours.has_value());
  EXPECT_EQ(b.cheaper_at_start, "gpu");
  EXPECT_EQ(b.cheaper_long_run, "gpu");
}

TEST(CostCli, ElectricityFigures) {
  using testing_support::run_fpgallm;
  auto r = run_fpgallm("cost --cards 20 --watts 150 --hours-per-day 24 --days 300 --price-per-kwh 1.2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("25,920"), std::string::npos) << r.out;
  r = run_fpgallm("cost --cards 20 --watts 400 --hours-per-day 24 --days 300 --price-per-kwh 1.2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("69,120"), std::string::npos) << r.out;
  r = run_fpgallm("cost --cards 20 --watts 150 --hours-per-day 24 --days 300 --price-per-kwh 1.2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j.at("electricity").get<double>(), 25920.0);
}

TEST(CostCli, BreakEvenFromFlags) {
  auto r = testing_support::run_fpgallm(
      "cost --watts 100 --card-price 8000 --throughput 100 --target-throughput 1000 --gpu-throughput 500 "
      "--gpu-watts 700 --gpu-price 10000 --price-per-kwh 0.5 --years 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("cards").get<int>(), 10);
  EXPECT_NEAR(j.at("break_even").at("crossover_days").get<double>(), 12500, 1e-6);
}

TEST(CostCli, InputsFromAPredictionJsonAndTheDeviceDatabase) {
  // 2 cards, 300 W together, 100 tokens/s together -> 150 W and 50 tokens/s per card.
  const std::string dir = testing_support::scratch_dir("cost_from");
  testing_support::write_bytes(dir + "/plan.json",
                               R"({"design": {"name": "x"}, "prediction": {"device": "u55c", "cards": 2, "watts": 300,)"
                               R"( "decode_tokens_per_s": 100}})");
  auto r = testing_support::run_fpgallm("cost --from " + dir + "/plan.json --days 10 --price-per-kwh 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("cards").get<int>(), 2);
  EXPECT_DOUBLE_EQ(j.at("watts_per_card").get<double>(), 150.0);
  EXPECT_DOUBLE_EQ(j.at("electricity").get<double>(), 2 * 0.15 * 240);  // 72
  EXPECT_GT(j.at("card_price").get<double>(), 0);  // the u55c's price from data/devices.json
}

TEST(CostCli, UnknownDeviceIsAnInputError) {
  auto r = testing_support::run_fpgallm("cost --device no-such-card --cards 1 --price-per-kwh 1");
  EXPECT_EQ(r.status, 2);
}

TEST(CostCli, MissingPriceIsAnInputError) {
  auto r = testing_support::run_fpgallm("cost --cards 2 --watts 100");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--price-per-kwh"), std::string::npos) << r.err;
}

}  // namespace
