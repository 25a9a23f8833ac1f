#pragma once
// The CPU's embedding loops: rows prefetched ahead of the random reads and writes of pooling and
// updates, the 16-bit rows widened and rounded 16 elements at a time, over contiguous blocks of
// items on the CPU backend's thread pool (device/cpu/host_workers.hpp). Used by the launcher
// (kernel_launch.cpp) and the one-hot fast path (one_hot.cpp). Internal to recmix_embedding.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "device/cpu/host_workers.hpp"
#include "embedding/cpu/half_rows.hpp"
#include "embedding/half_kernels.hpp"
#include "embedding/kernels.hpp"

namespace recmix::embedding::cpu {

// Floats (items x dim) below which a pooling or update loop stays on the calling thread. With
// prefetching a Kaggle-sized item (dim 16) costs 10-30 ns, and waking the second thread costs
// 50-100 us here: at batch 128 (3,328 lookups) one thread is faster.
constexpr std::int64_t kGrain = std::int64_t(1) << 18;
// How many items ahead the CPU loops prefetch the rows they will read: lookups hit random rows of
// tables far larger than the caches, and without prefetching each one waits for memory in turn.
constexpr std::int64_t kAhead = 16;

// Always inlined: GCC treats a function that only prefetches as free of side effects and deletes
// calls to it that were not inlined first, prefetches and all.
template <class T>
[[gnu::always_inline]] inline void prefetch_row(const T* p, std::int64_t dim) {
  const char* c = reinterpret_cast<const char*>(p);
  for (std::int64_t b = 0; b < dim * std::int64_t(sizeof(T)); b += 64) __builtin_prefetch(c + b);
}

template <class T>
[[gnu::always_inline]] inline void prefetch_row_for_write(T* p, std::int64_t dim) {
  char* c = reinterpret_cast<char*>(p);
  for (std::int64_t b = 0; b < dim * std::int64_t(sizeof(T)); b += 64) __builtin_prefetch(c + b, 1);
}

// The rows a pooling reads: PoolBags' or PoolBagsHalf's weights.
template <class Pool>
struct PrefetchPool {
  const Pool& f;
  [[gnu::always_inline]] void operator()(std::int64_t j) const {
    for (std::int64_t k = f.offsets[j]; k < f.offsets[j + 1]; ++k)
      prefetch_row(f.weights + f.rows[k] * f.dim, f.dim);
  }
};

// What an update reads and writes: its row of `weights` (fp32, or the 16-bit table's), its
// state and its gradients.
template <class W>
struct PrefetchUpdate {
  const kernels::UpdateRows& f;
  W* weights;
  [[gnu::always_inline]] void operator()(std::int64_t u) const {
    const std::int64_t row = f.unique_rows[u];
    prefetch_row_for_write(weights + row * f.dim, f.dim);
    if (f.kind == SparseOptimizerKind::adagrad) prefetch_row(f.state + row * f.dim, f.dim);
    if (f.kind == SparseOptimizerKind::rowwise_adagrad) __builtin_prefetch(f.state + row);
    for (std::int64_t e = f.entry_offsets[u]; e < f.entry_offsets[u + 1]; ++e)
      prefetch_row(f.grad + f.entry_grad[e] * f.dim, f.dim);
  }
};

// PoolBagsHalf on the CPU: each row read to fp32 16 elements at a time (cpu::widen_half_row)
// and summed in pool_bag's order, a chunk of components at a time: the same bits.
struct PoolHalfRows {
  const kernels::PoolBagsHalf& f;
  bool vectorised;
  void operator()(std::int64_t j) const {
    constexpr std::int64_t kChunk = 64;
    float* o = f.out + (f.out_pos ? f.out_pos[j] : j) * f.dim;
    const std::int64_t begin = f.offsets[j], end = f.offsets[j + 1];
    const float inv = end > begin ? 1.0f / static_cast<float>(end - begin) : 1.f;
    for (std::int64_t d0 = 0; d0 < f.dim; d0 += kChunk) {
      const std::int64_t n = std::min(kChunk, f.dim - d0);
      float acc[kChunk], row[kChunk];
      for (std::int64_t i = 0; i < n; ++i) acc[i] = 0.f;
      for (std::int64_t k = begin; k < end; ++k) {
        cpu::widen_half_row(f.storage, f.weights + f.rows[k] * f.dim + d0, row, n, vectorised);
        for (std::int64_t i = 0; i < n; ++i) acc[i] += row[i];
      }
      if (f.mean && end > begin)
        for (std::int64_t i = 0; i < n; ++i) acc[i] *= inv;
      for (std::int64_t i = 0; i < n; ++i) o[d0 + i] = acc[i];
    }
  }
};

// UpdateRowsHalf on the CPU: its step_row with rows read and rounded 16 elements at a time
// (cpu::CpuRowWriter), and each shard's rounding key found once per launch instead of per row.
class StepHalfRows {
 public:
  explicit StepHalfRows(const kernels::UpdateRowsHalf& f) : f_(f), vectorised_(cpu::half_rows_vectorised()) {
    const kernels::ShardRows& s = f.shards;
    if (f.stochastic)
      for (std::int64_t k = 0; k < s.count; ++k) key_.push_back(half::rounding_key(f.seed, s.table[k], f.step));
  }
  void operator()(std::int64_t u) const {
    const kernels::UpdateRows& p = f_.update;
    if (p.unique_count && u >= *p.unique_count) return;
    const std::int64_t row = p.unique_rows[u];
    cpu::CpuRowWriter w{f_.weights + row * p.dim, {f_.storage, f_.stochastic, 0}, 0, vectorised_};
    if (f_.stochastic) {  // the shard holding the row's local row: the last whose base is <= it
      const kernels::ShardRows& s = f_.shards;
      const std::int64_t local = s.local_of(row);
      const std::int64_t k = std::upper_bound(s.base, s.base + s.count, local) - s.base - 1;
      w.rounding.key = key_[static_cast<std::size_t>(k)];
      w.first = static_cast<std::uint64_t>(s.row_begin[k] + (local - s.base[k])) * static_cast<std::uint64_t>(p.dim);
    }
    f_.step_row(u, w);
  }

 private:
  const kernels::UpdateRowsHalf& f_;
  bool vectorised_;
  std::vector<std::uint64_t> key_;  // per shard
};

// The CPU loop with prefetching: each thread runs a contiguous block of items.
template <class F, class P>
void cpu_prefetched(int threads, std::int64_t n, const F& f, const P& prefetch, std::int64_t grain) {
  device::cpu::parallel_ranges(
      threads, n,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < std::min(end, begin + kAhead); ++i) prefetch(i);
        for (std::int64_t i = begin; i < end; ++i) {
          if (i + kAhead < end) prefetch(i + kAhead);
          f(i);
        }
      },
      grain);
}

}  // namespace recmix::embedding::cpu
