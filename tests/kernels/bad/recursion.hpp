// Bad kernel: recursion through two functions (tree sum written recursively).
inline float half_sum(const float* x, int n);
inline float tree(const float* x, int n) {
  if (n == 1) return x[0];
  return half_sum(x, n);
}
inline float half_sum(const float* x, int n) {
  return tree(x, n / 2) + tree(x + n / 2, n - n / 2);
}
