#include "embedding/kernel_launch.hpp"

#include <omp.h>

#include <algorithm>
#include <type_traits>

#include "core/error.hpp"
#include "device/launch.hpp"

namespace recmix::embedding {
namespace {

// Floats (items x dim) below which a pooling or update loop stays on the calling thread. With
// prefetching a Kaggle-sized item (dim 16) costs 10-30 ns, and waking the second thread costs
// 50-100 us here: at batch 128 (3,328 lookups) one thread is faster.
constexpr std::int64_t kGrain = std::int64_t(1) << 18;
// How many items ahead the CPU loops prefetch the rows they will read: lookups hit random rows of
// tables far larger than the caches, and without prefetching each one waits for memory in turn.
constexpr std::int64_t kAhead = 16;

// Always inlined: GCC treats a function that only prefetches as free of side effects and deletes
// calls to it that were not inlined first, prefetches and all.
[[gnu::always_inline]] inline void prefetch_row(const float* p, std::int64_t dim) {
  const char* c = reinterpret_cast<const char*>(p);
  for (std::int64_t b = 0; b < dim * std::int64_t(sizeof(float)); b += 64) __builtin_prefetch(c + b);
}

[[gnu::always_inline]] inline void prefetch_row_for_write(float* p, std::int64_t dim) {
  char* c = reinterpret_cast<char*>(p);
  for (std::int64_t b = 0; b < dim * std::int64_t(sizeof(float)); b += 64) __builtin_prefetch(c + b, 1);
}

struct PrefetchPool {
  const kernels::PoolBags& f;
  [[gnu::always_inline]] void operator()(std::int64_t j) const {
    for (std::int64_t k = f.offsets[j]; k < f.offsets[j + 1]; ++k)
      prefetch_row(f.weights + f.rows[k] * f.dim, f.dim);
  }
};

struct PrefetchUpdate {
  const kernels::UpdateRows& f;
  [[gnu::always_inline]] void operator()(std::int64_t u) const {
    const std::int64_t row = f.unique_rows[u];
    prefetch_row_for_write(f.weights + row * f.dim, f.dim);
    if (f.kind == SparseOptimizerKind::adagrad) prefetch_row(f.state + row * f.dim, f.dim);
    if (f.kind == SparseOptimizerKind::rowwise_adagrad) __builtin_prefetch(f.state + row);
    for (std::int64_t e = f.entry_offsets[u]; e < f.entry_offsets[u + 1]; ++e)
      prefetch_row(f.grad + f.entry_grad[e] * f.dim, f.dim);
  }
};

// The CPU loop with prefetching: each thread runs a contiguous block of items.
template <class F, class P>
void cpu_prefetched(int threads, std::int64_t n, const F& f, const P& prefetch, std::int64_t grain) {
  auto block = [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < std::min(end, begin + kAhead); ++i) prefetch(i);
    for (std::int64_t i = begin; i < end; ++i) {
      if (i + kAhead < end) prefetch(i + kAhead);
      f(i);
    }
  };
  if (threads <= 1 || n < grain) {
    block(0, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const std::int64_t parts = omp_get_num_threads(), me = omp_get_thread_num();
    block(n * me / parts, n * (me + 1) / parts);
  }
}

template <class F>
void run(device::Backend& backend, device::Stream& stream, std::int64_t n, const F& f,
         std::int64_t grain) {
  if (n <= 0) return;
  if (backend.kind() == device::BackendKind::cpu) {
    if constexpr (std::is_same_v<F, kernels::PoolBags>)
      cpu_prefetched(backend.num_threads(), n, f, PrefetchPool{f}, grain);
    else if constexpr (std::is_same_v<F, kernels::UpdateRows>)
      cpu_prefetched(backend.num_threads(), n, f, PrefetchUpdate{f}, grain);
    else
      device::cpu::parallel_for(backend.num_threads(), n, f, grain);
    return;
  }
#ifdef RECMIX_HAVE_CUDA
  cuda::launch(stream.native(), n, f);
#else
  throw NotCompiledError("embedding kernels: this build has no CUDA backend");
#endif
}

}  // namespace

void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::PoolBags& f) {
  run(b, s, n, f, kGrain / (f.dim > 0 ? f.dim : 1));
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::UpdateRows& f) {
  run(b, s, n, f, kGrain / (f.dim > 0 ? f.dim : 1));
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::InitShard& f) {
  run(b, s, n, f, 1 << 16);
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::Fill& f) {
  run(b, s, n, f, 1 << 18);
}

}  // namespace recmix::embedding
