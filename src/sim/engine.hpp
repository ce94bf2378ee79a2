#pragma once
// sim::Engine: an event-driven simulator of an accelerator at tile granularity.
//
// The machine is a set of in-order units (matrix unit, vector unit), transfer ports
// (a group of off-chip memory channels, the PCIe host link, a card-to-card link) and
// on-chip buffers with a capacity. The program is a list of tasks, each on one unit, in
// the order that unit executes them (the instruction order), with dependencies on earlier
// tasks. A task starts when it is at the head of its unit, all its dependencies have
// finished, and the buffer space it claims is free; the space is given back when a later
// task (its consumer) finishes. That is double buffering: with room for two tiles the
// load of tile i+1 overlaps the compute of tile i; with room for one it cannot.
//
// Time is in cycles of the design clock (double, so that fractional bytes per cycle of a
// memory channel add up exactly). A transfer port issues its tasks in order without
// waiting for the previous one to finish (AXI allows outstanding requests); a transfer
// occupies the channels its bursts reach (all of the group once it holds a burst per
// channel; a smaller one is cut into shorter bursts so every channel carries a share),
// each for its even share of the bytes in whole beats / (bytes_per_cycle * efficiency)
// cycles, as data striped word by word over one port per channel lies; and the data of a request
// starts arriving `latency` cycles after issue, so latency is hidden while a stream
// keeps the channels busy and exposed after every stall.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace sim {

using Cycles = double;
using TaskId = std::int32_t;

enum class UnitKind { control, matrix, vector, memory, host_link, card_link };
const char* to_string(UnitKind k);
inline bool is_transfer(UnitKind k) { return k == UnitKind::memory || k == UnitKind::host_link || k == UnitKind::card_link; }

// What a unit spends its time on. A compute unit whose next task waits for a load is
// waiting on memory; for the result of another compute task, on a dependency; for
// buffer space, on a buffer. A transfer port is busy while a transfer is outstanding;
// when its next request waits for a dependency (nothing to fetch yet) it is idle.
enum class State { busy, memory, dependency, buffer, idle };
constexpr int kStates = 5;
const char* to_string(State s);

struct PortSpec {
  int channels = 1;
  double bytes_per_cycle = 1;  // per channel, peak, at the design clock
  double efficiency = 1;       // sustained / peak for long sequential bursts
  std::int64_t burst_bytes = 4096;
  Cycles latency = 0;          // request issue to first data
};

struct Unit {
  std::string name;
  UnitKind kind;
  int card = 0;
  PortSpec port;  // transfer ports only
};

struct Buffer {
  std::string name;
  int card = 0;
  std::int64_t capacity = 0;
};

// A named operation of the workload (a matmul, attention, a norm); tasks belong to one
// and reports are per operation and per layer.
struct Op {
  std::string name;
  int layer = -1;  // -1: outside the transformer blocks (embedding, classifier, host I/O)
  int card = 0;
};

struct Task {
  int op = 0;
  int unit = 0;
  Cycles cycles = 0;         // compute tasks
  std::int64_t bytes = 0;    // transfer tasks
  int claim_buffer = -1;     // buffer whose space this task claims before it starts
  std::int64_t claim_bytes = 0;
  int release_buffer = -1;   // buffer space given back when this task ends
  std::int64_t release_bytes = 0;
  std::int32_t first_dep = 0, n_deps = 0;  // into Engine::deps_
};

struct TaskTime {
  Cycles start = 0, end = 0;
  Cycles issue = 0;  // when the unit took it (a transfer's request; a compute task's start)
};

// Bytes a transfer port carried over time: bucket i holds what its channels moved during
// [i * width, (i + 1) * width) (each burst spread evenly over its own interval). The width
// doubles (pairs of buckets merged) whenever the run outgrows kMaxBuckets.
struct ByteTimeline {
  static constexpr std::size_t kMaxBuckets = 1024;
  Cycles width = 1;
  std::vector<double> bytes;
  void add(Cycles start, Cycles end, double n);
};

struct UnitStats {
  Cycles state[kStates] = {};
  std::int64_t bytes = 0;      // transfer ports
  std::vector<Cycles> channel_busy;  // transfer ports: data time per channel
  ByteTimeline timeline;             // transfer ports
  std::int64_t tasks = 0;
};

struct OpStats {
  Cycles start = 0, end = 0;
  std::vector<Cycles> unit_busy;  // per unit: compute cycles, or bytes / port rate for transfers
  std::int64_t tasks = 0;
};

struct Result {
  Cycles cycles = 0;  // end of the last task
  std::vector<UnitStats> units;
  std::vector<OpStats> ops;
  std::vector<TaskTime> times;  // per task
};

class Engine {
 public:
  int add_unit(std::string name, UnitKind kind, int card = 0);
  int add_port(std::string name, UnitKind kind, const PortSpec& spec, int card = 0);
  int add_buffer(std::string name, std::int64_t capacity, int card = 0);
  int add_op(std::string name, int layer = -1, int card = 0);

  TaskId compute(int op, int unit, Cycles cycles, std::initializer_list<TaskId> deps = {});
  TaskId compute(int op, int unit, Cycles cycles, const std::vector<TaskId>& deps);
  TaskId transfer(int op, int port, std::int64_t bytes, std::initializer_list<TaskId> deps = {});
  TaskId transfer(int op, int port, std::int64_t bytes, const std::vector<TaskId>& deps);
  // The task waits for `bytes` of free space in `buffer` before it starts and holds it.
  void claim(TaskId t, int buffer, std::int64_t bytes);
  // The space is given back when task t ends.
  void release(TaskId t, int buffer, std::int64_t bytes);

  // Runs the program to completion. Throws std::logic_error when the program cannot
  // finish (a claim larger than its buffer, or a cycle of waits), naming the task.
  Result run() const;

  const std::vector<Unit>& units() const { return units_; }
  const std::vector<Buffer>& buffers() const { return buffers_; }
  const std::vector<Op>& ops() const { return ops_; }
  const std::vector<Task>& tasks() const { return tasks_; }
  std::size_t task_count() const { return tasks_.size(); }
  // Sustained rate of a transfer port over all its channels, bytes per cycle.
  double port_rate(int unit) const;
  // Data time of `bytes` on a port whose channels all stream in parallel, no latency.
  Cycles transfer_cycles(int unit, std::int64_t bytes) const;

 private:
  TaskId add_task(int op, int unit, Cycles cycles, std::int64_t bytes, const TaskId* deps, std::size_t n);
  std::vector<Unit> units_;
  std::vector<Buffer> buffers_;
  std::vector<Op> ops_;
  std::vector<Task> tasks_;
  std::vector<TaskId> deps_;
};

}  // namespace sim
