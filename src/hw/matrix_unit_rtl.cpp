#include "hw/matrix_unit_rtl.hpp"

namespace hw {

namespace {
int ceil_log2(int x) {
  int n = 0;
  while ((1 << n) < x) ++n;
  return n;
}
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
}  // namespace

int rtl_matrix_unit_latency(const arch::MatrixUnit& mu) { return 4 + ceil_log2(mu.cols) + 1; }

int rtl_requant_latency() { return 4; }

std::int64_t matrix_unit_tile_steps(const arch::MatrixUnit& mu, std::int64_t tile_rows, std::int64_t tile_cols,
                                    std::int64_t tokens) {
  return tokens * ceil_div(tile_rows, mu.rows) * ceil_div(tile_cols, mu.cols) * mu.ii;
}

}  // namespace hw
