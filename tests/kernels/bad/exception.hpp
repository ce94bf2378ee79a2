// Bad kernel: throws.
inline float checked_div(float a, float b) {
  if (b == 0.0f) throw 1;
  return a / b;
}
