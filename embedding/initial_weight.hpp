#pragma once
// The initial value of every embedding element: a pure function of (seed, table, row, col), so
// every shard layout on any number of ranks starts from the same weights. Kept free of C++20
// library types because nvcc compiles it too.
#include <cmath>
#include <cstdint>

#include "core/random.hpp"
#include "device/types.hpp"

namespace recmix::embedding {

// RNG stream of table t's initial weights (kept away from the small stream numbers other layers use).
RECMIX_HOST_DEVICE inline std::uint64_t init_stream(int table) {
  return 0x454D4200000000ull + static_cast<std::uint64_t>(table);  // "EMB" << 32 | table
}

// Initial value of element (row, col) of a table of `rows` rows: uniform(-sqrt(1/rows), +sqrt(1/rows))
// as in the reference DLRM, drawn at counter row * dim + col of stream init_stream(table).
RECMIX_HOST_DEVICE inline float initial_weight(std::uint64_t seed, int table, std::int64_t rows,
                                               int dim, std::int64_t row, int col) {
  float bound = sqrtf(1.0f / static_cast<float>(rows));
  return random::uniform(seed, init_stream(table),
                         static_cast<std::uint64_t>(row) * static_cast<std::uint64_t>(dim) +
                             static_cast<std::uint64_t>(col),
                         -bound, bound);
}

}  // namespace recmix::embedding
