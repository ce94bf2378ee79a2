// Bad kernel: a pipelined loop reads 8 elements of an on-chip array per iteration (the inner
// loop is unrolled), but the array is one BRAM bank of 2 ports: II 4, not 1.
inline void block_sums(float* out, const float* in) {
  float buf[256];
  for (int i = 0; i < 256; ++i) buf[i] = in[i];
  for (int i = 0; i < 256; i += 8) {
#pragma HLS PIPELINE II=1
    float s = 0.0f;
    for (int k = 0; k < 8; ++k) s += buf[i + k];
    out[i / 8] = s;
  }
}
