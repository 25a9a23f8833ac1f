#pragma once
// Rows of 16-bit tables on the CPU backend (the one-hot path, the general path's pooling and
// updates, checkpoint views), 16 elements at a time where the CPU has AVX-512 (F, DQ, BW, VL)
// and F16C: a row read to fp32, a row rounded back, and (the one-hot path's common case, fused)
// a row stepped by plain SGD and rounded back. Each gives the bits of the scalar functors of
// embedding/half_kernels.hpp (the conversions of core/half.hpp, the random bits of
// half::rounding_bits), element for element; `vectorised` = false runs those, so that tests hold
// both paths against each other.
#include <cstdint>

#include "core/half.hpp"
#include "embedding/half_kernels.hpp"

namespace recmix::embedding::cpu {

// Whether this CPU runs the vectorised rows (checked once).
bool half_rows_vectorised();

// out[d] = the fp32 value of w[d], d < n (`storage`: fp16 or bf16).
void widen_half_row(half::Storage storage, const std::uint16_t* w, float* out, std::int64_t n,
                    bool vectorised = half_rows_vectorised());

// How a step rounds the rows of one table: the storage, the mode, and for stochastic rounding the
// key of the table's random bits at this step (half::rounding_key), computed once for its rows.
struct RowRounding {
  half::Storage storage;
  bool stochastic;
  std::uint64_t key;

  static RowRounding of(const kernels::UpdateRowsHalf::RowWriter& w) {
    return {w.storage, w.stochastic, w.stochastic ? half::rounding_key(w.seed, w.table, w.step) : 0};
  }
};

// A row stepped by SGD for one gradient: w[d] = round(w[d] - lr (0 + g[d])), d < n, rounded as
// `r` says, element d stochastically with the bits of element first + d (table row x dim + d).
void sgd_half_row(const RowRounding& r, std::uint16_t* w, std::uint64_t first, const float* g, std::int64_t n,
                  float lr, bool vectorised = half_rows_vectorised());

// w[d] = x[d] rounded as `r` says, d < n (element d's random bits those of element first + d).
void round_half_row(const RowRounding& r, std::uint16_t* w, std::uint64_t first, const float* x, std::int64_t n,
                    bool vectorised = half_rows_vectorised());

// UpdateRowsHalf::RowWriter's chunks (kernels::UpdateRowsHalf::step_row) on the CPU: the row at
// `w`, element d the table's element first + d.
struct CpuRowWriter {
  std::uint16_t* w;
  RowRounding rounding;
  std::uint64_t first;
  bool vectorised;

  void read_chunk(std::int64_t d0, int n, float* x) const { widen_half_row(rounding.storage, w + d0, x, n, vectorised); }
  void write_chunk(std::int64_t d0, int n, const float* x) const {
    round_half_row(rounding, w + d0, first + static_cast<std::uint64_t>(d0), x, n, vectorised);
  }
};

// The same for the row a RowWriter writes, as it would round it.
inline void sgd_half_row(const kernels::UpdateRowsHalf::RowWriter& w, const float* g, std::int64_t n, float lr,
                         bool vectorised = half_rows_vectorised()) {
  sgd_half_row(RowRounding::of(w), w.w, w.first, g, n, lr, vectorised);
}

}  // namespace recmix::embedding::cpu
