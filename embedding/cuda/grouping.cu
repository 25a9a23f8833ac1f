// The sort and the prefix sum of the device grouping on CUDA: CUB's, which use the whole GPU where
// the portable functors (group_kernels.hpp) keep a thread per block and one for each scan. A stable
// sort has one result, so the grouping is the same as the functors' to the bit.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "device/cuda/check.cuh"
#include "embedding/kernel_launch.hpp"

namespace recmix::embedding::cuda {

std::size_t sort_pairs(void* native_stream, void* temp, std::size_t temp_bytes, const std::int64_t* keys_in,
                       std::int64_t* keys_out, const std::int64_t* vals_in, std::int64_t* vals_out, std::int64_t n,
                       int bits) {
  RECMIX_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, vals_in, vals_out, n, 0,
                                                    bits, static_cast<cudaStream_t>(native_stream)));
  return temp_bytes;
}

std::size_t exclusive_sum(void* native_stream, void* temp, std::size_t temp_bytes, const std::int64_t* in,
                          std::int64_t* out, std::int64_t n) {
  RECMIX_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(temp, temp_bytes, in, out, n, static_cast<cudaStream_t>(native_stream)));
  return temp_bytes;
}

}  // namespace recmix::embedding::cuda
