// A stand-in for the interface of XRT's native C++ API (xrt/xrt_bo.h); see xrt_device.h.
#ifndef FPGALLM_XRT_BO_STAND_IN
#define FPGALLM_XRT_BO_STAND_IN
#include <cstddef>
#include <cstdint>

#include "xrt_device.h"

enum xclBOSyncDirection { XCL_BO_SYNC_BO_TO_DEVICE = 0, XCL_BO_SYNC_BO_FROM_DEVICE, XCL_BO_SYNC_BO_GMIO_TO_AIE,
                          XCL_BO_SYNC_BO_AIE_TO_GMIO };

namespace xrt {

using memory_group = uint32_t;

class bo {
 public:
  bo();
  bo(const device& device, size_t size, memory_group group);
  bo(const bo&);
  bo(bo&&);
  bo& operator=(const bo&);
  bo& operator=(bo&&);
  ~bo();
  size_t size() const;
  void write(const void* src, size_t size, size_t seek);
  void write(const void* src);
  void read(void* dst, size_t size, size_t skip);
  void read(void* dst);
  void sync(xclBOSyncDirection dir, size_t size, size_t offset);
  void sync(xclBOSyncDirection dir);
};

}  // namespace xrt
#endif
