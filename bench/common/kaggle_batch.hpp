#pragma once
// Synthetic Kaggle-shaped batches for the training-step benchmarks, generated in memory.
#include <algorithm>
#include <cstdint>

#include "core/random.hpp"
#include "data/reader.hpp"

namespace recmix::bench {

// Global batch g's slice for this rank: one index per bag, uniform over each table, packed as the
// trainer's reader gives them (int32, row-major).
inline data::Batch make_batch(std::int64_t global_batch, int rank, int world, int tables, std::int64_t rows, int g) {
  const std::int64_t base = global_batch / world, extra = global_batch % world;
  const std::int64_t begin = rank * base + std::min<std::int64_t>(rank, extra);
  const std::int64_t size = base + (rank < extra ? 1 : 0);
  data::Batch b;
  b.size = size;
  b.dense.resize(size * 13);
  b.labels.resize(size);
  b.packed = true;
  b.tables = tables;
  b.one_hot.resize(size * tables);
  for (std::int64_t i = 0; i < size; ++i) {
    const std::uint64_t sample = static_cast<std::uint64_t>(g) * global_batch + begin + i;
    for (int d = 0; d < 13; ++d) b.dense[i * 13 + d] = random::uniform(7, d, sample, 0.f, 5.f);
    b.labels[i] = random::uniform01(8, 0, sample) < 0.25f ? 1.f : 0.f;
  }
  for (int t = 0; t < tables; ++t)
    for (std::int64_t i = 0; i < size; ++i)
      b.one_hot[i * tables + t] = static_cast<std::int32_t>(
          random::hash(9, t, static_cast<std::uint64_t>(g) * global_batch + begin + i) % rows);
  return b;
}

}  // namespace recmix::bench
