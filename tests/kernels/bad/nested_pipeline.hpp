// Bad kernel: a pipelined loop calls a function whose loop is pipelined again.
template <int N>
inline float row_sum(const float* x) {
  float s = 0.0f;
  for (int i = 0; i < N; ++i) {
#pragma HLS PIPELINE II=1
    s += x[i];
  }
  return s;
}
template <int ROWS, int N>
void row_sums(float* y, const float* x) {
  for (int r = 0; r < ROWS; ++r) {
#pragma HLS PIPELINE II=1
    y[r] = row_sum<N>(x + r * N);
  }
}
