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
// The C-simulation FIFO keeps its elements in one growing array and a read index, emptied
// (capacity kept) when the consumer catches up: a region's streams allocate once, not per
// element (a deque of 2 KB weight steps allocated a node per write); a consumer that never
// catches up has the read half dropped once it passes kCompactAt elements.
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
#include <vector>

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
    if (empty()) {
      std::fprintf(stderr, "kernels::Fifo %s: read while empty (the hardware would deadlock)\n", name_);
      std::abort();
    }
    T v = q_[head_++];
    if (head_ == q_.size()) {
      q_.clear();
      head_ = 0;
    } else if (head_ >= kCompactAt && 2 * head_ >= q_.size()) {
      // A consumer that keeps pace without ever catching up: drop the read half.
      q_.erase(q_.begin(), q_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    return v;
  }
  void read(T& v) { v = read(); }
  bool read_nb(T& v) {
    if (empty()) return false;
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
  bool empty() const { return head_ == q_.size(); }
  bool full() const { return false; }
  std::size_t size() const { return q_.size() - head_; }

 private:
  const char* name_ = "(unnamed)";
  static constexpr std::size_t kCompactAt = 4096;
  std::vector<T> q_;  // q_[head_ ..) are the unread elements, oldest first
  std::size_t head_ = 0;
};

}  // namespace kernels
#endif
