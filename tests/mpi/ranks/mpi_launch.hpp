#pragma once
// Launching commands under mpiexec from the multi-rank tests: the environment Open MPI
// needs in CI containers (root, oversubscription of 2 cores, no single-copy mechanism).
#include <unistd.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "testing.hpp"

namespace mpi_launch {

inline bool available() { return std::string(FPGALLM_MPIEXEC).size() > 0; }

inline std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, std::size_t(n)) : std::string();
}

inline std::string fpgallm() { return FPGALLM_TEST_BINARY; }

// The launcher's environment and options, as a shell prefix up to and including -np N.
inline std::string mpiexec(int ranks) {
  return std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                     "OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl=self,vader "
                     "OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1 ") +
         FPGALLM_MPIEXEC + " --oversubscribe -x FPGALLM_DIST_CHILD -np " + std::to_string(ranks) +
         " ";
}

struct Result {
  int status = -1;
  std::string out, err;
  double seconds = 0;
};

// Runs `command` on `ranks` ranks (through the shell), killed after timeout_s; `env` is
// "NAME=value ..." set for mpiexec and passed on to the ranks.
inline Result run(int ranks, const std::string& command, int timeout_s, const std::string& env = "") {
  const std::string dir = testing_support::scratch_dir("mpi-" + std::to_string(::getpid()) + "-" +
                                                       std::to_string(std::rand()));
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  const std::string cmd = "timeout -k 5 " + std::to_string(timeout_s) + " env " + env + " " + mpiexec(ranks) + command + " >" +
                          out + " 2>" + err + " </dev/null";
  const auto t0 = std::chrono::steady_clock::now();
  const int raw = std::system(cmd.c_str());
  Result r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = testing_support::read_bytes(out);
  r.err = testing_support::read_bytes(err);
  return r;
}

inline int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace mpi_launch
