#include "codegen/codegen.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

#include "arch/program.hpp"
#include "arch/units.hpp"
#include "codegen/emit_rtl.hpp"
#include "kernels/matrix_unit.hpp"
#include "codegen/emit_text.hpp"
#include "engine/accel.hpp"
#include "hw/device.hpp"
#include "hw/resources.hpp"
#include "util/error.hpp"
#include "util/output.hpp"
#include "util/paths.hpp"

namespace fs = std::filesystem;

namespace codegen {

namespace {

using namespace fpgallm_isa;  // the instruction word layout (src/arch/isa.hpp)

std::string bytes_of(const void* p, std::size_t n) { return std::string(static_cast<const char*>(p), n); }
template <class T>
std::string bytes_of(const std::vector<T>& v) { return bytes_of(v.data(), v.size() * sizeof(T)); }

void write(const fs::path& root, const std::string& rel, const std::string& contents,
           std::vector<std::string>& files) {
  const fs::path p = root / rel;
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), std::streamsize(contents.size()));
  if (!out) throw fpgallm::InputError(p.string(), "cannot write");
  files.push_back(rel);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw fpgallm::InputError(p.string(), "cannot read the kernel source");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The memory images of the project: every weight, scale and fp32 table the kernel reads.
struct Layout {
  std::vector<std::vector<kernels::PackedWord>> channels;  // one per weight channel
  std::vector<kernels::FloatWord> row_scales;               // per matrix, per row fold
  std::vector<kernels::FloatWord> params;                   // embedding, norms, RoPE table
  // (layer, which) -> int8: (beat, first row-scale word); int4: (beat of the packed
  // weights, beat of the fp16 group scales), both on the weight channels.
  std::map<std::pair<int, int>, std::pair<int, int>> linear;
  std::map<std::pair<int, int>, int> bias;                     // (layer, which) -> first FloatWord in params
  int embedding = 0, final_norm = 0, rope = 0;                // first FloatWord
  std::vector<int> attn_norm, ffn_norm, head_norm;            // head_norm: q gain, then k gain
  std::int64_t weight_bytes = 0;  // int8 codes, int4 packed bytes and their fp16 scales, before padding
};

int checked_int(std::size_t v, const char* what) {
  if (v > 0x7fffffffu) throw fpgallm::InputError("design", fmt::format("{} offset {} past 32-bit words", what, v));
  return int(v);
}

// Appends `rows` rows of `width` floats, each padded to whole FloatWords; returns the first word.
int append_rows(std::vector<kernels::FloatWord>& to, const float* v, std::size_t rows, std::size_t width) {
  const int at = checked_int(to.size(), "params");
  const std::size_t row_words = (width + kernels::kFloatsPerWord - 1) / kernels::kFloatsPerWord;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t w = 0; w < row_words; ++w) {
      kernels::FloatWord word{};
      for (std::size_t l = 0; l < std::size_t(kernels::kFloatsPerWord); ++l) {
        const std::size_t c = w * kernels::kFloatsPerWord + l;
        word.value[l] = c < width ? v[r * width + c] : 0.0f;
      }
      to.push_back(word);
    }
  return at;
}

// `rows` values as the store stage reads them per row fold of PE rows: scale_words
// FloatWords per fold, value r at lane (r mod PE) of its fold, zero past the edge; returns
// the first word. The row scales and the biases.
int append_folds(std::vector<kernels::FloatWord>& to, const float* v, int rows, int pe) {
  const int at = checked_int(to.size(), "row scales or params");
  const int scale_words = (pe + kernels::kFloatsPerWord - 1) / kernels::kFloatsPerWord;
  for (int nf = 0; nf < (rows + pe - 1) / pe; ++nf)
    for (int w = 0; w < scale_words; ++w) {
      kernels::FloatWord word{};
      for (int j = 0; j < kernels::kFloatsPerWord; ++j) {
        const int in_fold = w * kernels::kFloatsPerWord + j, r = nf * pe + in_fold;
        word.value[j] = in_fold < pe && r < rows ? v[r] : 0.0f;
      }
      to.push_back(word);
    }
  return at;
}

// One int8 matrix as the matrix unit reads it (kernels/matrix_unit.hpp): PE x SIMD steps in
// (row fold, column fold) order, zero past the edge, padded to whole gather groups, word w
// on channel w % channels. Its row scales: scale_words FloatWords per row fold.
std::pair<int, int> append_matrix(Layout& l, const quant::Int8Matrix& m, int rows, int cols, const arch::Design& d) {
  const int pe = d.matrix_unit.rows, simd = d.matrix_unit.cols, ch = int(l.channels.size());
  const kernels::MatrixWords mw = kernels::stream_words(pe, simd, ch, rows, cols);
  const int beat = checked_int(l.channels[0].size(), "weights");
  const int col_folds = (cols + simd - 1) / simd, row_folds = (rows + pe - 1) / pe;
  std::vector<kernels::PackedWord> words(std::size_t(mw.beats) * ch, kernels::PackedWord{});
  for (int nf = 0; nf < row_folds; ++nf)
    for (int sf = 0; sf < col_folds; ++sf)
      for (int p = 0; p < pe; ++p) {
        const int r = nf * pe + p;
        if (r >= rows) continue;
        for (int k = 0; k < simd; ++k) {
          const int c = sf * simd + k;
          if (c >= cols) continue;
          const std::size_t byte = (std::size_t(nf * col_folds + sf) * pe + p) * simd + k;
          words[byte / kernels::kWordBytes].lane[byte % kernels::kWordBytes] = m.q[std::size_t(r) * cols + c];
        }
      }
  for (std::size_t w = 0; w < words.size(); ++w) l.channels[w % ch].push_back(words[w]);
  const int scale_word = append_folds(l.row_scales, m.scale.data(), rows, pe);
  l.weight_bytes += std::int64_t(rows) * cols;
  return {beat, scale_word};
}

// `n` bytes as one part of the weight stream (overlay::StripedWeights): whole beats of every
// channel, zero past the end, word w on channel w % channels; returns its first beat.
int append_part(Layout& l, const std::vector<std::uint8_t>& bytes) {
  const std::size_t ch = l.channels.size();
  const int beat = checked_int(l.channels[0].size(), "weights");
  const std::size_t words = (bytes.size() + kernels::kWordBytes - 1) / kernels::kWordBytes;
  const std::size_t padded = (words + ch - 1) / ch * ch;
  for (std::size_t w = 0; w < padded; ++w) {
    kernels::PackedWord word{};
    for (std::size_t b = 0; b < std::size_t(kernels::kWordBytes); ++b) {
      const std::size_t i = w * kernels::kWordBytes + b;
      word.lane[b] = i < bytes.size() ? static_cast<kernels::i8>(bytes[i]) : kernels::i8(0);
    }
    l.channels[w % ch].push_back(word);
  }
  return beat;
}

// One int4 matrix as the emitted top's tiled matrix unit reads it (overlay::matmul_block):
// its packed bytes as quant::Int4Matrix holds them, then its fp16 scales, low byte first.
std::pair<int, int> append_int4(Layout& l, const quant::Int4Matrix& m) {
  const int weights = append_part(l, m.packed);
  std::vector<std::uint8_t> scales(m.scale.size() * 2);
  for (std::size_t i = 0; i < m.scale.size(); ++i) {
    scales[2 * i] = std::uint8_t(m.scale[i] & 0xffu);
    scales[2 * i + 1] = std::uint8_t(m.scale[i] >> 8);
  }
  const int scale_beat = append_part(l, scales);
  l.weight_bytes += std::int64_t(m.packed.size() + scales.size());
  return {weights, scale_beat};
}

Layout lay_out(const quant::QuantModel& qm, const arch::Design& d, int channels, int context) {
  const auto& c = qm.config;
  Layout l;
  l.channels.resize(std::size_t(channels));
  l.embedding = append_rows(l.params, qm.token_embedding.data(), std::size_t(c.vocab_size), std::size_t(c.dim));
  for (int i = 0; i < c.n_layers; ++i) {
    l.attn_norm.push_back(append_rows(l.params, qm.attn_norm[std::size_t(i)].data(), 1, std::size_t(c.dim)));
    l.ffn_norm.push_back(append_rows(l.params, qm.ffn_norm[std::size_t(i)].data(), 1, std::size_t(c.dim)));
  }
  l.final_norm = append_rows(l.params, qm.final_norm.data(), 1, std::size_t(c.dim));
  for (const auto& lp : qm.plan.layers) {
    const auto& L = qm.linear(lp.layer, lp.which);
    if (L.format == quant::WeightFormat::int8)
      l.linear[{lp.layer, int(lp.which)}] = append_matrix(l, L.int8, L.int8.rows, L.int8.cols, d);
    else if (L.format == quant::WeightFormat::int4 && d.matrix_unit.weight_bits == 4)
      l.linear[{lp.layer, int(lp.which)}] = append_int4(l, L.int4);
    else
      throw fpgallm::InputError("design", fmt::format("{}: {} weights; the emitted matrix unit multiplies int8 weights, "
                                                      "and int4 ones on a design with matrix_unit.weight_bits 4",
                                                      model::linear_name(lp.layer, lp.which),
                                                      quant::to_string(L.format)));
    if (c.qkv_bias && (lp.which == model::Linear::wq || lp.which == model::Linear::wk || lp.which == model::Linear::wv)) {
      const auto li = std::size_t(lp.layer);
      const auto& b = lp.which == model::Linear::wq ? qm.bq[li] : lp.which == model::Linear::wk ? qm.bk[li] : qm.bv[li];
      l.bias[{lp.layer, int(lp.which)}] = append_folds(l.params, b.data(), L.rows, d.matrix_unit.rows);
    }
  }
  if (c.qk_norm)
    for (int i = 0; i < c.n_layers; ++i) {
      std::vector<float> gains = qm.q_norm[std::size_t(i)];
      gains.insert(gains.end(), qm.k_norm[std::size_t(i)].begin(), qm.k_norm[std::size_t(i)].end());
      l.head_norm.push_back(append_rows(l.params, gains.data(), 2, std::size_t(c.head_dim())));
    }
  // The RoPE table in the fp32 operations of the accelerator backend (engine/accel.cpp).
  const int hd = c.head_dim();
  std::vector<float> rope(std::size_t(context) * hd);
  for (int pos = 0; pos < context; ++pos)
    for (int i = 0; i < hd; i += 2) {
      const float freq = 1.0f / std::pow(c.rope_theta, static_cast<float>(i) / static_cast<float>(hd));
      const float val = static_cast<float>(pos) * freq;
      rope[std::size_t(pos) * hd + i] = std::cos(val);
      rope[std::size_t(pos) * hd + i + 1] = std::sin(val);
    }
  l.rope = append_rows(l.params, rope.data(), std::size_t(context), std::size_t(hd));
  if (l.row_scales.empty()) l.row_scales.push_back(kernels::FloatWord{});
  return l;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::int32_t> encode(const arch::Program& p, const quant::QuantModel& qm, const Layout& l) {
  std::vector<std::int32_t> words;
  const auto& ins = p.instructions;
  for (std::size_t i = 0; i < ins.size(); ++i) {
    const arch::Instruction& in = ins[i];
    std::int32_t w[kWords] = {};
    w[f_op] = int(in.op);
    w[f_layer] = in.layer;
    w[f_rows] = in.rows;
    w[f_cols] = in.cols;
    w[f_heads] = in.heads;
    w[f_kv_heads] = in.kv_heads;
    w[f_head_dim] = in.head_dim;
    w[f_in] = int(in.in);
    w[f_out] = int(in.out);
    switch (in.op) {
      case arch::Op::embed: w[f_aux] = l.embedding; break;
      case arch::Op::rope: w[f_aux] = l.rope; break;
      case arch::Op::head_norm: w[f_aux] = l.head_norm.at(std::size_t(in.layer)); break;
      case arch::Op::norm:
        w[f_aux] = in.layer < 0                       ? l.final_norm
                   : ends_with(in.name, "attn_norm") ? l.attn_norm[std::size_t(in.layer)]
                                                     : l.ffn_norm[std::size_t(in.layer)];
        break;
      case arch::Op::quantize: {
        // The activation format is the consumer's (the next matmul's) plan.
        const arch::Instruction* consumer = nullptr;
        for (std::size_t j = i + 1; j < ins.size() && !consumer; ++j)
          if (ins[j].op == arch::Op::matmul) consumer = &ins[j];
        if (!consumer) throw std::logic_error("quantize without a consuming matmul");
        const auto& lp = qm.plan.at(consumer->layer, consumer->linear);
        if (lp.act == quant::ActFormat::int8_static) {
          w[f_flags] = kFlagStatic;
          std::uint32_t bits;
          std::memcpy(&bits, &lp.act_scale, 4);
          w[f_static_scale] = std::int32_t(bits);
        }
        break;
      }
      case arch::Op::matmul: {
        const auto [beat, scale] = l.linear.at({in.layer, int(in.linear)});
        w[f_weight_bits] = in.weight_bits;  // 8: the streaming unit; 4: the tiled unit (overlay::matmul_block)
        w[f_group] = in.group;
        w[f_weight_beat] = beat;
        w[f_scale_word] = scale;
        if (in.bias) {
          w[f_flags] |= kFlagBias;
          w[f_aux] = l.bias.at({in.layer, int(in.linear)});
        }
        break;
      }
      default: break;
    }
    words.insert(words.end(), w, w + kWords);
  }
  return words;
}

// Index of the first quantize that feeds a matmul outside block 0: the program up to it
// is one layer (embedding, block 0, and the norm that follows).
std::size_t first_layer_end(const arch::Program& p, std::string& consumer_name) {
  const auto& ins = p.instructions;
  for (std::size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].op != arch::Op::quantize) continue;
    for (std::size_t j = i + 1; j < ins.size(); ++j)
      if (ins[j].op == arch::Op::matmul) {
        if (ins[j].layer != 0) {
          consumer_name = ins[j].name;
          return i;
        }
        break;
      }
  }
  throw std::logic_error("program without a matmul after block 0");
}

}  // namespace

arch::Design backend_design(const arch::Design& design) {
  arch::Design golden = design;
  golden.style = arch::Style::overlay;
  return golden;
}

namespace {

// Why the golden model cannot run on a kernel sized for `k` (empty when it can).
std::string golden_misfit(const model::Config& k, const model::Config& g) {
  const struct {
    const char* what;
    int kernel, golden;
  } sizes[] = {{"dim", k.dim, g.dim},
               {"hidden_dim", k.hidden_dim, g.hidden_dim},
               {"n_heads", k.n_heads, g.n_heads},
               {"n_kv_heads", k.n_kv_heads, g.n_kv_heads},
               {"head_dim", k.head_dim(), g.head_dim()},
               {"vocab_size", k.vocab_size, g.vocab_size}};
  for (const auto& s : sizes)
    if (s.golden > s.kernel)
      return fmt::format("the golden model's {} ({}) exceeds the kernel's ({})", s.what, s.golden, s.kernel);
  if (!g.llama_family() || !k.llama_family() || g.moe() || k.moe())
    return "the emitted overlay runs dense llama-family models only (llama, qwen2, qwen3)";
  return "";
}

}  // namespace

EmitResult emit(const model::Model& base, const quant::QuantModel& qm, const arch::Design& design,
                const std::string& out_dir, const EmitOptions& options) {
  return emit(qm.config, base, qm, design, out_dir, options, "the model emitted");
}

EmitResult emit(const model::Config& kernel_config, const model::Model& base, const quant::QuantModel& qm,
                const arch::Design& design, const std::string& out_dir, const EmitOptions& options,
                const std::string& golden_source) {
  if (auto p = design.problems(); !p.empty()) throw fpgallm::InputError("design", p.front());
  if (options.golden_steps < 1) throw fpgallm::InputError("golden_steps", "at least one decode step");
  if (const std::string why = golden_misfit(kernel_config, qm.config); !why.empty())
    throw fpgallm::InputError("design", why);
  const auto& c = qm.config;
  ProjectInfo info;
  info.config = kernel_config;
  info.golden = c;
  info.golden_source = golden_source;
  info.design = design;
  info.weight_channels = std::max(1, design.memory.weight_channels);
  info.unroll_budget = std::max({design.matrix_unit.rows, design.matrix_unit.cols, design.vector_unit.lanes,
                                 kernels::kWordBytes, info.weight_channels});
  const arch::Design golden = backend_design(design);
  if (auto p = engine::accel_problems(qm, golden); !p.empty()) throw fpgallm::InputError("design", p.front());
  info.context = std::min(design.context, kernel_config.seq_len);
  info.golden_context = std::min(info.context, c.seq_len);
  if (options.golden_steps > info.golden_context)
    throw fpgallm::InputError("golden_steps", fmt::format("more steps than the context ({})", info.golden_context));

  if (design.matrix_unit.weight_bits == 4) {
    const auto& k = kernel_config;
    const int widest = std::max({k.hidden_dim, k.dim, k.n_heads * k.head_dim(), k.kv_dim()});
    if (widest > k.vocab_size)
      throw fpgallm::InputError("design", fmt::format("int4 weights: the tiled unit writes its rows to the logits array, "
                                                      "which is shorter ({}) than the widest matrix ({} rows)",
                                                      k.vocab_size, widest));
  }
  const Layout layout = lay_out(qm, design, info.weight_channels, info.golden_context);
  const auto precision = [&](int layer, model::Linear w) {
    const auto& lp = qm.plan.at(layer, w);
    return arch::LinearPrecision{lp.weight == quant::WeightFormat::int4 ? 4 : 8,
                                 lp.weight == quant::WeightFormat::int4 ? qm.plan.group : 0,
                                 lp.act == quant::ActFormat::int8_static};
  };
  const arch::Program program = arch::build_program(c, design, arch::Stage::decode, 0, 1, precision);
  const std::vector<std::int32_t> words = encode(program, qm, layout);
  info.golden_instructions = int(program.instructions.size());
  info.instructions = int(arch::build_program(kernel_config, design, arch::Stage::decode, 0, 1).instructions.size());
  info.weight_bytes = layout.weight_bytes;
  info.channel_words = std::int64_t(layout.channels[0].size());
  info.scale_words = std::int64_t(layout.row_scales.size());
  info.param_words = std::int64_t(layout.params.size());

  // Golden vectors from the accelerator backend: one layer (tap of the first matmul input
  // after block 0 at position 0), and greedy decode steps from BOS (token 1).
  std::string layer_consumer;
  info.layer_instructions = int(first_layer_end(program, layer_consumer));
  info.layer_result_buf = int(program.instructions[std::size_t(info.layer_instructions)].in);
  std::vector<float> layer_golden;
  std::vector<std::int32_t> tokens;
  std::vector<float> logits;
  {
    engine::AccelTransformer accel(base, qm, golden);
    accel.set_tap([&](const arch::Instruction& in, int, const float* x, int n) {
      if (layer_golden.empty() && in.name == layer_consumer) layer_golden.assign(x, x + n);
    });
    int token = 1;
    for (int pos = 0; pos < options.golden_steps; ++pos) {
      tokens.push_back(token);
      const float* l = accel.forward(token, pos);
      logits.insert(logits.end(), l, l + c.vocab_size);
      token = int(std::max_element(l, l + c.vocab_size) - l);
      if (pos == 0) accel.set_tap({});
    }
  }
  // Golden prompt calls: the first n tokens of one fixed sequence (BOS, then ids spread over
  // the vocabulary), each run by a fresh backend as one prefill (blocks of
  // arch::block_tokens): the last token's logits and the KV cache it leaves, positions [0, n)
  // of every layer as stored (keys, values, then for int8 the key and value scales).
  info.block_tokens = arch::block_tokens(golden);
  for (int n : options.prompt_lengths)
    if (n >= 1 && n <= info.golden_context) info.prompt_lengths.push_back(n);
  std::vector<std::int32_t> prompt_tokens;
  std::vector<float> prompt_logits;
  std::vector<std::uint8_t> prompt_kv;
  if (!info.prompt_lengths.empty()) {
    const int longest = *std::max_element(info.prompt_lengths.begin(), info.prompt_lengths.end());
    for (int i = 0; i < longest; ++i)
      prompt_tokens.push_back(i == 0 ? 1 : int((std::int64_t(i) * 7919 + 13) % c.vocab_size));
    for (int n : info.prompt_lengths) {
      engine::AccelTransformer accel(base, qm, golden);
      const float* l = accel.prefill(std::vector<int>(prompt_tokens.begin(), prompt_tokens.begin() + n), 0);
      prompt_logits.insert(prompt_logits.end(), l, l + c.vocab_size);
      for (int layer = 0; layer < c.n_layers; ++layer) {
        const auto kv = accel.kv_rows(layer, n);
        for (const auto* part : {&kv.k, &kv.v}) prompt_kv.insert(prompt_kv.end(), part->begin(), part->end());
        for (const auto* part : {&kv.k_scale, &kv.v_scale}) {
          const auto* b = reinterpret_cast<const std::uint8_t*>(part->data());
          prompt_kv.insert(prompt_kv.end(), b, b + part->size() * sizeof(float));
        }
      }
    }
  }
  info.prompt_kv_bytes = std::int64_t(prompt_kv.size());
  info.layer_width = int(layer_golden.size());
  info.golden_steps = options.golden_steps;
  info.layer_consumer = layer_consumer;
  info.device = design.device.empty() ? nullptr : hw::lookup_device(design.device);
  if (const std::string why = link_problem(info); !why.empty())
    throw fpgallm::InputError("design", "would not link on " + design.device + ": " + why);
  for (const auto& why : placement_problems(info))
    info.notes.push_back("the units do not fit the SLRs of " + design.device + " (v++ link would fail placement): " + why);
  const Schedule schedule = decode_schedule(kernel_config, design, info.device, info.context);
  info.schedule = schedule.table;

  if (design.matrix_unit.impl == arch::MatrixUnitImpl::rtl)
    info.notes.push_back("matrix_unit.impl is rtl: rtl/ holds the RTL matrix unit, packaged as a Vitis RTL kernel by "
                         "rtl/package_xo.tcl and linked by `make -C rtl link`; those steps were not run here, and the "
                         "overlay kernel still computes its matmuls in HLS (rtl/README.md)");
  // Replaces only an earlier fpgallm folder (util/output.hpp); written beside it, swapped in.
  fpgallm::check_output(out_dir, fpgallm::OutputKind::folder);
  fpgallm::OutputFolder folder(out_dir);
  const fs::path tmp(folder.dir());
  EmitResult result;
  try {
    std::vector<std::string>& files = result.files;
    const fs::path kernels = fs::path(fpgallm::source_dir()) / "src" / "kernels";
    for (const char* k : {"numerics.hpp", "stream.hpp", "trip_count.hpp", "matrix_unit.hpp", "vector_unit.hpp",
                          "attention.hpp"})
      write(tmp, std::string("src/kernels/") + k, read_text(kernels / k), files);
    write(tmp, "src/overlay.hpp", read_text(fs::path(fpgallm::source_dir()) / "src/codegen/templates/overlay.hpp"),
          files);
    write(tmp, "src/fpgallm_isa.hpp", read_text(fs::path(fpgallm::source_dir()) / "src/arch/isa.hpp"), files);
    write(tmp, "src/fpgallm_config.hpp", config_header(info), files);
    write(tmp, "src/fpgallm_overlay.cpp", top_source(info), files);
    write(tmp, "src/fpgallm_overlay.hpp", top_header(info), files);
    write(tmp, "host/host.cpp", host_source(info), files);
    write(tmp, "tb/testbench.cpp", testbench_source(info), files);
    write(tmp, "tb/golden_io.hpp", golden_reader_source(), files);
    write(tmp, "connectivity.cfg", connectivity(info), files);
    write(tmp, "Makefile", makefile(info), files);
    write(tmp, "hls/fpgallm_overlay.tcl", hls_tcl(info, HlsFlow::csim), files);
    write(tmp, "hls/fpgallm_overlay_cosim.tcl", hls_tcl(info, HlsFlow::cosim), files);
    write(tmp, "README.md", readme(info), files);
    write(tmp, "schedule.md", "# Schedule of one decode step (fpgallm emit)\n\n" + info.schedule, files);
    if (design.matrix_unit.impl == arch::MatrixUnitImpl::rtl)
      for (const auto& [path, text] : rtl_kernel_files(design, (fs::path(fpgallm::source_dir()) / "rtl").string()))
        write(tmp, path, text, files);
    for (int ch = 0; ch < info.weight_channels; ++ch)
      write(tmp, fmt::format("data/weights_ch{:02d}.bin", ch), bytes_of(layout.channels[std::size_t(ch)]), files);
    write(tmp, "data/row_scales.bin", bytes_of(layout.row_scales), files);
    write(tmp, "data/params.bin", bytes_of(layout.params), files);
    write(tmp, "data/program.bin", bytes_of(words), files);
    write(tmp, "golden/layer_out.bin", bytes_of(layer_golden), files);
    write(tmp, "golden/decode_tokens.bin", bytes_of(tokens), files);
    write(tmp, "golden/decode_logits.bin", bytes_of(logits), files);
    if (!info.prompt_lengths.empty()) {
      write(tmp, "golden/prompt_tokens.bin", bytes_of(prompt_tokens), files);
      write(tmp, "golden/prompt_logits.bin", bytes_of(prompt_logits), files);
      write(tmp, "golden/prompt_kv.bin", bytes_of(prompt_kv), files);
    }
    folder.commit();
  } catch (const fs::filesystem_error& e) {
    throw fpgallm::InputError(out_dir, e.what());
  }
  std::sort(result.files.begin(), result.files.end());
  result.dir = out_dir;
  result.weight_bytes = info.weight_bytes;
  result.param_floats = info.param_words * kernels::kFloatsPerWord;
  result.weight_channels = info.weight_channels;
  result.schedule_cycles = schedule.cycles;
  result.instructions = info.instructions;
  result.golden_steps = info.golden_steps;
  result.notes = info.notes;
  return result;
}

}  // namespace codegen
