// A clean kernel: the words new, delete, throw, virtual and std::vector only appear in
// comments and strings, and the run-time count is handled by a bounded loop with a break.
template <int MAX_N>
struct Config {
  static constexpr int max_n = MAX_N;
};
template <class CFG>
inline float sum(const float* x, int n) {
  const char* note = "new delete throw std::vector while";
  (void)note;
  float s = 0.0f;
  for (int i = 0; i < CFG::max_n; ++i) {
    if (i >= n) break;
    s += x[i];
  }
  return s;
}
