#pragma once
// When the dense model's element-wise kernels (bias + activation, interaction, loss, optimizer)
// use more than the calling thread on the CPU backend. Waking threads costs tens of
// microseconds, so only big kernels are split (at batch 2048 the interaction and the 512-wide
// layers; at batch 128 none). They never use OpenMP: its workers spin after a parallel region and
// steal the core from the OpenBLAS GEMM that follows (bench/RESULTS.md).
#include <cstdint>

namespace recmix::mlp {

inline constexpr std::int64_t kDefaultCpuParallelThreshold = std::int64_t(1) << 20;

// A kernel touching at least `elements` floats runs on backend.num_threads() threads (the caller
// and helper threads that sleep between kernels). Default kDefaultCpuParallelThreshold; the
// largest int64 keeps every kernel on the calling thread. Process-wide.
void set_cpu_parallel_threshold(std::int64_t elements);
std::int64_t cpu_parallel_threshold();

}  // namespace recmix::mlp
