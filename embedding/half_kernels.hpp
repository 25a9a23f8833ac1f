#pragma once
// The embedding kernels for tables stored in 16 bits (fp16 or bf16, core/half.hpp): the bags and
// optimizer steps of kernels.hpp with every weight read to fp32, the fp32 kernels' arithmetic
// unchanged, and each updated weight written back rounded to nearest or stochastically.
// Optimizer state stays fp32. Host/device functors, run as the fp32 ones are.
#include <cmath>
#include <cstdint>

#include "core/half.hpp"
#include "device/types.hpp"
#include "embedding/kernels.hpp"

namespace recmix::embedding::kernels {

// `storage` is fp16 or bf16.
RECMIX_HOST_DEVICE inline float half_to_float(half::Storage storage, std::uint16_t h) {
  return storage == half::Storage::bf16 ? half::bf16_to_float(h) : half::fp16_to_float(h);
}

// Round to nearest (ties to even), or stochastically with `random` (32 random bits; bf16 uses
// the low 16).
RECMIX_HOST_DEVICE inline std::uint16_t float_to_half(half::Storage storage, float x, bool stochastic,
                                                     std::uint32_t random) {
  if (storage == half::Storage::bf16)
    return stochastic ? half::float_to_bf16_stochastic(x, random) : half::float_to_bf16(x);
  return stochastic ? half::float_to_fp16_stochastic(x, random) : half::float_to_fp16(x);
}

// PoolBags over a 16-bit table: each element read to fp32 and summed as PoolBags sums, so the
// result equals PoolBags on the fp32 values of the same table, bit for bit.
struct PoolBagsHalf {
  const std::uint16_t* weights;
  half::Storage storage;
  std::int64_t dim;
  const std::int64_t* offsets;
  const std::int64_t* rows;
  const std::int64_t* out_pos;  // nullptr: bag j writes vector j
  float* out;
  bool mean;
  bool prefetch = true;  // as PoolBags::prefetch

  struct Decoded {
    const std::uint16_t* weights;
    half::Storage storage;
    std::int64_t dim;
    RECMIX_HOST_DEVICE float operator()(std::int64_t row, std::int64_t d) const {
      return half_to_float(storage, weights[row * dim + d]);
    }
    RECMIX_HOST_DEVICE void operator()(std::int64_t row, std::int64_t d0, int n, float* v) const {
      std::uint16_t h[kLane] = {0, 0, 0, 0};
      load_lane(weights + row * dim + d0, n, h);
      for (int c = 0; c < kLane; ++c)  // to the constant kLane: embedding/lanes.hpp
        if (c < n) v[c] = half_to_float(storage, h[c]);
    }
  };
  RECMIX_HOST_DEVICE void operator()(std::int64_t j) const {
    pool_bag(j, dim, offsets, rows, out_pos, out, mean, Decoded{weights, storage, dim});
  }
  // Fine decomposition (device/fine_grained.hpp): component d of bag j, PoolBags::fine's sum.
  RECMIX_HOST_DEVICE std::int64_t fine_items(std::int64_t bags) const { return bags * dim; }
  RECMIX_HOST_DEVICE void fine(std::int64_t i) const {
    const std::int64_t j = i / dim, d = i % dim;
    const std::int64_t begin = offsets[j], end = offsets[j + 1];
    float acc = 0.f;
    for (std::int64_t k = begin; k < end; ++k) acc += half_to_float(storage, weights[rows[k] * dim + d]);
    if (mean && end > begin) acc *= 1.0f / static_cast<float>(end - begin);
    out[(out_pos ? out_pos[j] : j) * dim + d] = acc;
  }
  // Lanes: 4 components of bag j, PoolBags::lane's sums.
  RECMIX_HOST_DEVICE std::int64_t lane_items(std::int64_t bags) const { return bags * lanes_per_row(dim); }
  RECMIX_HOST_DEVICE void lane(std::int64_t i) const {
    pool_lane(lane_at(i, dim), dim, offsets, rows, out_pos, out, mean, prefetch, Decoded{weights, storage, dim});
  }
};

// InitShard for a 16-bit table: each initial value rounded to nearest.
struct InitShardHalf {
  InitShard init;  // its weights unused: null
  std::uint16_t* weights;
  half::Storage storage;

  RECMIX_HOST_DEVICE void operator()(std::int64_t i) const {
    const std::int64_t r = i / init.dim;
    const int c = static_cast<int>(i - r * init.dim);
    weights[i] = float_to_half(storage, initial_weight(init.seed, init.table, init.table_rows, init.dim,
                                                       init.row_begin + r, c),
                               false, 0u);
  }
};

// The shards a rank owns, as laid out in its weight buffer: shard s holds rows row_begin[s] ..
// of table table[s] at local rows base[s] .. base[s+1) (the last one to the buffer's end).
// base is ascending, base[0] = 0 and count >= 1. Tiered tables index a buffer of slots instead:
// slot_row[slot] is the local row in that slot (null: the buffer holds the local rows).
struct ShardRows {
  const std::int64_t* base;
  const int* table;
  const std::int64_t* row_begin;
  std::int64_t count;
  const std::int64_t* slot_row = nullptr;

  struct TableRow {
    int table;
    std::int64_t row;
  };

  // The local row held by buffer row `row`.
  RECMIX_HOST_DEVICE std::int64_t local_of(std::int64_t row) const { return slot_row ? slot_row[row] : row; }

  // The table and table row of buffer row `row` (binary search for the last base <= its local row).
  RECMIX_HOST_DEVICE TableRow locate(std::int64_t row) const {
    const std::int64_t local = local_of(row);
    std::int64_t lo = 0, hi = count - 1;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo + 1) / 2;
      if (base[mid] <= local)
        lo = mid;
      else
        hi = mid - 1;
    }
    return {table[lo], row_begin[lo] + (local - base[lo])};
  }
};

// UpdateRows over a 16-bit table: `update` holds the step as UpdateRows takes it (its weights
// unused: null; state stays fp32) and sums the gradients; each weight is read to fp32, updated
// with UpdateRows' expression and rounded back. Stochastic rounding of column c of a row that is
// row r of table t takes half::rounding_bits(seed, t, step, r x dim + c), so the result depends
// on the table row, not on where the row lies in the buffer (`shards`: read only when stochastic).
struct UpdateRowsHalf {
  UpdateRows update;
  std::uint16_t* weights;
  half::Storage storage;
  bool stochastic;
  std::uint64_t seed;
  std::int64_t step;
  ShardRows shards;

  static constexpr int kChunk = UpdateRows::kChunk;

  // Where the weights of one row go: rounded, with the random bits of its table's elements.
  // Rows are read and written a chunk (up to kChunk elements) at a time; the CPU backend steps
  // rows with a writer of the same interface that does a chunk 16 elements at a time
  // (embedding/half_rows_cpu.hpp), to the same bits.
  struct RowWriter {
    std::uint16_t* w;
    half::Storage storage;
    bool stochastic;
    std::uint64_t seed;
    std::int64_t step;
    int table;
    std::uint64_t first;  // table row x dim

    RECMIX_HOST_DEVICE float read(std::int64_t d) const { return half_to_float(storage, w[d]); }
    RECMIX_HOST_DEVICE void write(std::int64_t d, float x) const {
      const std::uint32_t random =
          stochastic ? half::rounding_bits(seed, table, step, first + static_cast<std::uint64_t>(d)) : 0u;
      w[d] = float_to_half(storage, x, stochastic, random);
    }
    RECMIX_HOST_DEVICE void read_chunk(std::int64_t d0, int n, float* x) const {
      for (int i = 0; i < n; ++i) x[i] = read(d0 + i);
    }
    RECMIX_HOST_DEVICE void write_chunk(std::int64_t d0, int n, const float* x) const {
      for (int i = 0; i < n; ++i) write(d0 + i, x[i]);
    }
  };

  RECMIX_HOST_DEVICE RowWriter writer(std::int64_t row) const {
    RowWriter out{weights + row * update.dim, storage, stochastic, seed, step, 0, 0};
    if (stochastic) {
      const ShardRows::TableRow at = shards.locate(row);
      out.table = at.table;
      out.first = static_cast<std::uint64_t>(at.row) * static_cast<std::uint64_t>(update.dim);
    }
    return out;
  }

  RECMIX_HOST_DEVICE void operator()(std::int64_t u) const {
    if (update.unique_count && u >= *update.unique_count) return;
    step_row(u, writer(update.unique_rows[u]));
  }

  // Unique row u's step, its weights read and written through `w` (RowWriter's interface).
  template <class Writer>
  RECMIX_HOST_DEVICE void step_row(std::int64_t u, const Writer& w) const {
    const UpdateRows& p = update;
    const std::int64_t row = p.unique_rows[u];
    float g[kChunk], x[kChunk];
    if (p.kind == SparseOptimizerKind::rowwise_adagrad) {
      float sum_sq = 0.f;
      for (std::int64_t d0 = 0; d0 < p.dim; d0 += kChunk) {
        const int n = p.dim - d0 < kChunk ? static_cast<int>(p.dim - d0) : kChunk;
        p.sum_chunk(u, d0, n, g);
        for (int i = 0; i < n; ++i) sum_sq += g[i] * g[i];
      }
      p.state[row] += sum_sq / static_cast<float>(p.dim);
      const float rate = p.lr / (sqrtf(p.state[row]) + p.eps);
      for (std::int64_t d0 = 0; d0 < p.dim; d0 += kChunk) {
        const int n = p.dim - d0 < kChunk ? static_cast<int>(p.dim - d0) : kChunk;
        if (p.dim > kChunk) p.sum_chunk(u, d0, n, g);  // recomputed: same values, same order
        w.read_chunk(d0, n, x);
        for (int i = 0; i < n; ++i) x[i] = x[i] - rate * g[i];
        w.write_chunk(d0, n, x);
      }
      return;
    }
    for (std::int64_t d0 = 0; d0 < p.dim; d0 += kChunk) {
      const int n = p.dim - d0 < kChunk ? static_cast<int>(p.dim - d0) : kChunk;
      p.sum_chunk(u, d0, n, g);
      w.read_chunk(d0, n, x);
      if (p.kind == SparseOptimizerKind::sgd) {
        for (int i = 0; i < n; ++i) x[i] = x[i] - p.lr * g[i];
      } else {  // adagrad
        float* s = p.state + row * p.dim + d0;
        for (int i = 0; i < n; ++i) {
          s[i] += g[i] * g[i];
          x[i] = x[i] - p.lr * g[i] / (sqrtf(s[i]) + p.eps);
        }
      }
      w.write_chunk(d0, n, x);
    }
  }

  // Fine decomposition: component d of unique row u as UpdateRows::fine computes it (SGD,
  // Adagrad), then rounded as above; row-wise Adagrad keeps a row per item.
  RECMIX_HOST_DEVICE std::int64_t fine_items(std::int64_t items) const { return update.fine_items(items); }
  RECMIX_HOST_DEVICE void fine(std::int64_t i) const {
    const UpdateRows& p = update;
    if (p.kind == SparseOptimizerKind::rowwise_adagrad) {
      (*this)(i);
      return;
    }
    const std::int64_t u = i / p.dim, d = i % p.dim;
    if (p.unique_count && u >= *p.unique_count) return;
    float g = 0.f;
    for (std::int64_t e = p.entry_offsets[u]; e < p.entry_offsets[u + 1]; ++e) {
      const float src = p.grad[p.entry_grad[e] * p.dim + d];
      if (p.entry_scale)
        g += src * p.entry_scale[e];
      else
        g += src;
    }
    const std::int64_t row = p.unique_rows[u];
    const RowWriter w = writer(row);
    if (p.kind == SparseOptimizerKind::sgd) {
      w.write(d, w.read(d) - p.lr * g);
    } else {  // adagrad
      float& s = p.state[row * p.dim + d];
      s += g * g;
      w.write(d, w.read(d) - p.lr * g / (sqrtf(s) + p.eps));
    }
  }

  // Lanes: 4 components of unique row u as UpdateRows::lane steps them, then rounded as above
  // (row-wise Adagrad: RowwiseState over `update` first).
  RECMIX_HOST_DEVICE std::int64_t lane_items(std::int64_t items) const { return update.lane_items(items); }
  RECMIX_HOST_DEVICE void lane(std::int64_t i) const {
    const UpdateRows& p = update;
    const LaneAt at = lane_at(i, p.dim);
    if (p.unique_count && at.item >= *p.unique_count) return;
    float g[kLane], x[kLane] = {0.f, 0.f, 0.f, 0.f};
    p.lane_gradient(at, g);
    const std::int64_t row = p.unique_rows[at.item];
    const RowWriter w = writer(row);
    for (int c = 0; c < kLane; ++c)  // to the constant kLane: embedding/lanes.hpp
      if (c < at.n) x[c] = w.read(at.d0 + c);
    p.lane_step(row, at, g, x);
    for (int c = 0; c < kLane; ++c)
      if (c < at.n) w.write(at.d0 + c, x[c]);
  }
};

}  // namespace recmix::embedding::kernels
