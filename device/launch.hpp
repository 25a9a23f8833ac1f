#pragma once
// parallel_for: runs a host/device functor f(i) for i in [0, n). Kernels are written once as
// functors with RECMIX_HOST_DEVICE call operators in neutral headers; the CPU backend runs them
// on its thread pool (device/cpu/host_workers.hpp), the CUDA backend with a grid-stride launch
// (device/cuda/launch.cuh).
#include <cstdint>

#include "device/cpu/host_workers.hpp"
#include "device/types.hpp"

namespace recmix::device::cpu {

// Below this many iterations the loop runs on the calling thread: thread wake-up costs more
// than it saves on this machine (see ENVIRONMENT: barriers are expensive).
inline constexpr std::int64_t kSerialGrain = 4096;

template <class F>
void parallel_for(int threads, std::int64_t n, F f, std::int64_t grain = kSerialGrain) {
  parallel_blocks(threads, n, f, grain);
}

}  // namespace recmix::device::cpu
