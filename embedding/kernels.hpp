#pragma once
// The embedding kernels, written once as host/device functors: the CPU backend runs them with
// device::cpu::parallel_for, the CUDA backend launches the same functors (embedding/cuda/).
// All shards a rank owns live in one weight buffer; `rows` below index that buffer.
#include <cmath>
#include <cstdint>

#include "device/types.hpp"
#include "embedding/initial_weight.hpp"
#include "embedding/lanes.hpp"
#include "embedding/sparse_optimizer.hpp"

namespace recmix::embedding::kernels {

// Bag j: out[out_pos[j]] (out[j] when out_pos is null) = sum of the weights rows
// rows[offsets[j] .. offsets[j+1]), in index order;
// divided by the bag's length when `mean` (an empty bag gives zeros).
// Bag j of a pooling, for any table storage: `value(row, d)` reads element d of a weights row as
// fp32 (PoolBags: the float itself; the 16-bit tables: its conversion), summed in index order.
template <class Value>
RECMIX_HOST_DEVICE void pool_bag(std::int64_t j, std::int64_t dim, const std::int64_t* offsets, const std::int64_t* rows,
                                 const std::int64_t* out_pos, float* out, bool mean, const Value& value) {
  float* o = out + (out_pos ? out_pos[j] : j) * dim;
  const std::int64_t begin = offsets[j], end = offsets[j + 1];
  for (std::int64_t d = 0; d < dim; ++d) o[d] = 0.f;
  for (std::int64_t k = begin; k < end; ++k)
    for (std::int64_t d = 0; d < dim; ++d) o[d] += value(rows[k], d);
  if (mean && end > begin) {
    const float inv = 1.0f / static_cast<float>(end - begin);
    for (std::int64_t d = 0; d < dim; ++d) o[d] *= inv;
  }
}

struct PoolBags {
  const float* weights;
  std::int64_t dim;
  const std::int64_t* offsets;
  const std::int64_t* rows;
  const std::int64_t* out_pos;  // nullptr: bag j writes vector j
  float* out;
  bool mean;
  bool prefetch = true;  // lanes only: the next row's load issued before the current row's sum

  struct Fp32 {
    const float* weights;
    std::int64_t dim;
    RECMIX_HOST_DEVICE float operator()(std::int64_t row, std::int64_t d) const { return weights[row * dim + d]; }
    RECMIX_HOST_DEVICE void operator()(std::int64_t row, std::int64_t d0, int n, float* v) const {
      load_lane(weights + row * dim + d0, n, v);
    }
  };
  RECMIX_HOST_DEVICE void operator()(std::int64_t j) const {
    pool_bag(j, dim, offsets, rows, out_pos, out, mean, Fp32{weights, dim});
  }
  // Fine decomposition (device/fine_grained.hpp): component d of bag j, the same sum.
  RECMIX_HOST_DEVICE std::int64_t fine_items(std::int64_t bags) const { return bags * dim; }
  RECMIX_HOST_DEVICE void fine(std::int64_t i) const {
    const std::int64_t j = i / dim, d = i % dim;
    const std::int64_t begin = offsets[j], end = offsets[j + 1];
    float acc = 0.f;
    for (std::int64_t k = begin; k < end; ++k) acc += weights[rows[k] * dim + d];
    if (mean && end > begin) acc *= 1.0f / static_cast<float>(end - begin);
    out[(out_pos ? out_pos[j] : j) * dim + d] = acc;
  }
  // Lanes (device/fine_grained.hpp): 4 components of bag j, the same sums.
  RECMIX_HOST_DEVICE std::int64_t lane_items(std::int64_t bags) const { return bags * lanes_per_row(dim); }
  RECMIX_HOST_DEVICE void lane(std::int64_t i) const {
    pool_lane(lane_at(i, dim), dim, offsets, rows, out_pos, out, mean, prefetch, Fp32{weights, dim});
  }
};

// Unique row u (weights row unique_rows[u]) receives the gradient vectors
// grad[entry_grad[e]] * entry_scale[e] for e in [entry_offsets[u], entry_offsets[u+1]), summed in
// that order (the caller orders entries by position in the global batch), then one optimizer step.
// Rows are distinct, so every u can run in parallel.
struct UpdateRows {
  float* weights;
  float* state;  // Adagrad: [rows x dim]; row-wise Adagrad: [rows]; SGD: unused
  std::int64_t dim;
  SparseOptimizerKind kind;
  float lr, eps;
  const std::int64_t* unique_rows;
  const std::int64_t* entry_offsets;
  const std::int64_t* entry_grad;
  const float* entry_scale;  // nullptr: all 1
  const float* grad;
  // When set (the device grouping), the number of unique rows, read on the device: the launch
  // covers an upper bound and items past it return at once.
  const std::int64_t* unique_count = nullptr;

  // Dims are processed in chunks held in registers / local memory.
  static constexpr int kChunk = 64;

  // g[0 .. n) = summed gradient of dims [d0, d0 + n) of unique row u.
  RECMIX_HOST_DEVICE void sum_chunk(std::int64_t u, std::int64_t d0, int n, float* g) const {
    for (int i = 0; i < n; ++i) g[i] = 0.f;
    for (std::int64_t e = entry_offsets[u]; e < entry_offsets[u + 1]; ++e) {
      const float* src = grad + entry_grad[e] * dim + d0;
      if (entry_scale) {
        const float sc = entry_scale[e];
        for (int i = 0; i < n; ++i) g[i] += src[i] * sc;
      } else {
        for (int i = 0; i < n; ++i) g[i] += src[i];
      }
    }
  }

  // Row-wise Adagrad's state step for unique row u: the mean of its summed gradient's squares,
  // added in component order.
  RECMIX_HOST_DEVICE void row_state(std::int64_t u) const {
    if (unique_count && u >= *unique_count) return;
    float g[kChunk];
    state[unique_rows[u]] += sum_squares(u, g) / static_cast<float>(dim);
  }
  // The sum of squares of unique row u's summed gradient, in component order; g is left holding
  // the last chunk's gradient (the whole row's when dim <= kChunk).
  RECMIX_HOST_DEVICE float sum_squares(std::int64_t u, float* g) const {
    float sum_sq = 0.f;
    for (std::int64_t d0 = 0; d0 < dim; d0 += kChunk) {
      const int n = dim - d0 < kChunk ? static_cast<int>(dim - d0) : kChunk;
      sum_chunk(u, d0, n, g);
      for (int i = 0; i < n; ++i) sum_sq += g[i] * g[i];
    }
    return sum_sq;
  }

  RECMIX_HOST_DEVICE void operator()(std::int64_t u) const {
    if (unique_count && u >= *unique_count) return;
    const std::int64_t row = unique_rows[u];
    float* w = weights + row * dim;
    float g[kChunk];
    if (kind == SparseOptimizerKind::rowwise_adagrad) {
      state[row] += sum_squares(u, g) / static_cast<float>(dim);
      const float step = lr / (sqrtf(state[row]) + eps);
      for (std::int64_t d0 = 0; d0 < dim; d0 += kChunk) {
        const int n = dim - d0 < kChunk ? static_cast<int>(dim - d0) : kChunk;
        if (dim > kChunk) sum_chunk(u, d0, n, g);  // recomputed: same values, same order
        for (int i = 0; i < n; ++i) w[d0 + i] -= step * g[i];
      }
      return;
    }
    for (std::int64_t d0 = 0; d0 < dim; d0 += kChunk) {
      const int n = dim - d0 < kChunk ? static_cast<int>(dim - d0) : kChunk;
      sum_chunk(u, d0, n, g);
      if (kind == SparseOptimizerKind::sgd) {
        for (int i = 0; i < n; ++i) w[d0 + i] -= lr * g[i];
      } else {  // adagrad
        float* s = state + row * dim + d0;
        for (int i = 0; i < n; ++i) {
          s[i] += g[i] * g[i];
          w[d0 + i] -= lr * g[i] / (sqrtf(s[i]) + eps);
        }
      }
    }
  }

  // Fine decomposition: component d of unique row u (SGD, Adagrad), its entries summed in the
  // same order; row-wise Adagrad needs the whole row's gradient for its one state, so it keeps a
  // row per item.
  RECMIX_HOST_DEVICE std::int64_t fine_items(std::int64_t items) const {
    return kind == SparseOptimizerKind::rowwise_adagrad ? items : items * dim;
  }
  RECMIX_HOST_DEVICE void fine(std::int64_t i) const {
    if (kind == SparseOptimizerKind::rowwise_adagrad) {
      (*this)(i);
      return;
    }
    const std::int64_t u = i / dim, d = i % dim;
    if (unique_count && u >= *unique_count) return;
    float g = 0.f;
    for (std::int64_t e = entry_offsets[u]; e < entry_offsets[u + 1]; ++e) {
      const float src = grad[entry_grad[e] * dim + d];
      if (entry_scale)
        g += src * entry_scale[e];
      else
        g += src;
    }
    const std::int64_t row = unique_rows[u];
    float& w = weights[row * dim + d];
    if (kind == SparseOptimizerKind::sgd) {
      w -= lr * g;
    } else {  // adagrad
      float& s = state[row * dim + d];
      s += g * g;
      w -= lr * g / (sqrtf(s) + eps);
    }
  }

  // Lanes: 4 components of unique row u, their entries summed in the same order. Row-wise Adagrad
  // reads the row's state, which RowwiseState must have stepped first (the launchers run it over
  // the same rows just before), since no lane sees the whole row.
  RECMIX_HOST_DEVICE std::int64_t lane_items(std::int64_t items) const { return items * lanes_per_row(dim); }
  // g[0 .. at.n) = the summed gradient of lane `at` (its item a unique row).
  // The entries are loaded kAhead at a time before they are added (in order), so that a popular
  // row's long run of entries keeps several loads in flight: one at a time, a lane waited a
  // memory latency per entry, and the update took twice as long as one component per thread.
  static constexpr int kAhead = 4;
  RECMIX_HOST_DEVICE void lane_gradient(LaneAt at, float* g) const {
    for (int c = 0; c < kLane; ++c) g[c] = 0.f;
    float src[kAhead][kLane] = {};  // loops to constants: embedding/lanes.hpp
    const std::int64_t end = entry_offsets[at.item + 1];
    for (std::int64_t e0 = entry_offsets[at.item]; e0 < end; e0 += kAhead) {
      for (int a = 0; a < kAhead; ++a)
        if (e0 + a < end) load_lane(grad + entry_grad[e0 + a] * dim + at.d0, at.n, src[a]);
      for (int a = 0; a < kAhead; ++a) {
        if (e0 + a >= end) break;
        if (entry_scale) {
          const float sc = entry_scale[e0 + a];
          for (int c = 0; c < kLane; ++c) g[c] += src[a][c] * sc;
        } else {
          for (int c = 0; c < kLane; ++c) g[c] += src[a][c];
        }
      }
    }
  }
  // x[0 .. at.n) = components [d0, d0 + n) of weights row `row`, stepped with gradient g.
  RECMIX_HOST_DEVICE void lane_step(std::int64_t row, LaneAt at, const float* g, float* x) const {
    if (kind == SparseOptimizerKind::sgd) {
      for (int c = 0; c < kLane; ++c)
        if (c < at.n) x[c] -= lr * g[c];
    } else if (kind == SparseOptimizerKind::adagrad) {
      float* s = state + row * dim + at.d0;
      for (int c = 0; c < kLane; ++c)
        if (c < at.n) {
          s[c] += g[c] * g[c];
          x[c] -= lr * g[c] / (sqrtf(s[c]) + eps);
        }
    } else {
      const float step = lr / (sqrtf(state[row]) + eps);
      for (int c = 0; c < kLane; ++c)
        if (c < at.n) x[c] -= step * g[c];
    }
  }
  RECMIX_HOST_DEVICE void lane(std::int64_t i) const {
    const LaneAt at = lane_at(i, dim);
    if (unique_count && at.item >= *unique_count) return;
    float g[kLane], x[kLane] = {0.f, 0.f, 0.f, 0.f};
    lane_gradient(at, g);
    const std::int64_t row = unique_rows[at.item];
    float* w = weights + row * dim + at.d0;
    load_lane(w, at.n, x);
    lane_step(row, at, g, x);
    store_lane(w, at.n, x);
  }
};

// Row-wise Adagrad's first pass under lanes: the state of each unique row (UpdateRows::row_state).
struct RowwiseState {
  UpdateRows update;
  RECMIX_HOST_DEVICE void operator()(std::int64_t u) const { update.row_state(u); }
};

// Element i of a shard of rows [row_begin, row_begin + n / dim) of `table`: its initial value.
struct InitShard {
  float* weights;
  std::uint64_t seed;
  int table;
  std::int64_t table_rows;
  int dim;
  std::int64_t row_begin;

  RECMIX_HOST_DEVICE void operator()(std::int64_t i) const {
    const std::int64_t r = i / dim;
    const int c = static_cast<int>(i - r * dim);
    weights[i] = initial_weight(seed, table, table_rows, dim, row_begin + r, c);
  }
};

// The device path's combine (forward): output vector j = the partial sums parts[pos[k]] for k in
// [offsets[j], offsets[j+1]) added in that order (the order of ranks, then shards), then
// multiplied by scale[j] when scale is not null (mean pooling: 1 / the bag's length). The host
// loop it replaces did the same additions in the same order, so the results are equal bit for bit.
struct CombineParts {
  const float* parts;
  std::int64_t dim;
  const std::int64_t* offsets;
  const std::int64_t* pos;
  const float* scale;
  float* out;

  RECMIX_HOST_DEVICE void operator()(std::int64_t j) const {
    float* o = out + j * dim;
    for (std::int64_t d = 0; d < dim; ++d) o[d] = 0.f;
    for (std::int64_t k = offsets[j]; k < offsets[j + 1]; ++k) {
      const float* p = parts + pos[k] * dim;
      for (std::int64_t d = 0; d < dim; ++d) o[d] += p[d];
    }
    if (scale) {
      const float s = scale[j];
      for (std::int64_t d = 0; d < dim; ++d) o[d] *= s;
    }
  }
  RECMIX_HOST_DEVICE std::int64_t fine_items(std::int64_t bags) const { return bags * dim; }
  RECMIX_HOST_DEVICE void fine(std::int64_t i) const {
    const std::int64_t j = i / dim, d = i % dim;
    float acc = 0.f;
    for (std::int64_t k = offsets[j]; k < offsets[j + 1]; ++k) acc += parts[pos[k] * dim + d];
    if (scale) acc *= scale[j];
    out[i] = acc;
  }
};

// The device path's gradient gather (backward): vector j of out = vector src_pos[j] of src,
// times scale[j] when scale is not null.
struct GatherRows {
  const float* src;
  std::int64_t dim;
  const std::int64_t* src_pos;
  const float* scale;
  float* out;

  RECMIX_HOST_DEVICE void operator()(std::int64_t j) const {
    const float* s = src + src_pos[j] * dim;
    float* o = out + j * dim;
    const float sc = scale ? scale[j] : 1.f;
    for (std::int64_t d = 0; d < dim; ++d) o[d] = s[d] * sc;
  }
  RECMIX_HOST_DEVICE std::int64_t fine_items(std::int64_t rows) const { return rows * dim; }
  RECMIX_HOST_DEVICE void fine(std::int64_t i) const {
    const std::int64_t j = i / dim, d = i % dim;
    out[i] = src[src_pos[j] * dim + d] * (scale ? scale[j] : 1.f);
  }
};

struct Fill {
  float* data;
  float value;
  RECMIX_HOST_DEVICE void operator()(std::int64_t i) const { data[i] = value; }
};

}  // namespace recmix::embedding::kernels
