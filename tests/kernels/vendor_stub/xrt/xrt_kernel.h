// A stand-in for the interface of XRT's native C++ API (xrt/xrt_kernel.h); see xrt_device.h.
#ifndef FPGALLM_XRT_KERNEL_STAND_IN
#define FPGALLM_XRT_KERNEL_STAND_IN
#include <string>

#include "xrt_bo.h"
#include "xrt_device.h"

enum ert_cmd_state { ERT_CMD_STATE_NEW = 1, ERT_CMD_STATE_QUEUED = 2, ERT_CMD_STATE_COMPLETED = 4,
                     ERT_CMD_STATE_ERROR = 5, ERT_CMD_STATE_ABORT = 6, ERT_CMD_STATE_TIMEOUT = 9 };

namespace xrt {

class kernel {
 public:
  kernel();
  kernel(const device& device, const uuid& xclbin_id, const std::string& name);
  kernel(const kernel&);
  kernel& operator=(const kernel&);
  int group_id(int argno) const;
};

class run {
 public:
  run();
  explicit run(const kernel& krnl);
  run(const run&);
  run& operator=(const run&);
  // XRT passes a buffer argument as an xrt::bo and a scalar by value (its documented
  // template over the argument's type).
  template <typename ArgType>
  void set_arg(int index, ArgType&& arg);
  void start();
  ert_cmd_state wait(unsigned int timeout_ms = 0) const;
};

}  // namespace xrt
#endif
