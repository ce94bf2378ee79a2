// The first hour of a new user (issue 21): the bundled model finds its tokenizer and text,
// presets are understood everywhere, help says every default in the user's words, errors
// are readable, and advice, prices and power count every card a design needs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using testing_support::run_fpgallm;
using testing_support::source_path;

const std::string kModel = " " + testing_support::stories260k();
const std::string kText = " " + testing_support::sample_text();

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

nlohmann::json devices_json() {
  std::ifstream in(source_path("data/devices.json"));
  return nlohmann::json::parse(in);
}

// A figure of data/devices.json ([value, "source"]) of device `id`, or NaN.
double device_figure(const std::string& id, const std::string& key) {
  const nlohmann::json all = devices_json();
  for (const auto& d : all.at("devices"))
    if (d.at("id") == id) return d.contains(key) && d.at(key).at(0).is_number() ? d.at(key).at(0).get<double>() : NAN;
  return NAN;
}

}  // namespace

class Newcomer : public ::testing::Test {};

TEST_F(Newcomer, BundledModelFindsItsTokenizerThroughItsManifest) {
  const auto with = run_fpgallm("eval" + kModel + " -z " + testing_support::tok512() + " --text" + kText + " --json");
  const auto without = run_fpgallm("eval" + kModel + " --text" + kText + " --json");
  ASSERT_EQ(with.status, 0) << with.err;
  ASSERT_EQ(without.status, 0) << without.err;
  EXPECT_EQ(nlohmann::json::parse(without.out).at("perplexity"), nlohmann::json::parse(with.out).at("perplexity"));
}

TEST_F(Newcomer, ManifestPathsAreRelativeToTheManifest) {
  const std::string dir = testing_support::scratch_dir("manifest");
  fs::copy_file(source_path("models/stories260K.bin"), dir + "/m.bin");
  fs::copy_file(source_path("models/tok512.bin"), dir + "/vocab.bin");
  // No manifest and no tokenizer.bin: one line that says what was looked for.
  auto r = run_fpgallm("run " + dir + "/m.bin -n 8 -t 0");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("m.manifest.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("-z"), std::string::npos) << r.err;
  // A manifest naming a file that is not there: the manifest is named.
  testing_support::write_bytes(dir + "/m.manifest.json", R"({"tokenizer": "missing.bin"})");
  r = run_fpgallm("run " + dir + "/m.bin -n 8 -t 0");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("m.manifest.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("missing.bin"), std::string::npos) << r.err;
  testing_support::write_bytes(dir + "/m.manifest.json", R"({"tokenizer": 3})");
  r = run_fpgallm("run " + dir + "/m.bin -n 8 -t 0");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("m.manifest.json"), std::string::npos) << r.err;
  // Relative to the manifest's folder, from any working directory.
  testing_support::write_bytes(dir + "/m.manifest.json", R"({"tokenizer": "vocab.bin"})");
  r = run_fpgallm("run " + dir + "/m.bin -n 40 -t 0");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Once upon a time"), std::string::npos) << r.out;
}

TEST_F(Newcomer, DeployFindsItsTextInTheManifestAndSaysSo) {
  const auto help = run_fpgallm("deploy --help");
  ASSERT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("manifest"), std::string::npos) << help.out;
  // No text named anywhere: one line naming --text.
  const std::string dir = testing_support::scratch_dir("deploy-text");
  fs::copy_file(source_path("models/stories260K.bin"), dir + "/m.bin");
  const auto r = run_fpgallm("deploy " + dir + "/m.bin -z " + testing_support::tok512() + " --device u280 -o " + dir + "/out");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--text"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir + "/out"));
}

TEST_F(Newcomer, PresetsWhereWeightsAreNeededSayOneLineAndPointToSynth) {
  const std::string dir = testing_support::scratch_dir("presets");
  for (const std::string& args : std::vector<std::string>{"run llama2-7b", "eval llama2-7b --text " + testing_support::sample_text(),
                                 "quantize llama2-7b --calib " + testing_support::sample_text() + " -o " + dir + "/q.gguf",
                                 "deploy llama2-7b --device u280 -o " + dir + "/d",
                                 "train llama2-7b --data " + testing_support::sample_text() + " --steps 1",
                                 "convert llama2-7b -o " + dir + "/c.gguf"}) {
    const auto r = run_fpgallm(args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find("preset"), std::string::npos) << args << ": " << r.err;
    EXPECT_NE(r.err.find("fpgallm synth --preset llama2-7b"), std::string::npos) << args << ": " << r.err;
  }
  EXPECT_TRUE(fs::is_empty(dir));
  for (const std::string& args : std::vector<std::string>{"info llama2-7b", "profile llama2-7b", "plan llama2-7b --device u280"})
    EXPECT_EQ(run_fpgallm(args).status, 0) << args;
}

TEST_F(Newcomer, HelpShowsDefaultsInTheUsersWords) {
  for (const std::string& cmd : std::vector<std::string>{"run", "eval", "quantize", "deploy", "train", "plan", "explore", "profile", "simulate",
                                "emit", "cost", "devices", "info", "synth", "convert", "validate"}) {
    const auto r = run_fpgallm(cmd + " --help");
    ASSERT_EQ(r.status, 0) << cmd;
    EXPECT_EQ(r.out.find("::"), std::string::npos) << cmd << " --help names an internal type:\n" << r.out;
    EXPECT_EQ(r.out.find("179769"), std::string::npos) << cmd << " --help prints the largest double:\n" << r.out;
  }
  // `shown` in the help of `option` (up to the next option's line).
  auto has = [](const std::string& help, const std::string& option, const std::string& shown) {
    const auto at = help.find(option);
    return at != std::string::npos && help.find(shown, at) < help.find("\n  -", at);
  };
  const auto deploy = run_fpgallm("deploy --help").out;
  EXPECT_TRUE(has(deploy, "--budget", "(default 1)")) << deploy;
  EXPECT_TRUE(has(deploy, "--sample-steps", "(default 200)")) << deploy;
  EXPECT_TRUE(has(deploy, "--text", "manifest")) << deploy;
  const auto profile = run_fpgallm("profile --help").out;
  EXPECT_TRUE(has(profile, "--phase", "(default decode)")) << profile;
  const auto run = run_fpgallm("run --help").out;
  EXPECT_TRUE(has(run, "--steps", "(default 256)")) << run;
  EXPECT_TRUE(has(run, "--temperature", "(default 1)")) << run;
}

TEST_F(Newcomer, RangeErrorsAreReadable) {
  auto r = run_fpgallm("run " + testing_support::stories260k() + " -n -1");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("-1 is below the minimum 0"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 200u) << r.err;
  r = run_fpgallm("run " + testing_support::stories260k() + " -t 150");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("150 is not between 0 and 100"), std::string::npos) << r.err;
  r = run_fpgallm("cost --price-per-kwh -0.5");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err.find("179769"), std::string::npos) << r.err;
}

TEST_F(Newcomer, BudgetIsWrittenTheSameWayInQuantizeAndDeploy) {
  const std::string dir = testing_support::scratch_dir("budget");
  // Accepted in both forms: the command goes on to the next problem (the unknown card or
  // the missing checkpoint), which is what it names.
  for (const std::string& b : std::vector<std::string>{"5", "5%", "0.5 %"}) {
    auto r = run_fpgallm("deploy " + testing_support::stories260k() + " --device nosuchcard -o " + dir + "/d --budget '" + b + "'");
    EXPECT_EQ(r.status, 2) << b << ": " << r.err;
    EXPECT_NE(r.err.find("nosuchcard"), std::string::npos) << b << ": " << r.err;
    r = run_fpgallm("quantize " + dir + "/none.bin --calib " + testing_support::sample_text() + " -o " + dir +
                    "/q.gguf --scheme mixed --budget '" + b + "'");
    EXPECT_EQ(r.status, 2) << b << ": " << r.err;
    EXPECT_NE(r.err.find("none.bin"), std::string::npos) << b << ": " << r.err;
  }
  for (const std::string& cmd : std::vector<std::string>{"deploy " + testing_support::stories260k() + " --device u280 -o " + dir + "/d",
                                "quantize " + testing_support::stories260k() + " --calib " + testing_support::sample_text() +
                                    " -o " + dir + "/q.gguf --scheme mixed"}) {
    const auto r = run_fpgallm(cmd + " --budget 5x");
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("--budget"), std::string::npos) << r.err;
  }
}

// Every price and power figure of explore is that of the whole design: the cards it needs
// times one card (prices and cost per token recomputed here from data/devices.json and
// data/perf_model.json), and the advice quotes those whole-design prices.
TEST_F(Newcomer, ExplorePricesAndPowerCountEveryCard) {
  const auto r = run_fpgallm("explore llama3-8b --devices all --json", 300);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::ifstream in(source_path("data/perf_model.json"));
  const auto constants = nlohmann::json::parse(in).at("constants");
  const double years = constants.at("amortization_years").at("value").get<double>();
  const double kwh = constants.at("electricity_usd_per_kwh").at("value").get<double>();
  int multi_card = 0;
  std::map<std::string, double> price_of;
  for (const auto& d : j.at("devices")) {
    if (!d.at("fits").get<bool>()) continue;
    const std::string id = d.at("device");
    const auto& best = d.at("best");
    const auto& p = best.at("prediction");
    const int cards = p.at("cards");
    multi_card += cards > 1;
    const double unit = device_figure(id, "price_usd");
    if (std::isnan(unit)) {
      EXPECT_TRUE(best.at("price_usd").is_null()) << id;
      continue;
    }
    price_of[id] = cards * unit;
    EXPECT_DOUBLE_EQ(best.at("price_usd").get<double>(), cards * unit) << id;
    const double watts = p.at("watts").is_number() ? p.at("watts").get<double>() : 0.0;
    const double tps = p.at("decode_tokens_per_s");
    if (!std::isnan(device_figure(id, "cloud_usd_per_hour")) || watts <= 0) continue;
    // Every card amortized plus the electricity of all of them (watts is all the cards').
    const double hourly = cards * unit / (years * 365 * 24) + watts / 1000 * kwh;
    EXPECT_NEAR(p.at("usd_per_mtoken").get<double>(), hourly / (tps * 3600) * 1e6, 1e-9 * hourly / tps * 1e6) << id;
    EXPECT_NEAR(p.at("joules_per_token").get<double>(), watts / tps, 1e-9 * watts / tps) << id;
  }
  EXPECT_GT(multi_card, 0) << "llama3-8b should need several cards on some device";
  // The advice quotes whole-design prices: each "$N" next to a device is that design's.
  const std::regex quoted(R"((\S+) reaches [0-9]+ tokens/s for \$([0-9]+)(?: \(([0-9]+) cards\))? instead of \$([0-9]+))");
  for (const auto& a : j.at("advice")) {
    const std::string s = a;
    std::smatch m;
    if (!std::regex_search(s, m, quoted)) continue;
    ASSERT_TRUE(price_of.count(m[1])) << s;
    EXPECT_NEAR(std::stod(m[2]), price_of[m[1]], 0.5) << s;
  }
  // The table counts the same way.
  const auto text = run_fpgallm("explore llama3-8b --devices all", 300);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("count every card of a design"), std::string::npos) << text.out;
  EXPECT_EQ(text.err.find("speed-up"), std::string::npos) << "one process has no speed-up: " << text.err;
}

// Every card in data/devices.json has a power figure today, so the test reads a copy of the
// data folder (FPGALLM_DATA) in which f1's is removed.
class UnknownPower : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_support::scratch_dir("unknown-power");
    fs::copy(source_path("data"), dir_, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    nlohmann::json all = devices_json();
    for (auto& d : all.at("devices"))
      if (d.at("id") == "f1")
        for (const char* key : {"tdp_w", "static_w", "static_power_w"})
          if (d.contains(key)) d[key] = nlohmann::json::array({nullptr, "removed by the test"});
    std::ofstream(dir_ + "/devices.json") << all.dump(1);
    ::setenv("FPGALLM_DATA", dir_.c_str(), 1);
  }
  void TearDown() override { ::unsetenv("FPGALLM_DATA"); }
  std::string dir_;
};

TEST_F(UnknownPower, IsShownUnknownAndNeverRankedAsZero) {
  const auto by_energy = run_fpgallm("explore stories15m --devices f1 --objective tokens-per-joule --json", 120);
  const auto by_speed = run_fpgallm("explore stories15m --devices f1 --objective decode-tps --json", 120);
  ASSERT_EQ(by_energy.status, 0) << by_energy.err;
  ASSERT_EQ(by_speed.status, 0) << by_speed.err;
  const auto e = nlohmann::json::parse(by_energy.out).at("devices").at(0);
  const auto s = nlohmann::json::parse(by_speed.out).at("devices").at(0);
  EXPECT_TRUE(e.at("best").at("prediction").at("watts").is_null()) << e.dump();
  // Without power every design scores the same: ranked by tokens/s, not by the smallest design.
  EXPECT_EQ(e.at("best").at("design"), s.at("best").at("design"));
  bool said = false;
  const auto energy_json = nlohmann::json::parse(by_energy.out);
  for (const auto& a : energy_json.at("advice"))
    said = said || a.get<std::string>().find("f1: power unknown") != std::string::npos;
  EXPECT_TRUE(said) << by_energy.out;
  const auto table = run_fpgallm("explore stories15m --devices f1 --objective tokens-per-joule");
  ASSERT_EQ(table.status, 0);
  const auto row = table.out.substr(table.out.find("\nf1 "), table.out.find('\n', table.out.find("\nf1 ") + 1) - table.out.find("\nf1 "));
  EXPECT_NE(row.find("unknown"), std::string::npos) << row;
  EXPECT_EQ(row.find(" 0.0 "), std::string::npos) << row;
}

TEST_F(Newcomer, DevicesShowEachMemoryPoolAndWholeNumbers) {
  const auto r = run_fpgallm("devices");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto at = r.out.find("\nu280 ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string row = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  double sum = 0;
  const nlohmann::json all = devices_json();
  for (const auto& d : all.at("devices")) {
    if (d.at("id") != "u280") continue;
    ASSERT_GE(d.at("memory").size(), 2u);
    for (const auto& m : d.at("memory")) {
      const double bw = m.at("bandwidth_gbps").at(0);
      sum += bw;
      EXPECT_NE(row.find(m.at("kind").get<std::string>() + " " + std::to_string(std::lround(bw)) + " GB/s"),
                std::string::npos) << row;
    }
  }
  EXPECT_EQ(row.find(std::to_string(std::lround(sum))), std::string::npos) << "pools added together: " << row;
  const auto one = run_fpgallm("devices u280");
  ASSERT_EQ(one.status, 0);
  EXPECT_EQ(one.out.find("e+0"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find(std::to_string(std::lround(device_figure("u280", "lut")))), std::string::npos) << one.out;
}

TEST_F(Newcomer, PresetsAndProfileAgreeWithTheirOwnFigures) {
  const auto p = run_fpgallm("presets");
  ASSERT_EQ(p.status, 0);
  const auto at = p.out.find("\nstories260k ");
  ASSERT_NE(at, std::string::npos) << p.out;
  const std::string row = p.out.substr(at + 1, p.out.find('\n', at + 1) - at - 1);
  EXPECT_EQ(row.find("0.00B"), std::string::npos) << row;
  EXPECT_TRUE(std::regex_search(row, std::regex(R"( [0-9.]+k$)"))) << row;
  // profile: the header's weights are the table's (its total row, weights column).
  const auto prof = run_fpgallm("profile stories260k");
  ASSERT_EQ(prof.status, 0);
  std::smatch head, total;
  ASSERT_TRUE(std::regex_search(prof.out, head, std::regex(R"(\(weights ([0-9.]+ [kMG]?B),)"))) << prof.out;
  ASSERT_TRUE(std::regex_search(prof.out, total, std::regex(R"(\ntotal +\S+ \S+ +\S+% +\S+ \S+ +\S+% +(\S+ \S+))"))) << prof.out;
  EXPECT_EQ(head[1], total[1]) << prof.out;
}

TEST_F(Newcomer, TrainAndQuantizeSplitTheSampleAlike) {
  const std::string dir = testing_support::scratch_dir("split");
  const auto qr = run_fpgallm("quantize " + testing_support::stories260k() + " --calib " + testing_support::sample_text() +
                              " --scheme w8a8 -o " + dir + "/q.gguf");
  ASSERT_EQ(qr.status, 0) << qr.err;
  const auto tr = run_fpgallm("train " + testing_support::stories260k() + " --data " + testing_support::sample_text() +
                              " --steps 0");
  ASSERT_EQ(tr.status, 0) << tr.err;
  std::smatch q, t;
  ASSERT_TRUE(std::regex_search(qr.out, q, std::regex(R"(calibrated on ([0-9]+) stories)"))) << qr.out;
  ASSERT_TRUE(std::regex_search(tr.out, t, std::regex(R"(: ([0-9]+) train stories)"))) << tr.out;
  // The sample has 19 stories: the first 9 calibrate or train, the other 10 are held out.
  EXPECT_EQ(q[1], "9") << qr.out;
  EXPECT_EQ(t[1], "9") << tr.out;
}

TEST_F(Newcomer, RunSaysWhenItStopsAtTheContext) {
  // Sampled with this seed, the story runs to the context; greedy, it ends before.
  const auto r = run_fpgallm("run " + testing_support::stories260k() + " -z " + testing_support::tok512() + " -n 2000 -s 3 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto tokens = nlohmann::json::parse(r.out).at("tokens").size();
  const auto text = run_fpgallm("run " + testing_support::stories260k() + " -n 2000 -s 3");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.err.find("-n 2000 is more than the model's context length, 512 positions"), std::string::npos) << text.err;
  EXPECT_NE(text.err.find(tokens > 512 ? "(it did)" : "ended earlier"), std::string::npos) << tokens << ": " << text.err;
  const auto short_run = run_fpgallm("run " + testing_support::stories260k() + " -t 0 -n 20");
  ASSERT_EQ(short_run.status, 0) << short_run.err;
  EXPECT_EQ(short_run.err.find("context"), std::string::npos) << short_run.err;
}

TEST_F(Newcomer, LongCommandsEstimateTheTimeLeft) {
  // Progress goes to stderr on a terminal, or with --progress (here stderr is a pipe).
  const auto r = run_fpgallm("eval --progress" + kModel + " --text" + kText);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("left"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("perplexity"), std::string::npos) << r.out;
}
