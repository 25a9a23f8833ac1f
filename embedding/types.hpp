#pragma once
// The vocabulary of the sparse half of the model: table shapes, pooling modes, one table's bags
// of indices in CSR form or one index per bag (and, via initial_weight.hpp, every element's initial value).
#include <cstdint>
#include <span>

#include "core/half.hpp"
#include "embedding/initial_weight.hpp"

namespace recmix::embedding {

enum class Pooling { sum, mean };

// The hot/cold tiers' choices (embedding/tiered_rows.hpp): which rows are hot (the dataset's
// access counts, or the rows most used so far), and where cold rows' updates are computed.
enum class HotSet { counts, lfu };
enum class ColdUpdate { device, host };

// How a layer's tables are stored (docs/math.md): fp32, or 16 bits (fp16 or bf16) read to fp32
// for pooling and the optimizer's arithmetic, each updated weight rounded back to nearest or
// stochastically (keyed by seed, table, step, row and column). Optimizer state stays fp32.
struct TableStorage {
  half::Storage type = half::Storage::fp32;
  bool stochastic = true;
};

struct TableSpec {
  std::int64_t rows;
  int dim;
  // The rows whose bound its initial values take (initial_weight: uniform(+-sqrt(1/init_rows)));
  // 0: its own. A scaled-down stand-in for a larger table (recmix data synth --preset) starts as
  // that table would.
  std::int64_t init_rows = 0;
  std::int64_t bound_rows() const { return init_rows > 0 ? init_rows : rows; }
};

// One table's bags over the local batch: bag b holds indices[offsets[b] .. offsets[b+1]).
// offsets has local_batch + 1 non-decreasing entries, usually starting at 0 (a slice of a larger
// CSR may start further on); an empty bag pools to zeros.
struct Bags {
  std::span<const std::int64_t> offsets;
  std::span<const std::int64_t> indices;
};

// A batch in which every bag holds exactly one index (the Criteo case), in the layout the dataset
// stores it: sample b's index into table t is indices[b * tables + t].
struct OneHotRows {
  std::span<const std::int32_t> indices;  // [local_batch x tables], row-major
  int tables = 0;
};

}  // namespace recmix::embedding
