#pragma once
// When the engine's loops split over OpenMP threads: a loop of fewer multiply-adds than this
// stays on one thread (the fork and barrier cost more than the split saves, the more so on a
// machine whose cores are busy with other work).
namespace engine {
inline constexpr long kParallelWork = 1L << 18;
}  // namespace engine
