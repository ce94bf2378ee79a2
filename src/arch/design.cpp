#include "arch/design.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "util/error.hpp"
#include "util/paths.hpp"
#include "util/json_file.hpp"

namespace arch {

using nlohmann::json;

const char* to_string(MatrixUnitImpl i) { return i == MatrixUnitImpl::hls ? "hls" : "rtl"; }
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

bool pow2(long v) { return v > 0 && (v & (v - 1)) == 0; }

template <typename E>
E enum_from(const json& j, const char* field, std::initializer_list<E> values) {
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

template <typename T>
void get(const json& j, const char* key, T& out, const char* where) {
  if (!j.contains(key)) return;
  try {
    out = j.at(key).get<T>();
  } catch (const json::exception&) {
    throw std::invalid_argument(fmt::format("{}.{}: wrong type ({})", where, key, j.at(key).type_name()));
  }
}

}  // namespace

std::vector<std::string> Design::problems() const {
  std::vector<std::string> p;
  auto need = [&](bool ok, std::string msg) {
    if (!ok) p.push_back(std::move(msg));
  };
  const auto& mu = matrix_unit;
  need(clock_mhz >= 10 && clock_mhz <= 1000, fmt::format("clock_mhz: {} outside 10..1000", clock_mhz));
  need(pow2(mu.rows) && mu.rows <= 256, fmt::format("matrix_unit.rows: {} must be a power of two in 1..256", mu.rows));
  need(pow2(mu.cols) && mu.cols <= 256, fmt::format("matrix_unit.cols: {} must be a power of two in 1..256", mu.cols));
  need(mu.weight_bits == 8 || mu.weight_bits == 4, fmt::format("matrix_unit.weight_bits: {} (the kernels implement 8 and 4)", mu.weight_bits));
  need(mu.act_bits == 8, fmt::format("matrix_unit.act_bits: {} (the kernels implement 8)", mu.act_bits));
  need(mu.acc_bits == 32, fmt::format("matrix_unit.acc_bits: {} (the kernels implement 32)", mu.acc_bits));
  need(mu.ii >= 1 && mu.ii <= 16, fmt::format("matrix_unit.ii: {} outside 1..16", mu.ii));
  need(mu.pipeline_depth >= 1 && mu.pipeline_depth <= 256, fmt::format("matrix_unit.pipeline_depth: {} outside 1..256", mu.pipeline_depth));
  need(pow2(vector_unit.lanes) && vector_unit.lanes <= 256, fmt::format("vector_unit.lanes: {} must be a power of two in 1..256", vector_unit.lanes));
  need(vector_unit.exp_table_bits >= 4 && vector_unit.exp_table_bits <= 12, fmt::format("vector_unit.exp_table_bits: {} outside 4..12", vector_unit.exp_table_bits));
  if (!p.empty()) return p;  // the checks below divide by the unit's shape
  need(tiling.tile_rows >= mu.rows && tiling.tile_rows % mu.rows == 0,
       fmt::format("tiling.tile_rows: {} must be a positive multiple of matrix_unit.rows ({})", tiling.tile_rows, mu.rows));
  need(tiling.tile_cols >= mu.cols && tiling.tile_cols % mu.cols == 0,
       fmt::format("tiling.tile_cols: {} must be a positive multiple of matrix_unit.cols ({})", tiling.tile_cols, mu.cols));
  need(tiling.tile_rows <= 65536 && tiling.tile_cols <= 65536, "tiling: tiles larger than 65536");
  need(tiling.prefill_block >= 1 && tiling.prefill_block <= 4096, fmt::format("tiling.prefill_block: {} outside 1..4096", tiling.prefill_block));
  const std::int64_t tile_bytes = std::int64_t(tiling.tile_rows) * tiling.tile_cols * mu.weight_bits / 8;
  need(buffers.weight_bytes >= tile_bytes,
       fmt::format("buffers.weight_bytes: {} cannot hold one {}x{} weight tile ({} bytes)", buffers.weight_bytes,
                   tiling.tile_rows, tiling.tile_cols, tile_bytes));
  need(buffers.activation_bytes > 0, "buffers.activation_bytes: must be positive");
  need(buffers.kv_bytes >= 0, "buffers.kv_bytes: must not be negative");
  need(memory.weight_channels >= 1 && memory.weight_channels <= 64, fmt::format("memory.weight_channels: {} outside 1..64", memory.weight_channels));
  need(memory.kv_channels >= 0 && memory.kv_channels <= 64, fmt::format("memory.kv_channels: {} outside 0..64", memory.kv_channels));
  need(memory.activation_channels >= 0 && memory.activation_channels <= 64, fmt::format("memory.activation_channels: {} outside 0..64", memory.activation_channels));
  need(pow2(memory.burst_bytes) && memory.burst_bytes >= 64 && memory.burst_bytes <= 65536,
       fmt::format("memory.burst_bytes: {} must be a power of two in 64..65536", memory.burst_bytes));
  need(parallel.cards >= 1 && parallel.cards <= 64, fmt::format("parallel.cards: {} outside 1..64", parallel.cards));
  need((parallel.cards == 1) == (parallel.split == Split::none),
       fmt::format("parallel.split: '{}' with {} card(s) (use 'none' for one card, tensor or pipeline for more)",
                   to_string(parallel.split), parallel.cards));
  need(batch >= 1 && batch <= 4096, fmt::format("batch: {} outside 1..4096", batch));
  need(context >= 1 && context <= (1 << 20), fmt::format("context: {} outside 1..1048576", context));
  need(kv_bits == 8 || kv_bits == 16 || kv_bits == 32,
       fmt::format("kv_bits: {} (8 = int8 with a scale per position and head, 16 = fp16, 32 = fp32)", kv_bits));
  need(weight_sparsity >= 0 && weight_sparsity < 1, fmt::format("weight_sparsity: {} outside [0, 1)", weight_sparsity));
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
           {"vector_unit", {{"lanes", d.vector_unit.lanes}, {"exp_table_bits", d.vector_unit.exp_table_bits}}},
           {"tiling", {{"tile_rows", d.tiling.tile_rows}, {"tile_cols", d.tiling.tile_cols},
                       {"prefill_block", d.tiling.prefill_block}}},
           {"buffers", {{"weight_bytes", d.buffers.weight_bytes}, {"activation_bytes", d.buffers.activation_bytes},
                        {"kv_bytes", d.buffers.kv_bytes}}},
           {"memory", {{"weight_channels", d.memory.weight_channels}, {"kv_channels", d.memory.kv_channels},
                       {"activation_channels", d.memory.activation_channels}, {"burst_bytes", d.memory.burst_bytes}}},
           {"parallel", {{"cards", d.parallel.cards}, {"split", to_string(d.parallel.split)}}},
           {"batch", d.batch},
           {"context", d.context},
           {"kv_bits", d.kv_bits},
           {"fuse_norm_matmul", d.fuse_norm_matmul},
           {"fuse_attention", d.fuse_attention},
           {"weight_sparsity", d.weight_sparsity}};
}

void from_json(const json& j, Design& d) {
  check_keys(j, "design", {"name", "device", "style", "phase", "clock_mhz", "matrix_unit", "vector_unit", "tiling",
                           "buffers", "memory", "parallel", "batch", "context", "kv_bits", "fuse_norm_matmul",
                           "fuse_attention", "weight_sparsity", "predicted", "assumptions", "model", "quant"});
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
    check_keys(v, "vector_unit", {"lanes", "exp_table_bits"});
    get(v, "lanes", d.vector_unit.lanes, "vector_unit");
    get(v, "exp_table_bits", d.vector_unit.exp_table_bits, "vector_unit");
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
    check_keys(b, "buffers", {"weight_bytes", "activation_bytes", "kv_bytes"});
    get(b, "weight_bytes", d.buffers.weight_bytes, "buffers");
    get(b, "activation_bytes", d.buffers.activation_bytes, "buffers");
    get(b, "kv_bytes", d.buffers.kv_bytes, "buffers");
  }
  if (j.contains("memory")) {
    const auto& m = j["memory"];
    check_keys(m, "memory", {"weight_channels", "kv_channels", "activation_channels", "burst_bytes"});
    get(m, "weight_channels", d.memory.weight_channels, "memory");
    get(m, "kv_channels", d.memory.kv_channels, "memory");
    get(m, "activation_channels", d.memory.activation_channels, "memory");
    get(m, "burst_bytes", d.memory.burst_bytes, "memory");
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
}

Design load(const std::string& path) {
  const json j = fpgallm::read_json_file(path, "design file");
  Design d;
  try {
    from_json(j, d);
  } catch (const std::invalid_argument& e) {
    throw fpgallm::InputError(path, e.what());
  }
  if (auto p = d.problems(); !p.empty()) throw fpgallm::InputError(path, p.front());
  return d;
}

void save(const Design& d, const std::string& path) {
  json j = d;
  fpgallm::write_file_atomic(path, j.dump(2) + "\n");
}

}  // namespace arch
