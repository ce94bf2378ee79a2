#pragma once
// The job's ranks when fpgallm runs under mpirun (one rank = one card or one share of a
// sweep). MPI is initialized on first use, and only when the launcher's environment is
// present (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK); otherwise, and in a build without
// Open MPI, everything is single-process: rank 0 of 1, collectives copy.
//
// Every collective counts the bytes this rank sends. All-reduce and all-gather count what
// a ring algorithm sends (docs/accelerator.md, "Multi-card"): an all-reduce of B bytes
// sends 2 (N-1)/N B per rank, an all-gather of a B-byte whole (N-1)/N B (exact chunk
// sizes); point-to-point sends count their size. That is the traffic of the cards' links,
// not what Open MPI's shared-memory transport happens to copy.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dist {

int rank();  // 0 when not distributed
int size();  // 1 without MPI or when not launched by mpirun
bool distributed();  // size() > 1

// Every rank's bytes, in rank order.
std::vector<std::string> allgather(const std::string& mine);
void barrier();
// Prints `line` on this rank's stderr, then ends every rank (MPI_Abort); exit(code) when
// single-process. Ranks other than 0 wait 3 s first, so that a failure every rank sees is
// printed once, by rank 0.
[[noreturn]] void abort_job(const std::string& line, int code);

// Element-wise sums and maxima, identical on every rank.
void allreduce_sum(std::int32_t* data, std::size_t n);
// fp32 sums are added in rank order (rank 0 + rank 1 + ...), the same bits on every rank.
void allreduce_sum(float* data, std::size_t n);
void allreduce_max(float* data, std::size_t n);
float allreduce_max(float value);
// all[counts[0] values of rank 0, counts[1] of rank 1, ...]; `mine` holds counts[rank()].
void allgather(const float* mine, float* all, const std::vector<int>& counts);
void send(const void* data, std::size_t bytes, int to, int tag);
void recv(void* data, std::size_t bytes, int from, int tag);
void broadcast(void* data, std::size_t bytes, int root);

// Bytes this rank has sent through the functions above since start (or reset).
std::uint64_t bytes_sent();
void reset_bytes_sent();

// Bytes a ring all-reduce / all-gather of `bytes` sends from rank `r` of `n` (chunks of
// bytes/n, the remainder spread over the first chunks); the accounting used above.
std::uint64_t ring_allreduce_bytes(std::uint64_t bytes, int r, int n);
std::uint64_t ring_allgather_bytes(std::uint64_t bytes, int r, int n);

}  // namespace dist
