// A stand-in for the interface of Vitis HLS's hls_stream.h, for the front-end gate only:
// with -D__SYNTHESIS__ the kernels include the vendor header, which is not installed on
// these machines. This file declares the members the kernels use, with the vendor's
// signatures (UG1399, "HLS Stream Library"), and defines nothing: compiling against it
// (-fsyntax-only) checks that the synthesis branch of the sources is valid C++14 that
// uses hls::stream as documented. It is not a model of the vendor's FIFO.
#ifndef FPGALLM_HLS_STREAM_STAND_IN
#define FPGALLM_HLS_STREAM_STAND_IN
namespace hls {
template <typename T, int DEPTH = 0>
class stream {
 public:
  stream();
  explicit stream(const char* name);
  T read();
  void read(T& v);
  bool read_nb(T& v);
  void write(const T& v);
  bool write_nb(const T& v);
  void operator>>(T& v);
  void operator<<(const T& v);
  bool empty() const;
  bool full() const;
  unsigned size() const;

 private:
  stream(const stream&);
  stream& operator=(const stream&);
};
}  // namespace hls
#endif
