#pragma once
// Which banks of the card hold each buffer of the emitted kernel (the sp= lines of
// connectivity.cfg), and the check that they can: every buffer's bytes against the capacity
// of its banks (with the other buffers sharing them), and the bandwidth the schedule assumes
// on its port against what the banks and the port deliver. `plan` (through perf), `simulate`
// and `emit` all read this one mapping.
//
// The rule, as a Vitis engineer writes connectivity.cfg for an HBM card: a bank (an HBM
// pseudo-channel, a DDR bank) is one contiguous address range, and XRT allocates a buffer
// contiguously inside the banks its port is connected to; a buffer larger than one bank gets
// a range HBM[a:b] of banks no other buffer uses; smaller buffers may share a bank. Weight
// channel c gets bank c (a pseudo-channel per weight port, its full bandwidth); the KV ports
// get the KV channels the design assigns (design.memory.kv_channels, split between kv_k and
// kv_v) or, without any, as many free banks as their bytes need; what does not fit in the
// first memory of the card goes to the next one (the U280's DDR4).
#include <cstdint>
#include <string>
#include <vector>

#include "arch/design.hpp"
#include "arch/units.hpp"
#include "hw/device.hpp"
#include "model/config.hpp"

namespace hw {

// One m_axi buffer of the emitted top function.
struct KernelBuffer {
  std::string port;        // "w00", "kv_k", "params", ...
  std::string what;        // "weights, channel 0", "KV cache keys", ...
  std::int64_t bytes = 0;  // at the model and context the kernel is sized for
  double bytes_per_s = 0;  // sustained rate the schedule assumes on the port (arch::PortRates); 0: not bandwidth-bound
  std::string bundle;      // the m_axi bundle; ports of one bundle are one AXI master, so share their banks
};

// The buffers of the emitted top for model `c` on design `d` with a KV cache of `context`
// positions; `rates` are the port rates the schedule charges (perf::port_rates), `clock_hz`
// the kernel clock. Weight channels: kernels::stream_words of every matrix (what
// codegen's layout writes); parameters: the fp32 embedding, norm gains, Qwen biases and head
// gains and the RoPE table, rows padded to 16 floats; KV: layers x context x kv_dim elements
// of kv_bits per port, and one fp32 scale per position and KV head.
std::vector<KernelBuffer> kernel_buffers(const model::Config& c, const arch::Design& d, int context,
                                         const arch::PortRates& rates);

// Banks first..last of memory pool `pool` of the device.
struct BankRange {
  int pool = 0;
  std::string kind;  // "HBM" or "DDR" as connectivity.cfg names them
  int first = 0, last = 0;
  int banks() const { return last - first + 1; }
  std::string sp() const;  // "HBM[3]", "HBM[28:30]", "DDR[1]"
};

struct MappedBuffer {
  KernelBuffer buffer;
  BankRange banks;
  bool mapped = false;
};

struct MemoryMap {
  std::vector<MappedBuffer> buffers;
  bool fits = true;                    // every buffer mapped and check_map found nothing
  std::vector<std::string> problems;   // one line each
  std::vector<std::string> assumptions;
  const MappedBuffer* find(const std::string& port) const;
};

// Maps `buffers` onto the banks of `device` for design `d` (rule above), then checks the map
// (check_map). `memory_efficiency`: the sustained fraction of peak the rates assume
// (perf::Constants::memory_efficiency).
MemoryMap map_buffers(const std::vector<KernelBuffer>& buffers, const Device& device, const arch::Design& d,
                      double memory_efficiency);

// Capacity of one bank of `pool` (its capacity over its channels) and the peak bandwidth of
// `banks` banks behind one port of `port_bits` at `clock_hz`.
double bank_bytes(const MemoryPool& pool);
double banks_bandwidth(const MemoryPool& pool, int banks, int port_bits, double clock_hz);

// The check alone: each bank's buffers against its capacity, and each buffer's rate against
// memory_efficiency x the peak of its banks behind its port. One line per problem.
std::vector<std::string> check_map(const MemoryMap& map, const Device& device, const arch::Design& d,
                                   double memory_efficiency);

// One line per buffer: "kv_k -> HBM[28:29] (537 MB in 2 x 250 MB; 12.9 of 25.9 GB/s)".
std::vector<std::string> map_lines(const MemoryMap& map, const Device& device, const arch::Design& d,
                                   double memory_efficiency);

}  // namespace hw
