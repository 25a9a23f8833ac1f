#pragma once
// How many rows of a shard a hot fraction keeps in device memory: the one rule that the tiered
// tables (embedding/tiering.hpp) and the memory estimator (sched/memory_estimator.cpp) both use.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace recmix {

// The hot rows of a shard of `rows` rows for a fraction in (0, 1] (the caller checks the range):
// the fraction rounded up, but not past a product that is a whole number but for rounding
// (0.1 x 1000 is 100, not 101), and at least one row of a shard that has any.
inline std::int64_t hot_rows_of_fraction(std::int64_t rows, double hot_fraction) {
  if (rows <= 0) return 0;
  const double want = hot_fraction * static_cast<double>(rows) * (1 - 1e-12);
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(want)), 1, rows);
}

}  // namespace recmix
