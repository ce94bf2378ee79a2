// Bad kernel: the loop runs to a run-time count, not a compile-time bound.
template <int MAX_N>
void relu(float* x, int n) {
  for (int i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
