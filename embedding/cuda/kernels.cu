// The CUDA twin of the CPU launches in kernel_launch.cpp: the same functors, grid-stride launched
// (in lanes, a sub-warp a row, where they have them: device/fine_grained.hpp).
#include "device/cuda/launch.cuh"
#include "embedding/kernel_launch.hpp"

namespace recmix::embedding::cuda {

void launch(void* s, std::int64_t n, const kernels::PoolBags& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::UpdateRows& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::InitShard& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::Fill& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::CombineParts& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::GatherRows& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::PoolBagsHalf& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::UpdateRowsHalf& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::InitShardHalf& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::RowwiseState& f) { device::cuda::parallel_for(s, n, f); }
#define RECMIX_EMBEDDING_DEFINE_CUDA_LAUNCH(K) \
  void launch(void* s, std::int64_t n, const kernels::K& f) { device::cuda::parallel_for(s, n, f); }
RECMIX_EMBEDDING_GROUP_KERNELS(RECMIX_EMBEDDING_DEFINE_CUDA_LAUNCH)
#undef RECMIX_EMBEDDING_DEFINE_CUDA_LAUNCH

}  // namespace recmix::embedding::cuda
