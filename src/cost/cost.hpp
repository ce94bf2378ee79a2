#pragma once
// What running a cluster of accelerator cards costs: electricity, hardware, total cost of
// ownership, cloud rental, cost per million tokens, and the break-even point against a GPU
// cluster sized to the same throughput. Pure arithmetic on figures the caller supplies
// (from flags, a plan, or the device database); every formula is written out in cost.cpp.
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace cost {

// Defaults stated once, used by the command line and documented in its help.
inline constexpr double kDefaultYears = 3.0;
inline constexpr double kDefaultHoursPerDay = 24.0;
inline constexpr double kDefaultPue = 1.0;                  // no cooling/facility overhead
inline constexpr double kDefaultMaintenanceFraction = 0.0;  // of hardware price, per year

// kWh drawn by `cards` cards of `watts` each for `hours` hours: cards x W / 1000 x h.
double energy_kwh(int cards, double watts, double hours);
// energy_kwh x price per kWh.
double electricity_cost(int cards, double watts, double hours, double price_per_kwh);

// One cluster of identical cards operated for a period.
struct Cluster {
  std::string name;            // "fpga", "gpu", or a device name
  int cards = 0;
  double watts_per_card = 0;   // average electrical draw while operating
  double card_price = 0;       // purchase price per card (0 when unknown)
  std::optional<double> hourly_rental;  // cloud price per card-hour, when one exists
};

struct Operation {
  double days = 365.0 * kDefaultYears;  // operating period
  double hours_per_day = kDefaultHoursPerDay;
  double price_per_kwh = 0;
  double pue = kDefaultPue;  // facility power / IT power; (pue - 1) x IT energy is cooling
  double maintenance_fraction_per_year = kDefaultMaintenanceFraction;

  double hours() const { return days * hours_per_day; }
  double years() const { return days / 365.0; }
};

struct Tco {
  double operating_hours = 0;
  double energy_kwh = 0;        // IT energy (cards only)
  double facility_kwh = 0;      // energy_kwh x PUE
  double hardware = 0;          // cards x card price
  double electricity = 0;       // IT energy x price
  double cooling = 0;           // (PUE - 1) x IT energy x price
  double maintenance = 0;       // hardware x fraction per year x years
  double total = 0;             // hardware + electricity + cooling + maintenance
  std::optional<double> rental; // cards x hourly rental x hours, when a rental price exists
  double cost_per_hour_owned() const { return operating_hours > 0 ? total / operating_hours : 0; }
};

Tco tco(const Cluster& c, const Operation& op);

// Cards needed to reach `target` units/s at `per_card` units/s each: ceil(target / per_card).
int cards_for_throughput(double target, double per_card);

// Cost per million units (tokens) processed at `units_per_s` by a cluster whose cost over
// `hours` is `total_cost`: total_cost / (units_per_s x 3600 x hours / 1e6).
double cost_per_million(double total_cost, double units_per_s, double hours);

struct Side {
  Cluster cluster;            // cards filled in by break_even
  double throughput_per_card = 0;  // units/s (tokens/s or steps/s)
};

// Both clusters sized to `target_throughput` (not to equal card counts), owned, operated
// for op. Costs grow linearly in operating time: capex + opex_per_hour x t. The break-even
// time is where the two lines cross.
struct BreakEven {
  double target_throughput = 0;
  int fpga_cards = 0, gpu_cards = 0;
  double fpga_capex = 0, gpu_capex = 0;           // hardware
  double fpga_opex_per_hour = 0, gpu_opex_per_hour = 0;  // electricity + cooling + maintenance
  Tco fpga, gpu;                                   // over op's whole period
  // Cumulative cost lines cross at capex difference / opex-per-hour difference; the
  // crossover is reported when it lies at a positive operating time.
  std::optional<double> crossover_hours;
  std::optional<double> crossover_days() const;  // crossover_hours / hours_per_day
  std::string cheaper_at_start;  // "fpga", "gpu" or "equal": lower hardware cost
  std::string cheaper_long_run;  // "fpga", "gpu" or "equal": lower running cost per hour
  double hours_per_day = 24;
  std::string verdict() const;  // one sentence
};

BreakEven break_even(Side fpga, Side gpu, double target_throughput, const Operation& op);

void to_json(nlohmann::json& j, const Tco& t);
void to_json(nlohmann::json& j, const BreakEven& b);

}  // namespace cost
