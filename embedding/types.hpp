#pragma once
// The vocabulary of the sparse half of the model: table shapes, pooling modes, one table's bags
// of indices in CSR form (and, via initial_weight.hpp, every element's initial value).
#include <cstdint>
#include <span>

#include "embedding/initial_weight.hpp"

namespace recmix::embedding {

enum class Pooling { sum, mean };

struct TableSpec {
  std::int64_t rows;
  int dim;
};

// One table's bags over the local batch: bag b holds indices[offsets[b] .. offsets[b+1]).
// offsets has local_batch + 1 non-decreasing entries, usually starting at 0 (a slice of a larger
// CSR may start further on); an empty bag pools to zeros.
struct Bags {
  std::span<const std::int64_t> offsets;
  std::span<const std::int64_t> indices;
};

}  // namespace recmix::embedding
