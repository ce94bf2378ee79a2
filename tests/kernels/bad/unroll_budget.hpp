// Bad kernel: a loop over the whole vector inside a pipelined loop is unrolled completely
// by Vitis: 4096 adders, far past the design's widest unit.
template <int MAX_DIM>
struct Cfg {
  static constexpr int max_dim = MAX_DIM;
};
using Big = Cfg<4096>;
template <class CFG>
void dots(float* y, const float* a, const float* b, int rows) {
  for (int r = 0; r < 16; ++r) {
#pragma HLS PIPELINE II=1
    if (r >= rows) break;
    float s = 0.0f;
    for (int i = 0; i < CFG::max_dim; ++i) s += a[i] * b[r * CFG::max_dim + i];
    y[r] = s;
  }
}
