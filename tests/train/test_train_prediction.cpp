// The training-step prediction never beats the card's peak arithmetic rate, and the bound
// is computed from the device's datasheet figures (hand-checked below).
#include <gtest/gtest.h>

#include "hw/device.hpp"
#include "model/presets.hpp"
#include "model/model.hpp"
#include "perf/train_step.hpp"

namespace {

TEST(TrainPrediction, BertBaseOnU55CNeverBeatsPeakAnd29msIsUnreachable) {
  const model::Model bert = model::load_or_preset("bert-base");
  const hw::Device& u55c = hw::find_device("u55c");
  const perf::TrainStepPrediction p = perf::predict_train_step_fpga(bert.config, u55c, 32, 128);
  // Peak: 2 x 9024 DSPs x 2 int8 MACs x 225 MHz = 8.12 TOPS (data/devices.json figures: the U55C family clock).
  EXPECT_NEAR(p.peak_ops_per_s, 2.0 * 9024 * 2 * 225e6, 1e6);
  EXPECT_GE(p.step_s, p.min_step_s);
  EXPECT_NEAR(p.min_step_s, p.total_flops / p.peak_ops_per_s, 1e-12);
  // BERT-base has ~110 M parameters; 4096 tokens x 6 FLOPs per parameter and token is a
  // lower estimate of a training step's FLOPs (attention and the optimizer add to it).
  EXPECT_GT(p.total_flops, 6.0 * 85e6 * 4096);
  // "29 ms per step on a U55C" would need total_flops / 0.029 s of arithmetic:
  const double needed_ops = p.total_flops / 0.029;
  EXPECT_GT(needed_ops, p.peak_ops_per_s);
  EXPECT_FALSE(perf::reachable(p, 0.029));
  std::printf("bert-base batch 32 x 128 on u55c: %.3g FLOPs per step, peak %.2f TOPS -> at least %.0f ms per step "
              "(predicted %.0f ms); 29 ms would need %.0f TOPS\n",
              p.total_flops, p.peak_ops_per_s / 1e12, p.min_step_s * 1e3, p.step_s * 1e3, needed_ops / 1e12);
}

TEST(TrainPrediction, GpuBaselineAlsoRespectsItsPeak) {
  const model::Model bert = model::load_or_preset("bert-base");
  const perf::TrainStepPrediction g = perf::predict_train_step_gpu(bert.config, hw::find_device("a100-80gb"), 32, 128);
  EXPECT_NEAR(g.peak_ops_per_s, 312e12, 1e9);
  EXPECT_GE(g.step_s, g.min_step_s);
  EXPECT_GE(g.step_s, g.total_flops / (312e12 * 0.5) * 0.999);  // compute efficiency 0.5
}

TEST(TrainPrediction, FlopsSplitMatchesGraphTotals) {
  const model::Model m = model::load_or_preset("bert-base");
  const perf::TrainStepPrediction p = perf::predict_train_step_fpga(m.config, hw::find_device("u55c"), 8, 64);
  EXPECT_NEAR(p.forward_flops + p.backward_flops + p.optimizer_flops, p.total_flops, 1e-6 * p.total_flops);
  // Backward of every product is two products of the same size: about twice the forward.
  EXPECT_GT(p.backward_flops, 1.8 * p.forward_flops);
  EXPECT_LT(p.backward_flops, 2.2 * p.forward_flops);
  EXPECT_NEAR(p.optimizer_state_bytes, 8.0 * double(m.config.n_params()), 1.0);
}

}  // namespace
