#include "embedding/kernel_launch.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "device/fine_grained.hpp"
#include "device/launch.hpp"
#include "embedding/half_rows_cpu.hpp"

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
  backend.note_launch();
  if (device::runs_kernels_on_host(backend)) {
    const int threads = backend.num_threads();
    if constexpr (device::FineGrained<F>) {
      // The strict emulator runs what the GPU runs (device/fine_grained.hpp).
      if (device::runs_fine_items(backend)) {
        backend.run_host_kernel(stream, [threads, n, f, grain] {
          device::cpu::parallel_for(threads, f.fine_items(n), device::FineItems<F>{f}, grain);
        });
        return;
      }
    }
    // The functor is held by value: a captured launch runs later (device/graph.hpp).
    backend.run_host_kernel(stream, [threads, n, f, grain] {
      if constexpr (std::is_same_v<F, kernels::PoolBags>)
        cpu_prefetched(threads, n, f, PrefetchPool<F>{f}, grain);
      else if constexpr (std::is_same_v<F, kernels::PoolBagsHalf>)
        cpu_prefetched(threads, n, PoolHalfRows{f, cpu::half_rows_vectorised()}, PrefetchPool<F>{f}, grain);
      else if constexpr (std::is_same_v<F, kernels::UpdateRows>)
        cpu_prefetched(threads, n, f, PrefetchUpdate<float>{f, f.weights}, grain);
      else if constexpr (std::is_same_v<F, kernels::UpdateRowsHalf>)
        cpu_prefetched(threads, n, StepHalfRows(f), PrefetchUpdate<std::uint16_t>{f.update, f.weights}, grain);
      else
        device::cpu::parallel_for(threads, n, f, grain);
    });
    return;
  }
#ifdef RECMIX_HAVE_CUDA
  cuda::launch(stream.native(), n, f);
#else
  throw NotCompiledError("embedding kernels: this build has no CUDA backend");
#endif
}

}  // namespace

namespace cpu {

std::int64_t one_hot_forward(int threads, const OneHotTables& f, float* out) {
  const std::int64_t B = f.batch, T = f.tables, D = f.dim;
  auto row_of = [&](std::int64_t b, std::int64_t t) {
    const std::int64_t r = f.index(b, t);
    return r >= 0 && r < f.table_rows[t] ? f.table_base[t] + r : -1;
  };
  auto bags = [&](std::int64_t b_begin, std::int64_t b_end) {
    // 1. The weight row of every lookup, checked (-1 for an index outside its table): in order
    //    from packed indices, else table by table, from one index stream at a time.
    bool bad = false;
    std::int64_t* rows = f.rows;
    if (f.packed) {
      for (std::int64_t j = b_begin * T, b = b_begin; b < b_end; ++b)
        for (std::int64_t t = 0; t < T; ++t, ++j) {
          const std::int64_t r = f.packed[j];
          const bool in_range = r >= 0 && r < f.table_rows[t];
          bad |= !in_range;
          rows[j] = in_range ? f.table_base[t] + r : -1;
        }
    } else {
      for (std::int64_t t = 0; t < T; ++t) {
        const std::int64_t* idx = f.indices[t];
        const std::int64_t table_rows = f.table_rows[t], base = f.table_base[t];
        for (std::int64_t b = b_begin; b < b_end; ++b) {
          const std::int64_t r = idx[b];
          const bool in_range = r >= 0 && r < table_rows;
          bad |= !in_range;
          rows[b * T + t] = in_range ? base + r : -1;
        }
      }
    }
    // 2. Bag-major, like the output: out is written in order, the weight rows (the random part)
    //    prefetched kAhead lookups ahead. Two plain passes instead of one that walks T index
    //    streams and checks every index twice (for the prefetch and for the copy): in the
    //    training step at batch 128, 170-180 instead of 220-230 us.
    const std::int64_t j_begin = b_begin * T, j_end = b_end * T;
    auto copy_rows = [&](const auto* weights, const auto& copy_row) {
      for (std::int64_t j = j_begin; j < std::min(j_end, j_begin + kAhead); ++j)
        if (rows[j] >= 0) prefetch_row(weights + rows[j] * D, D);
      for (std::int64_t j = j_begin; j < j_end; ++j) {
        if (j + kAhead < j_end && rows[j + kAhead] >= 0) prefetch_row(weights + rows[j + kAhead] * D, D);
        const std::int64_t row = rows[j];
        if (row < 0) continue;
        copy_row(weights + row * D, out + j * D);
      }
    };
    if (!f.half) {
      copy_rows(f.weights, [D](const float* w, float* o) {
        for (std::int64_t d = 0; d < D; ++d) o[d] = w[d];
      });
    } else {
      const half::Storage storage = f.half->storage;
      const bool vectorised = half_rows_vectorised();
      copy_rows(static_cast<const std::uint16_t*>(f.half->weights), [=](const std::uint16_t* w, float* o) {
        widen_half_row(storage, w, o, D, vectorised);
      });
    }
    return bad;
  };
  bool bad = false;
  if (threads <= 1 || B * T * D < kGrain) {
    bad = bags(0, B);
  } else {
#pragma omp parallel num_threads(threads) reduction(|| : bad)
    {
      const std::int64_t parts = omp_get_num_threads(), me = omp_get_thread_num();
      bad = bags(B * me / parts, B * (me + 1) / parts);
    }
  }
  if (!bad) return -1;
  std::int64_t first = -1;
  for (std::int64_t t = 0; t < T; ++t)  // the first bad index, tables in order, then bags
    for (std::int64_t b = 0; b < B; ++b)
      if (row_of(b, t) < 0) {
        if (first < 0) first = t * B + b;
        f.rows[b * T + t] = f.table_base[t];  // a valid row; nothing was pooled for it
      }
  return first;
}

void one_hot_update(int threads, const OneHotTables& f, SparseOptimizerKind kind, float lr, float eps,
                    const float* grad) {
  const std::int64_t B = f.batch, T = f.tables, D = f.dim;
  const bool parallel = threads > 1 && B * T * D >= kGrain;
  // 1. Per table: find each row's bags. lead[b * T + t] is -1 for a row only bag b looks up,
  //    -2 for a later bag of a row seen earlier in the batch, and for the first bag of a row
  //    looked up several times the position in order[] where its bags start (in bag order).
  //    The rows are found in a hash table over the batch (linear probing, at most half full):
  //    a table whose rows are all distinct, the usual case when the batch is small next to the
  //    table, costs one pass.
  std::int64_t* lead = f.scratch;                // [B x T]
  std::int64_t* group_size = f.scratch + T * B;  // [B x T]
  std::int64_t* order = f.scratch + 2 * T * B;   // [T x B]
  auto group_tables = [&](std::int64_t t_begin, std::int64_t t_end) {
    int bits = 1;
    while ((std::int64_t(1) << bits) < 2 * B) ++bits;
    const std::uint64_t slots = std::uint64_t(1) << bits;
    std::vector<std::int64_t> slot_row(slots), slot_count(slots), slot_next(slots), slot_of(B);
    for (std::int64_t t = t_begin; t < t_end; ++t) {
      std::fill(slot_row.begin(), slot_row.end(), -1);
      std::int64_t* l = lead + t;  // l[b * T]
      std::int64_t* n = group_size + t;
      bool repeats = false;
      for (std::int64_t b = 0; b < B; ++b) {
        const std::int64_t row = f.rows[b * T + t];
        std::uint64_t h = (static_cast<std::uint64_t>(row) * 0x9E3779B97F4A7C15ull) >> (64 - bits);
        while (slot_row[h] != -1 && slot_row[h] != row) h = (h + 1) & (slots - 1);
        slot_of[b] = static_cast<std::int64_t>(h);
        if (slot_row[h] == -1) {
          slot_row[h] = row;
          slot_count[h] = 1;
          l[b * T] = -1;
        } else {
          ++slot_count[h];
          l[b * T] = -2;
          repeats = true;
        }
      }
      if (!repeats) continue;
      // Rows looked up more than once: one run of order[] each, their bags in bag order.
      std::int64_t* e = order + t * B;
      std::int64_t next = 0;
      for (std::int64_t b = 0; b < B; ++b) {
        const std::int64_t h = slot_of[b];
        if (slot_count[h] == 1) continue;
        if (l[b * T] == -1) {  // the row's first bag
          l[b * T] = next;
          n[b * T] = slot_count[h];
          slot_next[h] = next;
          next += slot_count[h];
        }
        e[slot_next[h]++] = b;
      }
    }
  };
  // 2. Bag-major over the batch, so the gradients stream in order: each row is updated once,
  //    by whichever thread holds its first bag, with its bags' gradients summed in bag order
  //    (kernels::UpdateRows, as in the general path: the same bits).
  auto update_bags = [&](std::int64_t b_begin, std::int64_t b_end) {
    std::vector<std::int64_t> grads_of;
    std::int64_t unique = 0, offsets[2] = {0, 0};
    kernels::UpdateRows u{f.weights, f.state, D, kind, lr, eps, &unique, offsets, nullptr, nullptr, grad};
    kernels::UpdateRowsHalf uh{};
    const bool vectorised = half_rows_vectorised();
    // 16-bit tables: per table, how its rows round and, as a table row x dim, where its rows'
    // random bits start (the table is whole here: local row table_base[t] + r is its row r plus
    // the first row of its shard, found once).
    std::vector<RowRounding> rounding;
    std::vector<std::int64_t> first_row;
    if (f.half) {
      uh = *f.half;
      uh.update = u;
      for (std::int64_t t = 0; t < T; ++t) {
        const auto w = uh.writer(f.table_base[t]);
        rounding.push_back(RowRounding::of(w));
        first_row.push_back(static_cast<std::int64_t>(w.first) / D - f.table_base[t]);
      }
    }
    const StepHalfRows step_half(uh);  // rows looked up more than once, and other optimizers
    // The row a lookup updates, for prefetching: in the fp32 or the 16-bit table.
    auto prefetch = [&](std::int64_t j) {
      if (f.half)
        prefetch_row_for_write(uh.weights + f.rows[j] * D, D);
      else
        prefetch_row_for_write(f.weights + f.rows[j] * D, D);
    };
    const std::int64_t j_begin = b_begin * T, j_end = b_end * T;
    for (std::int64_t j = j_begin; j < std::min(j_end, j_begin + kAhead); ++j)
      if (lead[j] != -2) prefetch(j);
    for (std::int64_t j = j_begin, b = b_begin, t = 0; j < j_end; ++j, (++t == T ? (t = 0, ++b) : 0)) {
      if (j + kAhead < j_end && lead[j + kAhead] != -2) prefetch(j + kAhead);
      const std::int64_t l = lead[j];
      if (l == -2) continue;
      if (l == -1 && kind == SparseOptimizerKind::sgd) {
        // The common case, a row only this bag looks up, inline: the operations of
        // kernels::UpdateRows for one entry (g = 0 + grad, w -= lr g), so the same bits (and
        // for 16-bit tables UpdateRowsHalf's reads and rounded writes).
        const float* g = grad + j * D;
        if (f.half) {
          const std::int64_t row = f.rows[j];
          sgd_half_row(rounding[t], uh.weights + row * D, static_cast<std::uint64_t>((first_row[t] + row) * D), g, D,
                       lr, vectorised);
          continue;
        }
        float* w = f.weights + f.rows[j] * D;
        for (std::int64_t d = 0; d < D; ++d) w[d] -= lr * (0.f + g[d]);
        continue;
      }
      unique = f.rows[j];
      std::int64_t single = j;
      if (l == -1) {
        offsets[1] = 1;
        u.entry_grad = &single;
      } else {
        const std::int64_t n = group_size[j];
        grads_of.resize(n);
        for (std::int64_t i = 0; i < n; ++i) grads_of[i] = order[t * B + l + i] * T + t;
        offsets[1] = n;
        u.entry_grad = grads_of.data();
      }
      if (f.half) {
        uh.update.entry_grad = u.entry_grad;
        step_half(0);
      } else {
        u(0);
      }
    }
  };
  if (!parallel) {
    group_tables(0, T);
    update_bags(0, B);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const std::int64_t parts = omp_get_num_threads(), me = omp_get_thread_num();
    group_tables(T * me / parts, T * (me + 1) / parts);
#pragma omp barrier
    update_bags(B * me / parts, B * (me + 1) / parts);
  }
}

}  // namespace cpu

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
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::CombineParts& f) {
  run(b, s, n, f, kGrain / (f.dim > 0 ? f.dim : 1));
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::GatherRows& f) {
  run(b, s, n, f, kGrain / (f.dim > 0 ? f.dim : 1));
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::PoolBagsHalf& f) {
  run(b, s, n, f, kGrain / (f.dim > 0 ? f.dim : 1));
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::UpdateRowsHalf& f) {
  run(b, s, n, f, kGrain / (f.update.dim > 0 ? f.update.dim : 1));
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::InitShardHalf& f) {
  run(b, s, n, f, 1 << 16);
}

// Launched over blocks (or one item): each item is a block's worth of work.
#define RECMIX_EMBEDDING_DEFINE_LAUNCH(K) \
  void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::K& f) { run(b, s, n, f, 2); }
RECMIX_EMBEDDING_GROUP_KERNELS(RECMIX_EMBEDDING_DEFINE_LAUNCH)
#undef RECMIX_EMBEDDING_DEFINE_LAUNCH

}  // namespace recmix::embedding
