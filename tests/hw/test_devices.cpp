#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "hw/device.hpp"
#include "testing.hpp"
#include "util/error.hpp"
#include "util/paths.hpp"

namespace {

// Walks data/devices.json as raw JSON: every [value, "source"] pair with a value has a source.
void check_figures(const nlohmann::json& j, const std::string& where, int& checked) {
  if (j.is_array() && j.size() == 2 && !j[0].is_structured() && j[1].is_string()) {
    if (!j[0].is_null()) {
      EXPECT_FALSE(j[1].get<std::string>().empty()) << where << " has a value without a source";
      ++checked;
    }
    return;
  }
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) check_figures(it.value(), where + "." + it.key(), checked);
  else if (j.is_array())
    for (std::size_t i = 0; i < j.size(); ++i) check_figures(j[i], where + "[" + std::to_string(i) + "]", checked);
}

TEST(Devices, EveryFigureHasASource) {
  std::ifstream in(fpgallm::data_dir() + "/devices.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  int checked = 0;
  check_figures(j["devices"], "devices", checked);
  check_figures(j["power_model"], "power_model", checked);
  EXPECT_GT(checked, 300);
  for (const auto& d : hw::devices()) {
    for (const hw::Figure* f : {&d.fabric.lut, &d.fabric.dsp, &d.tdp_w, &d.peak_int8_tops, &d.price_usd, &d.pcie_gbps})
      if (f->has()) {
        EXPECT_FALSE(f->source.empty()) << d.id;
      }
    for (const auto& m : d.memory)
      if (m.bandwidth_gbps.has()) {
        EXPECT_FALSE(m.bandwidth_gbps.source.empty()) << d.id;
      }
  }
}

TEST(Devices, TheIssueListIsPresent) {
  for (const char* id : {"u50", "u55c", "u200", "u250", "u280", "v80", "vck5000", "vhk158", "f1", "zcu102", "kv260",
                         "stratix10-nx", "agilex7-m", "v100s", "a100-40gb", "a100-80gb", "h100-pcie", "h100-sxm", "h200",
                         "l4", "t4"})
    EXPECT_NE(hw::lookup_device(id), nullptr) << id;
}

TEST(Devices, DatasheetFiguresOfKnownCards) {
  const hw::Device& u280 = hw::find_device("u280");
  EXPECT_EQ(*u280.fabric.dsp, 9024);
  EXPECT_EQ(*u280.fabric.lut, 1303680);
  EXPECT_DOUBLE_EQ(u280.memory.front().bandwidth_gbps.or_else(0), 460);  // 32 x 14.375
  EXPECT_EQ(u280.memory_channels(), 34);                                  // 32 HBM PCs + 2 DDR banks
  EXPECT_LT(*u280.platform.available.lut, *u280.fabric.lut);              // the shell takes its share
  EXPECT_DOUBLE_EQ(u280.platform.lut_ceiling, 0.70);
  EXPECT_DOUBLE_EQ(u280.platform.ff_ceiling, 0.50);
  EXPECT_DOUBLE_EQ(u280.platform.dsp_ceiling, 0.80);
  const hw::Device& h100 = hw::find_device("h100-sxm");
  EXPECT_EQ(h100.kind, hw::Kind::gpu);
  EXPECT_DOUBLE_EQ(h100.memory_bandwidth_gbps(), 3350);
  EXPECT_DOUBLE_EQ(*h100.peak_fp16_tflops, 989.5);  // dense, not the sparse 1979
  // Volta has no int8 tensor path: empty, with the reason as its source.
  const hw::Device& v100s = hw::find_device("v100s");
  EXPECT_FALSE(v100s.peak_int8_tops.has());
  EXPECT_FALSE(v100s.peak_int8_tops.source.empty());
  // A figure that could not be checked against its document says so in its source.
  EXPECT_NE(hw::find_device("v80").fabric.lut.source.find("verify"), std::string::npos);
}

TEST(Devices, LookupIsCaseInsensitiveAndTakesAliases) {
  EXPECT_EQ(hw::find_device("U280").id, "u280");
  EXPECT_EQ(hw::find_device("alveo-u55c").id, "u55c");
  EXPECT_EQ(hw::find_device("AMD Alveo U250").id, "u250");
  EXPECT_EQ(hw::find_device("h100").id, "h100-sxm");
  EXPECT_EQ(hw::lookup_device("no-such-card"), nullptr);
}

TEST(Devices, UnknownNamesListCloseOnes) {
  try {
    hw::find_device("u28");
    FAIL() << "expected an InputError";
  } catch (const fpgallm::InputError& e) {
    EXPECT_NE(e.problem().find("u280"), std::string::npos) << e.problem();
    EXPECT_EQ(e.source(), "--device");
  }
  const auto close = hw::close_device_names("h10");
  EXPECT_FALSE(close.empty());
  EXPECT_NE(std::find(close.begin(), close.end(), "h100-sxm"), close.end());
}

TEST(Devices, ATableWithASourcelessFigureIsRejected) {
  const std::string dir = testing_support::scratch_dir("hw_devices");
  const std::string path = dir + "/devices.json";
  testing_support::write_bytes(path, R"({"devices": [{"id": "x", "kind": "fpga", "lut": [1000, ""]}]})");
  EXPECT_THROW(hw::load_devices(path), fpgallm::InputError);
  testing_support::write_bytes(path, R"({"devices": [{"id": "x", "kind": "fpga", "lut": 1000}]})");
  EXPECT_THROW(hw::load_devices(path), fpgallm::InputError);
  testing_support::write_bytes(path, R"({"devices": [{"id": "x", "kind": "fpga", "lutz": [1, "s"]}]})");
  EXPECT_THROW(hw::load_devices(path), fpgallm::InputError);
  testing_support::write_bytes(path, R"({"devices": [{"id": "x", "lut": [1, "s"]}, {"id": "X"}]})");
  EXPECT_THROW(hw::load_devices(path), fpgallm::InputError);  // the same name twice
  testing_support::write_bytes(path, R"({"devices": [{"id": "x", "kind": "fpga", "lut": [null, "not found"]}]})");
  EXPECT_FALSE(hw::load_devices(path).front().fabric.lut.has());
}

// Every card a user would weigh is in the table with every figure a prediction needs.
TEST(Devices, EveryListedCardHasTheFiguresAPredictionNeeds) {
  const char* fpgas[] = {"u50", "u55c", "u200", "u250", "u280", "v80", "vck190", "vck5000", "vhk158", "vcu118",
                         "vcu128", "f1", "f2", "zcu102", "zcu104", "kv260", "stratix10-gx", "stratix10-mx",
                         "stratix10-nx", "agilex7-f", "agilex7-m"};
  for (const char* id : fpgas) {
    const hw::Device* d = hw::lookup_device(id);
    ASSERT_NE(d, nullptr) << id;
    EXPECT_EQ(d->kind, hw::Kind::fpga) << id;
    ASSERT_FALSE(d->memory.empty()) << id;
    const hw::Fabric usable = d->usable();
    for (const hw::Figure* f : {&d->memory.front().bandwidth_gbps, &d->memory.front().capacity_gb,
                                &d->memory.front().channels, &d->kernel_clock_mhz, &usable.lut, &usable.ff, &usable.dsp,
                                &usable.bram36, &d->int8_macs_per_dsp, &d->onchip_mb, &d->tdp_w, &d->pcie_gbps}) {
      EXPECT_TRUE(f->has()) << id;
      EXPECT_FALSE(f->source.empty()) << id;
    }
  }
  EXPECT_TRUE(hw::find_device("f1").cloud_usd_per_hour.has());
  const char* gpus[] = {"v100", "a100-40gb", "a100-80gb", "h100-pcie", "h100-sxm", "h200",
                        "l4",   "l40s",      "rtx3090",   "rtx4090",   "jetson-agx-orin"};
  for (const char* id : gpus) {
    const hw::Device* d = hw::lookup_device(id);
    ASSERT_NE(d, nullptr) << id;
    EXPECT_EQ(d->kind, hw::Kind::gpu) << id;
    EXPECT_GT(d->memory_bandwidth_gbps(), 0) << id;
    EXPECT_GT(d->memory_capacity_gb(), 0) << id;
    EXPECT_TRUE(d->peak_fp16_tflops.has()) << id;
    EXPECT_TRUE(d->tdp_w.has()) << id;
  }
}

TEST(DevicesCli, ListsAndShowsSources) {
  auto r = testing_support::run_fpgallm("devices --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto list = nlohmann::json::parse(r.out);
  EXPECT_EQ(list.size(), hw::devices().size());
  r = testing_support::run_fpgallm("devices u280");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("DS890"), std::string::npos);
  r = testing_support::run_fpgallm("devices u28");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("did you mean"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
