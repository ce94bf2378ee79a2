// Bad kernel: allocates on the heap.
template <int N>
void scale(float* x) {
  float* tmp = new float[N];
  for (int i = 0; i < N; ++i) tmp[i] = x[i] * 2.0f;
  for (int i = 0; i < N; ++i) x[i] = tmp[i];
  delete[] tmp;
}
