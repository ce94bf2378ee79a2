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
  model::Config config;                // the model the kernel is sized for (a preset may have no weights)
  model::Config golden;                // the model of data/ and golden/ (config itself, or a small
                                       // synthesized model run on the same design)
  arch::Design design;
  const hw::Device* device = nullptr;  // null when design.device is empty or unknown
  int context = 0;                     // positions of the kernel's KV cache
  int golden_context = 0;              // positions of the testbench's KV cache
  int instructions = 0;                // of one decode step of `config`
  int golden_instructions = 0;         // of one decode step of `golden` (data/program.bin)
  int weight_channels = 1;             // 512-bit weight bundles (design.memory.weight_channels)
  std::int64_t channel_words = 0;      // words of data/weights_chNN.bin, each channel
  std::int64_t scale_words = 0;        // FloatWords of data/row_scales.bin
  std::int64_t param_words = 0;        // FloatWords of data/params.bin
  std::int64_t weight_bytes = 0;       // int8 codes of all matrices (before padding)
  int unroll_budget = 64;              // widest unit of the design (checker budget)
  std::string schedule;                // the schedule table (Markdown), README.md and schedule.md
  int layer_instructions = 0;          // instructions of the one-layer golden test
  int layer_result_buf = 0;            // arch::Buf compared in the one-layer test
  int layer_width = 0;
  std::string layer_consumer;          // the matmul whose input is the one-layer result
  std::string golden_source;           // where the golden model comes from (README)
  int golden_steps = 0;
  int block_tokens = 1;                // tokens of one prefill block of the prompt call (arch::block_tokens)
  std::vector<int> prompt_lengths;     // the golden prompt calls (golden/prompt_*.bin)
  std::int64_t prompt_kv_bytes = 0;    // bytes of golden/prompt_kv.bin
  std::vector<std::string> notes;      // departures from the design, listed in README.md
};

std::string config_header(const ProjectInfo& p);
std::string top_header(const ProjectInfo& p);
std::string top_source(const ProjectInfo& p);
std::string host_source(const ProjectInfo& p);
std::string testbench_source(const ProjectInfo& p);
std::string golden_reader_source();
std::string connectivity(const ProjectInfo& p);
// Why connectivity.cfg cannot be written (a buffer no bank of the card holds), or empty.
std::string link_problem(const ProjectInfo& p);
// Where the units do not fit the card's SLRs (an SLR over its ceilings, a boundary over its
// SLLs; `plan` never picks such a design, a hand-written one may be emitted): one line each.
std::vector<std::string> placement_problems(const ProjectInfo& p);
std::string makefile(const ProjectInfo& p);
// hls/fpgallm_overlay.tcl (C simulation, C synthesis) or hls/fpgallm_overlay_cosim.tcl
// (C synthesis, C/RTL co-simulation of the golden testbench).
enum class HlsFlow { csim, cosim };
std::string hls_tcl(const ProjectInfo& p, HlsFlow flow);
std::string readme(const ProjectInfo& p);

// The schedule of one decode step of `c` at `context` on `d` (the emitted kernel's loops):
// a Markdown table and the total cycles, the sum over the decode program of
// arch::unit_work (the units' description the simulator and the analytical model read)
// at perf::port_rates of the design's device.
struct Schedule {
  std::string table;
  double cycles = 0;
};
Schedule decode_schedule(const model::Config& c, const arch::Design& d, const hw::Device* device, int context);
// Names of the weight bundles' ports, "w00", "w01", ...
std::string weight_port(int channel);

}  // namespace codegen
