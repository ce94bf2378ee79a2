// Bad kernel: a standard container.
#include <vector>
template <int N>
float total(const float* x) {
  std::vector<float> v(x, x + N);
  float s = 0;
  for (int i = 0; i < N; ++i) s += v[i];
  return s;
}
