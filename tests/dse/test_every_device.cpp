// Every FPGA card of data/devices.json can be planned for a small and a 7B model: a design,
// or one line naming the physical limit that stops it, never a missing figure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

#include "dse/dse.hpp"
#include "model/presets.hpp"

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

class EveryFpgaDevice : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryFpgaDevice, PlansStories110mAndLlama2_7b) {
  const hw::Device& dev = hw::find_device(GetParam());
  for (const char* preset : {"stories110m", "llama2-7b"}) {
    dse::Request r;
    r.config = *model::find_preset(preset);
    r.precision = graph::parse_scheme("int4");
    r.scenario.batch = 1;
    r.scenario.prompt = 64;
    r.scenario.context = 512;
    r.max_cards = 1;
    const dse::DeviceResult res =
        dse::explore_device(dev, r, dse::Objective::decode_tps, perf::lower(r.config, r.precision, r.scenario));
    if (res.fits()) {
      const auto& best = res.best();
      EXPECT_EQ(best.design.device, dev.id);
      EXPECT_GT(best.prediction.decode_tokens_per_s, 0) << dev.id << " " << preset;
      // The clock is what the device family closes at, never above it.
      EXPECT_LE(best.design.clock_mhz, *dev.kernel_clock_mhz) << dev.id;
      continue;
    }
    ASSERT_FALSE(res.why_not.empty()) << dev.id << " " << preset << ": no design and no reason";
    const std::string reason = lower(res.why_not.front());
    EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
    EXPECT_EQ(reason.find("figure"), std::string::npos) << dev.id << " " << preset << ": " << reason;
    EXPECT_EQ(reason.find("missing"), std::string::npos) << dev.id << " " << preset << ": " << reason;
    const bool physical = reason.find("fit") != std::string::npos || reason.find("memory") != std::string::npos ||
                          reason.find("chip") != std::string::npos || reason.find("exceed") != std::string::npos ||
                          reason.find("allowed") != std::string::npos;
    EXPECT_TRUE(physical) << dev.id << " " << preset << ": " << reason;
  }
}

std::vector<std::string> fpga_ids() {
  std::vector<std::string> ids;
  for (const auto& d : hw::devices())
    if (d.kind == hw::Kind::fpga) ids.push_back(d.id);
  return ids;
}

std::string name_of(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Devices, EveryFpgaDevice, ::testing::ValuesIn(fpga_ids()), name_of);

}  // namespace
