// Bad kernel: an unbounded while loop.
inline int leading_zeros(unsigned v) {
  int n = 0;
  while (v && !(v & 0x80000000u)) {
    v <<= 1;
    ++n;
  }
  return n;
}
