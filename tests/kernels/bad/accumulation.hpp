// Bad kernel: one running floating-point sum in an II=1 pipelined loop: each addition needs
// the previous one's result, so the loop runs at the adder's latency, not at II=1.
inline float total(const float* x) {
  float s = 0.0f;
  for (int i = 0; i < 1024; ++i) {
#pragma HLS PIPELINE II=1
    s += x[i];
  }
  return s;
}
