#pragma once
// OpenMP's worker threads spin after each parallel region (OMP_WAIT_POLICY=active, libgomp's
// default for a while), taking the cores that OpenBLAS's own threads need for the next GEMM:
// on this 2-core machine that cost up to a third of a training step. The policy is read from the
// environment when libgomp loads, before main, so a program that wants the passive policy sets
// it and re-executes itself, once, at the top of main (same PID, so mpirun and srun are fine).
// It re-executes the file /proc/self/exe points to, not that link: the kernel names a process
// after the file it executes, and ps, top and ss would otherwise show every recmix as "exe".
#include <limits.h>
#include <unistd.h>

#include <cstdlib>

namespace recmix::device::cpu {

inline void ensure_passive_omp_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;  // the user's choice stands
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  char path[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  // Returns only on failure: carry on with the default policy.
  execv(n > 0 ? path : "/proc/self/exe", argv);
}

}  // namespace recmix::device::cpu
