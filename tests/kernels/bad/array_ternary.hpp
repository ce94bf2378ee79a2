// Bad kernel: a pointer chooses between two on-chip arrays at run time.
inline void add(float* out, int which, int n) {
  float left[64];
  float right[64];
  for (int i = 0; i < 64; ++i) left[i] = right[i] = 1.0f;
  const float* src = which ? left : right;
  for (int i = 0; i < 64; ++i) {
    if (i >= n) break;
    out[i] = src[i];
  }
}
