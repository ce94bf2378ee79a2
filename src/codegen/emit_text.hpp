#pragma once
// The text files of the emitted project (internal to codegen).
#include <cstdint>
#include <string>
#include <vector>

#include "arch/design.hpp"
#include "hw/device.hpp"
#include "model/config.hpp"

namespace codegen {

struct ProjectInfo {
  model::Config config;
  arch::Design design;
  const hw::Device* device = nullptr;  // null when design.device is empty or unknown
  int context = 0;                     // positions of the KV cache
  int instructions = 0;                // of one decode step
  std::int64_t weight_bytes = 0, param_floats = 0, half_scales = 0;
  int layer_instructions = 0;          // instructions of the one-layer golden test
  int layer_result_buf = 0;            // arch::Buf compared in the one-layer test
  int layer_width = 0;
  std::string layer_consumer;          // the matmul whose input is the one-layer result
  int golden_steps = 0;
  std::vector<std::string> notes;      // departures from the design, listed in README.md
};

std::string config_header(const ProjectInfo& p);
std::string top_header(const ProjectInfo& p);
std::string top_source(const ProjectInfo& p);
std::string host_source(const ProjectInfo& p);
std::string testbench_source(const ProjectInfo& p);
std::string golden_reader_source();
std::string connectivity(const ProjectInfo& p);
std::string makefile(const ProjectInfo& p);
std::string hls_tcl(const ProjectInfo& p);
std::string readme(const ProjectInfo& p);

}  // namespace codegen
