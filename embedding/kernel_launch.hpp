#pragma once
// Runs an embedding kernel (kernels.hpp) on the backend that owns the memory: the CPU backend's
// parallel_for (serial below the grain, where waking threads costs more than it saves), or the
// CUDA launcher compiled in embedding/cuda/ (NotCompiledError in a build without CUDA).
#include <cstddef>
#include <cstdint>

#include "device/backend.hpp"
#include "embedding/group_kernels.hpp"
#include "embedding/half_kernels.hpp"
#include "embedding/cpu/one_hot.hpp"
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
void launch(device::Backend& backend, device::Stream& stream, std::int64_t n,
            const kernels::CombineParts& f);
void launch(device::Backend& backend, device::Stream& stream, std::int64_t n,
            const kernels::GatherRows& f);
// The 16-bit tables' kernels (half_kernels.hpp).
void launch(device::Backend& backend, device::Stream& stream, std::int64_t n,
            const kernels::PoolBagsHalf& f);
void launch(device::Backend& backend, device::Stream& stream, std::int64_t n,
            const kernels::UpdateRowsHalf& f);
void launch(device::Backend& backend, device::Stream& stream, std::int64_t n,
            const kernels::InitShardHalf& f);
// The device grouping's kernels (group_kernels.hpp), each run over blocks (or one item).
#define RECMIX_EMBEDDING_GROUP_KERNELS(X) \
  X(OneHotCsr) X(BagOfEntry) X(InitSort) X(RadixHistogram) X(RadixOffsets) X(RadixScatter) X(GroupHeads) X(ExclusiveSum) \
  X(GroupScatter) X(GroupTotal)
#define RECMIX_EMBEDDING_DECLARE_LAUNCH(K) \
  void launch(device::Backend& backend, device::Stream& stream, std::int64_t n, const kernels::K& f);
RECMIX_EMBEDDING_GROUP_KERNELS(RECMIX_EMBEDDING_DECLARE_LAUNCH)
#undef RECMIX_EMBEDDING_DECLARE_LAUNCH

// Whether the poolings' lanes load the next row before adding the current one (kernels::pool_lane;
// on by default, RECMIX_EMBEDDING_PREFETCH=off in the environment turns it off): an A/B switch
// for the GPU suite. The sums are the same either way.
bool lane_prefetch();
void set_lane_prefetch(bool on);

// The CPU fast path of a one-rank job whose tables are whole and whose bags each hold exactly one
// index (embedding/cpu/one_hot.hpp), issued as a kernel: counted, and run inside the backend's
// device work. Only for a backend whose device memory is the host's (no graphs there: it runs at
// once). The forward returns what cpu::one_hot_forward does.
std::int64_t launch_one_hot_forward(device::Backend& backend, device::Stream& stream, const cpu::OneHotTables& f,
                                    float* out);
void launch_one_hot_update(device::Backend& backend, device::Stream& stream, const cpu::OneHotTables& f,
                           SparseOptimizerKind kind, float lr, float eps, const float* grad);

namespace cuda {
// Defined in embedding/cuda/kernels.cu when the build has CUDA.
void launch(void* native_stream, std::int64_t n, const kernels::PoolBags& f);
void launch(void* native_stream, std::int64_t n, const kernels::UpdateRows& f);
void launch(void* native_stream, std::int64_t n, const kernels::InitShard& f);
void launch(void* native_stream, std::int64_t n, const kernels::Fill& f);
void launch(void* native_stream, std::int64_t n, const kernels::CombineParts& f);
void launch(void* native_stream, std::int64_t n, const kernels::GatherRows& f);
void launch(void* native_stream, std::int64_t n, const kernels::PoolBagsHalf& f);
void launch(void* native_stream, std::int64_t n, const kernels::UpdateRowsHalf& f);
void launch(void* native_stream, std::int64_t n, const kernels::InitShardHalf& f);
void launch(void* native_stream, std::int64_t n, const kernels::RowwiseState& f);
#define RECMIX_EMBEDDING_DECLARE_CUDA_LAUNCH(K) void launch(void* native_stream, std::int64_t n, const kernels::K& f);
RECMIX_EMBEDDING_GROUP_KERNELS(RECMIX_EMBEDDING_DECLARE_CUDA_LAUNCH)
#undef RECMIX_EMBEDDING_DECLARE_CUDA_LAUNCH

// CUB's stable radix sort of (keys, vals) by the keys' low `bits` bits, and its exclusive prefix
// sum, enqueued on the stream (embedding/cuda/grouping.cu). With temp == nullptr each only returns
// the scratch bytes it needs for n items.
std::size_t sort_pairs(void* native_stream, void* temp, std::size_t temp_bytes, const std::int64_t* keys_in,
                       std::int64_t* keys_out, const std::int64_t* vals_in, std::int64_t* vals_out, std::int64_t n,
                       int bits);
std::size_t exclusive_sum(void* native_stream, void* temp, std::size_t temp_bytes, const std::int64_t* in,
                          std::int64_t* out, std::int64_t n);
}  // namespace cuda

}  // namespace recmix::embedding
