#pragma once
// arch::unit_work: the one description of what the accelerator's units do for one
// instruction of arch::Program, read off the kernels (src/kernels, the emitted top
// src/codegen emit_text.cpp) loop by loop: every loop with its trip count, initiation
// interval and pipeline depth, the bytes it moves on each port, and the cycles the
// instruction takes. The code generator's schedule table, the simulator and the analytical
// model all read it, so they cannot disagree about a unit.
//
// What runs (both stages):
//   controller   fetches the instruction's 16 words from the program bundle (one request,
//                then one word per cycle) and calls the unit; instructions run one after
//                another (the top's instruction loop is sequential). Every instruction of
//                the list runs, fused or not: the kernels implement no fusion.
//   embed        one fp32 embedding row per token from the parameter bundle (16 floats per
//                beat).
//   norm         the gain from the parameter bundle, then a lane reduction (sum of
//                squares; LayerNorm adds the mean) and the scaling pass, lanes per cycle.
//   quantize     max |x| and the codes, lanes per cycle each (dynamic scale).
//   matmul       decode (one token): the streaming matrix-vector unit, a DATAFLOW region
//                read_weight_channel x channels -> gather_weight_steps ->
//                matrix_vector_w8a8 (II=1, pipeline_depth) -> store_rows; it takes its
//                slowest process plus the multiplier's fill and one request latency.
//                prefill (several tokens): the tiled unit kernels::matmul_w8a8: weight
//                tiles tile_rows x tile_cols streamed over the weight channels (one SIMD
//                word of a row per iteration, charged at the channels' rate) and the
//                tokens' activation columns beside each (one SIMD word per cycle),
//                double-buffered when buffers.weight_bytes holds two tiles, each computed
//                for all tokens (tokens x row folds x column folds x ii + pipeline_depth),
//                the store stage (tokens x rows) after the last column tile of a row tile.
//                int4 weights (w4a8) at decode: the same tiled unit, kernels::matmul_w4a8,
//                at one token (the emitted top's overlay::matmul_block).
//                A bias (qkv_bias) is added in store_rows, read beside the row scales from
//                the parameter bundle (tiled: in the store stage, one word per output).
//   head_norm    the q gain, every q head's RMSNorm (lane reduction, scaling pass), then
//                the k gain and every k head's (Qwen3's q_norm/k_norm).
//   rope         the cos/sin row, then every q and k head, lanes elements per cycle.
//   kv_store     k and v of every KV head: int8 = max |x| and codes (two lane passes),
//                binary16/fp32 one element per cycle; writes are posted.
//   attention    kernels::attention: per query head, its query vectors on chip (one element
//                per cycle), then per block of kKvBlock positions the block's int8 scales
//                (one request, one per cycle), then the K and V of all its keys as one
//                flattened loop (one request per block, lanes elements per beat of the
//                widened KV bundles), then per query three loops pipelined at II=1 over
//                beats x positions: the scores (lane tree of q . k, / sqrt(d), running
//                maxima), the values (p = exp(s - m), partial sums of p v), the combine
//                (acc x corr + the slots), each charged its pipeline depth once per call,
//                and one sequential exp for the correction; the store. It runs on the
//                vector unit; the matrix unit is idle.
//   residual_add, swiglu, gelu: one lane pass.
//   host         token ids in and the logits out over PCIe (embed, classifier).
// Weights and the KV cache are always read through the m_axi bundles: the kernels keep
// neither on chip, whatever design.style (dataflow) or buffers.kv_bytes say.
// Depths: the matrix unit's (design.matrix_unit.pipeline_depth) and attention's loops
// (called once per query and block: their chains of binary32 cores, units.cpp) are
// charged; the other vector loops' depths, once per instruction, are not counted (the
// table says so).
// Every Loop names the kernel loop it describes (Loop::kernel_loop); tests/unit_loops runs
// each instruction kind through the kernels and checks trip x calls against the iterations
// the kernels count in C simulation (kernels/trip_count.hpp).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "arch/design.hpp"
#include "arch/program.hpp"

namespace arch {

// Positions of one attention block (kernels::AttentionConfig KV_BLOCK): the accelerator
// backend's and the emitted kernel's attention unit.
inline constexpr int kKvBlock = 256;
// Tokens of one prefill program, as the accelerator backend and the emitted top's prompt
// call run a prompt: tiling.prefill_block, at most kMaxBlockTokens (the kernels' MAX_TOKENS
// and MAX_QUERIES, the rows of the emitted top's on-chip activation arrays).
inline constexpr int kMaxBlockTokens = 64;
inline int block_tokens(const Design& d) { return std::clamp(d.tiling.prefill_block, 1, kMaxBlockTokens); }
// The emitted top's on-chip activation arrays (x, xb, xb2, q, k, v, att, hb, hb2): block_tokens
// rows each, cyclically partitioned into activation_partition banks (PE-wide stores from the
// matrix unit, lane-wide reads), every token's row rounded up to whole partitions so that
// each token's vector starts in bank 0.
int activation_partition(const Design& d);
int activation_row(const Design& d, int width);
// Words of one bank of such an array `width` elements wide (block RAM or LUTRAM, or UltraRAM
// when design.buffers.activations_in_uram).
long long activation_bank_depth(const Design& d, int width);
// int32 words of one encoded instruction (src/arch/isa.hpp).
inline constexpr int kInstructionWords = fpgallm_isa::kWords;
// The emitted m_axi bundles of the weights and the parameters: bursts of burst_bytes in
// 512-bit beats (1 to 256, the AXI4 limit), and the weight bundles' outstanding reads.
inline int burst_beats(const Design& d) { return std::clamp(d.memory.burst_bytes / 64, 1, 256); }
inline constexpr int kWeightReadsOutstanding = 16;

// What the ports deliver, in bytes per cycle of the design clock, sustained (memory
// efficiency applied), and their request latencies in cycles. Computed from the device
// by perf::port_rates (one function for every reader).
struct PortRates {
  double weight_channel = 64;  // one weight channel (bundle w00, w01, ...)
  int weight_channels = 1;     // channels the weight bundles stream from at that rate together
                               // (design.memory.weight_channels, at most the pool's channels)
  double kv = 64;              // one KV data bundle (kv_k or kv_v)
  double params = 64;          // parameters, row scales, the program (one bundle each)
  double host = 64;            // PCIe
  double memory_latency = 0;   // request to first data, weights/params/program memory
  double kv_latency = 0;       // request to first data, KV memory
  double host_latency = 0;     // one PCIe DMA transfer
  std::string note;            // where the rates come from
};

enum class UnitKind { controller, matrix, vector, host };
const char* to_string(UnitKind u);

struct Loop {
  std::string name;         // "matmul 288x288: matrix_vector_w8a8"
  // The kernel loop it describes: its FPGALLM_TRIP id (src/kernels/trip_count.hpp), whose
  // iterations in C simulation are trip x calls summed over the loops naming it. Empty for
  // the host's PCIe transfer, which is no kernel loop.
  std::string kernel_loop;
  std::int64_t trip = 0;    // iterations per call
  int ii = 1;
  int depth = 0;            // pipeline depth charged once per call (0: none charged)
  std::int64_t calls = 1;   // calls in this instruction
  double cycles = 0;        // all calls
  std::string note;
};

struct Work {
  UnitKind unit = UnitKind::vector;  // the unit busy for the instruction's body
  std::vector<Loop> loops;
  double fetch_cycles = 0;    // controller: request latency + the instruction words
  double host_cycles = 0;     // PCIe transfers (token in, logits out)
  double body_cycles = 0;     // the unit's part, request latencies included
  double cycles = 0;          // fetch + body + host: the instruction, start to end
  // The weight stream (matmul): bytes over all weight channels and the compute it feeds,
  // split into `pieces` equal parts that can overlap (decode: the DATAFLOW stream;
  // prefill: the weight tiles, overlapping only when `double_buffered`).
  std::int64_t stream_bytes = 0;
  double stream_compute = 0;  // cycles of the slowest compute process over all pieces
  double stream_fill = 0;     // multiplier fill (decode: once; prefill: inside stream_compute)
  double after_stream = 0;    // cycles after the stream's last piece (the logits to the result bundle)
  std::int64_t pieces = 0;
  std::int64_t piece_buffer_bytes = 0;  // bytes of one piece (its share of the buffer while in flight)
  bool double_buffered = true;
  bool streaming = false;     // decode: the pieces are one DATAFLOW stream (fill once)
  // Off-chip bytes by port.
  std::int64_t weight_bytes = 0, param_bytes = 0, kv_read_bytes = 0, kv_write_bytes = 0, host_bytes = 0;
  std::int64_t macs = 0;      // multiply-accumulates (matrix unit or vector lanes)
};

// The work of one instruction on one card of `design` (`cards`: the tensor split's share
// of rows, columns and heads is the caller's: see shard()). Without `list_loops`,
// Work::loops stays empty and every figure is the same.
Work unit_work(const Design& design, const Instruction& ins, const PortRates& rates, bool list_loops = true);

// One card's part of an instruction under a tensor split over `cards` cards, as the
// multi-card executor divides it: column-parallel matmuls (wq, wk, wv, w1, w3, cls) by
// rows, row-parallel ones (wo, w2) by columns, attention, RoPE and the KV cache by heads.
Instruction shard(const Instruction& ins, int cards);

}  // namespace arch
