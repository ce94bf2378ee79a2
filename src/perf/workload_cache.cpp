#include "perf/workload_cache.hpp"

#include <algorithm>
#include <stdexcept>

#include "arch/units.hpp"

namespace perf {

namespace {

struct InstructionHash {
  std::size_t operator()(const arch::Instruction& i) const {
    std::size_t h = 0;
    for (std::int64_t v : {std::int64_t(i.op), std::int64_t(i.linear), std::int64_t(i.rows), std::int64_t(i.cols),
                           std::int64_t(i.pos), std::int64_t(i.context), i.weight_bytes})
      h = h * 1000003 + std::size_t(v);
    return h;
  }
};

ShapedProgram shaped(arch::Program program) {
  ShapedProgram s;
  std::unordered_map<arch::Instruction, int, InstructionHash> index;
  s.shape_of.reserve(program.instructions.size());
  for (std::size_t i = 0; i < program.instructions.size(); ++i) {
    arch::Instruction shape = program.instructions[i];
    shape.name.clear();
    shape.layer = 0;
    const auto [it, added] = index.try_emplace(shape, int(s.shapes.size()));
    if (added) {
      s.shapes.push_back(std::move(shape));
      s.first_of.push_back(int(i));
    }
    s.shape_of.push_back(it->second);
  }
  s.program = std::move(program);
  return s;
}

Step step_of(std::vector<Transfer> transfers) {
  Step s;
  s.transfers = std::move(transfers);
  for (const Transfer& t : s.transfers) {
    if (t.linear.empty()) {
      s.linear_of.push_back(-1);
      continue;
    }
    const auto it = std::find(s.linears.begin(), s.linears.end(), t.linear);
    s.linear_of.push_back(int(it - s.linears.begin()));
    if (it == s.linears.end()) s.linears.push_back(t.linear);
  }
  return s;
}

// Per instruction of `p`: the index in step.linears of its name (-1: none).
std::vector<int> linear_slots(const arch::Program& p, const Step& step) {
  std::unordered_map<std::string, int> index;
  for (std::size_t k = 0; k < step.linears.size(); ++k) index.emplace(step.linears[k], int(k));
  std::vector<int> out;
  out.reserve(p.instructions.size());
  for (const auto& in : p.instructions) {
    const auto it = index.find(in.name);
    out.push_back(it == index.end() ? -1 : it->second);
  }
  return out;
}

}  // namespace

std::size_t WorkloadCache::ProgramKeyHash::operator()(const ProgramKey& k) const {
  std::size_t h = 0;
  for (int v : {int(k.stage), k.pos, k.tokens, k.fields.tile_rows, k.fields.tile_cols, k.fields.weight_bits,
                k.fields.kv_bits})
    h = h * 1000003 + std::size_t(v);
  return h;
}

std::vector<ProgramRun> phase_runs(WorkloadCache& cache, const graph::Workload& wl, int context, const arch::Design& d,
                                   bool dynamic_scale) {
  const graph::Precision& pr = wl.precision;
  const arch::PrecisionFn precision = [&pr](int layer, model::Linear which) {
    return arch::LinearPrecision{pr.bits_for(model::linear_name(layer, which)), pr.group_size, pr.static_act};
  };
  const arch::ProgramFields fields = arch::program_fields(d);
  std::vector<WorkloadCache::ProgramKey> keys;
  if (wl.shape.phase == graph::Phase::decode) {
    keys.push_back({arch::Stage::decode, context - 1, 1, fields});
  } else {
    const int block = arch::block_tokens(d);  // the programs the backend and the emitted top's prompt call run
    for (int pos = 0; pos < wl.shape.prompt; pos += block)
      keys.push_back({arch::Stage::prefill, pos, std::min(block, wl.shape.prompt - pos), fields});
  }
  std::vector<ProgramRun> runs;
  const std::lock_guard<std::mutex> lock(cache.mutex);
  for (const auto& k : keys) {
    auto it = cache.programs.find(k);
    if (it == cache.programs.end()) {
      WorkloadCache::Program p;
      try {
        p.shaped = shaped(arch::build_program(wl.config, d, k.stage, k.pos, k.tokens, precision));
      } catch (const std::invalid_argument&) {
      }
      it = cache.programs.emplace(k, std::move(p)).first;
    }
    WorkloadCache::Program& p = it->second;
    if (!p.shaped) return {};
    const WorkloadCache::StepKey sk{int(k.stage), k.tokens, d.parallel.cards, int(d.parallel.split), dynamic_scale};
    auto st = cache.steps.find(sk);
    if (st == cache.steps.end())
      st = cache.steps.emplace(sk, step_of(card_transfers(wl.config, d.parallel, k.tokens, k.tokens, dynamic_scale))).first;
    const Step* step = &st->second;
    auto slots = p.linear_of.find(step);
    if (slots == p.linear_of.end()) slots = p.linear_of.emplace(step, linear_slots(p.shaped->program, *step)).first;
    runs.push_back({&*p.shaped, step, &slots->second});
  }
  return runs;
}

double model_weight_bytes(WorkloadCache& cache, const graph::Workload& decode) {
  const std::lock_guard<std::mutex> lock(cache.mutex);
  if (!cache.decode_weight_bytes) cache.decode_weight_bytes = decode.model_weight_bytes();
  return *cache.decode_weight_bytes;
}

}  // namespace perf
