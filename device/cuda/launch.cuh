#pragma once
// The CUDA twin of device/launch.hpp: a grid-stride kernel that runs the same functors, in their
// lane or fine decomposition where they offer one (device/fine_grained.hpp).
#include <cuda_runtime.h>

#include <cstdint>

#include "device/cuda/check.cuh"
#include "device/fine_grained.hpp"

namespace recmix::device::cuda {

template <class F>
__global__ void grid_stride_kernel(std::int64_t n, F f) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(blockDim.x) * gridDim.x)
    f(i);
}

template <class F>
void parallel_for(void* native_stream, std::int64_t n, F f) {
  if constexpr (LaneGrained<F>) {
    if (gpu_items() == GpuItems::lanes) {
      parallel_for(native_stream, f.lane_items(n), LaneItems<F>{f});
      return;
    }
  }
  if constexpr (FineGrained<F>) {
    parallel_for(native_stream, f.fine_items(n), FineItems<F>{f});
  } else {
    if (n <= 0) return;
    constexpr int kBlock = 256;
    std::int64_t blocks = (n + kBlock - 1) / kBlock;
    if (blocks > 65535 * 4) blocks = 65535 * 4;
    grid_stride_kernel<<<static_cast<unsigned>(blocks), kBlock, 0,
                         static_cast<cudaStream_t>(native_stream)>>>(n, f);
    RECMIX_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace recmix::device::cuda
