#pragma once
// Runs an embedding kernel (kernels.hpp) on the backend that owns the memory: the CPU backend's
// parallel_for (serial below the grain, where waking threads costs more than it saves), or the
// CUDA launcher compiled in embedding/cuda/ (NotCompiledError in a build without CUDA).
#include <cstdint>

#include "device/backend.hpp"
#include "embedding/kernels.hpp"

namespace recmix::embedding {

void launch(device::Backend& backend, device::Stream& stream, std::int64_t n,
            const kernels::PoolBags& f);
void launch(device::Backend& backend, device::Stream& stream, std::int64_t n,
            const kernels::UpdateRows& f);
void launch(device::Backend& backend, device::Stream& stream, std::int64_t n,
            const kernels::InitShard& f);
void launch(device::Backend& backend, device::Stream& stream, std::int64_t n,
            const kernels::Fill& f);

namespace cuda {
// Defined in embedding/cuda/kernels.cu when the build has CUDA.
void launch(void* native_stream, std::int64_t n, const kernels::PoolBags& f);
void launch(void* native_stream, std::int64_t n, const kernels::UpdateRows& f);
void launch(void* native_stream, std::int64_t n, const kernels::InitShard& f);
void launch(void* native_stream, std::int64_t n, const kernels::Fill& f);
}  // namespace cuda

}  // namespace recmix::embedding
