// Bad kernel: the on-chip buffer is picked at run time by returning one of several arrays.
struct Buffers {
  float x[64];
  float y[64];
  float z[64];
};
inline float* pick(Buffers& b, int which) {
  switch (which) {
    case 0: return b.x;
    case 1: return b.y;
    default: return b.z;
  }
}
inline void clear(Buffers& b, int which) {
  float* p = pick(b, which);
  for (int i = 0; i < 64; ++i) p[i] = 0.0f;
}
