// No prediction moves more bytes per second than the ports of its design carry, or does
// more arithmetic than its MAC array (GPU: its datasheet peaks), on any device x preset.
// The limits are computed here from the design and the device figures, not by perf.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/presets.hpp"
#include "perf/perf.hpp"

namespace {

// A plain overlay on every channel of the device's first memory, at the device's clock.
arch::Design design_for(const hw::Device& dev, int port_bits, int compute_units) {
  arch::Design d;
  d.name = dev.id + "-bounds";
  d.device = dev.id;
  d.clock_mhz = *dev.kernel_clock_mhz;
  d.matrix_unit.rows = 32;
  d.matrix_unit.cols = 64;
  d.tiling.tile_rows = 64;
  d.tiling.tile_cols = 256;
  d.buffers.weight_bytes = 2 * 64 * 256;
  d.buffers.activation_bytes = 1 << 20;
  const int channels = int(dev.memory.front().channels.or_else(1));
  d.memory.weight_channels = std::max(1, channels - channels / 4);
  d.memory.kv_channels = channels / 4;
  d.memory.activation_channels = 0;
  d.memory.port_bits = port_bits;
  d.compute_units = compute_units;
  return d;
}

TEST(Bounds, NoFpgaPredictionExceedsItsPortsOrMacArray) {
  int checked = 0;
  for (const auto& dev : hw::devices()) {
    if (dev.kind != hw::Kind::fpga) continue;
    const auto& pool = dev.memory.front();
    ASSERT_TRUE(pool.bandwidth_gbps.has() && dev.kernel_clock_mhz.has()) << dev.id;
    for (const auto& preset : model::presets()) {
      if (!preset.config.causal()) continue;  // encoders have no decode phase
      perf::Scenario s;
      s.prompt = 32;
      s.context = 256;
      const auto w = perf::lower(preset.config, graph::parse_scheme("int8"), s);
      for (int port_bits : {128, 512})
        for (int cu : {1, 3}) {
          const arch::Design d = design_for(dev, port_bits, cu);
          const perf::Prediction p = perf::predict(d, dev, w);
          const int channels = std::min(int(pool.channels.or_else(1)), d.memory.weight_channels + d.memory.kv_channels);
          const double ports = std::min(channels * port_bits / 8.0 * d.clock_mhz * 1e6,
                                        *pool.bandwidth_gbps * 1e9 * channels / pool.channels.or_else(1));
          const double macs = 2.0 * 32 * 64 * cu * d.clock_mhz * 1e6;
          for (const auto* ph : {&p.prefill, &p.decode})
            for (const auto& o : ph->ops) {
              if (o.time_s <= 0 || o.on_host) continue;
              EXPECT_LE(o.offchip_bytes / o.time_s, ports * (1 + 1e-9)) << dev.id << " " << preset.config.name << " " << o.name;
              EXPECT_LE(o.flops / o.time_s, macs * (1 + 1e-9)) << dev.id << " " << preset.config.name << " " << o.name;
            }
          EXPECT_LE(p.decode.offchip_bytes / p.decode.seconds, ports * (1 + 1e-9)) << dev.id << " " << preset.config.name;
          ++checked;
        }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(Bounds, NoGpuPredictionExceedsItsDatasheet) {
  for (const auto& dev : hw::devices()) {
    if (dev.kind != hw::Kind::gpu) continue;
    const double bw = dev.memory_bandwidth_gbps() * 1e9;
    double peak = 0;
    for (const auto* f : {&dev.peak_int8_tops, &dev.peak_fp16_tflops, &dev.peak_bf16_tflops, &dev.peak_fp32_tflops})
      if (f->has()) peak = std::max(peak, **f * 1e12);
    ASSERT_GT(bw, 0) << dev.id;
    ASSERT_GT(peak, 0) << dev.id;
    for (const auto& preset : model::presets())
      for (perf::GpuStack stack : perf::gpu_stacks()) {
        if (!preset.config.causal()) continue;
        perf::Scenario s;
        s.prompt = 64;
        const auto w = perf::lower(preset.config, graph::parse_scheme("fp16"), s);
        const perf::Prediction p = perf::predict_gpu(dev, w, 1, stack);
        for (const auto* ph : {&p.prefill, &p.decode}) {
          EXPECT_LE(ph->offchip_bytes / ph->seconds, bw) << dev.id << " " << preset.config.name;
          EXPECT_LE(ph->flops / ph->seconds, peak) << dev.id << " " << preset.config.name;
        }
      }
  }
}

}  // namespace
