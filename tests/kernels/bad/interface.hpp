// Bad kernel: an INTERFACE pragma in a sub-function (only the top function declares ports).
inline void scale_row(float* y, const float* x, int n) {
#pragma HLS INTERFACE m_axi port=x bundle=gmem0
  for (int i = 0; i < 64; ++i) {
    if (i >= n) break;
    y[i] = 2.0f * x[i];
  }
}
extern "C" void top(float* y, const float* x, int n) {
#pragma HLS INTERFACE m_axi port=y bundle=gmem1
  scale_row(y, x, n);
}
