#pragma once
// When the dense model's element-wise kernels (bias + activation, interaction, loss, optimizer)
// use more than the calling thread on the CPU backend. On the 2-vCPU machines measured, OpenMP
// workers that spin after a parallel region steal the core from the next OpenBLAS GEMM, which
// costs more than the kernels gain (bench/RESULTS-mlp.md); so by default they run on the calling
// thread, and the GEMMs alone use the backend's threads.
#include <cstdint>

namespace recmix::mlp {

// A kernel touching at least `elements` floats runs on backend.num_threads() OpenMP threads.
// Default: never (the largest int64). Process-wide.
void set_cpu_parallel_threshold(std::int64_t elements);
std::int64_t cpu_parallel_threshold();

}  // namespace recmix::mlp
