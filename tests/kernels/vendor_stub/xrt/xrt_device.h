// A stand-in for the interface of XRT's native C++ API (xrt/xrt_device.h), for the
// front-end gate only: XRT is not installed on these machines. It declares the members the
// emitted host program uses, with the signatures of AMD's XRT documentation ("XRT Native
// APIs"), and defines nothing: compiling against it (-fsyntax-only) checks that the host
// program is valid C++17 that uses the API as documented. It is not a model of XRT.
#ifndef FPGALLM_XRT_DEVICE_STAND_IN
#define FPGALLM_XRT_DEVICE_STAND_IN
#include <string>

namespace xrt {

class uuid {
 public:
  uuid();
  uuid(const uuid&);
  uuid& operator=(const uuid&);
};

class device {
 public:
  device();
  explicit device(unsigned int index);
  device(const device&);
  device& operator=(const device&);
  uuid load_xclbin(const std::string& xclbin_file_name);
};

}  // namespace xrt
#endif
