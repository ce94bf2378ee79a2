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

// The structures the II rules accept: affine m_axi reads behind the trip-count exit, a
// cyclic partition with a bank for every two accesses of an iteration, kSlots partial sums
// used in turn with their DEPENDENCE distance, and one run-time row shared by every lane.
constexpr int kLanes = 8;
constexpr int kSlots = 8;
inline float partial_sums(const float* in, int base, int n) {
  float buf[256];
  float acc[kSlots][kLanes];
#pragma HLS ARRAY_PARTITION variable=buf cyclic factor=kLanes
#pragma HLS ARRAY_PARTITION variable=acc complete dim=0
  for (int i = 0; i < 256; ++i) {
#pragma HLS PIPELINE II=1
    if (i >= n) break;
    buf[i] = in[base + i];
  }
  for (int d = 0; d < kSlots; ++d)
    for (int l = 0; l < kLanes; ++l) acc[d][l] = 0.0f;
  int slot = 0;
  for (int i = 0; i < 256; i += kLanes) {
#pragma HLS PIPELINE II=1
#pragma HLS DEPENDENCE variable=acc inter distance=kSlots true
    if (i >= n) break;
    for (int l = 0; l < kLanes; ++l) acc[slot][l] = acc[slot][l] + buf[i + l];
    slot = slot == kSlots - 1 ? 0 : slot + 1;
  }
  float s = 0.0f;
  for (int d = 0; d < kSlots; ++d)
    for (int l = 0; l < kLanes; ++l) s += acc[d][l];
  return s;
}
inline void fill_row(float* out, int row, float g) {
  float tile[4][64];
#pragma HLS ARRAY_PARTITION variable=tile dim=2 cyclic factor=kLanes
  for (int c = 0; c < 64; c += kLanes) {
#pragma HLS PIPELINE II=1
    for (int k = 0; k < kLanes; ++k) tile[row][c + k] = g * static_cast<float>(c + k);
  }
  for (int c = 0; c < 64; ++c) out[c] = tile[row][c];
}
extern "C" void clean_top(float* out, const float* in, int base, int n, int row) {
#pragma HLS INTERFACE m_axi port=out bundle=gmem0
#pragma HLS INTERFACE m_axi port=in bundle=gmem1
  out[0] = partial_sums(in, base, n);
  fill_row(out + 1, row, 2.0f);
}
