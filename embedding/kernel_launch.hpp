#pragma once
// Runs an embedding kernel (kernels.hpp) on the backend that owns the memory: the CPU backend's
// parallel_for (serial below the grain, where waking threads costs more than it saves), or the
// CUDA launcher compiled in embedding/cuda/ (NotCompiledError in a build without CUDA).
#include <cstddef>
#include <cstdint>

#include "device/backend.hpp"
#include "embedding/group_kernels.hpp"
#include "embedding/half_kernels.hpp"
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
  X(BagOfEntry) X(InitSort) X(RadixHistogram) X(RadixOffsets) X(RadixScatter) X(GroupHeads) X(ExclusiveSum) \
  X(GroupScatter) X(GroupTotal)
#define RECMIX_EMBEDDING_DECLARE_LAUNCH(K) \
  void launch(device::Backend& backend, device::Stream& stream, std::int64_t n, const kernels::K& f);
RECMIX_EMBEDDING_GROUP_KERNELS(RECMIX_EMBEDDING_DECLARE_LAUNCH)
#undef RECMIX_EMBEDDING_DECLARE_LAUNCH

// The CPU fast path of a one-rank job whose tables are whole and whose bags each hold exactly
// one index (the Criteo case). Tables are independent there, so both halves run table by table
// over the threads, with no intermediate CSR and sorts of one table's batch at a time.
namespace cpu {

struct OneHotTables {
  float* weights;                    // null for 16-bit tables (half)
  float* state;                      // optimizer state (see kernels::UpdateRows); may be null for SGD
  std::int64_t dim;
  int tables, batch;
  const std::int64_t* const* indices;  // per table: `batch` indices into the table, or
  const std::int32_t* packed;          // when not null: [batch x tables], row-major (OneHotRows)
  const std::int64_t* table_base;      // per table: its first row in `weights`
  const std::int64_t* table_rows;      // per table: rows
  std::int64_t* rows;                  // [batch x tables]: weight row of each lookup (forward writes it)
  std::int64_t* scratch;               // 3 x batch x tables, for the update
  // 16-bit tables: their weights and how an update rounds (its `update` is filled in per row).
  const kernels::UpdateRowsHalf* half = nullptr;

  std::int64_t index(std::int64_t b, std::int64_t t) const {
    return packed ? packed[b * tables + t] : indices[t][b];
  }
};

// out[(b * tables + t) * dim ..] = row of indices[t][b] (sum or mean of one row are that row).
// Returns -1, or t * batch + b of the first index outside its table (tables in order, then bags),
// in which case nothing is pooled for it and the caller reports it.
std::int64_t one_hot_forward(int threads, const OneHotTables& f, float* out);

// Sums the gradients grad[(b * tables + t) * dim ..] of each table's duplicate rows in bag order
// and applies the sparse optimizer once per distinct row, exactly as kernels::UpdateRows does.
void one_hot_update(int threads, const OneHotTables& f, SparseOptimizerKind kind, float lr, float eps,
                    const float* grad);

}  // namespace cpu

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
