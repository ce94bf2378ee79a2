#include "sim/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <queue>
#include <stdexcept>

namespace sim {

const char* to_string(UnitKind k) {
  switch (k) {
    case UnitKind::control: return "control";
    case UnitKind::matrix: return "matrix";
    case UnitKind::vector: return "vector";
    case UnitKind::memory: return "memory";
    case UnitKind::host_link: return "host_link";
    case UnitKind::card_link: return "card_link";
  }
  return "?";
}

const char* to_string(State s) {
  switch (s) {
    case State::busy: return "busy";
    case State::memory: return "wait_memory";
    case State::dependency: return "wait_dependency";
    case State::buffer: return "wait_buffer";
    case State::idle: return "idle";
  }
  return "?";
}

int Engine::add_unit(std::string name, UnitKind kind, int card) {
  if (is_transfer(kind)) throw std::logic_error("sim: add_unit(" + name + "): transfer units are added with add_port");
  units_.push_back({std::move(name), kind, card, {}});
  return static_cast<int>(units_.size()) - 1;
}

int Engine::add_port(std::string name, UnitKind kind, const PortSpec& spec, int card) {
  if (!is_transfer(kind)) throw std::logic_error("sim: add_port(" + name + "): not a transfer kind");
  if (spec.channels < 1 || !(spec.bytes_per_cycle > 0) || !(spec.efficiency > 0) || spec.efficiency > 1 ||
      spec.burst_bytes < 1 || spec.latency < 0)
    throw std::logic_error("sim: add_port(" + name + "): channels, rate, efficiency, burst or latency out of range");
  units_.push_back({std::move(name), kind, card, spec});
  return static_cast<int>(units_.size()) - 1;
}

int Engine::add_buffer(std::string name, std::int64_t capacity, int card) {
  if (capacity < 0) throw std::logic_error("sim: add_buffer(" + name + "): negative capacity");
  buffers_.push_back({std::move(name), card, capacity});
  return static_cast<int>(buffers_.size()) - 1;
}

int Engine::add_op(std::string name, int layer, int card) {
  ops_.push_back({std::move(name), layer, card});
  return static_cast<int>(ops_.size()) - 1;
}

TaskId Engine::add_task(int op, int unit, Cycles cycles, std::int64_t bytes, const TaskId* deps, std::size_t n) {
  if (op < 0 || op >= static_cast<int>(ops_.size())) throw std::logic_error("sim: task of an unknown op");
  if (unit < 0 || unit >= static_cast<int>(units_.size())) throw std::logic_error("sim: task on an unknown unit");
  const auto id = static_cast<TaskId>(tasks_.size());
  Task t;
  t.op = op;
  t.unit = unit;
  t.cycles = cycles;
  t.bytes = bytes;
  t.first_dep = static_cast<std::int32_t>(deps_.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (deps[i] < 0) continue;  // "no dependency" placeholder
    if (deps[i] >= id) throw std::logic_error("sim: a task may depend only on earlier tasks");
    deps_.push_back(deps[i]);
  }
  t.n_deps = static_cast<std::int32_t>(deps_.size()) - t.first_dep;
  tasks_.push_back(t);
  return id;
}

TaskId Engine::compute(int op, int unit, Cycles cycles, std::initializer_list<TaskId> deps) {
  return compute(op, unit, cycles, std::vector<TaskId>(deps));
}
TaskId Engine::compute(int op, int unit, Cycles cycles, const std::vector<TaskId>& deps) {
  if (is_transfer(units_.at(unit).kind)) throw std::logic_error("sim: compute task on transfer unit " + units_[unit].name);
  if (!(cycles >= 0)) throw std::logic_error("sim: negative compute cycles");
  return add_task(op, unit, cycles, 0, deps.data(), deps.size());
}
TaskId Engine::transfer(int op, int port, std::int64_t bytes, std::initializer_list<TaskId> deps) {
  return transfer(op, port, bytes, std::vector<TaskId>(deps));
}
TaskId Engine::transfer(int op, int port, std::int64_t bytes, const std::vector<TaskId>& deps) {
  if (!is_transfer(units_.at(port).kind)) throw std::logic_error("sim: transfer on compute unit " + units_[port].name);
  if (bytes < 0) throw std::logic_error("sim: negative transfer size");
  return add_task(op, port, 0, bytes, deps.data(), deps.size());
}

void Engine::claim(TaskId t, int buffer, std::int64_t bytes) {
  auto& task = tasks_.at(t);
  if (buffer < 0 || buffer >= static_cast<int>(buffers_.size())) throw std::logic_error("sim: claim on an unknown buffer");
  if (task.claim_buffer >= 0 && task.claim_buffer != buffer) throw std::logic_error("sim: a task claims one buffer");
  task.claim_buffer = buffer;
  task.claim_bytes += bytes;
}

void Engine::release(TaskId t, int buffer, std::int64_t bytes) {
  auto& task = tasks_.at(t);
  if (buffer < 0 || buffer >= static_cast<int>(buffers_.size())) throw std::logic_error("sim: release of an unknown buffer");
  if (task.release_buffer >= 0 && task.release_buffer != buffer) throw std::logic_error("sim: a task releases one buffer");
  task.release_buffer = buffer;
  task.release_bytes += bytes;
}

double Engine::port_rate(int unit) const {
  const auto& p = units_.at(unit).port;
  return p.channels * p.bytes_per_cycle * p.efficiency;
}

Cycles Engine::transfer_cycles(int unit, std::int64_t bytes) const { return static_cast<double>(bytes) / port_rate(unit); }

void ByteTimeline::add(Cycles start, Cycles end, double n) {
  if (!(n > 0)) return;
  while (end > width * kMaxBuckets) {
    std::vector<double> merged((bytes.size() + 1) / 2, 0.0);
    for (std::size_t i = 0; i < bytes.size(); ++i) merged[i / 2] += bytes[i];
    bytes = std::move(merged);
    width *= 2;
  }
  const auto last = static_cast<std::size_t>(std::max(0.0, std::ceil(end / width) - 1));
  if (bytes.size() <= last) bytes.resize(last + 1, 0.0);
  if (!(end > start)) {
    bytes[last] += n;
    return;
  }
  for (auto i = static_cast<std::size_t>(start / width); i <= last; ++i) {
    const Cycles lo = std::max(start, i * width), hi = std::min(end, (i + 1) * width);
    if (hi > lo) bytes[i] += n * (hi - lo) / (end - start);
  }
}

namespace {

struct Event {
  Cycles time;
  std::int64_t seq;
  TaskId task;
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

struct UnitRun {
  std::vector<TaskId> queue;
  std::size_t head = 0;
  TaskId running = -1;       // compute units
  int in_flight = 0;         // transfer ports
  std::vector<Cycles> channel_free;
  std::int64_t next_channel = 0;
  State state = State::idle;
  Cycles since = 0;
  bool waiting_buffer = false;
};

}  // namespace

Result Engine::run() const {
  const std::size_t nt = tasks_.size(), nu = units_.size();
  Result r;
  r.units.resize(nu);
  r.ops.resize(ops_.size());
  for (auto& o : r.ops) {
    o.unit_busy.assign(nu, 0);
    o.start = INFINITY;
    o.end = 0;
  }
  r.times.assign(nt, {});

  std::vector<UnitRun> run(nu);
  for (std::size_t u = 0; u < nu; ++u) {
    if (is_transfer(units_[u].kind)) {
      run[u].channel_free.assign(units_[u].port.channels, 0);
      r.units[u].channel_busy.assign(units_[u].port.channels, 0);
    }
  }
  for (std::size_t t = 0; t < nt; ++t) run[tasks_[t].unit].queue.push_back(static_cast<TaskId>(t));

  // Dependents in compressed rows, and the count of unfinished dependencies per task.
  std::vector<std::int32_t> pending(nt, 0), row(nt + 1, 0);
  for (std::size_t t = 0; t < nt; ++t) {
    pending[t] = tasks_[t].n_deps;
    for (std::int32_t i = 0; i < tasks_[t].n_deps; ++i) ++row[deps_[tasks_[t].first_dep + i] + 1];
  }
  for (std::size_t t = 0; t < nt; ++t) row[t + 1] += row[t];
  std::vector<TaskId> dependents(row[nt]);
  {
    std::vector<std::int32_t> fill(row.begin(), row.end() - 1);
    for (std::size_t t = 0; t < nt; ++t)
      for (std::int32_t i = 0; i < tasks_[t].n_deps; ++i) dependents[fill[deps_[tasks_[t].first_dep + i]]++] = static_cast<TaskId>(t);
  }
  std::vector<char> done(nt, 0);
  std::vector<std::int64_t> free_bytes(buffers_.size());
  for (std::size_t b = 0; b < buffers_.size(); ++b) free_bytes[b] = buffers_[b].capacity;
  for (std::size_t t = 0; t < nt; ++t) {
    const auto& k = tasks_[t];
    if (k.claim_buffer >= 0 && k.claim_bytes > buffers_[k.claim_buffer].capacity)
      throw std::logic_error(fmt::format("sim: task {} of '{}' claims {} bytes of buffer '{}' which holds {}", t,
                                         ops_[k.op].name, k.claim_bytes, buffers_[k.claim_buffer].name,
                                         buffers_[k.claim_buffer].capacity));
  }
  std::vector<std::vector<int>> buffer_waiters(buffers_.size());

  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  std::int64_t seq = 0;

  auto set_state = [&](int u, State s, Cycles now) {
    auto& ur = run[u];
    r.units[u].state[static_cast<int>(ur.state)] += now - ur.since;
    ur.state = s;
    ur.since = now;
  };
  auto blocked_reason = [&](TaskId h) {
    const auto& k = tasks_[h];
    for (std::int32_t i = 0; i < k.n_deps; ++i) {
      const TaskId d = deps_[k.first_dep + i];
      if (!done[d] && is_transfer(units_[tasks_[d].unit].kind)) return State::memory;
    }
    return State::dependency;
  };
  auto can_claim = [&](const Task& k) { return k.claim_buffer < 0 || free_bytes[k.claim_buffer] >= k.claim_bytes; };
  auto account_start = [&](TaskId h, Cycles issue, Cycles start, Cycles end, Cycles busy) {
    const auto& k = tasks_[h];
    r.times[h] = {start, end, issue};
    auto& o = r.ops[k.op];
    o.start = std::min(o.start, start);
    o.end = std::max(o.end, end);
    o.unit_busy[k.unit] += busy;
    ++o.tasks;
    ++r.units[k.unit].tasks;
    if (k.claim_buffer >= 0) free_bytes[k.claim_buffer] -= k.claim_bytes;
    events.push({end, seq++, h});
  };

  // Starts what unit u can start at time `now` and records what it is doing.
  auto advance = [&](int u, Cycles now) {
    auto& ur = run[u];
    const Unit& unit = units_[u];
    if (!is_transfer(unit.kind)) {
      if (ur.running >= 0) return;
      if (ur.head == ur.queue.size()) return set_state(u, State::idle, now);
      const TaskId h = ur.queue[ur.head];
      const Task& k = tasks_[h];
      if (pending[h] > 0) return set_state(u, blocked_reason(h), now);
      if (!can_claim(k)) {
        if (!ur.waiting_buffer) buffer_waiters[k.claim_buffer].push_back(u);
        ur.waiting_buffer = true;
        return set_state(u, State::buffer, now);
      }
      ++ur.head;
      ur.running = h;
      account_start(h, now, now, now + k.cycles, k.cycles);
      return set_state(u, State::busy, now);
    }
    // Transfer port: issue every ready request in order; each queues behind earlier data.
    bool blocked_on_buffer = false;
    const PortSpec& p = unit.port;
    const double rate = p.bytes_per_cycle * p.efficiency;
    while (ur.head < ur.queue.size()) {
      const TaskId h = ur.queue[ur.head];
      const Task& k = tasks_[h];
      if (pending[h] > 0) break;
      if (!can_claim(k)) {
        if (!ur.waiting_buffer) buffer_waiters[k.claim_buffer].push_back(u);
        ur.waiting_buffer = true;
        blocked_on_buffer = true;
        break;
      }
      ++ur.head;
      ++ur.in_flight;
      // A transfer too small to give every channel a full burst is cut into shorter
      // bursts (whole 64-byte beats) so that all channels of the group carry a share.
      const std::int64_t n = p.channels;
      std::int64_t burst = p.burst_bytes;
      if (k.bytes < burst * n) burst = std::min(burst, std::max<std::int64_t>(64, (k.bytes + 64 * n - 1) / (64 * n) * 64));
      const std::int64_t full = k.bytes / burst, rest = k.bytes % burst;
      const std::int64_t bursts = full + (rest > 0);
      Cycles first = INFINITY, last = now;
      const Cycles arrive = now + p.latency;
      // The channels the bursts reach share the transfer evenly, in whole beats (the extra
      // beats on the channels after the last one that took extra): the data is striped word
      // by word over the bundles, so no channel carries a whole extra burst per transfer.
      const std::int64_t used = std::min<std::int64_t>(n, bursts), beats = (k.bytes + 63) / 64;
      for (std::int64_t j = 0; j < used; ++j) {
        const std::int64_t share = beats / used + (j < beats % used ? 1 : 0);
        const std::int64_t bytes = j == used - 1 ? k.bytes - 64 * (beats - share) : 64 * share;
        const auto c = static_cast<std::size_t>((ur.next_channel + j) % n);
        const Cycles start = std::max(arrive, ur.channel_free[c]);
        const Cycles busy = static_cast<double>(bytes) / rate;
        ur.channel_free[c] = start + busy;
        r.units[u].channel_busy[c] += busy;
        r.units[u].timeline.add(start, start + busy, static_cast<double>(bytes));
        first = std::min(first, start);
        last = std::max(last, start + busy);
      }
      if (used > 0) ur.next_channel = (ur.next_channel + beats % used) % n;
      if (bursts == 0) first = last = arrive;
      r.units[u].bytes += k.bytes;
      account_start(h, now, first, last, static_cast<double>(k.bytes) / (rate * n));
    }
    if (ur.in_flight > 0) return set_state(u, State::busy, now);
    set_state(u, blocked_on_buffer ? State::buffer : State::idle, now);
  };

  for (std::size_t u = 0; u < nu; ++u) advance(static_cast<int>(u), 0);
  std::vector<int> poke;
  Cycles now = 0;
  while (!events.empty()) {
    const Event e = events.top();
    events.pop();
    now = e.time;
    const Task& k = tasks_[e.task];
    done[e.task] = 1;
    poke.clear();
    auto& ur = run[k.unit];
    if (is_transfer(units_[k.unit].kind))
      --ur.in_flight;
    else
      ur.running = -1;
    poke.push_back(k.unit);
    if (k.release_buffer >= 0) {
      free_bytes[k.release_buffer] += k.release_bytes;
      for (int w : buffer_waiters[k.release_buffer]) {
        run[w].waiting_buffer = false;
        poke.push_back(w);
      }
      buffer_waiters[k.release_buffer].clear();
    }
    for (std::int32_t i = row[e.task]; i < row[e.task + 1]; ++i) {
      const TaskId d = dependents[i];
      --pending[d];
      poke.push_back(tasks_[d].unit);
    }
    std::sort(poke.begin(), poke.end());
    poke.erase(std::unique(poke.begin(), poke.end()), poke.end());
    for (int u : poke) advance(u, now);
  }
  r.cycles = now;
  for (std::size_t u = 0; u < nu; ++u) {
    if (run[u].head != run[u].queue.size()) {
      const TaskId h = run[u].queue[run[u].head];
      throw std::logic_error(fmt::format("sim: deadlock: unit '{}' cannot start task {} of '{}' ({})", units_[u].name, h,
                                         ops_[tasks_[h].op].name, to_string(run[u].state)));
    }
    set_state(static_cast<int>(u), State::idle, now);
  }
  for (auto& o : r.ops)
    if (o.tasks == 0) o.start = 0;
  return r;
}

}  // namespace sim
