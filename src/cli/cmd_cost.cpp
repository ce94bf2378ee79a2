#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "arch/design.hpp"
#include "cli/command.hpp"

#include "cost/cost.hpp"
#include "hw/device.hpp"
#include "util/error.hpp"
#include "util/json_file.hpp"

namespace {

struct CostArgs {
  int cards = 0;
  double watts = 0, card_price = 0;
  std::optional<double> hourly_price;
  std::optional<double> days, years;
  double hours_per_day = cost::kDefaultHoursPerDay;
  std::optional<double> price_per_kwh;
  double pue = cost::kDefaultPue, maintenance = cost::kDefaultMaintenanceFraction;
  std::optional<double> throughput, target_throughput;
  std::string unit = "tokens";
  std::optional<double> gpu_throughput, gpu_watts, gpu_price, gpu_hourly_price;
  std::string device, gpu, from;
  bool json = false;
};

// The first object in j (depth first) that carries a prediction: "watts" and
// "decode_tokens_per_s" (perf::Prediction's JSON, alone or inside a plan/design file).
const nlohmann::json* find_prediction(const nlohmann::json& j) {
  if (!j.is_object() && !j.is_array()) return nullptr;
  if (j.is_object() && j.contains("watts") && j.contains("decode_tokens_per_s")) return &j;
  for (const auto& v : j) {
    if (const auto* p = find_prediction(v)) return p;
  }
  return nullptr;
}

// Fills what the flags left open from a plan/design JSON and from the device database.
// Explicit flags always win.
void fill_inputs(CostArgs& a) {
  bool device_from_file = false;
  if (!a.from.empty()) {
    const nlohmann::json j = fpgallm::read_json_file(a.from, "the prediction file");
    // A design.json (any of its hardware sections at the top) is validated whole, so that a
    // design that lacks a section is refused rather than costed from its prediction alone.
    bool design = false;
    for (const char* section : {"matrix_unit", "vector_unit", "tiling", "memory"})
      design = design || (j.is_object() && j.contains(section));
    if (design) (void)arch::load(a.from);
    fpgallm::reading_json(a.from, [&] {
    const nlohmann::json* p = find_prediction(j);
    if (!p) throw fpgallm::InputError(a.from, "no prediction (an object with watts and decode_tokens_per_s) inside");
    auto positive = [&](const char* key) {
      const auto& v = p->at(key);
      if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
        throw fpgallm::InputError(a.from, fmt::format("{}: {} is not a positive number", key, v.dump()));
      return v.get<double>();
    };
    int cards = 1;
    if (p->contains("cards")) {
      const auto& v = p->at("cards");
      if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > 4096)
        throw fpgallm::InputError(a.from, fmt::format("cards: {} is not a whole number of cards in 1..4096", v.dump()));
      cards = v.get<int>();
    }
    if (p->at("watts").is_null() && !(a.watts > 0))
      throw fpgallm::InputError(a.from, "watts: unknown for this device (no power figure); give --watts");
    const double watts = p->at("watts").is_null() ? a.watts * cards : positive("watts");
    const double tps = positive("decode_tokens_per_s");
    if (a.cards <= 0) a.cards = cards;
    if (!(a.watts > 0)) a.watts = watts / cards;
    if (!a.throughput) a.throughput = tps / cards;
    if (a.device.empty() && p->contains("device") && (*p)["device"].is_string()) {
      a.device = (*p)["device"].get<std::string>();
      device_from_file = true;
    }
    });
  }
  if (!a.device.empty()) {
    if (device_from_file && !hw::lookup_device(a.device)) {
      try {
        (void)hw::find_device(a.device);
      } catch (const fpgallm::InputError& e) {
        throw fpgallm::InputError(a.from, "device: " + e.problem());
      }
    }
    const hw::Device& d = hw::find_device(a.device);
    if (!(a.watts > 0) && d.tdp_w.has()) a.watts = *d.tdp_w;
    if (a.card_price <= 0 && d.price_usd.has()) a.card_price = *d.price_usd;
    if (!a.hourly_price && d.cloud_usd_per_hour.has()) a.hourly_price = *d.cloud_usd_per_hour;
  }
  if (!a.gpu.empty()) {
    const hw::Device& g = hw::find_device(a.gpu);
    if (!a.gpu_watts && g.tdp_w.has()) a.gpu_watts = *g.tdp_w;
    if (!a.gpu_price && g.price_usd.has()) a.gpu_price = *g.price_usd;
    if (!a.gpu_hourly_price && g.cloud_usd_per_hour.has()) a.gpu_hourly_price = *g.cloud_usd_per_hour;
  }
}

// 25920 -> "25,920"; 1234.5 -> "1,234.50" (two decimals when not a whole number).
std::string money(double v) {
  const bool whole = std::abs(v - std::round(v)) < 5e-7 * std::max(1.0, std::abs(v));
  std::string s = whole ? fmt::format("{:.0f}", std::round(v)) : fmt::format("{:.2f}", v);
  const std::size_t begin = s[0] == '-' ? 1 : 0;
  const std::size_t end = std::min(s.find('.'), s.size());
  std::string out = s.substr(0, begin);
  for (std::size_t i = begin; i < end; ++i) {
    if (i > begin && (end - i) % 3 == 0) out += ',';
    out += s[i];
  }
  out += s.substr(end);
  return out;
}

void print_tco(const char* title, const cost::Cluster& c, const cost::Tco& t) {
  std::printf("%s: %d cards x %s W", title, c.cards, money(c.watts_per_card).c_str());
  if (c.card_price > 0) std::printf(" x %s per card", money(c.card_price).c_str());
  std::printf("\n");
  std::printf("  energy (cards)      %14s kWh\n", money(t.energy_kwh).c_str());
  std::printf("  electricity         %14s\n", money(t.electricity).c_str());
  if (t.cooling != 0) std::printf("  cooling (PUE)       %14s\n", money(t.cooling).c_str());
  std::printf("  hardware            %14s\n", money(t.hardware).c_str());
  if (t.maintenance != 0) std::printf("  maintenance         %14s\n", money(t.maintenance).c_str());
  std::printf("  total (owned)       %14s\n", money(t.total).c_str());
  if (t.rental) std::printf("  cloud rental        %14s (instead of owning)\n", money(*t.rental).c_str());
}

void run_cost(CostArgs a) {
  fill_inputs(a);
  if (!a.price_per_kwh) throw fpgallm::InputError("--price-per-kwh", "electricity price is required");
  if (a.days && a.years) throw fpgallm::InputError("--days", "give either --days or --years, not both");
  cost::Operation op;
  op.days = a.days ? *a.days : 365.0 * (a.years ? *a.years : cost::kDefaultYears);
  op.hours_per_day = a.hours_per_day;
  op.price_per_kwh = *a.price_per_kwh;
  op.pue = a.pue;
  op.maintenance_fraction_per_year = a.maintenance;

  const bool have_gpu = a.gpu_throughput.has_value();
  if (have_gpu && !a.throughput) throw fpgallm::InputError("--gpu-throughput", "needs --throughput (per FPGA card) too");
  if (have_gpu && !a.gpu_watts) throw fpgallm::InputError("--gpu-throughput", "needs --gpu-watts too");

  std::optional<double> target = a.target_throughput;
  if (!target && a.throughput && a.cards > 0) target = a.cards * *a.throughput;

  cost::Cluster fpga{"fpga", a.cards, a.watts, a.card_price, a.hourly_price};
  if (fpga.cards <= 0) {
    if (target && a.throughput) fpga.cards = cost::cards_for_throughput(*target, *a.throughput);
    else throw fpgallm::InputError("--cards", "give --cards, or --throughput with --target-throughput");
  }
  if (!(a.watts > 0)) throw fpgallm::InputError("--watts", "power per card is required and must be positive");
  const cost::Tco t = cost::tco(fpga, op);

  std::optional<double> per_million;
  const bool tokens = a.unit == "tokens";
  if (a.throughput && tokens) per_million = cost::cost_per_million(t.total, fpga.cards * *a.throughput, op.hours());
  std::optional<double> per_million_rented;
  if (per_million && t.rental) per_million_rented = cost::cost_per_million(*t.rental, fpga.cards * *a.throughput, op.hours());

  std::optional<cost::BreakEven> be;
  if (have_gpu) {
    cost::Side f{fpga, *a.throughput};
    cost::Side g{{"gpu", 0, *a.gpu_watts, a.gpu_price.value_or(0), a.gpu_hourly_price}, *a.gpu_throughput};
    be = cost::break_even(f, g, *target, op);
  }

  nlohmann::json assumptions = {{"days", op.days},
                                {"hours_per_day", op.hours_per_day},
                                {"operating_hours", op.hours()},
                                {"price_per_kwh", op.price_per_kwh},
                                {"pue", op.pue},
                                {"maintenance_fraction_per_year", op.maintenance_fraction_per_year},
                                {"currency", "same unit as --price-per-kwh and the card prices"}};
  if (a.json) {
    nlohmann::json j = {{"cards", fpga.cards},
                        {"watts_per_card", fpga.watts_per_card},
                        {"card_price", fpga.card_price},
                        {"energy_kwh", t.energy_kwh},
                        {"electricity", t.electricity},
                        {"tco", t},
                        {"assumptions", assumptions},
                        {"unit", a.unit}};
    j["cost_per_million_tokens"] = per_million ? nlohmann::json(*per_million) : nlohmann::json(nullptr);
    j["cost_per_million_tokens_rented"] = per_million_rented ? nlohmann::json(*per_million_rented) : nlohmann::json(nullptr);
    j["break_even"] = be ? nlohmann::json(*be) : nlohmann::json(nullptr);
    cli::print_json(j);
    return;
  }
  std::printf("operating period: %s days x %g h/day = %s h; electricity at %g per kWh, PUE %g, maintenance %g%% of hardware per year\n",
              money(op.days).c_str(), op.hours_per_day, money(op.hours()).c_str(), op.price_per_kwh, op.pue,
              100 * op.maintenance_fraction_per_year);
  std::printf("electricity: %s (%d cards x %g kW x %s h x %g per kWh)\n", money(t.electricity).c_str(), fpga.cards,
              fpga.watts_per_card / 1000.0, money(op.hours()).c_str(), op.price_per_kwh);
  print_tco("FPGA cluster", fpga, t);
  if (per_million) std::printf("  cost per million tokens (owned): %.4f\n", *per_million);
  if (per_million_rented) std::printf("  cost per million tokens (rented): %.4f\n", *per_million_rented);
  if (be) {
    std::printf("\nbreak-even at equal throughput: %s %s/s\n", money(be->target_throughput).c_str(), a.unit.c_str());
    cost::Cluster fc = fpga, gc{"gpu", be->gpu_cards, *a.gpu_watts, a.gpu_price.value_or(0), a.gpu_hourly_price};
    fc.cards = be->fpga_cards;
    print_tco("FPGA cluster", fc, be->fpga);
    print_tco("GPU cluster", gc, be->gpu);
    std::printf("running cost per hour: FPGA %.4f, GPU %.4f\n", be->fpga_opex_per_hour, be->gpu_opex_per_hour);
    std::printf("%s\n", be->verdict().c_str());
  }
}

void setup(CLI::App& root) {
  auto a = std::make_shared<CostArgs>();
  auto* cmd = root.add_subcommand(
      "cost",
      "Electricity, total cost of ownership, cost per million tokens and break-even against a GPU cluster\n"
      "example: fpgallm cost --cards 20 --watts 150 --hours-per-day 24 --days 300 --price-per-kwh 1.2");
  cmd->add_option("--cards", a->cards, "FPGA cards (default: enough for --target-throughput)")->check(cli::kNonNegative);
  cmd->add_option("--watts", a->watts, "Average power per FPGA card, W")->check(cli::kNonNegative);
  cmd->add_option("--card-price", a->card_price, "Purchase price per FPGA card (default 0: electricity only)")->check(cli::kNonNegative);
  cmd->add_option("--hourly-price", a->hourly_price, "Cloud rental price per FPGA card-hour")->check(cli::kNonNegative);
  cmd->add_option("--days", a->days, "Operating period in days (default: 3 years)")->check(cli::kPositive);
  cmd->add_option("--years", a->years, "Operating period in years of 365 days (default 3)")->check(cli::kPositive);
  cmd->add_option("--hours-per-day", a->hours_per_day, "Operating hours per day (default 24)")->check(cli::between(0.0, 24.0));
  cmd->add_option("--price-per-kwh", a->price_per_kwh, "Electricity price per kWh (required)")->check(cli::kNonNegative);
  cmd->add_option("--pue", a->pue, "Power usage effectiveness: facility / IT power; (PUE-1) is cooling (default 1.0)")->check(cli::between(1.0, 5.0));
  cmd->add_option("--maintenance", a->maintenance, "Maintenance per year as a fraction of hardware price (default 0)")->check(cli::between(0.0, 1.0));
  cmd->add_option("--throughput", a->throughput, "Throughput per FPGA card (units/s, see --unit)")->check(cli::kPositive);
  cmd->add_option("--target-throughput", a->target_throughput, "Cluster throughput to size both sides to (default: cards x throughput)")->check(cli::kPositive);
  cmd->add_option("--unit", a->unit, "What throughput counts: tokens (default) or steps")->check(CLI::IsMember({"tokens", "steps"}));
  cmd->add_option("--gpu-throughput", a->gpu_throughput, "Throughput per GPU card (same unit); enables break-even")->check(cli::kPositive);
  cmd->add_option("--gpu-watts", a->gpu_watts, "Average power per GPU card, W")->check(cli::kPositive);
  cmd->add_option("--gpu-price", a->gpu_price, "Purchase price per GPU card")->check(cli::kNonNegative);
  cmd->add_option("--gpu-hourly-price", a->gpu_hourly_price, "Cloud rental price per GPU card-hour")->check(cli::kNonNegative);
  cmd->add_option("--device", a->device, "FPGA card from the device database: fills --watts (TDP), --card-price, --hourly-price when not given");
  cmd->add_option("--gpu", a->gpu, "GPU from the device database: fills --gpu-watts (TDP), --gpu-price, --gpu-hourly-price when not given");
  cmd->add_option("--from", a->from, "Plan or design JSON with a prediction (cards, watts, decode_tokens_per_s, device)");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { run_cost(*a); });
}

}  // namespace

FPGALLM_COMMAND("cost", setup);
