// The CUDA twin of the CPU launches in kernel_launch.cpp: the same functors, grid-stride launched.
#include "device/cuda/launch.cuh"
#include "embedding/kernel_launch.hpp"

namespace recmix::embedding::cuda {

void launch(void* s, std::int64_t n, const kernels::PoolBags& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::UpdateRows& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::InitShard& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::Fill& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::CombineParts& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::GatherRows& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::BagOfEntry& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::InitSort& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::RadixHistogram& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::RadixOffsets& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::RadixScatter& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::GroupCount& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::GroupBase& f) { device::cuda::parallel_for(s, n, f); }
void launch(void* s, std::int64_t n, const kernels::GroupWrite& f) { device::cuda::parallel_for(s, n, f); }

}  // namespace recmix::embedding::cuda
