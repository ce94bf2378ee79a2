#include "cost/cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>


namespace cost {

double energy_kwh(int cards, double watts, double hours) { return cards * (watts / 1000.0) * hours; }

double electricity_cost(int cards, double watts, double hours, double price_per_kwh) {
  return energy_kwh(cards, watts, hours) * price_per_kwh;
}

Tco tco(const Cluster& c, const Operation& op) {
  Tco t;
  t.operating_hours = op.hours();
  t.energy_kwh = energy_kwh(c.cards, c.watts_per_card, t.operating_hours);
  t.facility_kwh = t.energy_kwh * op.pue;
  t.hardware = c.cards * c.card_price;
  t.electricity = t.energy_kwh * op.price_per_kwh;
  t.cooling = (op.pue - 1.0) * t.energy_kwh * op.price_per_kwh;
  t.maintenance = t.hardware * op.maintenance_fraction_per_year * op.years();
  t.total = t.hardware + t.electricity + t.cooling + t.maintenance;
  if (c.hourly_rental) t.rental = c.cards * *c.hourly_rental * t.operating_hours;
  return t;
}

int cards_for_throughput(double target, double per_card) {
  if (!(per_card > 0)) throw std::invalid_argument("throughput per card must be positive");
  if (!(target > 0)) throw std::invalid_argument("target throughput must be positive");
  // A tiny relative slack so that 10 / (10/3) is 3 cards, not 4 after rounding noise.
  return static_cast<int>(std::ceil(target / per_card * (1.0 - 1e-12)));
}

double cost_per_million(double total_cost, double units_per_s, double hours) {
  const double units = units_per_s * 3600.0 * hours;
  return units > 0 ? total_cost / (units / 1e6) : std::numeric_limits<double>::infinity();
}

std::optional<double> BreakEven::crossover_days() const {
  if (!crossover_hours || hours_per_day <= 0) return std::nullopt;
  return *crossover_hours / hours_per_day;
}

namespace {

// Running cost per operating hour: electricity with the facility overhead, plus
// maintenance spread over the operating hours of a year.
double opex_per_hour(const Cluster& c, const Operation& op) {
  const double power = energy_kwh(c.cards, c.watts_per_card, 1.0) * op.pue * op.price_per_kwh;
  const double hours_per_year = 365.0 * op.hours_per_day;
  const double maintenance = hours_per_year > 0 ? c.cards * c.card_price * op.maintenance_fraction_per_year / hours_per_year : 0;
  return power + maintenance;
}

std::string cheaper(double fpga, double gpu) {
  const double tol = 1e-9 * std::max({1.0, std::abs(fpga), std::abs(gpu)});
  if (std::abs(fpga - gpu) <= tol) return "equal";
  return fpga < gpu ? "fpga" : "gpu";
}

}  // namespace

BreakEven break_even(Side fpga, Side gpu, double target_throughput, const Operation& op) {
  BreakEven b;
  b.target_throughput = target_throughput;
  b.hours_per_day = op.hours_per_day;
  fpga.cluster.cards = cards_for_throughput(target_throughput, fpga.throughput_per_card);
  gpu.cluster.cards = cards_for_throughput(target_throughput, gpu.throughput_per_card);
  b.fpga_cards = fpga.cluster.cards;
  b.gpu_cards = gpu.cluster.cards;
  b.fpga_capex = fpga.cluster.cards * fpga.cluster.card_price;
  b.gpu_capex = gpu.cluster.cards * gpu.cluster.card_price;
  b.fpga_opex_per_hour = opex_per_hour(fpga.cluster, op);
  b.gpu_opex_per_hour = opex_per_hour(gpu.cluster, op);
  b.fpga = tco(fpga.cluster, op);
  b.gpu = tco(gpu.cluster, op);
  b.cheaper_at_start = cheaper(b.fpga_capex, b.gpu_capex);
  b.cheaper_long_run = cheaper(b.fpga_opex_per_hour, b.gpu_opex_per_hour);
  // capex_f + opex_f t = capex_g + opex_g t  =>  t = (capex_f - capex_g) / (opex_g - opex_f)
  const double slope = b.gpu_opex_per_hour - b.fpga_opex_per_hour;
  if (b.cheaper_long_run != "equal" && b.cheaper_at_start != "equal" && b.cheaper_at_start != b.cheaper_long_run) {
    b.crossover_hours = (b.fpga_capex - b.gpu_capex) / slope;
  }
  return b;
}

std::string BreakEven::verdict() const {
  auto name = [](const std::string& s) { return s == "fpga" ? std::string("FPGA") : std::string("GPU"); };
  if (crossover_hours) {
    return fmt::format("the {} cluster costs less to buy, the {} cluster less to run; they break even after {:.0f} days "
                       "({:.2f} years) of operation at {:g} h/day",
                       name(cheaper_at_start), name(cheaper_long_run), *crossover_days(), *crossover_days() / 365.0,
                       hours_per_day);
  }
  if (cheaper_at_start == "equal" && cheaper_long_run == "equal") return "both clusters cost the same at every point";
  const std::string winner = cheaper_at_start != "equal" ? cheaper_at_start : cheaper_long_run;
  return fmt::format("the {} cluster is never more expensive: it costs no more to buy and no more to run, so there is "
                     "no break-even point",
                     name(winner));
}

void to_json(nlohmann::json& j, const Tco& t) {
  j = {{"operating_hours", t.operating_hours}, {"energy_kwh", t.energy_kwh}, {"facility_kwh", t.facility_kwh},
       {"hardware", t.hardware},               {"electricity", t.electricity}, {"cooling", t.cooling},
       {"maintenance", t.maintenance},         {"total", t.total}};
  j["rental"] = t.rental ? nlohmann::json(*t.rental) : nlohmann::json(nullptr);
}

void to_json(nlohmann::json& j, const BreakEven& b) {
  j = {{"target_throughput", b.target_throughput},
       {"fpga_cards", b.fpga_cards},
       {"gpu_cards", b.gpu_cards},
       {"fpga_capex", b.fpga_capex},
       {"gpu_capex", b.gpu_capex},
       {"fpga_opex_per_hour", b.fpga_opex_per_hour},
       {"gpu_opex_per_hour", b.gpu_opex_per_hour},
       {"fpga_tco", b.fpga},
       {"gpu_tco", b.gpu},
       {"cheaper_at_start", b.cheaper_at_start},
       {"cheaper_long_run", b.cheaper_long_run},
       {"verdict", b.verdict()}};
  j["crossover_hours"] = b.crossover_hours ? nlohmann::json(*b.crossover_hours) : nlohmann::json(nullptr);
  j["crossover_days"] = b.crossover_days() ? nlohmann::json(*b.crossover_days()) : nlohmann::json(nullptr);
}

}  // namespace cost
