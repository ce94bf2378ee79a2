#include "mpi/dist.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#ifdef FPGALLM_WITH_MPI
#include <mpi.h>
#endif

namespace dist {

namespace {

std::uint64_t g_sent = 0;
constexpr std::chrono::seconds kNonRootAbortDelay{3};

std::uint64_t chunk(std::uint64_t bytes, int i, int n) {
  return bytes / std::uint64_t(n) + (std::uint64_t(i) < bytes % std::uint64_t(n) ? 1 : 0);
}

#ifdef FPGALLM_WITH_MPI
struct World {
  int rank = 0;
  int size = 1;
  bool mpi = false;
};

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

const World& world() {
  static const World w = [] {
    World r;
    if (!launched_by_mpirun()) return r;
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) MPI_Init(nullptr, nullptr);
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.size);
    r.mpi = true;
    std::atexit(finalize_at_exit);
    return r;
  }();
  return w;
}

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI ") + what + " failed");
}

int as_int(std::size_t n) {
  if (n > std::size_t(1) << 30) throw std::length_error("MPI message over 1 GiB");
  return int(n);
}
#else
struct World {
  int rank = 0;
  int size = 1;
  bool mpi = false;
};
const World& world() {
  static const World w;
  return w;
}
#endif

}  // namespace

int rank() { return world().rank; }
int size() { return world().size; }
bool distributed() { return world().size > 1; }

std::uint64_t ring_allreduce_bytes(std::uint64_t bytes, int r, int n) {
  if (n <= 1) return 0;
  // Reduce-scatter sends every chunk but (r+1) mod n; the all-gather every chunk but (r+2).
  return 2 * bytes - chunk(bytes, (r + 1) % n, n) - chunk(bytes, (r + 2) % n, n);
}

std::uint64_t ring_allgather_bytes(std::uint64_t bytes, int r, int n) {
  if (n <= 1) return 0;
  return bytes - chunk(bytes, (r + 1) % n, n);
}

std::uint64_t bytes_sent() { return g_sent; }
void reset_bytes_sent() { g_sent = 0; }

void abort_job(const std::string& line, int code) {
  std::fflush(stdout);
#ifdef FPGALLM_WITH_MPI
  // A check that every rank makes fails on every rank: rank 0 prints its line and its
  // MPI_Abort ends the others while they wait here, so the job prints the line once. A rank
  // that fails alone prints after the wait.
  if (world().mpi && world().rank != 0) std::this_thread::sleep_for(kNonRootAbortDelay);
#endif
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
#ifdef FPGALLM_WITH_MPI
  if (world().mpi) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

std::vector<std::string> allgather(const std::string& mine) {
  const World& w = world();
  if (w.size == 1) return {mine};
#ifdef FPGALLM_WITH_MPI
  int len = as_int(mine.size());
  std::vector<int> lens(std::size_t(w.size)), displs(std::size_t(w.size));
  check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD), "allgather");
  std::size_t total = 0;
  for (int i = 0; i < w.size; ++i) displs[std::size_t(i)] = as_int(total), total += std::size_t(lens[std::size_t(i)]);
  std::string all(total, '\0');
  check(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, MPI_COMM_WORLD),
        "allgatherv");
  g_sent += std::uint64_t(total - mine.size());
  std::vector<std::string> out;
  for (int i = 0; i < w.size; ++i)
    out.push_back(all.substr(std::size_t(displs[std::size_t(i)]), std::size_t(lens[std::size_t(i)])));
  return out;
#else
  return {mine};
#endif
}

void barrier() {
#ifdef FPGALLM_WITH_MPI
  if (world().size > 1) check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
#endif
}

void allreduce_sum(std::int32_t* data, std::size_t n) {
  const World& w = world();
  if (w.size == 1) return;
#ifdef FPGALLM_WITH_MPI
  check(MPI_Allreduce(MPI_IN_PLACE, data, as_int(n), MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD), "allreduce");
  g_sent += ring_allreduce_bytes(n * sizeof(std::int32_t), w.rank, w.size);
#else
  (void)data, (void)n;
#endif
}

void allreduce_sum(float* data, std::size_t n) {
  const World& w = world();
  if (w.size == 1) return;
#ifdef FPGALLM_WITH_MPI
  // MPI_SUM on floats may associate differently per rank; gather and add in rank order.
  std::vector<float> all(n * std::size_t(w.size));
  check(MPI_Allgather(data, as_int(n), MPI_FLOAT, all.data(), as_int(n), MPI_FLOAT, MPI_COMM_WORLD), "allgather");
  for (std::size_t i = 0; i < n; ++i) {
    float s = all[i];
    for (int r = 1; r < w.size; ++r) s += all[std::size_t(r) * n + i];
    data[i] = s;
  }
  g_sent += ring_allreduce_bytes(n * sizeof(float), w.rank, w.size);
#else
  (void)data, (void)n;
#endif
}

void allreduce_max(float* data, std::size_t n) {
  const World& w = world();
  if (w.size == 1) return;
#ifdef FPGALLM_WITH_MPI
  check(MPI_Allreduce(MPI_IN_PLACE, data, as_int(n), MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD), "allreduce");
  g_sent += ring_allreduce_bytes(n * sizeof(float), w.rank, w.size);
#else
  (void)data, (void)n;
#endif
}

float allreduce_max(float value) {
  allreduce_max(&value, 1);
  return value;
}

void allgather(const float* mine, float* all, const std::vector<int>& counts) {
  const World& w = world();
  if (int(counts.size()) != w.size) throw std::invalid_argument("allgather: one count per rank");
  if (w.size == 1) {
    std::memmove(all, mine, sizeof(float) * std::size_t(counts[0]));
    return;
  }
#ifdef FPGALLM_WITH_MPI
  std::vector<int> displs(counts.size());
  int total = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) displs[i] = total, total += counts[i];
  check(MPI_Allgatherv(mine, counts[std::size_t(w.rank)], MPI_FLOAT, all, counts.data(), displs.data(), MPI_FLOAT,
                       MPI_COMM_WORLD),
        "allgatherv");
  // Ring: this rank forwards every block but its successor's.
  g_sent += sizeof(float) * std::uint64_t(total - counts[std::size_t((w.rank + 1) % w.size)]);
#endif
}

void send(const void* data, std::size_t bytes, int to, int tag) {
#ifdef FPGALLM_WITH_MPI
  if (world().size > 1) {
    check(MPI_Send(data, as_int(bytes), MPI_BYTE, to, tag, MPI_COMM_WORLD), "send");
    g_sent += bytes;
    return;
  }
#endif
  (void)data, (void)bytes, (void)to, (void)tag;
  throw std::logic_error("dist::send in a single-process run");
}

void recv(void* data, std::size_t bytes, int from, int tag) {
#ifdef FPGALLM_WITH_MPI
  if (world().size > 1) {
    check(MPI_Recv(data, as_int(bytes), MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "recv");
    return;
  }
#endif
  (void)data, (void)bytes, (void)from, (void)tag;
  throw std::logic_error("dist::recv in a single-process run");
}

void broadcast(void* data, std::size_t bytes, int root) {
  const World& w = world();
  if (w.size == 1) return;
#ifdef FPGALLM_WITH_MPI
  check(MPI_Bcast(data, as_int(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "bcast");
  // A ring (pipelined chain) broadcast: every rank but the last in the chain forwards it.
  if ((w.rank - root + w.size) % w.size != w.size - 1) g_sent += bytes;
#else
  (void)data, (void)bytes, (void)root;
#endif
}

}  // namespace dist
