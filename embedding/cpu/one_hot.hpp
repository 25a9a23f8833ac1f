#pragma once
#include <cstdint>

#include "embedding/half_kernels.hpp"
#include "embedding/kernels.hpp"
#include "embedding/types.hpp"

namespace recmix::embedding::cpu {

// The CPU fast path of a one-rank job whose tables are whole and whose bags each hold exactly
// one index (the Criteo case). Tables are independent there, so both halves run table by table
// over the threads, with no intermediate CSR and sorts of one table's batch at a time.
struct OneHotTables {
  float* weights;                    // null for 16-bit tables (half)
  float* state;                      // optimizer state (see kernels::UpdateRows); may be null for SGD
  std::int64_t dim;
  int tables, batch;
  const std::int64_t* const* indices;  // per table: `batch` indices into the table, or
  const std::int32_t* packed;          // when not null: [batch x tables], row-major (OneHotRows)
  const std::int64_t* table_base;      // per table: its first row in `weights`
  const std::int64_t* table_rows;      // per table: rows
  std::int64_t* rows;                  // [batch x tables]: weight row of each lookup (forward writes it)
  std::int64_t* scratch;               // 3 x batch x tables, for the update
  // 16-bit tables: their weights and how an update rounds (its `update` is filled in per row).
  const kernels::UpdateRowsHalf* half = nullptr;

  std::int64_t index(std::int64_t b, std::int64_t t) const {
    return packed ? packed[b * tables + t] : indices[t][b];
  }
};

// out[(b * tables + t) * dim ..] = row of indices[t][b] (sum or mean of one row are that row).
// Returns -1, or t * batch + b of the first index outside its table (tables in order, then bags),
// in which case nothing is pooled for it and the caller reports it.
std::int64_t one_hot_forward(int threads, const OneHotTables& f, float* out);

// Sums the gradients grad[(b * tables + t) * dim ..] of each table's duplicate rows in bag order
// and applies the sparse optimizer once per distinct row, exactly as kernels::UpdateRows does.
void one_hot_update(int threads, const OneHotTables& f, SparseOptimizerKind kind, float lr, float eps,
                    const float* grad);


}  // namespace recmix::embedding::cpu
