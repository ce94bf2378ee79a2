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
#include "codegen/emit_rtl.hpp"
#include "codegen/emit_text.hpp"
#include "engine/accel.hpp"
#include "hw/device.hpp"
#include "hw/resources.hpp"
#include "util/error.hpp"
#include "util/paths.hpp"

namespace fs = std::filesystem;

namespace codegen {

namespace {

constexpr int kWords = 16;
constexpr int kWeightBlock = 64;
enum Field { f_op, f_layer, f_rows, f_cols, f_heads, f_kv_heads, f_head_dim, f_in, f_out, f_weight_bits, f_group,
             f_weight_block, f_scale_offset, f_aux, f_static_scale, f_flags };

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

// The parameter blobs of the project: every weight, scale and fp32 table the kernel reads.
struct Layout {
  std::vector<std::int8_t> weights;        // int8 codes / packed int4, each matrix 64-byte aligned
  std::vector<std::uint16_t> half_scales;  // int4 group scales (fp16 bits)
  std::vector<float> params;               // embedding, norms, int8 row scales, RoPE table
  std::map<std::pair<int, int>, std::pair<int, int>> linear;  // (layer, which) -> (block, scale offset)
  int embedding = 0, final_norm = 0, rope = 0;
  std::vector<int> attn_norm, ffn_norm;
};

int checked_int(std::size_t v, const char* what) {
  if (v > 0x7fffffffu) throw fpgallm::InputError("design", fmt::format("{} offset {} past 32-bit words", what, v));
  return int(v);
}

int append(std::vector<float>& to, const std::vector<float>& v) {
  const int at = checked_int(to.size(), "params");
  to.insert(to.end(), v.begin(), v.end());
  return at;
}

Layout lay_out(const quant::QuantModel& qm, int context) {
  const auto& c = qm.config;
  Layout l;
  l.embedding = append(l.params, qm.token_embedding);
  for (int i = 0; i < c.n_layers; ++i) {
    l.attn_norm.push_back(append(l.params, qm.attn_norm[std::size_t(i)]));
    l.ffn_norm.push_back(append(l.params, qm.ffn_norm[std::size_t(i)]));
  }
  l.final_norm = append(l.params, qm.final_norm);
  for (const auto& lp : qm.plan.layers) {
    const auto& L = qm.linear(lp.layer, lp.which);
    const std::size_t block = l.weights.size() / kWeightBlock;
    int scale = 0;
    if (L.format == quant::WeightFormat::int8) {
      l.weights.insert(l.weights.end(), L.int8.q.begin(), L.int8.q.end());
      scale = append(l.params, L.int8.scale);
    } else {
      const auto* p = reinterpret_cast<const std::int8_t*>(L.int4.packed.data());
      l.weights.insert(l.weights.end(), p, p + L.int4.packed.size());
      scale = checked_int(l.half_scales.size(), "half_scales");
      l.half_scales.insert(l.half_scales.end(), L.int4.scale.begin(), L.int4.scale.end());
    }
    l.weights.resize((l.weights.size() + kWeightBlock - 1) / kWeightBlock * kWeightBlock, 0);
    l.linear[{lp.layer, int(lp.which)}] = {checked_int(block, "weights"), scale};
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
  l.rope = append(l.params, rope);
  if (l.half_scales.empty()) l.half_scales.push_back(0);  // a port needs a buffer
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
          w[f_flags] = 1;
          std::uint32_t bits;
          std::memcpy(&bits, &lp.act_scale, 4);
          w[f_static_scale] = std::int32_t(bits);
        }
        break;
      }
      case arch::Op::matmul: {
        const auto& L = qm.linear(in.layer, in.linear);
        const auto [block, scale] = l.linear.at({in.layer, int(in.linear)});
        w[f_weight_bits] = L.format == quant::WeightFormat::int4 ? 4 : 8;
        w[f_group] = L.format == quant::WeightFormat::int4 ? L.int4.group : 0;
        w[f_weight_block] = block;
        w[f_scale_offset] = scale;
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

arch::Design backend_design(const arch::Design& design, std::vector<std::string>* notes) {
  // The accelerator backend has a fixed set of matrix-unit and tile shapes compiled in.
  // Integer results do not depend on those shapes (engine/accel.hpp), so a shape outside
  // the set is replaced by 32x32 units and 128x256 tiles; the emitted testbench checks the
  // claim bit for bit for the design's own shapes.
  arch::Design golden = design;
  golden.style = arch::Style::overlay;
  const std::vector<std::string> shapes = engine::accel_design_problems(golden);
  if (std::any_of(shapes.begin(), shapes.end(), [](const std::string& s) {
        return s.rfind("matrix_unit.", 0) == 0 || s.rfind("tiling:", 0) == 0;
      })) {
    golden.matrix_unit.rows = golden.matrix_unit.cols = 32;
    golden.tiling.tile_rows = 128;
    golden.tiling.tile_cols = 256;
    if (notes)
      notes->push_back(fmt::format(
          "golden vectors computed by the accelerator backend with a 32x32 matrix unit and 128x256 tiles (this "
          "design: {}x{}, {}x{} tiles, not compiled into the backend); integer results do not depend on these shapes "
          "and the testbench checks it bit for bit",
          design.matrix_unit.rows, design.matrix_unit.cols, design.tiling.tile_rows, design.tiling.tile_cols));
  }
  return golden;
}

EmitResult emit(const model::Model& base, const quant::QuantModel& qm, const arch::Design& design,
                const std::string& out_dir, const EmitOptions& options) {
  if (auto p = design.problems(); !p.empty()) throw fpgallm::InputError("design", p.front());
  if (options.golden_steps < 1) throw fpgallm::InputError("golden_steps", "at least one decode step");
  const auto& c = qm.config;
  ProjectInfo info;
  info.config = c;
  info.design = design;
  if (design.style != arch::Style::overlay)
    info.notes.push_back(fmt::format(
        "design style \"{}\": emitted as the overlay (one set of units, weights streamed from off-chip memory); "
        "a layer-per-unit dataflow kernel with resident weights is not generated",
        arch::to_string(design.style)));
  if (design.buffers.kv_bytes > 0)
    info.notes.push_back("the design keeps the KV cache on chip; the emitted kernel keeps it in off-chip memory");
  const arch::Design golden = backend_design(design, &info.notes);
  if (auto p = engine::accel_problems(qm, golden); !p.empty()) throw fpgallm::InputError("design", p.front());
  info.context = std::min(design.context, c.seq_len);
  if (options.golden_steps > info.context)
    throw fpgallm::InputError("golden_steps", fmt::format("more steps than the context ({})", info.context));

  const Layout layout = lay_out(qm, info.context);
  const arch::Program program = arch::build_program(c, design, arch::Stage::decode, 0, 1, [&](int layer, model::Linear w) {
    const auto& lp = qm.plan.at(layer, w);
    return arch::LinearPrecision{lp.weight == quant::WeightFormat::int4 ? 4 : 8,
                                 lp.weight == quant::WeightFormat::int4 ? qm.plan.group : 0};
  });
  const std::vector<std::int32_t> words = encode(program, qm, layout);
  info.instructions = int(program.instructions.size());
  info.weight_bytes = std::int64_t(layout.weights.size());
  info.param_floats = std::int64_t(layout.params.size());
  info.half_scales = std::int64_t(layout.half_scales.size());

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
  info.layer_width = int(layer_golden.size());
  info.golden_steps = options.golden_steps;
  info.layer_consumer = layer_consumer;
  info.device = design.device.empty() ? nullptr : hw::lookup_device(design.device);

  if (design.matrix_unit.impl == arch::MatrixUnitImpl::rtl)
    info.notes.push_back("matrix_unit.impl is rtl: rtl/ holds the RTL matrix unit, packaged as a Vitis RTL kernel by "
                         "rtl/package_xo.tcl and linked by `make -C rtl link`; those steps were not run here, and the "
                         "overlay kernel still computes its matmuls in HLS (rtl/README.md)");
  const fs::path final_dir(out_dir);
  // Replacing is limited to an earlier emitted project: never delete an unrelated folder.
  if (fs::exists(final_dir) && !(fs::is_directory(final_dir) && (fs::is_empty(final_dir) ||
                                                                  fs::exists(final_dir / "src/fpgallm_overlay.cpp"))))
    throw fpgallm::InputError(out_dir, "exists and is not an fpgallm emit project; remove it or choose another folder");
  const fs::path tmp = fs::path(out_dir + ".tmp-" + std::to_string(::getpid()));
  EmitResult result;
  try {
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    std::vector<std::string>& files = result.files;
    const fs::path kernels = fs::path(fpgallm::source_dir()) / "src" / "kernels";
    for (const char* k : {"numerics.hpp", "matrix_unit.hpp", "vector_unit.hpp", "attention.hpp"})
      write(tmp, std::string("src/kernels/") + k, read_text(kernels / k), files);
    write(tmp, "src/overlay.hpp", read_text(fs::path(fpgallm::source_dir()) / "src/codegen/templates/overlay.hpp"),
          files);
    write(tmp, "src/fpgallm_config.hpp", config_header(info), files);
    write(tmp, "src/fpgallm_overlay.cpp", top_source(info), files);
    write(tmp, "src/fpgallm_overlay.hpp", top_header(info), files);
    write(tmp, "host/host.cpp", host_source(info), files);
    write(tmp, "tb/testbench.cpp", testbench_source(info), files);
    write(tmp, "tb/golden_io.hpp", golden_reader_source(), files);
    write(tmp, "connectivity.cfg", connectivity(info), files);
    write(tmp, "Makefile", makefile(info), files);
    write(tmp, "hls/fpgallm_overlay.tcl", hls_tcl(info), files);
    write(tmp, "README.md", readme(info), files);
    if (design.matrix_unit.impl == arch::MatrixUnitImpl::rtl)
      for (const auto& [path, text] : rtl_kernel_files(design, (fs::path(fpgallm::source_dir()) / "rtl").string()))
        write(tmp, path, text, files);
    write(tmp, "data/weights.bin", bytes_of(layout.weights), files);
    write(tmp, "data/half_scales.bin", bytes_of(layout.half_scales), files);
    write(tmp, "data/params.bin", bytes_of(layout.params), files);
    write(tmp, "data/program.bin", bytes_of(words), files);
    write(tmp, "golden/layer_out.bin", bytes_of(layer_golden), files);
    write(tmp, "golden/decode_tokens.bin", bytes_of(tokens), files);
    write(tmp, "golden/decode_logits.bin", bytes_of(logits), files);
    fs::remove_all(final_dir);
    fs::rename(tmp, final_dir);
  } catch (const fs::filesystem_error& e) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw fpgallm::InputError(out_dir, e.what());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  std::sort(result.files.begin(), result.files.end());
  result.dir = out_dir;
  result.weight_bytes = info.weight_bytes;
  result.param_floats = info.param_floats;
  result.instructions = info.instructions;
  result.golden_steps = info.golden_steps;
  result.notes = info.notes;
  return result;
}

}  // namespace codegen
