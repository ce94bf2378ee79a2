// Bad kernel: a pipelined loop reads 16 consecutive elements of a cyclically partitioned
// array at a run-time head offset: which of the 16 banks each lane reads is known only at
// run time, so Vitis HLS cannot prove the lanes use different banks.
inline void scale_head(float* out, const float* in, int head, int head_dim) {
  float q[256], y[64];
#pragma HLS ARRAY_PARTITION variable=q cyclic factor=16
#pragma HLS ARRAY_PARTITION variable=y cyclic factor=16
  for (int i = 0; i < 256; ++i) q[i] = in[i];
  for (int i = 0; i < 64; i += 16) {
#pragma HLS PIPELINE II=1
    for (int l = 0; l < 16; ++l) y[i + l] = 2.0f * q[head * head_dim + i + l];
  }
  for (int i = 0; i < 64; ++i) out[i] = y[i];
}
