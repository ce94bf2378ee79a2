// The text files of the emitted project. Templates use @NAME@ placeholders (C++ braces
// stay readable); every value comes from the design, the model or the device database.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>

#include "arch/program.hpp"
#include "arch/units.hpp"
#include "kernels/attention.hpp"
#include "codegen/emit_text.hpp"
#include "model/model.hpp"
#include "hw/memory_map.hpp"
#include "hw/placement.hpp"
#include "hw/resources.hpp"
#include "kernels/matrix_unit.hpp"
#include "kernels/vector_unit.hpp"
#include "perf/perf.hpp"
#include "util/error.hpp"

namespace codegen {

namespace {

using Vars = std::map<std::string, std::string>;

std::string fill(std::string text, const Vars& vars) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t a = text.find('@', i);
    if (a == std::string::npos) break;
    const std::size_t b = text.find('@', a + 1);
    if (b == std::string::npos) break;
    const auto it = vars.find(text.substr(a + 1, b - a - 1));
    if (it == vars.end()) {  // not a placeholder: keep the '@'
      out += text.substr(i, a + 1 - i);
      i = a + 1;
      continue;
    }
    out += text.substr(i, a - i) + it->second;
    i = b + 1;
  }
  return out + text.substr(i);
}

// An fp32 constant spelled exactly in C++14: nine significant decimal digits identify a
// binary32 value uniquely (hexadecimal floating literals are C++17).
std::string float_literal(float f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.8ef", static_cast<double>(f));
  return buf;
}

int max_of(std::initializer_list<int> v) { return std::max(v); }
int round_up(int v, int m) { return (v + m - 1) / m * m; }

// Argument lists of the top function that depend on the number of weight channels.
std::string join_ports(int channels, const std::string& before, const std::string& after, const std::string& sep) {
  std::string out;
  for (int c = 0; c < channels; ++c) out += (c ? sep : "") + before + weight_port(c) + after;
  return out;
}

Vars vars_of(const ProjectInfo& p) {
  const auto& c = p.config;
  const auto& g = p.golden;
  const auto& d = p.design;
  const int q_dim = c.n_heads * c.head_dim();
  const int lanes = d.vector_unit.lanes, pe = d.matrix_unit.rows, simd = d.matrix_unit.cols;
  Vars v;
  v["MODEL"] = c.name.empty() ? "model" : c.name;
  v["GOLDENMODEL"] = g.name.empty() ? "model" : g.name;
  v["DESIGN"] = d.name;
  v["DEVICE"] = d.device.empty() ? "(none)" : d.device;
  v["DIM"] = std::to_string(c.dim);
  v["HIDDEN"] = std::to_string(c.hidden_dim);
  v["QDIM"] = std::to_string(q_dim);
  v["KVDIM"] = std::to_string(c.kv_dim());
  v["VOCAB"] = std::to_string(c.vocab_size);
  v["LAYERS"] = std::to_string(c.n_layers);
  v["HEADS"] = std::to_string(c.n_heads);
  v["KVHEADS"] = std::to_string(c.n_kv_heads);
  v["HEADDIM"] = std::to_string(c.head_dim());
  v["KVBLOCK"] = std::to_string(arch::kKvBlock);
  v["KVBEATBITS"] = std::to_string(kernels::kKvBeatBits);
  v["CONTEXT"] = std::to_string(p.context);
  v["EPS"] = float_literal(g.norm_eps);
  v["KVBITS"] = std::to_string(d.kv_bits);
  v["PE"] = std::to_string(pe);
  v["SIMD"] = std::to_string(simd);
  v["CHANNELS"] = std::to_string(p.weight_channels);
  v["TILEROWS"] = std::to_string(d.tiling.tile_rows);
  v["TILECOLS"] = std::to_string(d.tiling.tile_cols);
  v["WBITS"] = std::to_string(d.matrix_unit.weight_bits);
  v["LANES"] = std::to_string(lanes);
  v["EXPBITS"] = std::to_string(d.vector_unit.exp_table_bits);
  v["MAXROWS"] = std::to_string(max_of({c.vocab_size, c.hidden_dim, c.dim, q_dim, c.kv_dim()}));
  v["MAXCOLS"] = std::to_string(max_of({c.hidden_dim, c.dim, q_dim}));
  // Every on-chip vector holds whole 512-bit parameter words and whole lane groups.
  const int width = max_of({c.vocab_size, c.hidden_dim, c.dim, q_dim, c.kv_dim()});
  v["MAXWIDTH"] = std::to_string(round_up(width, std::max(16, lanes)));
  v["PARTITION"] = std::to_string(arch::activation_partition(d));
  v["DIMROW"] = std::to_string(arch::activation_row(d, c.dim));
  v["QROW"] = std::to_string(arch::activation_row(d, q_dim));
  v["KVROW"] = std::to_string(arch::activation_row(d, c.kv_dim()));
  v["HIDDENROW"] = std::to_string(arch::activation_row(d, c.hidden_dim));
  // The block arrays in UltraRAM (design.buffers.activations_in_uram).
  std::string uram;
  if (d.buffers.activations_in_uram)
    for (const char* name : {"x", "xb", "xb2", "q", "k", "v", "att", "hb", "hb2"})
      uram += fmt::format("#pragma HLS BIND_STORAGE variable={} type=ram_2p impl=uram\n", name);
  v["URAMBINDINGS"] = uram;
  v["INSTRUCTIONS"] = std::to_string(std::max(p.instructions, p.golden_instructions));
  v["GOLDENINSTRUCTIONS"] = std::to_string(p.golden_instructions);
  v["LAYERINSTRUCTIONS"] = std::to_string(p.layer_instructions);
  v["LAYERBUF"] = std::to_string(p.layer_result_buf);
  v["LAYERWIDTH"] = std::to_string(p.layer_width);
  v["LAYERCONSUMER"] = p.layer_consumer;
  v["STEPS"] = std::to_string(p.golden_steps);
  v["BLOCK"] = std::to_string(p.block_tokens);
  v["INT4"] = d.matrix_unit.weight_bits == 4 ? "true" : "false";
  v["PROMPTS"] = std::to_string(p.prompt_lengths.size());
  std::string lengths;
  for (int n : p.prompt_lengths) lengths += (lengths.empty() ? "" : ", ") + std::to_string(n);
  v["PROMPTLENGTHS"] = lengths.empty() ? "0" : lengths;
  v["PROMPTKVBYTES"] = std::to_string(p.prompt_kv_bytes);
  v["CLOCK"] = fmt::format("{:g}", d.clock_mhz);
  v["CLOCKHZ"] = std::to_string(std::llround(d.clock_mhz * 1e6));
  v["PERIOD"] = fmt::format("{:.3f}", 1000.0 / d.clock_mhz);
  v["WEIGHTBYTES"] = std::to_string(p.weight_bytes);
  v["CHANNELWORDS"] = std::to_string(p.channel_words);
  v["SCALEWORDS"] = std::to_string(p.scale_words);
  v["PARAMWORDS"] = std::to_string(p.param_words);
  v["GOLDENCONTEXT"] = std::to_string(p.golden_context);
  // Elements of the buffers the testbench and the host allocate, the depth= of their m_axi
  // ports (co-simulation sizes its memory models from them).
  v["PROGRAMWORDS"] = std::to_string(std::int64_t(p.golden_instructions) * arch::kInstructionWords);
  v["KVELEMENTS"] = std::to_string(std::int64_t(g.n_layers) * p.context * g.kv_dim());
  v["KVSCALES"] = std::to_string(std::int64_t(g.n_layers) * p.context * g.n_kv_heads + 1);
  v["GOLDENLAYERS"] = std::to_string(g.n_layers);
  v["GOLDENKVDIM"] = std::to_string(g.kv_dim());
  v["GOLDENKVHEADS"] = std::to_string(g.n_kv_heads);
  v["GOLDENVOCAB"] = std::to_string(g.vocab_size);
  v["GOLDENSOURCE"] = p.golden_source;
  v["BURSTBEATS"] = std::to_string(arch::burst_beats(d));
  v["WEIGHTOUTSTANDING"] = std::to_string(arch::kWeightReadsOutstanding);
  v["BUDGET"] = std::to_string(p.unroll_budget);
  v["SCHEDULE"] = p.schedule;
  return v;
}

}  // namespace

std::string weight_port(int channel) { return fmt::format("w{:02d}", channel); }

std::string config_header(const ProjectInfo& p) {
  Vars v = vars_of(p);

  return fill(R"CPP(#pragma once
// Generated by fpgallm emit from design "@DESIGN@" and model "@MODEL@"; do not edit.
// The kernels' config-struct pattern: every size of this instance as a compile-time constant.
// Loop bounds and on-chip arrays are sized for @MODEL@; the run-time sizes come from the
// instruction words, so the testbench runs the golden model (@GOLDENMODEL@) on this kernel.
#include "fpgallm_isa.hpp"
#include "kernels/attention.hpp"
#include "kernels/matrix_unit.hpp"
#include "kernels/vector_unit.hpp"

struct FpgallmConfig {
  // model
  static constexpr int dim = @DIM@;
  static constexpr int hidden_dim = @HIDDEN@;
  static constexpr int q_dim = @QDIM@;
  static constexpr int kv_dim = @KVDIM@;
  static constexpr int vocab_size = @VOCAB@;
  static constexpr int n_layers = @LAYERS@;
  static constexpr int n_heads = @HEADS@;
  static constexpr int n_kv_heads = @KVHEADS@;
  static constexpr int head_dim = @HEADDIM@;
  static constexpr float norm_eps = @EPS@;
  // design
  static constexpr int context = @CONTEXT@;      // KV cache positions per layer
  static constexpr int kv_bits = @KVBITS@;        // KV cache element (8: int8 + scale per head)
  static constexpr int max_instructions = @INSTRUCTIONS@;  // one step (a decode step or a prefill block)
  static constexpr int max_tokens = @BLOCK@;       // tokens of a prefill block: rows of the activation arrays
  static constexpr bool int4_weights = @INT4@;     // matrix_unit.weight_bits 4: the int4 (w4a8) tiled path is built
  static constexpr int max_width = @MAXWIDTH@;     // longest on-chip vector (whole words and lane groups)
  static constexpr int partition = @PARTITION@;    // cyclic partition of the activation arrays
  // The rows of the activation arrays (token t's vector at t x row): widths rounded up to
  // whole partitions, so that every token's vector starts in the first bank.
  static constexpr int dim_row = @DIMROW@;
  static constexpr int q_row = @QROW@;
  static constexpr int kv_row = @KVROW@;
  static constexpr int hidden_row = @HIDDENROW@;
  static constexpr double clock_mhz = @CLOCK@;
  typedef kernels::KvElement<kv_bits>::type kv_elem;
  // streaming matrix unit: @PE@ x @SIMD@ (PE x SIMD) int8 MACs fed by @CHANNELS@ 512-bit weight channels
  typedef kernels::MatrixVectorConfig<@PE@, @SIMD@, @CHANNELS@, @MAXROWS@, @MAXCOLS@> matrix_vector;
  // tiled matrix unit of the prompt call's blocks (and of int4 matmuls at decode): @PE@ x @SIMD@ MACs,
  // @TILEROWS@ x @TILECOLS@ weight tiles, up to max_tokens tokens per tile
  typedef kernels::MatrixUnitConfig<@PE@, @SIMD@, @TILEROWS@, @TILECOLS@, max_tokens, @MAXROWS@, @MAXCOLS@> matrix_unit;
  // vector unit: @LANES@ lanes, 2^@EXPBITS@-entry exp table
  typedef kernels::VectorUnitConfig<@LANES@, @EXPBITS@, max_width> vector_unit;
  // attention: KV blocks of @KVBLOCK@ positions (arch::kKvBlock)
  typedef kernels::AttentionConfig<vector_unit, @HEADDIM@, @KVBLOCK@, max_tokens, @CONTEXT@, @HEADS@> attention_unit;
  static_assert(head_dim * n_heads == q_dim, "head geometry");
};

// Words of the memory buffers the host allocates (data/*.bin).
constexpr long kChannelWords = @CHANNELWORDS@;  // each of the @CHANNELS@ weight channels (512-bit words)
constexpr long kScaleWords = @SCALEWORDS@;      // row scales (16 floats per word)
constexpr long kParamWords = @PARAMWORDS@;      // embedding, norm gains, RoPE table (16 floats per word)
constexpr long kProgramWords = @GOLDENINSTRUCTIONS@L * fpgallm_isa::kWords;
constexpr int kGoldenInstructions = @GOLDENINSTRUCTIONS@;
// The golden model's KV cache (testbench and host).
constexpr long kKvElements = @GOLDENLAYERS@L * FpgallmConfig::context * @GOLDENKVDIM@;
constexpr long kKvScales = @GOLDENLAYERS@L * FpgallmConfig::context * @GOLDENKVHEADS@;
constexpr int kGoldenVocab = @GOLDENVOCAB@;
constexpr int kGoldenContext = @GOLDENCONTEXT@;
// The one-layer golden test: instructions run, result buffer (arch::Buf) and its width.
constexpr int kLayerInstructions = @LAYERINSTRUCTIONS@;
constexpr int kLayerResultBuf = @LAYERBUF@;
constexpr int kLayerWidth = @LAYERWIDTH@;
constexpr int kGoldenSteps = @STEPS@;
// The golden prompt calls: their lengths (prefixes of golden/prompt_tokens.bin).
constexpr int kPrompts = @PROMPTS@;
constexpr int kPromptLengths[] = {@PROMPTLENGTHS@};
constexpr long kPromptKvBytes = @PROMPTKVBYTES@;
constexpr int kLogitsBuf = 11;  // arch::Buf::logits
)CPP",
              v);
}

std::string top_header(const ProjectInfo& p) {
  Vars v = vars_of(p);
  v["WEIGHTPORTS"] = join_ports(p.weight_channels, "const kernels::PackedWord* ", "", ",\n                                ");
  return fill(R"CPP(#pragma once
// The top-level function of the overlay kernel (generated by fpgallm emit).
#include "fpgallm_config.hpp"

// n_tokens == 0: one decode step of `token` at position `pos`. n_tokens > 0: the prompt
// prompt[0..n_tokens) at positions pos.. in one call, as prefill blocks of
// FpgallmConfig::max_tokens tokens; `result` then holds the last token's `result_buf`.
extern "C" void fpgallm_overlay(const int* program, int n_instructions, int token, int pos, const int* prompt,
                                int n_tokens,
                                @WEIGHTPORTS@,
                                const kernels::FloatWord* row_scales, const kernels::FloatWord* params,
                                FpgallmConfig::kv_elem* kv_k, FpgallmConfig::kv_elem* kv_v, float* kv_k_scale,
                                float* kv_v_scale, int result_buf, float* result);
)CPP",
              v);
}

std::string top_source(const ProjectInfo& p) {
  Vars v = vars_of(p);
  const int ch = p.weight_channels;
  v["WEIGHTPORTS"] = join_ports(ch, "const kernels::PackedWord* ", "", ",\n                                ");
  v["REGIONPORTS"] = join_ports(ch, "const kernels::PackedWord* ", "", ",\n                          ");
  v["WEIGHTARGS"] = join_ports(ch, "", "", ", ");
  std::string reads, pragmas;
  for (int c = 0; c < ch; ++c) {
    reads += fmt::format("  kernels::read_weight_channel<MV>({}, beat, beats, channel[{}]);\n", weight_port(c), c);
    pragmas += fmt::format(
        "#pragma HLS INTERFACE m_axi port={0} offset=slave bundle=gmem_{0} max_read_burst_length=@BURSTBEATS@ "
        "num_read_outstanding=@WEIGHTOUTSTANDING@ max_write_burst_length=2 depth=@CHANNELWORDS@\n",
        weight_port(c));
  }
  v["READS"] = reads;
  v["WEIGHTPRAGMAS"] = fill(pragmas, v);
  return fill(R"CPP(// The overlay kernel's top level (generated by fpgallm emit for design "@DESIGN@").
// One 512-bit m_axi bundle per weight channel (@CHANNELS@), the row scales, the fp32
// parameters, KV data (k, v) and KV scales each on their own bundle; program in and result
// out on the host bundle; scalars and control on s_axilite. Every matmul is a DATAFLOW
// region load -> gather -> multiply -> store linked by streams (kernels/stream.hpp).
#include "fpgallm_overlay.hpp"

#include "overlay.hpp"

namespace {

typedef FpgallmConfig CFG;
typedef CFG::matrix_vector MV;
typedef CFG::vector_unit V;
typedef CFG::attention_unit A;
typedef kernels::SharedCores<V, CFG::kv_bits> CORES;

// One matmul instruction: the weights of the matrix stream from the @CHANNELS@ channels
// (words [beat, beat + beats) of each), are gathered into PE x SIMD steps, multiplied with
// the int8 codes and requantized into the destination array.
void matmul_region(@REGIONPORTS@,
                   const kernels::FloatWord* row_scales, int beat, int beats, int groups, int steps, int scale_word,
                   const kernels::FloatWord* params, int bias_word,
                   int rows, int cols, const kernels::i8 codes[MV::padded_cols], float code_scale, int dest,
                   float q[CFG::q_dim], float k[CFG::kv_dim], float v[CFG::kv_dim], float xb2[CFG::dim],
                   float hb[CFG::hidden_dim], float hb2[CFG::hidden_dim], float logits[CFG::vocab_size]) {
#pragma HLS DATAFLOW
  kernels::Fifo<kernels::PackedWord, 64> channel[MV::channels];
  kernels::Fifo<kernels::WeightStep<MV::step_words>, 4> weight_steps;
  kernels::Fifo<kernels::AccWord<MV::pe>, 4> acc;
@READS@  kernels::gather_weight_steps<MV>(channel, weight_steps, groups, steps);
  kernels::matrix_vector_w8a8<MV>(weight_steps, codes, acc, rows, cols);
  overlay::store_rows<CFG>(acc, row_scales, scale_word, params, bias_word, code_scale, rows, dest, q, k, v, xb2, hb,
                          hb2, logits);
}

}  // namespace

extern "C" void fpgallm_overlay(const int* program, int n_instructions, int token, int pos, const int* prompt,
                                int n_tokens,
                                @WEIGHTPORTS@,
                                const kernels::FloatWord* row_scales, const kernels::FloatWord* params,
                                FpgallmConfig::kv_elem* kv_k, FpgallmConfig::kv_elem* kv_v, float* kv_k_scale,
                                float* kv_v_scale, int result_buf, float* result) {
#pragma HLS INTERFACE m_axi port=program offset=slave bundle=gmem_host depth=@PROGRAMWORDS@
#pragma HLS INTERFACE m_axi port=prompt offset=slave bundle=gmem_host depth=@CONTEXT@
#pragma HLS INTERFACE m_axi port=result offset=slave bundle=gmem_host depth=@MAXWIDTH@
@WEIGHTPRAGMAS@#pragma HLS INTERFACE m_axi port=row_scales offset=slave bundle=gmem_scales max_read_burst_length=@BURSTBEATS@ depth=@SCALEWORDS@
#pragma HLS INTERFACE m_axi port=params offset=slave bundle=gmem_params max_read_burst_length=@BURSTBEATS@ depth=@PARAMWORDS@
#pragma HLS INTERFACE m_axi port=kv_k offset=slave bundle=gmem_kv_k max_widen_bitwidth=@KVBEATBITS@ depth=@KVELEMENTS@
#pragma HLS INTERFACE m_axi port=kv_v offset=slave bundle=gmem_kv_v max_widen_bitwidth=@KVBEATBITS@ depth=@KVELEMENTS@
#pragma HLS INTERFACE m_axi port=kv_k_scale offset=slave bundle=gmem_kv_k_scale depth=@KVSCALES@
#pragma HLS INTERFACE m_axi port=kv_v_scale offset=slave bundle=gmem_kv_v_scale depth=@KVSCALES@
#pragma HLS INTERFACE s_axilite port=return
  // One set of binary32 cores for every vector operation, attention's lane work and the KV
  // store (their functions are inlined here): the most any one of their pipelined loops
  // takes (kernels::SharedCores). The matmul region is a function of its own (DATAFLOW):
  // these limits do not reach it (UG1399).
#pragma HLS ALLOCATION operation instances=fmul limit=CORES::fmul
#pragma HLS ALLOCATION operation instances=fadd limit=CORES::fadd
#pragma HLS ALLOCATION operation instances=fsub limit=CORES::fsub
  // The activations of a step, on chip, partitioned for PE-wide stores and lane-wide reads:
  // CFG::max_tokens rows (the tokens of a prefill block; a decode step uses the first), token
  // t's vector at t x the array's row (CFG::dim_row, ...: whole partitions, so every token's
  // vector starts in bank 0). The logits hold the last token's row only.
  static float x[CFG::max_tokens * CFG::dim_row], xb[CFG::max_tokens * CFG::dim_row];
  static float xb2[CFG::max_tokens * CFG::dim_row], q[CFG::max_tokens * CFG::q_row];
  static float k[CFG::max_tokens * CFG::kv_row], v[CFG::max_tokens * CFG::kv_row];
  static float att[CFG::max_tokens * CFG::q_row], hb[CFG::max_tokens * CFG::hidden_row];
  static float hb2[CFG::max_tokens * CFG::hidden_row], logits[CFG::vocab_size];
  static float param[CFG::max_width];  // the norm gain or RoPE row of the current instruction
  static kernels::i8 codes[CFG::max_tokens * MV::padded_cols];
  static float code_scale[CFG::max_tokens];
#pragma HLS ARRAY_PARTITION variable=x cyclic factor=CFG::partition
#pragma HLS ARRAY_PARTITION variable=xb cyclic factor=CFG::partition
#pragma HLS ARRAY_PARTITION variable=xb2 cyclic factor=CFG::partition
#pragma HLS ARRAY_PARTITION variable=q cyclic factor=CFG::partition
#pragma HLS ARRAY_PARTITION variable=k cyclic factor=CFG::partition
#pragma HLS ARRAY_PARTITION variable=v cyclic factor=CFG::partition
#pragma HLS ARRAY_PARTITION variable=att cyclic factor=CFG::partition
#pragma HLS ARRAY_PARTITION variable=hb cyclic factor=CFG::partition
#pragma HLS ARRAY_PARTITION variable=hb2 cyclic factor=CFG::partition
#pragma HLS ARRAY_PARTITION variable=logits cyclic factor=CFG::partition
#pragma HLS ARRAY_PARTITION variable=param cyclic factor=CFG::partition
#pragma HLS ARRAY_PARTITION variable=codes cyclic factor=MV::simd
@URAMBINDINGS@  const kernels::PackedWord* const ports[MV::channels] = {@WEIGHTARGS@};
  // A decode step is one block of one token; a prompt is ceil(n_tokens / max_tokens) blocks,
  // each running the whole program (the instruction words hold no token count).
  const int total = n_tokens > 0 ? n_tokens : 1;
  for (int b0 = 0; b0 < CFG::context; b0 += CFG::max_tokens) {
    if (b0 >= total) break;
    const int nb = total - b0 < CFG::max_tokens ? total - b0 : CFG::max_tokens;  // tokens of this block
    const int at = pos + b0;                                                       // position of its first
    for (int i = 0; i < CFG::max_instructions; ++i) {
      if (i >= n_instructions) break;
      int w[overlay::kWords];
#pragma HLS ARRAY_PARTITION variable=w complete
      // Its words from the program bundle, one per cycle: the loop arch::unit_work's schedule
      // charges as "fetch instruction", in overlay.hpp so that C simulation counts its
      // iterations as it does the kernels'.
      overlay::fetch_instruction(program, i, w);
      const int rows = w[overlay::f_rows], cols = w[overlay::f_cols], layer = w[overlay::f_layer];
      const int hd = w[overlay::f_head_dim];
      switch (w[overlay::f_op]) {
        case overlay::op_embed:
          for (int t = 0; t < CFG::max_tokens; ++t) {
            if (t >= nb) break;
            const int id = n_tokens > 0 ? prompt[b0 + t] : token;
            overlay::load_floats<CFG>(params, w[overlay::f_aux] + id * ((cols + 15) / 16), cols, x + t * CFG::dim_row);
          }
          break;
        case overlay::op_norm:
          overlay::load_floats<CFG>(params, w[overlay::f_aux], cols, param);
          for (int t = 0; t < CFG::max_tokens; ++t) {
            if (t >= nb) break;
            if (w[overlay::f_out] == overlay::buf_x)
              kernels::rmsnorm<V>(x + t * CFG::dim_row, x + t * CFG::dim_row, param, cols, CFG::norm_eps);
            else
              kernels::rmsnorm<V>(xb + t * CFG::dim_row, x + t * CFG::dim_row, param, cols, CFG::norm_eps);
          }
          break;
        case overlay::op_quantize: {
          const bool fixed = (w[overlay::f_flags] & overlay::kFlagStatic) != 0;
          const float s = kernels::bits_to_float(static_cast<kernels::u32>(w[overlay::f_static_scale]));
          for (int t = 0; t < CFG::max_tokens; ++t) {
            if (t >= nb) break;
            code_scale[t] = overlay::quantize<CFG>(codes + t * MV::padded_cols, w[overlay::f_in], xb + t * CFG::dim_row,
                                                   att + t * CFG::q_row, hb + t * CFG::hidden_row, x + t * CFG::dim_row,
                                                   cols, fixed, s);
          }
          break;
        }
        case overlay::op_matmul: {
          // A prefill block, or int4 weights: the tiled unit, the block's tokens per weight tile.
          if (nb > 1 || (CFG::int4_weights && w[overlay::f_weight_bits] == 4)) {
            overlay::matmul_block<CFG>(ports, row_scales, params, w, codes, code_scale, nb, q, k, v, xb2, hb, hb2,
                                       logits);
            break;
          }
          const float code_scale0 = code_scale[0];
          const kernels::MatrixWords m = kernels::matrix_words<MV>(rows, cols);
          const int bias_word = (w[overlay::f_flags] & overlay::kFlagBias) != 0 ? w[overlay::f_aux] : -1;
          matmul_region(@WEIGHTARGS@, row_scales, w[overlay::f_weight_beat], m.beats, m.groups, m.steps,
                        w[overlay::f_scale_word], params, bias_word, rows, cols, codes, code_scale0, w[overlay::f_out],
                        q, k, v, xb2, hb, hb2, logits);
          break;
        }
        case overlay::op_head_norm:
          overlay::head_norms<CFG>(q, k, CFG::q_row, CFG::kv_row, params, w[overlay::f_aux], w[overlay::f_heads],
                                   w[overlay::f_kv_heads], hd, param, nb);
          break;
        case overlay::op_rope:
          for (int t = 0; t < CFG::max_tokens; ++t) {
            if (t >= nb) break;
            overlay::load_floats<CFG>(params, w[overlay::f_aux] + (at + t) * ((hd + 15) / 16), hd, param);
            overlay::rope_heads<CFG>(q + t * CFG::q_row, k + t * CFG::kv_row, param, w[overlay::f_heads],
                                     w[overlay::f_kv_heads], hd);
          }
          break;
        case overlay::op_kv_store:
          kernels::kv_store<A, CFG::kv_bits>(
              overlay::layer_cache<CFG>(kv_k, kv_v, kv_k_scale, kv_v_scale, layer, w[overlay::f_kv_heads], hd), k, v, nb,
              at, hd, CFG::kv_row);
          break;
        case overlay::op_attention:
          kernels::attention<A, CFG::kv_bits>(
              att, q, overlay::layer_cache<CFG>(kv_k, kv_v, kv_k_scale, kv_v_scale, layer, w[overlay::f_kv_heads], hd),
              nb, at, w[overlay::f_heads], hd, 0, w[overlay::f_heads], CFG::q_row);
          break;
        case overlay::op_residual_add:
          for (int t = 0; t < CFG::max_tokens; ++t) {
            if (t >= nb) break;
            kernels::residual_add<V>(x + t * CFG::dim_row, xb2 + t * CFG::dim_row, cols);
          }
          break;
        case overlay::op_swiglu:
          for (int t = 0; t < CFG::max_tokens; ++t) {
            if (t >= nb) break;
            kernels::swiglu<V>(hb + t * CFG::hidden_row, hb2 + t * CFG::hidden_row, cols);
          }
          break;
        default:
          break;
      }
    }
    // The block's result: the logits of its last token (the logits array holds only that row);
    // another buffer is its first token's (the one-layer test runs one token).
    if (result_buf == overlay::buf_logits) overlay::write_result<CFG>(logits, CFG::vocab_size, result);
    if (result_buf == overlay::buf_x) overlay::write_result<CFG>(x, CFG::dim, result);
    if (result_buf == overlay::buf_xb) overlay::write_result<CFG>(xb, CFG::dim, result);
    if (result_buf == overlay::buf_att) overlay::write_result<CFG>(att, CFG::q_dim, result);
    if (result_buf == overlay::buf_hb) overlay::write_result<CFG>(hb, CFG::hidden_dim, result);
  }
}
)CPP",
              v);
}

std::string golden_reader_source() {
  return R"CPP(#pragma once
// Reading the binary data and golden files (raw little-endian arrays) and comparing results
// bit for bit. Host-side C++ only (not part of the kernel).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

template <class T>
std::vector<T> read_array(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot open " + path);
  const std::streamsize bytes = in.tellg();
  if (bytes % std::streamsize(sizeof(T))) throw std::runtime_error(path + ": size is not a whole number of elements");
  std::vector<T> v(std::size_t(bytes) / sizeof(T));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), bytes);
  if (!in) throw std::runtime_error("cannot read " + path);
  return v;
}

// Bit-exact comparison of n floats; prints the first mismatch and the largest difference.
inline bool same_bits(const char* what, const float* got, const float* want, long n) {
  long mismatches = 0, first = -1;
  double max_diff = 0;
  for (long i = 0; i < n; ++i) {
    if (std::memcmp(got + i, want + i, sizeof(float)) != 0) {
      if (first < 0) first = i;
      ++mismatches;
      const double d = std::fabs(double(got[i]) - double(want[i]));
      if (!(d <= max_diff)) max_diff = d;
    }
  }
  if (mismatches == 0) {
    std::printf("%s: %ld values bit-exact\n", what, n);
    return true;
  }
  std::printf("%s: FAIL, %ld of %ld values differ; first at %ld (got %.9g, want %.9g); largest difference %.3g\n",
              what, mismatches, n, first, double(got[first]), double(want[first]), max_diff);
  return false;
}

// Byte-exact comparison of n bytes (a KV cache as stored); prints the first mismatch.
inline bool same_bytes(const char* what, const unsigned char* got, const unsigned char* want, long n) {
  long mismatches = 0, first = -1;
  for (long i = 0; i < n; ++i)
    if (got[i] != want[i]) {
      if (first < 0) first = i;
      ++mismatches;
    }
  if (mismatches == 0) {
    std::printf("%s: %ld bytes bit-exact\n", what, n);
    return true;
  }
  std::printf("%s: FAIL, %ld of %ld bytes differ; first at %ld (got 0x%02x, want 0x%02x)\n", what, mismatches, n, first,
              unsigned(got[first]), unsigned(want[first]));
  return false;
}
)CPP";
}

std::string testbench_source(const ProjectInfo& p) {
  Vars v = vars_of(p);
  std::string args;
  for (int c = 0; c < p.weight_channels; ++c) args += fmt::format("weights[{}].data(), ", c);
  v["WEIGHTARGS"] = args;
  return fill(R"CPP(// C-simulation testbench (generated by fpgallm emit): runs the kernel's top function on
// the golden inputs written by fpgallm's accelerator backend and compares bit for bit:
//   1. one layer: the embedding of token decode_tokens[0] through block 0 and the norm
//      before @LAYERCONSUMER@ (the first @LAYERINSTRUCTIONS@ instructions) at position 0;
//   2. @STEPS@ full decode steps from position 0: the logits of every step;
//   3. prompt calls of @PROMPTLENGTHS@ tokens from position 0 (prefill blocks of @BLOCK@ tokens),
//      each on an empty KV cache: the last token's logits and the KV cache the call leaves
//      (positions before the prompt's end, every layer, as stored).
// Usage: testbench [PROJECT_DIR] (default "."). Exit status 0 when every value matches.
#include <cstdio>
#include <string>
#include <vector>

#include "../src/fpgallm_overlay.hpp"
#include "golden_io.hpp"

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  try {
    const std::vector<int> program = read_array<int>(dir + "/data/program.bin");
    std::vector<std::vector<kernels::PackedWord>> weights;
    for (int c = 0; c < FpgallmConfig::matrix_vector::channels; ++c) {
      char name[64];
      std::snprintf(name, sizeof name, "/data/weights_ch%02d.bin", c);
      weights.push_back(read_array<kernels::PackedWord>(dir + name));
      if (long(weights.back().size()) != kChannelWords) {
        std::printf("FAIL: %s does not hold %ld words\n", name, kChannelWords);
        return 1;
      }
    }
    const std::vector<kernels::FloatWord> row_scales = read_array<kernels::FloatWord>(dir + "/data/row_scales.bin");
    const std::vector<kernels::FloatWord> params = read_array<kernels::FloatWord>(dir + "/data/params.bin");
    const std::vector<int> tokens = read_array<int>(dir + "/golden/decode_tokens.bin");
    const std::vector<float> logits = read_array<float>(dir + "/golden/decode_logits.bin");
    const std::vector<float> layer_out = read_array<float>(dir + "/golden/layer_out.bin");
    if (long(program.size()) != kProgramWords || long(row_scales.size()) != kScaleWords ||
        long(params.size()) != kParamWords || long(tokens.size()) != kGoldenSteps ||
        long(logits.size()) != long(kGoldenSteps) * kGoldenVocab || long(layer_out.size()) != kLayerWidth) {
      std::printf("FAIL: data or golden files do not match the generated config sizes\n");
      return 1;
    }
    std::vector<FpgallmConfig::kv_elem> kv_k(kKvElements), kv_v(kKvElements);
    std::vector<float> kv_k_scale(kKvScales + 1), kv_v_scale(kKvScales + 1);
    std::vector<float> result(FpgallmConfig::max_width);
    std::vector<int> no_prompt(FpgallmConfig::context);
    bool ok = true;

    fpgallm_overlay(program.data(), kLayerInstructions, tokens[0], 0, no_prompt.data(), 0, @WEIGHTARGS@row_scales.data(),
                    params.data(), kv_k.data(), kv_v.data(), kv_k_scale.data(), kv_v_scale.data(), kLayerResultBuf,
                    result.data());
    ok &= same_bits("one layer (block 0)", result.data(), layer_out.data(), kLayerWidth);

    std::fill(kv_k.begin(), kv_k.end(), FpgallmConfig::kv_elem());
    std::fill(kv_v.begin(), kv_v.end(), FpgallmConfig::kv_elem());
    std::fill(kv_k_scale.begin(), kv_k_scale.end(), 0.0f);
    std::fill(kv_v_scale.begin(), kv_v_scale.end(), 0.0f);
    for (int step = 0; step < kGoldenSteps; ++step) {
      fpgallm_overlay(program.data(), kGoldenInstructions, tokens[std::size_t(step)], step, no_prompt.data(), 0,
                      @WEIGHTARGS@row_scales.data(), params.data(), kv_k.data(), kv_v.data(), kv_k_scale.data(),
                      kv_v_scale.data(), kLogitsBuf, result.data());
      const std::string what = "decode step " + std::to_string(step) + " logits";
      ok &= same_bits(what.c_str(), result.data(), logits.data() + long(step) * kGoldenVocab, kGoldenVocab);
    }

    if (kPrompts > 0) {
      const std::vector<int> prompt_tokens = read_array<int>(dir + "/golden/prompt_tokens.bin");
      const std::vector<float> prompt_logits = read_array<float>(dir + "/golden/prompt_logits.bin");
      const std::vector<unsigned char> prompt_kv = read_array<unsigned char>(dir + "/golden/prompt_kv.bin");
      if (long(prompt_logits.size()) != long(kPrompts) * kGoldenVocab || long(prompt_kv.size()) != kPromptKvBytes) {
        std::printf("FAIL: golden prompt files do not match the generated config sizes\n");
        return 1;
      }
      const long kv_dim = kKvElements / (@GOLDENLAYERS@L * FpgallmConfig::context);
      const long kv_heads = kKvScales / (@GOLDENLAYERS@L * FpgallmConfig::context);
      const bool int8 = FpgallmConfig::kv_bits == 8;
      long kv_at = 0;  // the golden KV bytes of the prompt being checked
      for (int p = 0; p < kPrompts; ++p) {
        const int n = kPromptLengths[p];
        std::fill(kv_k.begin(), kv_k.end(), FpgallmConfig::kv_elem());
        std::fill(kv_v.begin(), kv_v.end(), FpgallmConfig::kv_elem());
        std::fill(kv_k_scale.begin(), kv_k_scale.end(), 0.0f);
        std::fill(kv_v_scale.begin(), kv_v_scale.end(), 0.0f);
        // One call: the whole prompt.
        fpgallm_overlay(program.data(), kGoldenInstructions, 0, 0, prompt_tokens.data(), n, @WEIGHTARGS@row_scales.data(),
                        params.data(), kv_k.data(), kv_v.data(), kv_k_scale.data(), kv_v_scale.data(), kLogitsBuf,
                        result.data());
        const std::string what = "prompt of " + std::to_string(n) + " tokens";
        ok &= same_bits((what + ": last token's logits").c_str(), result.data(), prompt_logits.data() + long(p) * kGoldenVocab,
                        kGoldenVocab);
        // The KV cache it leaves: per layer, positions [0, n) of keys, values (and int8 scales).
        std::vector<unsigned char> got;
        for (long layer = 0; layer < @GOLDENLAYERS@L; ++layer) {
          const long e0 = layer * FpgallmConfig::context * kv_dim, s0 = layer * FpgallmConfig::context * kv_heads;
          for (const FpgallmConfig::kv_elem* c : {kv_k.data(), kv_v.data()}) {
            const unsigned char* b = reinterpret_cast<const unsigned char*>(c + e0);
            got.insert(got.end(), b, b + n * kv_dim * long(sizeof(FpgallmConfig::kv_elem)));
          }
          if (int8)
            for (const float* c : {kv_k_scale.data(), kv_v_scale.data()}) {
              const unsigned char* b = reinterpret_cast<const unsigned char*>(c + s0);
              got.insert(got.end(), b, b + n * kv_heads * long(sizeof(float)));
            }
        }
        if (kv_at + long(got.size()) > long(prompt_kv.size())) {
          std::printf("FAIL: golden/prompt_kv.bin is shorter than the prompts' KV caches\n");
          return 1;
        }
        ok &= same_bytes((what + ": KV cache").c_str(), got.data(), prompt_kv.data() + kv_at, long(got.size()));
        kv_at += long(got.size());
      }
    }
    std::printf(ok ? "PASS\n" : "FAIL\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
)CPP",
              v);
}

std::string host_source(const ProjectInfo& p) {
  Vars v = vars_of(p);
  std::string args_enum, uploads, run_args;
  for (int c = 0; c < p.weight_channels; ++c) {
    args_enum += fmt::format("a_{}, ", weight_port(c));
    uploads += fmt::format(
        "  weight_bos.push_back(upload<a_{0}>(device, kernel, read_array<kernels::PackedWord>(dir + \"/data/weights_ch{1:02d}.bin\")));\n",
        weight_port(c), c);
    run_args += fmt::format("set_buffer<a_{}>(run, weight_bos[{}]);\n    ", weight_port(c), c);
  }
  v["ARGSENUM"] = args_enum;
  v["UPLOADS"] = uploads;
  v["RUNARGS"] = run_args;
  return fill(R"CPP(// Host program (generated by fpgallm emit): XRT native C++ API (C++17, as XRT's headers
// require; the kernel sources are C++14). Loads the xclbin, moves the weights (one buffer
// per weight channel, each in the bank connectivity.cfg gives its port), scales and
// tables into the card once, then runs generation token by token (greedy), one kernel call
// per decode step. With --check it feeds the golden tokens and compares the card's logits
// with the golden ones bit for bit, then runs each golden prompt as one call (the prompt
// call) and compares its last token's logits.
// Usage: host XCLBIN [PROJECT_DIR] [--steps N] [--check]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>

#include "../src/fpgallm_overlay.hpp"
#include "../tb/golden_io.hpp"

namespace {
// Argument indices of fpgallm_overlay, in the order of its parameters.
enum Arg { a_program, a_n, a_token, a_pos, a_prompt, a_n_tokens, @ARGSENUM@a_row_scales, a_params, a_kv_k, a_kv_v, a_kv_k_scale,
           a_kv_v_scale, a_result_buf, a_result, a_count };

// The type of the top function's parameter I (fpgallm_overlay.hpp), so that every buffer and
// scalar this program passes is checked against the kernel's interface when it compiles.
template <class F> struct Parameters;
template <class R, class... A> struct Parameters<R (*)(A...)> { typedef std::tuple<A...> type; };
typedef Parameters<decltype(&fpgallm_overlay)>::type TopParameters;
static_assert(std::tuple_size<TopParameters>::value == a_count, "enum Arg and fpgallm_overlay's parameters differ in number");
template <int I> using Parameter = typename std::tuple_element<I, TopParameters>::type;
template <int I> using Pointee = typename std::remove_cv<typename std::remove_pointer<Parameter<I>>::type>::type;

// A buffer for pointer argument I holding `data`, in the bank of that argument's port.
template <int I, class T>
xrt::bo upload(const xrt::device& device, const xrt::kernel& kernel, const std::vector<T>& data) {
  static_assert(std::is_pointer<Parameter<I>>::value, "a buffer passed for a scalar argument of fpgallm_overlay");
  static_assert(std::is_same<Pointee<I>, T>::value, "a buffer's elements differ from the type fpgallm_overlay reads");
  xrt::bo bo(device, std::max<std::size_t>(data.size() * sizeof(T), 64), kernel.group_id(I));
  bo.write(data.data(), data.size() * sizeof(T), 0);
  bo.sync(XCL_BO_SYNC_BO_TO_DEVICE);
  return bo;
}
template <int I> void set_buffer(xrt::run& run, const xrt::bo& bo) {
  static_assert(std::is_pointer<Parameter<I>>::value, "a buffer passed for a scalar argument of fpgallm_overlay");
  run.set_arg(I, bo);
}
template <int I, class T> void set_scalar(xrt::run& run, T value) {
  static_assert(std::is_same<Parameter<I>, T>::value, "a scalar of another type than fpgallm_overlay's argument");
  run.set_arg(I, value);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s XCLBIN [PROJECT_DIR] [--steps N] [--check]\n", argv[0]);
    return 2;
  }
  const std::string xclbin = argv[1];
  std::string dir = ".";
  int steps = 32;
  bool check = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--check") check = true;
    else if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else dir = a;
  }
  steps = std::min(steps, kGoldenContext);

  xrt::device device(0);
  const xrt::uuid uuid = device.load_xclbin(xclbin);
  xrt::kernel kernel(device, uuid, "fpgallm_overlay");

  // Once: program, weights, scales and tables into the banks of their ports.
  xrt::bo program_bo = upload<a_program>(device, kernel, read_array<int>(dir + "/data/program.bin"));
  std::vector<xrt::bo> weight_bos;
@UPLOADS@  xrt::bo scales_bo = upload<a_row_scales>(device, kernel, read_array<kernels::FloatWord>(dir + "/data/row_scales.bin"));
  xrt::bo params_bo = upload<a_params>(device, kernel, read_array<kernels::FloatWord>(dir + "/data/params.bin"));
  xrt::bo kv_k_bo = upload<a_kv_k>(device, kernel, std::vector<FpgallmConfig::kv_elem>(kKvElements));
  xrt::bo kv_v_bo = upload<a_kv_v>(device, kernel, std::vector<FpgallmConfig::kv_elem>(kKvElements));
  xrt::bo kv_ks_bo = upload<a_kv_k_scale>(device, kernel, std::vector<float>(kKvScales + 1));
  xrt::bo kv_vs_bo = upload<a_kv_v_scale>(device, kernel, std::vector<float>(kKvScales + 1));
  xrt::bo result_bo = upload<a_result>(device, kernel, std::vector<float>(FpgallmConfig::max_width));
  // The prompt call's token ids (decode calls pass n_tokens 0 and do not read it).
  xrt::bo prompt_bo = upload<a_prompt>(device, kernel, std::vector<int>(FpgallmConfig::context));

  std::vector<int> golden_tokens;
  std::vector<float> golden_logits;
  if (check) {
    golden_tokens = read_array<int>(dir + "/golden/decode_tokens.bin");
    golden_logits = read_array<float>(dir + "/golden/decode_logits.bin");
    steps = std::min<int>(steps, int(golden_tokens.size()));
  }
  std::vector<float> logits(FpgallmConfig::max_width);
  int token = check ? golden_tokens[0] : 1;  // 1 = BOS in llama2.c tokenizers
  bool ok = true;
  // One kernel call: a decode step of token `tok` at position `at` (n_tokens 0), or the
  // first n_tokens tokens of prompt_bo; the logits (of the last token) into `logits`.
  auto call = [&](int tok, int at, int n_tokens) {
    xrt::run run(kernel);
    set_buffer<a_program>(run, program_bo);
    set_scalar<a_n>(run, kGoldenInstructions);
    set_scalar<a_token>(run, tok);
    set_scalar<a_pos>(run, at);
    set_buffer<a_prompt>(run, prompt_bo);
    set_scalar<a_n_tokens>(run, n_tokens);
    @RUNARGS@set_buffer<a_row_scales>(run, scales_bo);
    set_buffer<a_params>(run, params_bo);
    set_buffer<a_kv_k>(run, kv_k_bo);
    set_buffer<a_kv_v>(run, kv_v_bo);
    set_buffer<a_kv_k_scale>(run, kv_ks_bo);
    set_buffer<a_kv_v_scale>(run, kv_vs_bo);
    set_scalar<a_result_buf>(run, kLogitsBuf);
    set_buffer<a_result>(run, result_bo);
    run.start();
    run.wait();
    result_bo.sync(XCL_BO_SYNC_BO_FROM_DEVICE);
    result_bo.read(logits.data());
  };
  for (int pos = 0; pos < steps; ++pos) {
    call(token, pos, 0);
    const int next = int(std::max_element(logits.begin(), logits.begin() + kGoldenVocab) - logits.begin());
    if (check) {
      const std::string what = "step " + std::to_string(pos) + " logits";
      ok &= same_bits(what.c_str(), logits.data(), golden_logits.data() + long(pos) * kGoldenVocab, kGoldenVocab);
      if (pos + 1 < steps) token = golden_tokens[std::size_t(pos) + 1];
    } else {
      std::printf("%d%c", next, pos + 1 < steps ? ' ' : '\n');
      token = next;
    }
  }
  // With --check, the golden prompts, one kernel call each (n_tokens = the prompt's length):
  // the last token's logits. The call rewrites every KV position it attends to.
  if (check && kPrompts > 0) {
    const std::vector<int> prompt = read_array<int>(dir + "/golden/prompt_tokens.bin");
    const std::vector<float> prompt_logits = read_array<float>(dir + "/golden/prompt_logits.bin");
    prompt_bo.write(prompt.data(), prompt.size() * sizeof(int), 0);
    prompt_bo.sync(XCL_BO_SYNC_BO_TO_DEVICE);
    for (int p = 0; p < kPrompts; ++p) {
      call(0, 0, kPromptLengths[p]);
      const std::string what = "prompt of " + std::to_string(kPromptLengths[p]) + " tokens: last token's logits";
      ok &= same_bits(what.c_str(), logits.data(), prompt_logits.data() + long(p) * kGoldenVocab, kGoldenVocab);
    }
  }
  return ok ? 0 : 1;
}
)CPP",
              v);
}

namespace {

// The link of the kernel: the banks of every m_axi port and the units on the SLRs. With a
// known device, both come from src/hw, as `plan` prints them: hw::map_buffers through
// perf::bank_map (the sp= lines) and hw::place_units on the resource model's units (the slr=
// line, or the per-SLR split of a kernel that spans SLRs). Without one, every bundle on DDR[0].
struct Banks {
  std::map<std::string, std::string> port;  // m_axi port -> "HBM[3]", "HBM[28:29]", "DDR[0]"
  std::string slr;                          // the compute unit's SLR; empty when it spans SLRs
  std::vector<std::string> shares;          // "SLR1: vector datapath 12/32 lanes"
  std::vector<std::string> placement;       // hw::placement_lines
  std::vector<std::string> map;             // hw::map_lines
  std::vector<std::string> problems;        // what would not link: a buffer no bank holds
  std::vector<std::string> slr_problems;    // an SLR over its ceilings, a boundary over its SLLs
  std::string note;
};

std::vector<std::string> port_names(const ProjectInfo& p) {
  std::vector<std::string> ports;
  for (int c = 0; c < p.weight_channels; ++c) ports.push_back(weight_port(c));
  for (const char* n : {"row_scales", "params", "kv_k", "kv_v", "kv_k_scale", "kv_v_scale", "program", "prompt", "result"})
    ports.push_back(n);
  return ports;
}

Banks banks_of(const ProjectInfo& p) {
  Banks b;
  if (!p.device || p.device->memory.empty()) {
    for (const auto& port : port_names(p)) b.port[port] = "DDR[0]";
    b.slr = "SLR0";
    b.note = "no device in the design: every bundle on DDR[0]";
    return b;
  }
  const hw::Device& dev = *p.device;
  const double eta = perf::constants().memory_efficiency.value;
  const std::optional<hw::MemoryMap> map = perf::bank_map(p.design, dev, p.config);
  if (map) {
    for (const auto& m : map->buffers) b.port[m.buffer.port] = m.mapped ? m.banks.sp() : "(none)";
    b.map = hw::map_lines(*map, dev, p.design, eta);
    b.problems = map->problems;
  } else {
    b.note = "the bank map covers one card of a dense llama-family model: every bundle on bank 0";
    for (const auto& port : port_names(p)) b.port[port] = fmt::format("{}[0]", dev.memory.front().is_hbm() ? "HBM" : "DDR");
  }
  b.slr = "SLR0";
  try {
    const hw::Utilization u = hw::estimate_resources(p.design, dev, {&p.config, false});
    const hw::SlrPlacement pl = hw::place_units(u.parts, dev, p.design);
    if (pl.per_slr) {
      b.placement = hw::placement_lines(pl);
      for (const auto& sh : pl.shares)
        b.shares.push_back(fmt::format("SLR{}: {} {}/{} {}", sh.slr, sh.part, sh.slices, sh.of, sh.slice));
      if (pl.spanned() > 1) b.slr.clear();
      b.slr_problems = pl.problems;
    }
  } catch (const std::exception& e) {
    b.note = std::string("no placement on the SLRs: ") + e.what();
  }
  return b;
}

std::string part_of(const ProjectInfo& p) {
  if (!p.device || !p.device->chip.has()) return "";
  const std::string& chip = *p.device->chip.value;
  const auto a = chip.find('('), e = chip.find(')');
  if (a == std::string::npos || e == std::string::npos || e < a) return "";
  return chip.substr(a + 1, e - a - 1);
}

}  // namespace

std::string connectivity(const ProjectInfo& p) {
  const Banks b = banks_of(p);
  std::string s = fmt::format(
      "# v++ -l --config connectivity.cfg (generated by fpgallm emit for design \"{}\" on {}).\n"
      "# Banks: every buffer in banks that hold it at {}'s sizes and context {} (hw/memory_map.hpp; a buffer\n"
      "# larger than one bank gets a range of its own, HBM[a:b]); `fpgallm plan` prints the same map{}.\n",
      p.design.name, p.design.device.empty() ? "no device" : p.design.device, p.config.name.empty() ? "the model" : p.config.name,
      p.context, b.note.empty() ? "" : " (" + b.note + ")");
  for (const auto& l : b.map) s += "#   " + l + "\n";
  if (!b.placement.empty()) {
    s += "# Units on the SLRs (hw/placement.hpp; placed/allowed under the timing-closure ceilings):\n";
    for (const auto& l : b.placement) s += "#   " + l + "\n";
    for (const auto& l : b.shares) s += "# place " + l + "\n";
    for (const auto& l : b.slr_problems) s += "# DOES NOT FIT: " + l + "\n";
    if (b.slr.empty())
      s += "# The compute unit spans SLRs: v++ assigns a whole compute unit to one SLR (slr=), so none is given\n"
           "# here; the split above is what Vivado's placement must reach (USER_SLR_ASSIGNMENT on the units'\n"
           "# instances, crossing signals registered in Laguna flip-flops, UG949), which only a v++ link confirms.\n";
  }
  s += "[connectivity]\nnk=fpgallm_overlay:1:fpgallm_overlay_1\n";
  if (!b.slr.empty()) s += "slr=fpgallm_overlay_1:" + b.slr + "\n";
  for (const auto& port : port_names(p)) s += fmt::format("sp=fpgallm_overlay_1.{}:{}\n", port, b.port.at(port));
  return s;
}

std::string link_problem(const ProjectInfo& p) {
  const Banks b = banks_of(p);
  return b.problems.empty() ? std::string() : b.problems.front();
}

std::vector<std::string> placement_problems(const ProjectInfo& p) { return banks_of(p).slr_problems; }

std::string makefile(const ProjectInfo& p) {
  Vars v = vars_of(p);
  return fill(
      "# Generated by fpgallm emit for design \"@DESIGN@\".\n"
      "#   make csim                     C simulation against the golden vectors (g++, C++14)\n"
      "#   make check                    the front-end gate (host program against an XRT stand-in) and the\n"
      "#                                 synthesizability checker\n"
      "#   make cosim                    C/RTL co-simulation of the golden testbench (Vitis HLS)\n"
      "#   make sw_emu|hw_emu|hw PLATFORM=<xpfm>   xclbin and host program (Vitis, XRT)\n"
      "#   make run TARGET=sw_emu|hw_emu|hw PLATFORM=<xpfm>  run that checks the golden logits\n"
      "TARGET ?= sw_emu\nPLATFORM ?=\nKERNEL := fpgallm_overlay\n"
      "# @CLOCK@ MHz as an integer number of Hz, for v++ --hls.clock and --clock.freqHz.\n"
      "CLOCK_HZ := @CLOCKHZ@\n"
      "CXX ?= g++\nCXXFLAGS ?= -std=c++14 -O2\nHOST_CXXFLAGS ?= -std=c++17 -O2\nXILINX_XRT ?= /opt/xilinx/xrt\n"
      "FPGALLM_SOURCE ?=\n"
      "BUILD := build/$(TARGET)\nXO := $(BUILD)/$(KERNEL).xo\nXCLBIN := $(BUILD)/$(KERNEL).xclbin\n"
      "KERNEL_SOURCES := src/fpgallm_overlay.cpp src/fpgallm_overlay.hpp src/fpgallm_config.hpp src/overlay.hpp "
      "src/fpgallm_isa.hpp $(wildcard src/kernels/*.hpp)\n\n"
      ".PHONY: all csim cosim check sw_emu hw_emu hw xclbin host run hls clean check-platform\n"
      "all: csim\n\n"
      "csim: build/testbench\n\t./build/testbench .\n\n"
      "build/testbench: tb/testbench.cpp tb/golden_io.hpp $(KERNEL_SOURCES)\n"
      "\t@mkdir -p build\n\t$(CXX) $(CXXFLAGS) -Isrc -o $@ tb/testbench.cpp src/fpgallm_overlay.cpp\n\n"
      "# The checks fpgallm runs in its own tests (FPGALLM_SOURCE: an fpgallm checkout).\n"
      "check:\n\t@test -n \"$(FPGALLM_SOURCE)\" || (echo \"set FPGALLM_SOURCE to an fpgallm checkout\"; false)\n"
      "\tpython3 $(FPGALLM_SOURCE)/scripts/check_synthesizable.py --top fpgallm_overlay --unroll-budget @BUDGET@ src\n"
      "\tfor cxx in g++ clang++; do for mode in \"\" \"-D__SYNTHESIS__ -I$(FPGALLM_SOURCE)/tests/kernels/vendor_stub\"; do "
      "$$cxx -std=c++14 -pedantic -Werror -Wall -Wextra -Wno-unknown-pragmas $$mode -Isrc -fsyntax-only "
      "src/fpgallm_overlay.cpp || exit 1; done; done\n"
      "\t$(CXX) -std=c++17 -pedantic -Werror -Wall -Wextra -Wno-unknown-pragmas -I$(FPGALLM_SOURCE)/tests/kernels/vendor_stub -Isrc "
      "-fsyntax-only host/host.cpp\n\n"
      "sw_emu hw_emu hw:\n\t$(MAKE) TARGET=$@ xclbin host\n\n"
      "check-platform:\n\t@test -n \"$(PLATFORM)\" || (echo \"set PLATFORM to the card's .xpfm or platform name\"; false)\n\n"
      "xclbin: $(XCLBIN)\n\n"
      "$(XO): $(KERNEL_SOURCES) | check-platform\n\t@mkdir -p $(BUILD)\n"
      "\tv++ -c -t $(TARGET) --platform $(PLATFORM) -k $(KERNEL) --hls.clock $(CLOCK_HZ):$(KERNEL) "
      "--advanced.prop kernel.$(KERNEL).kernel_flags=\"-std=c++14\" -Isrc -o $@ src/fpgallm_overlay.cpp\n\n"
      "$(XCLBIN): $(XO) connectivity.cfg | check-platform\n"
      "\tv++ -l -t $(TARGET) --platform $(PLATFORM) --config connectivity.cfg --clock.freqHz $(CLOCK_HZ):$(KERNEL)_1 "
      "-o $@ $(XO)\n\n"
      "# Emulation needs emconfig.json beside the host program (XRT reads it from there).\n"
      "$(BUILD)/emconfig.json: | check-platform\n\t@mkdir -p $(BUILD)\n"
      "\temconfigutil --platform $(PLATFORM) --od $(BUILD)\n\n"
      "host: build/host\n\n"
      "build/host: host/host.cpp tb/golden_io.hpp src/fpgallm_config.hpp src/fpgallm_overlay.hpp\n\t@mkdir -p build\n"
      "\t$(CXX) $(HOST_CXXFLAGS) -Isrc -I$(XILINX_XRT)/include -o $@ host/host.cpp -L$(XILINX_XRT)/lib "
      "-lxrt_coreutil -pthread\n\n"
      "ifeq ($(TARGET),hw)\n"
      "run: $(XCLBIN) build/host\n\t./build/host $(XCLBIN) . --check\n"
      "else\n"
      "run: $(XCLBIN) build/host $(BUILD)/emconfig.json\n"
      "\tEMCONFIG_PATH=$(BUILD) XCL_EMULATION_MODE=$(TARGET) ./build/host $(XCLBIN) . --check\n"
      "endif\n\n"
      "hls:\n\tvitis_hls -f hls/fpgallm_overlay.tcl\n\n"
      "# C/RTL co-simulation: the golden testbench against the synthesized RTL (Vitis HLS).\n"
      "cosim:\n\tvitis_hls -f hls/fpgallm_overlay_cosim.tcl\n\n"
      "clean:\n\trm -rf build hls_fpgallm_overlay *.log\n",
      v);
}

std::string hls_tcl(const ProjectInfo& p, HlsFlow flow) {
  Vars v = vars_of(p);
  const std::string part = part_of(p);
  v["PART"] = part.empty() ? "# set_part <part>  (no part known for this design's device)" : "set_part {" + part + "}";
  v["WHAT"] = flow == HlsFlow::cosim ? "C synthesis and C/RTL co-simulation" : "C simulation and C synthesis";
  v["FILE"] = flow == HlsFlow::cosim ? "fpgallm_overlay_cosim.tcl" : "fpgallm_overlay.tcl";
  // Co-simulation runs the golden testbench against the synthesized RTL: the same argv, the
  // m_axi memories sized by each port's depth=.
  v["FLOWSTEPS"] = flow == HlsFlow::cosim ? "csynth_design\ncosim_design -argv [pwd] -trace_level none"
                                      : "csim_design -argv [pwd]\ncsynth_design";
  return fill(R"CPP(# Vitis HLS @WHAT@ of the overlay kernel (generated by fpgallm emit).
# Run from the project folder: vitis_hls -f hls/@FILE@
open_project -reset hls_fpgallm_overlay
set_top fpgallm_overlay
add_files src/fpgallm_overlay.cpp -cflags "-Isrc -std=c++14"
add_files -tb tb/testbench.cpp -cflags "-Isrc -std=c++14"
open_solution -reset solution1 -flow_target vitis
@PART@
# @CLOCK@ MHz
create_clock -period @PERIOD@ -name default
@FLOWSTEPS@
exit
)CPP",
              v);
}

std::string readme(const ProjectInfo& p) {
  Vars v = vars_of(p);
  const Banks b = banks_of(p);
  std::string resources;
  if (p.device) {
    try {
      const hw::Utilization u = hw::estimate_resources(p.design, *p.device, {&p.config});
      resources = "| resource | predicted | available | ceiling |\n|---|---:|---:|---:|\n";
      for (const auto& l : u.lines)
        resources += fmt::format("| {} | {:.0f} | {:.0f} | {:.0f} ({:.0f}% used) |\n", hw::to_string(l.resource), l.used,
                                 l.available, l.ceiling, 100.0 * l.utilization());
      resources += "\nAssumptions of the resource model (src/hw/resources.cpp):\n";
      for (const auto& a : u.assumptions) resources += "- " + a + "\n";
    } catch (const std::exception& e) {
      resources = std::string("No resource prediction: ") + e.what() + "\n";
    }
  } else {
    resources = "No resource prediction: the design names no device known to fpgallm.\n";
  }
  v["RESOURCES"] = resources;
  std::string notes;
  for (const auto& n : p.notes) notes += "- " + n + "\n";
  v["NOTES"] = notes.empty() ? "- none: the project implements the design as planned\n" : notes;
  std::string bank_text;
  for (const auto& port : port_names(p)) bank_text += fmt::format("{}{} -> {}", bank_text.empty() ? "" : ", ", port, b.port.at(port));
  v["BANKS"] = bank_text + (b.slr.empty() ? "; the compute unit spans SLRs (below)" : "; compute unit in " + b.slr) +
               (b.note.empty() ? "" : " (" + b.note + ")");
  std::string link;
  for (const auto& l : b.map) link += "- " + l + "\n";
  for (const auto& l : b.placement) link += "- " + l + "\n";
  v["LINK"] = link.empty() ? "- no device known: nothing placed\n" : link;
  return fill(R"CPP(# Vitis project: @MODEL@ on design "@DESIGN@" (@DEVICE@)

Generated by `fpgallm emit`. The overlay kernel `fpgallm_overlay` executes the instruction
list (data/program.bin, 16 words per instruction) through the HLS kernels in src/kernels,
instantiated by src/fpgallm_config.hpp for @MODEL@: a streaming matrix unit of @PE@ x @SIMD@
int8 MACs (PE x SIMD) fed by @CHANNELS@ 512-bit weight channels, a tiled matrix unit of the same
shape for prompts (@TILEROWS@ x @TILECOLS@ weight tiles), a vector unit of @LANES@ lanes, a
@KVBITS@-bit KV cache of @CONTEXT@ positions, @CLOCK@ MHz.

One call runs either one decode step (`n_tokens` 0: `token` at `pos`) or a whole prompt
(`n_tokens` n: `prompt[0..n)` at positions `pos`..): the program once per prefill block of up
to @BLOCK@ tokens, the KV store and attention over the block, every matmul on the tiled unit
reading each weight tile once for the block's tokens (a block of one token streams, as
decode does). The result is the last token's logits. fpgallm's `plan` costs this call as the
time to first token.

The data and golden vectors are those of @GOLDENMODEL@ (@GOLDENSOURCE@): the kernel takes
every size at run time from the instruction words, bounded by the compile-time sizes of
@MODEL@, so the same kernel runs the golden model's program.

## Departures from the design

@NOTES@
## Files

- `src/fpgallm_overlay.cpp` the top function: one m_axi bundle per weight channel (`w00`...),
  separate bundles for row scales, parameters, KV data (`kv_k`, `kv_v`) and KV scales, the
  instruction loop, and the DATAFLOW region of a matmul (read one channel per process ->
  gather PE x SIMD steps -> multiply (kernels::matrix_vector_w8a8, II=1) -> requantize and store).
  `src/overlay.hpp` the per-instruction processes, `src/kernels/` the kernels (C++14),
  `src/fpgallm_config.hpp` the sizes, `src/fpgallm_isa.hpp` the instruction encoding.
- `data/weights_chNN.bin` the weights of channel NN: every int8 matrix as PE x SIMD steps in the
  order the matrix unit reads them, every int4 matrix as its packed bytes then its fp16 group
  scales (read by the tiled unit, `overlay::matmul_block`), word w of a matrix on channel w mod
  @CHANNELS@ (@CHANNELWORDS@ 512-bit words per channel); `data/row_scales.bin` fp32 row scales per row fold;
  `data/params.bin` embedding, norm gains and the RoPE table, each row padded to 16 floats;
  `data/program.bin` the encoded program.
- `golden/` vectors from fpgallm's accelerator backend (`--backend accel`): the output of one layer
  (input of @LAYERCONSUMER@ at position 0), the logits of @STEPS@ greedy decode steps from token 1,
  and for prompts of @PROMPTLENGTHS@ tokens (prefixes of golden/prompt_tokens.bin) the backend's
  prefill: the last token's logits and the KV cache it leaves (golden/prompt_kv.bin).
- `tb/testbench.cpp` C simulation against them (bit-exact), `host/host.cpp` XRT host program.
- `connectivity.cfg` bundle-to-bank map: @BANKS@.
- `Makefile`, `hls/fpgallm_overlay.tcl`, `hls/fpgallm_overlay_cosim.tcl`, `schedule.md` (the table below).

## Link: banks and SLRs

What `connectivity.cfg` places, for @MODEL@ at context @CONTEXT@ (`fpgallm plan` prints the same):
every buffer against the banks it is mapped to (bytes; for the bandwidth-bound ports, the rate the
schedule assumes against what the banks deliver behind one port), and the units of the resource
model below on the card's SLRs (placed/allowed under the timing-closure ceilings, and the signals
crossing each SLR boundary against its super long lines):

@LINK@
fpgallm checks these figures; only `v++ -l` and Vivado confirm them: that XRT allocates each buffer
where the map says, that placement reaches the per-SLR split, and that the crossings close timing.

## Build

    make csim                                  # g++ -std=c++14: testbench against the golden vectors
    make check FPGALLM_SOURCE=<fpgallm>        # front-end gate + synthesizability checker
    make hls                                   # Vitis HLS: csim_design + csynth_design
    make cosim                                 # Vitis HLS: csynth_design + cosim_design (the golden testbench on the RTL)
    make hw_emu PLATFORM=<platform>            # xclbin + host (e.g. xilinx_u280_gen3x16_xdma_1_202211_1)
    make run TARGET=hw_emu PLATFORM=<platform> # emconfigutil, emulation, compares the logits with golden/
    make hw PLATFORM=<platform> && ./build/host build/hw/fpgallm_overlay.xclbin . --steps 32

## What was checked here, and what only Vitis can check

Checked by fpgallm (its tests run these on every emitted project):
- C simulation (`make csim`): the kernel's top function reproduces the accelerator backend's
  golden vectors bit for bit (one layer, @STEPS@ decode steps, and prompt calls of @PROMPTLENGTHS@
  tokens: logits and KV cache); a changed golden byte fails it.
- Front end: the kernel sources compile with `g++` and `clang++ -std=c++14 -pedantic -Werror`,
  with and without `__SYNTHESIS__`; with `__SYNTHESIS__` against a stand-in that declares
  the interface of `hls_stream.h` (tests/kernels/vendor_stub in fpgallm), since the vendor
  header is not installed there.
- `scripts/check_synthesizable.py --top fpgallm_overlay --unroll-budget @BUDGET@`: INTERFACE
  only on the top function, no PIPELINE inside a pipelined region (calls followed), no full
  unroll wider than the design's widest unit (@BUDGET@), no on-chip array chosen by a run-time
  pointer, no dynamic memory, recursion, virtual calls, exceptions or standard containers;
  and the structure each pipelined loop's II needs: affine, unconditional addresses on the
  m_axi ports (burst), partitions with a port for every access per cycle (partition), enough
  partial sums for a floating-point accumulation (accumulation), no run-time index into a
  partitioned array (runtime-index). The findings fpgallm knows and has not fixed print as
  "known" (fpgallm's docs/accelerator.md lists them with the II expected) and do not fail.
- The schedule below against `fpgallm simulate` for this design.

Only Vitis can check: that csynth meets the II and depths the schedule assumes and the
@CLOCK@ MHz clock; the DATAFLOW region's actual overlap and FIFO depths (deadlock freedom:
co-simulation and the dataflow viewer); burst inference on every m_axi bundle (the synthesis
log's burst messages); resource use and placement; the memory system's real bandwidth; and
everything after `v++ -l` (timing closure, the xclbin, emulation and the card). fpgallm has
not run v++ or Vitis HLS on this project.

What `make cosim` checks that C simulation does not: the synthesized RTL (not the C++) produces
the golden vectors, so the scheduling, the pipelines' II and depths, the DATAFLOW processes and
their FIFOs (a too-shallow FIFO deadlocks there, never in C simulation), the AXI protocol of every
m_axi and s_axilite port, and the bursts' addresses and lengths are exercised; every m_axi port
states `depth=` (the elements the testbench allocates for it: weight channels @CHANNELWORDS@ words,
row scales @SCALEWORDS@, parameters @PARAMWORDS@, program @PROGRAMWORDS@ words, KV data @KVELEMENTS@
and KV scales @KVSCALES@ elements), which sizes co-simulation's memory models, so an access past a
buffer fails there. It also reports the latency of each call, to compare with the schedule below.
C simulation checks none of these, and C/RTL co-simulation runs much slower (every clock cycle of
the RTL is simulated): lower the golden steps (`fpgallm emit --golden-steps 1`) for a quick run.
C simulation has no bounds check of its own: the testbench allocates exactly each port's depth,
so `make csim CXXFLAGS='-std=c++14 -O1 -fsanitize=address'` stops at an access past one.

## Schedule of one decode step

Every loop of the kernel with its trip count, initiation interval and pipeline depth, and the
cycles it spends in one decode step of @MODEL@ at the design's context; compare with
`csynth.rpt` line by line (the II and depth are what the source asks for, not what csynth
achieved). Cycles in a DATAFLOW region are those of its slowest process plus the others'
fill; memory-bound loops take the cycles of the bytes at the design's channel bandwidth.

@SCHEDULE@
## What the plan predicts

Clock: @CLOCK@ MHz (design.clock_mhz; the Tcl script sets a @PERIOD@ ns period, the Makefile
passes @CLOCKHZ@ Hz to v++).

@RESOURCES@
## What to compare after synthesis

- `csynth_design` report (hls_fpgallm_overlay/solution1/syn/report/): LUT, FF, DSP, BRAM, URAM
  against the table above, the estimated clock against @CLOCK@ MHz, and every loop against
  the schedule.
- `make run` on hw_emu or hardware: every logit bit-exact with golden/decode_logits.bin.

Limits: the resource table above counts the decode datapath; the prompt call's tiled MAC
array and tile buffers and the @BLOCK@-token rows of the activation arrays are not in it yet
(csynth reports them). The host program generates with decode calls (`n_tokens` 0); `--check` also
runs the golden prompt calls. The KV bundles are
declared with the element's width and `max_widen_bitwidth=@KVBEATBITS@`: attention's loads of one
@KVBEATBITS@-bit beat of K and of V per cycle need Vitis's automatic port widening (csynth's
interface report shows whether it happened) and are not bursts (docs/accelerator.md, "The II rules").
)CPP",
              v);
}

Schedule decode_schedule(const model::Config& c, const arch::Design& d, const hw::Device* device, int context) {
  const double f = d.clock_mhz * 1e6;
  arch::PortRates rates;  // no device: one port word per cycle, no latency
  rates.note = "no device: one 512-bit word per cycle, no request latency";
  if (device && !device->memory.empty() && device->memory.front().bandwidth_gbps.has())
    rates = perf::port_rates(d, *device, c);
  const arch::Program prog = arch::build_program(c, d, arch::Stage::decode, context - 1, 1);
  std::vector<arch::Loop> rows;
  double total = 0;
  for (const auto& in : prog.instructions) {
    const arch::Work w = arch::unit_work(d, in, rates);
    total += w.cycles;
    for (const auto& l : w.loops) {
      auto same = std::find_if(rows.begin(), rows.end(),
                               [&](const arch::Loop& r) { return r.name == l.name && r.trip == l.trip; });
      if (same == rows.end()) {
        rows.push_back(l);
      } else {
        same->calls += l.calls;
        same->cycles += l.cycles;
      }
    }
  }
  Schedule s;
  s.cycles = total;
  s.table = "| loop | trip count | II | depth | calls per step | cycles per step |\n|---|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows)
    s.table += fmt::format("| {} | {} | {} | {} | {} | {:.0f} |\n", r.name, r.trip, r.ii,
                           r.depth > 0 ? std::to_string(r.depth) : std::string("-"), r.calls, r.cycles);
  s.table += fmt::format("| **one decode step** (instructions in sequence; DATAFLOW regions at their slowest process) | | | | | **{:.0f}** |\n",
                         total);
  s.table += fmt::format("\nContext {} positions; {} MHz: {:.3f} ms per token. Memory: {}. Each row's cycles include the "
                         "request latency of the streams it starts; not included: the depths csynth chooses for the "
                         "vector loops.\n",
                         context, d.clock_mhz, total / f * 1e3, rates.note);
  return s;
}

}  // namespace codegen
