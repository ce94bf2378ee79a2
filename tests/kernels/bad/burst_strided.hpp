// Bad kernel: a pipelined loop reads its m_axi port at row * stride + col, where row and
// col are counters the loop body steps itself (not the loop variable): the address is not
// affine in the loop variable, so Vitis HLS cannot infer a burst (one request per element).
inline void gather_rows(float* out, const float* in, int stride) {
  int row = 0, col = 0;
  for (int i = 0; i < 256; ++i) {
#pragma HLS PIPELINE II=1
    out[i] = in[row * stride + col];
    ++col;
    if (col == 16) {
      col = 0;
      ++row;
    }
  }
}
extern "C" void top(float* out, const float* in, int stride) {
#pragma HLS INTERFACE m_axi port=out bundle=gmem0
#pragma HLS INTERFACE m_axi port=in bundle=gmem1
  gather_rows(out, in, stride);
}
