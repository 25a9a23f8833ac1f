// The one-hot fast path on the CPU (one_hot.hpp): table by table, with no intermediate CSR.
#include "embedding/cpu/one_hot.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "device/cpu/host_workers.hpp"
#include "embedding/cpu/loops.hpp"

namespace recmix::embedding::cpu {

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
  // A part that met a bad index says so; which index it was is found afterwards, in order.
  std::atomic<bool> bad{false};
  device::cpu::parallel_ranges(B * T * D < kGrain ? 1 : threads, B, [&](std::int64_t b_begin, std::int64_t b_end) {
    if (bags(b_begin, b_end)) bad.store(true, std::memory_order_relaxed);
  });
  if (!bad.load()) return -1;
  std::int64_t first = -1;
  for (std::int64_t t = 0; t < T; ++t)  // the first bad index, tables in order, then bags
    for (std::int64_t b = 0; b < B; ++b)
      if (row_of(b, t) < 0) {
        if (first < 0) first = t * B + b;
        f.rows[b * T + t] = f.table_base[t];  // a valid row; nothing was pooled for it
      }
  return first;
}

namespace {

// The two passes of one_hot_update, each over a range of the pool's work: the first writes the
// groups into f.scratch (lead [B x T], group_size [B x T], order [T x B]), the second reads them.

// 1. Per table: find each row's bags. lead[b * T + t] is -1 for a row only bag b looks up,
//    -2 for a later bag of a row seen earlier in the batch, and for the first bag of a row
//    looked up several times the position in order[] where its bags start (in bag order).
//    The rows are found in a hash table over the batch (linear probing, at most half full):
//    a table whose rows are all distinct, the usual case when the batch is small next to the
//    table, costs one pass.
void group_tables(const OneHotTables& f, std::int64_t t_begin, std::int64_t t_end) {
  const std::int64_t B = f.batch, T = f.tables;
  std::int64_t* lead = f.scratch;
  std::int64_t* group_size = f.scratch + T * B;
  std::int64_t* order = f.scratch + 2 * T * B;
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
}

// 2. Bag-major over the batch, so the gradients stream in order: each row is updated once,
//    by whichever thread holds its first bag, with its bags' gradients summed in bag order
//    (kernels::UpdateRows, as in the general path: the same bits).
void update_bags(const OneHotTables& f, SparseOptimizerKind kind, float lr, float eps, const float* grad,
                 std::int64_t b_begin, std::int64_t b_end) {
  const std::int64_t B = f.batch, T = f.tables, D = f.dim;
  const std::int64_t* lead = f.scratch;                // [B x T]
  const std::int64_t* group_size = f.scratch + T * B;  // [B x T]
  const std::int64_t* order = f.scratch + 2 * T * B;   // [T x B]
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
}

}  // namespace

void one_hot_update(int threads, const OneHotTables& f, SparseOptimizerKind kind, float lr, float eps,
                    const float* grad) {
  const std::int64_t B = f.batch, T = f.tables, D = f.dim;
  const bool parallel = threads > 1 && B * T * D >= kGrain;
  // Two passes over the pool: every table is grouped before any bag is updated.
  const int used = parallel ? threads : 1;
  device::cpu::parallel_ranges(used, T, [&](std::int64_t t_begin, std::int64_t t_end) { group_tables(f, t_begin, t_end); });
  device::cpu::parallel_ranges(used, B, [&](std::int64_t b_begin, std::int64_t b_end) {
    update_bags(f, kind, lr, eps, grad, b_begin, b_end);
  });
}

}  // namespace recmix::embedding::cpu
