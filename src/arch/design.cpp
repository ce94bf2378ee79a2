#include "arch/design.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "util/error.hpp"
#include "util/paths.hpp"
#include "util/json_file.hpp"

namespace arch {

using nlohmann::json;

const char* to_string(MatrixUnitImpl i) { return i == MatrixUnitImpl::hls ? "hls" : "rtl"; }
const char* to_string(VectorFormat f) { return f == VectorFormat::fp32 ? "fp32" : "fp16"; }
const char* to_string(Style s) { return s == Style::overlay ? "overlay" : "dataflow"; }
const char* to_string(Split s) {
  switch (s) {
    case Split::none: return "none";
    case Split::tensor: return "tensor";
    case Split::pipeline: return "pipeline";
  }
  return "?";
}
const char* to_string(Phase p) { return p == Phase::inference ? "inference" : "train"; }

namespace {

constexpr const char* kRequiredSections[] = {"clock_mhz", "matrix_unit", "vector_unit", "tiling", "buffers", "memory"};

bool pow2(long v) { return v > 0 && (v & (v - 1)) == 0; }

template <typename E>
E enum_from(const json& j, const char* field, std::initializer_list<E> values) {
  if (!j.is_string()) throw std::invalid_argument(fmt::format("{}: wrong type ({}), expected a string", field, j.type_name()));
  const std::string s = j.get<std::string>();
  for (E v : values)
    if (s == to_string(v)) return v;
  std::string allowed;
  for (E v : values) allowed += (allowed.empty() ? "" : ", ") + std::string(to_string(v));
  throw std::invalid_argument(fmt::format("{}: '{}' is not one of {}", field, s, allowed));
}

// Reads the known keys of object `j` into the setter calls, rejecting unknown ones.
void check_keys(const json& j, const char* where, std::initializer_list<const char*> known) {
  if (!j.is_object()) throw std::invalid_argument(fmt::format("{}: expected an object", where));
  std::set<std::string> k(known.begin(), known.end());
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!k.count(it.key())) throw std::invalid_argument(fmt::format("{}: unknown field '{}'", where, it.key()));
}

// An integer field takes a JSON integer, or a number with no fractional part, that fits T:
// nlohmann's get<int> would wrap 2^32+32 to 32 and truncate 32.5 to 32.
template <typename T>
T integer_from(const json& v, const char* key, const char* where) {
  constexpr auto lo = std::numeric_limits<T>::min();
  constexpr auto hi = std::numeric_limits<T>::max();
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) throw std::invalid_argument(fmt::format("{}.{}: {} does not fit ({}..{})", where, key, u, lo, hi));
    return static_cast<T>(u);
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if (i < static_cast<std::int64_t>(lo) || i > static_cast<std::int64_t>(hi))
      throw std::invalid_argument(fmt::format("{}.{}: {} does not fit ({}..{})", where, key, i, lo, hi));
    return static_cast<T>(i);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d))
      throw std::invalid_argument(fmt::format("{}.{}: {} is not an integer", where, key, v.dump()));
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
      throw std::invalid_argument(fmt::format("{}.{}: {} does not fit ({}..{})", where, key, v.dump(), lo, hi));
    return static_cast<T>(d);
  }
  throw std::invalid_argument(fmt::format("{}.{}: wrong type ({}), expected an integer", where, key, v.type_name()));
}

template <typename T>
void get(const json& j, const char* key, T& out, const char* where) {
  if (!j.contains(key)) return;
  const json& v = j.at(key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    out = integer_from<T>(v, key, where);
  } else {
    try {
      out = v.get<T>();
    } catch (const json::exception&) {
      throw std::invalid_argument(fmt::format("{}.{}: wrong type ({})", where, key, v.type_name()));
    }
    if constexpr (std::is_floating_point_v<T>)
      if (!std::isfinite(out)) throw std::invalid_argument(fmt::format("{}.{}: not a finite number", where, key));
  }
}

// Appends msg to p unless ok; msg is a string, or a function that makes it (formatted only
// for a problem: a design's checks run for every candidate of the design search).
template <class Msg>
void add_problem(std::vector<std::string>& p, bool ok, Msg&& msg) {
  if (ok) return;
  if constexpr (std::is_invocable_v<Msg>)
    p.push_back(msg());
  else
    p.push_back(std::string(msg));
}

}  // namespace

double StoredWeights::bits_per_weight(int mac_weight_bits) const {
  const double value_bits = bits > 0 ? bits : mac_weight_bits;
  if (sparse_n <= 0) return value_bits;
  int index_bits = 0;
  while ((1 << index_bits) < sparse_m) ++index_bits;
  return density() * (value_bits + index_bits);
}

std::vector<std::string> Design::problems() const {
  std::vector<std::string> p = model_problems();
  if (p.empty()) p = kernel_gaps();
  return p;
}

std::vector<std::string> Design::kernel_gaps() const {
  std::vector<std::string> p;
  auto need = [&](bool ok, auto&& msg) { add_problem(p, ok, msg); };
  const auto& mu = matrix_unit;
  need(mu.weight_bits == 8 || mu.weight_bits == 4, [&] { return fmt::format("matrix_unit.weight_bits: {} (the kernels implement 8 and 4)", mu.weight_bits); });
  need(mu.act_bits == 8, [&] { return fmt::format("matrix_unit.act_bits: {} (the kernels implement 8)", mu.act_bits); });
  need(mu.acc_bits == 32, [&] { return fmt::format("matrix_unit.acc_bits: {} (the kernels implement 32)", mu.acc_bits); });
  need(kv_bits == 8 || kv_bits == 16 || kv_bits == 32, [&] { return fmt::format("kv_bits: {} (the kernels implement 8, 16 and 32)", kv_bits); });
  need(weights.bits == 0 || weights.bits == mu.weight_bits,
       [&] { return fmt::format("weights.bits: {} (the kernels store matrix_unit.weight_bits per weight)", weights.bits); });
  need(weights.sparse_n == 0, "weights.sparse_n: the kernels implement dense weights only");
  need(memory.port_bits == 512, [&] { return fmt::format("memory.port_bits: {} (the kernels' m_axi ports are 512 bits)", memory.port_bits); });
  need(compute_units == 1, [&] { return fmt::format("compute_units: {} (the kernels build one compute unit)", compute_units); });
  need(host_ops.empty(), "host_ops: the accelerator backend runs every operator on the fabric");
  need(!host_launch_per_layer, "host_launch_per_layer: the accelerator backend runs the whole model from one instruction list");
  need(style == Style::overlay, "style: dataflow (the kernels build the overlay: one set of units, weights streamed from off-chip memory)");
  need(buffers.kv_bytes == 0, [&] { return fmt::format("buffers.kv_bytes: {} (the kernels keep the KV cache in off-chip memory; 0)", buffers.kv_bytes); });
  need(mu.ii == 1, [&] { return fmt::format("matrix_unit.ii: {} (the kernels pipeline the matrix unit at II=1)", mu.ii); });
  need(weight_sparsity == 0, [&] { return fmt::format("weight_sparsity: {} (the kernels compute every weight)", weight_sparsity); });
  need(fuse_attention, "fuse_attention: false (the attention kernel runs scores, softmax and values in one pass)");
  need(!fuse_norm_matmul, "fuse_norm_matmul: true (the kernels run the norm as its own vector-unit instruction)");
  need(vector_unit.format == VectorFormat::fp32, "vector_unit.format: fp16 (the kernels' vector unit computes in fp32)");
  need(!vector_unit.shared, "vector_unit.shared: true (the kernels give each vector operation its own datapath at each call site)");
  return p;
}

std::vector<std::string> Design::model_problems() const {
  std::vector<std::string> p;
  auto need = [&](bool ok, auto&& msg) { add_problem(p, ok, msg); };
  const auto& mu = matrix_unit;
  need(clock_mhz >= 10 && clock_mhz <= 1000, [&] { return fmt::format("clock_mhz: {} outside 10..1000", clock_mhz); });
  need(pow2(mu.rows) && mu.rows <= 256, [&] { return fmt::format("matrix_unit.rows: {} must be a power of two in 1..256", mu.rows); });
  need(pow2(mu.cols) && mu.cols <= 256, [&] { return fmt::format("matrix_unit.cols: {} must be a power of two in 1..256", mu.cols); });
  need((mu.weight_bits >= 1 && mu.weight_bits <= 8) || mu.weight_bits == 16,
       [&] { return fmt::format("matrix_unit.weight_bits: {} outside 1..8 or 16", mu.weight_bits); });
  need(mu.act_bits == 4 || mu.act_bits == 8 || mu.act_bits == 16, [&] { return fmt::format("matrix_unit.act_bits: {} (4, 8 or 16)", mu.act_bits); });
  need(mu.acc_bits >= 16 && mu.acc_bits <= 48, [&] { return fmt::format("matrix_unit.acc_bits: {} outside 16..48", mu.acc_bits); });
  need(mu.ii >= 1 && mu.ii <= 16, [&] { return fmt::format("matrix_unit.ii: {} outside 1..16", mu.ii); });
  need(mu.pipeline_depth >= 1 && mu.pipeline_depth <= 256, [&] { return fmt::format("matrix_unit.pipeline_depth: {} outside 1..256", mu.pipeline_depth); });
  need(pow2(vector_unit.lanes) && vector_unit.lanes <= 256, [&] { return fmt::format("vector_unit.lanes: {} must be a power of two in 1..256", vector_unit.lanes); });
  need(vector_unit.exp_table_bits >= 4 && vector_unit.exp_table_bits <= 12, [&] { return fmt::format("vector_unit.exp_table_bits: {} outside 4..12", vector_unit.exp_table_bits); });
  if (!p.empty()) return p;  // the checks below divide by the unit's shape
  need(tiling.tile_rows >= mu.rows && tiling.tile_rows % mu.rows == 0,
       [&] { return fmt::format("tiling.tile_rows: {} must be a positive multiple of matrix_unit.rows ({})", tiling.tile_rows, mu.rows); });
  need(tiling.tile_cols >= mu.cols && tiling.tile_cols % mu.cols == 0,
       [&] { return fmt::format("tiling.tile_cols: {} must be a positive multiple of matrix_unit.cols ({})", tiling.tile_cols, mu.cols); });
  need(tiling.tile_rows <= 65536 && tiling.tile_cols <= 65536, "tiling: tiles larger than 65536");
  need(tiling.prefill_block >= 1 && tiling.prefill_block <= 4096, [&] { return fmt::format("tiling.prefill_block: {} outside 1..4096", tiling.prefill_block); });
  const std::int64_t tile_bytes = std::int64_t(tiling.tile_rows) * tiling.tile_cols * mu.weight_bits / 8;
  need(buffers.weight_bytes >= tile_bytes,
       [&] { return fmt::format("buffers.weight_bytes: {} cannot hold one {}x{} weight tile ({} bytes)", buffers.weight_bytes,
                   tiling.tile_rows, tiling.tile_cols, tile_bytes); });
  need(buffers.activation_bytes > 0, "buffers.activation_bytes: must be positive");
  need(buffers.kv_bytes >= 0, "buffers.kv_bytes: must not be negative");
  need(memory.weight_channels >= 1 && memory.weight_channels <= 64, [&] { return fmt::format("memory.weight_channels: {} outside 1..64", memory.weight_channels); });
  need(memory.kv_channels >= 0 && memory.kv_channels <= 64, [&] { return fmt::format("memory.kv_channels: {} outside 0..64", memory.kv_channels); });
  need(memory.activation_channels >= 0 && memory.activation_channels <= 64, [&] { return fmt::format("memory.activation_channels: {} outside 0..64", memory.activation_channels); });
  need(pow2(memory.burst_bytes) && memory.burst_bytes >= 64 && memory.burst_bytes <= 65536,
       [&] { return fmt::format("memory.burst_bytes: {} must be a power of two in 64..65536", memory.burst_bytes); });
  need(parallel.cards >= 1 && parallel.cards <= 64, [&] { return fmt::format("parallel.cards: {} outside 1..64", parallel.cards); });
  need((parallel.cards == 1) == (parallel.split == Split::none),
       [&] { return fmt::format("parallel.split: '{}' with {} card(s) (use 'none' for one card, tensor or pipeline for more)",
                   to_string(parallel.split), parallel.cards); });
  need(batch >= 1 && batch <= 4096, [&] { return fmt::format("batch: {} outside 1..4096", batch); });
  need(context >= 1 && context <= (1 << 20), [&] { return fmt::format("context: {} outside 1..1048576", context); });
  need(kv_bits == 2 || kv_bits == 4 || kv_bits == 8 || kv_bits == 16 || kv_bits == 32,
       [&] { return fmt::format("kv_bits: {} (2, 4 or 8 = integer with a scale per position and head, 16 = fp16, 32 = fp32)", kv_bits); });
  need(weight_sparsity >= 0 && weight_sparsity < 1, [&] { return fmt::format("weight_sparsity: {} outside [0, 1)", weight_sparsity); });
  need(weights.bits == 0 || (weights.bits >= 1 && weights.bits <= 16), [&] { return fmt::format("weights.bits: {} outside 1..16 (0 = matrix_unit.weight_bits)", weights.bits); });
  need(weights.group_size >= 0 && weights.group_size <= 65536, [&] { return fmt::format("weights.group_size: {} outside 0..65536", weights.group_size); });
  need((weights.sparse_n == 0 && weights.sparse_m == 0) ||
           (weights.sparse_n >= 1 && weights.sparse_n < weights.sparse_m && weights.sparse_m <= 64),
       [&] { return fmt::format("weights.sparse_n:sparse_m: {}:{} (N:M with 1 <= N < M <= 64, or 0:0 for dense)", weights.sparse_n, weights.sparse_m); });
  need(memory.port_bits == 64 || memory.port_bits == 128 || memory.port_bits == 256 || memory.port_bits == 512 ||
           memory.port_bits == 1024,
       [&] { return fmt::format("memory.port_bits: {} (64, 128, 256, 512 or 1024)", memory.port_bits); });
  need(compute_units >= 1 && compute_units <= 16, [&] { return fmt::format("compute_units: {} outside 1..16", compute_units); });
  for (const auto& op : host_ops)
    need(op == "embedding" || op == "classifier" || op == "norm" || op == "softmax",
         [&] { return fmt::format("host_ops: '{}' (embedding, classifier, norm or softmax)", op); });
  return p;
}

void to_json(json& j, const Design& d) {
  const auto& mu = d.matrix_unit;
  j = json{{"name", d.name},
           {"device", d.device},
           {"style", to_string(d.style)},
           {"phase", to_string(d.phase)},
           {"clock_mhz", d.clock_mhz},
           {"matrix_unit", {{"impl", to_string(mu.impl)}, {"rows", mu.rows}, {"cols", mu.cols}, {"weight_bits", mu.weight_bits},
                            {"act_bits", mu.act_bits}, {"acc_bits", mu.acc_bits}, {"ii", mu.ii},
                            {"pipeline_depth", mu.pipeline_depth}}},
           {"vector_unit", {{"lanes", d.vector_unit.lanes},
                             {"exp_table_bits", d.vector_unit.exp_table_bits},
                             {"format", to_string(d.vector_unit.format)},
                             {"shared", d.vector_unit.shared}}},
           {"tiling", {{"tile_rows", d.tiling.tile_rows}, {"tile_cols", d.tiling.tile_cols},
                       {"prefill_block", d.tiling.prefill_block}}},
           {"buffers", {{"weight_bytes", d.buffers.weight_bytes}, {"activation_bytes", d.buffers.activation_bytes},
                        {"kv_bytes", d.buffers.kv_bytes}, {"activations_in_uram", d.buffers.activations_in_uram}}},
           {"memory", {{"weight_channels", d.memory.weight_channels}, {"kv_channels", d.memory.kv_channels},
                       {"activation_channels", d.memory.activation_channels}, {"burst_bytes", d.memory.burst_bytes},
                       {"port_bits", d.memory.port_bits}}},
           {"parallel", {{"cards", d.parallel.cards}, {"split", to_string(d.parallel.split)}}},
           {"batch", d.batch},
           {"context", d.context},
           {"kv_bits", d.kv_bits},
           {"fuse_norm_matmul", d.fuse_norm_matmul},
           {"fuse_attention", d.fuse_attention},
           {"weight_sparsity", d.weight_sparsity},
           {"weights", {{"bits", d.weights.bits}, {"group_size", d.weights.group_size},
                        {"sparse_n", d.weights.sparse_n}, {"sparse_m", d.weights.sparse_m}}},
           {"compute_units", d.compute_units},
           {"host_ops", d.host_ops},
           {"host_launch_per_layer", d.host_launch_per_layer}};
}

void from_json(const json& j, Design& d) {
  check_keys(j, "design", {"name", "device", "style", "phase", "clock_mhz", "matrix_unit", "vector_unit", "tiling",
                           "buffers", "memory", "parallel", "batch", "context", "kv_bits", "fuse_norm_matmul",
                           "fuse_attention", "weight_sparsity", "weights", "compute_units", "host_ops", "host_launch_per_layer", "predicted",
                           "assumptions", "model", "quant"});
  get(j, "name", d.name, "design");
  get(j, "device", d.device, "design");
  if (j.contains("style")) d.style = enum_from(j["style"], "style", {Style::overlay, Style::dataflow});
  if (j.contains("phase")) d.phase = enum_from(j["phase"], "phase", {Phase::inference, Phase::train});
  get(j, "clock_mhz", d.clock_mhz, "design");
  if (j.contains("matrix_unit")) {
    const auto& m = j["matrix_unit"];
    check_keys(m, "matrix_unit", {"impl", "rows", "cols", "weight_bits", "act_bits", "acc_bits", "ii", "pipeline_depth"});
    if (m.contains("impl")) d.matrix_unit.impl = enum_from(m["impl"], "matrix_unit.impl", {MatrixUnitImpl::hls, MatrixUnitImpl::rtl});
    get(m, "rows", d.matrix_unit.rows, "matrix_unit");
    get(m, "cols", d.matrix_unit.cols, "matrix_unit");
    get(m, "weight_bits", d.matrix_unit.weight_bits, "matrix_unit");
    get(m, "act_bits", d.matrix_unit.act_bits, "matrix_unit");
    get(m, "acc_bits", d.matrix_unit.acc_bits, "matrix_unit");
    get(m, "ii", d.matrix_unit.ii, "matrix_unit");
    get(m, "pipeline_depth", d.matrix_unit.pipeline_depth, "matrix_unit");
  }
  if (j.contains("vector_unit")) {
    const auto& v = j["vector_unit"];
    check_keys(v, "vector_unit", {"lanes", "exp_table_bits", "format", "shared"});
    get(v, "lanes", d.vector_unit.lanes, "vector_unit");
    get(v, "exp_table_bits", d.vector_unit.exp_table_bits, "vector_unit");
    if (v.contains("format")) d.vector_unit.format = enum_from(v["format"], "vector_unit.format", {VectorFormat::fp32, VectorFormat::fp16});
    get(v, "shared", d.vector_unit.shared, "vector_unit");
  }
  if (j.contains("tiling")) {
    const auto& t = j["tiling"];
    check_keys(t, "tiling", {"tile_rows", "tile_cols", "prefill_block"});
    get(t, "tile_rows", d.tiling.tile_rows, "tiling");
    get(t, "tile_cols", d.tiling.tile_cols, "tiling");
    get(t, "prefill_block", d.tiling.prefill_block, "tiling");
  }
  if (j.contains("buffers")) {
    const auto& b = j["buffers"];
    check_keys(b, "buffers", {"weight_bytes", "activation_bytes", "kv_bytes", "activations_in_uram"});
    get(b, "weight_bytes", d.buffers.weight_bytes, "buffers");
    get(b, "activation_bytes", d.buffers.activation_bytes, "buffers");
    get(b, "kv_bytes", d.buffers.kv_bytes, "buffers");
    get(b, "activations_in_uram", d.buffers.activations_in_uram, "buffers");
  }
  if (j.contains("memory")) {
    const auto& m = j["memory"];
    check_keys(m, "memory", {"weight_channels", "kv_channels", "activation_channels", "burst_bytes", "port_bits"});
    get(m, "weight_channels", d.memory.weight_channels, "memory");
    get(m, "kv_channels", d.memory.kv_channels, "memory");
    get(m, "activation_channels", d.memory.activation_channels, "memory");
    get(m, "burst_bytes", d.memory.burst_bytes, "memory");
    get(m, "port_bits", d.memory.port_bits, "memory");
  }
  if (j.contains("parallel")) {
    const auto& p = j["parallel"];
    check_keys(p, "parallel", {"cards", "split"});
    get(p, "cards", d.parallel.cards, "parallel");
    if (p.contains("split")) d.parallel.split = enum_from(p["split"], "parallel.split", {Split::none, Split::tensor, Split::pipeline});
  }
  get(j, "batch", d.batch, "design");
  get(j, "context", d.context, "design");
  get(j, "kv_bits", d.kv_bits, "design");
  get(j, "fuse_norm_matmul", d.fuse_norm_matmul, "design");
  get(j, "fuse_attention", d.fuse_attention, "design");
  get(j, "weight_sparsity", d.weight_sparsity, "design");
  if (j.contains("weights")) {
    const auto& w = j["weights"];
    check_keys(w, "weights", {"bits", "group_size", "sparse_n", "sparse_m"});
    get(w, "bits", d.weights.bits, "weights");
    get(w, "group_size", d.weights.group_size, "weights");
    get(w, "sparse_n", d.weights.sparse_n, "weights");
    get(w, "sparse_m", d.weights.sparse_m, "weights");
  }
  get(j, "compute_units", d.compute_units, "design");
  get(j, "host_ops", d.host_ops, "design");
  get(j, "host_launch_per_layer", d.host_launch_per_layer, "design");
}

Design load(const std::string& path) {
  const json j = fpgallm::read_json_file(path, "design file");
  Design d;
  try {
    from_json(j, d);
  } catch (const std::invalid_argument& e) {
    throw fpgallm::InputError(path, e.what());
  } catch (const json::exception& e) {
    throw fpgallm::InputError(path, e.what());
  }
  if (auto p = d.model_problems(); !p.empty()) throw fpgallm::InputError(path, p.front());
  // A design file states the hardware: a missing section would silently take defaults.
  for (const char* section : kRequiredSections)
    if (!j.contains(section))
      throw fpgallm::InputError(path, fmt::format("missing '{}' (a design file states clock_mhz, matrix_unit, "
                                                  "vector_unit, tiling, buffers and memory)",
                                                  section));
  return d;
}

void save(const Design& d, const std::string& path) {
  json j = d;
  fpgallm::write_file_atomic(path, j.dump(2) + "\n");
}

}  // namespace arch
