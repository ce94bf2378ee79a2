#pragma once
// kernels::Fifo<T, DEPTH>: the FIFO channel between the processes of a DATAFLOW region.
//
// Under __SYNTHESIS__ it is Vitis HLS's own hls::stream<T, DEPTH> (hls_stream.h, the vendor
// header, which these machines do not have). In C simulation it is this project's FIFO with
// the same interface (read, write, read_nb, write_nb, empty, full, size, >>, <<), unbounded
// as hls::stream is in C simulation: the processes of a region run one after another there,
// so a producer writes everything before its consumer reads. What C simulation therefore
// proves: the data each process produces and consumes (values, order, counts). What it
// does not prove: that the FIFO depths avoid deadlock and that the processes overlap in
// hardware (the co-simulation and the dataflow viewer of Vitis HLS show that).
#ifdef __SYNTHESIS__
#include "hls_stream.h"

namespace kernels {
template <class T, int DEPTH = 2>
using Fifo = hls::stream<T, DEPTH>;
}  // namespace kernels

#else
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <deque>

namespace kernels {

template <class T, int DEPTH = 2>
class Fifo {
 public:
  Fifo() = default;
  explicit Fifo(const char* name) : name_(name) {}
  Fifo(const Fifo&) = delete;
  Fifo& operator=(const Fifo&) = delete;

  // Reading an empty FIFO would stall the hardware forever: C simulation stops there.
  T read() {
    if (q_.empty()) {
      std::fprintf(stderr, "kernels::Fifo %s: read while empty (the hardware would deadlock)\n", name_);
      std::abort();
    }
    T v = q_.front();
    q_.pop_front();
    return v;
  }
  void read(T& v) { v = read(); }
  bool read_nb(T& v) {
    if (q_.empty()) return false;
    v = read();
    return true;
  }
  void write(const T& v) { q_.push_back(v); }
  bool write_nb(const T& v) {
    write(v);
    return true;
  }
  void operator>>(T& v) { read(v); }
  void operator<<(const T& v) { write(v); }
  bool empty() const { return q_.empty(); }
  bool full() const { return false; }
  std::size_t size() const { return q_.size(); }

 private:
  const char* name_ = "(unnamed)";
  std::deque<T> q_;
};

}  // namespace kernels
#endif
