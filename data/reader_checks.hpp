#pragma once
// The reader's loops over batch memory: value checks in place (packed batches), copies fused with
// checks, and the row-major -> per-table index transposes. Internal to recmix_data.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace recmix::data::detail {

// --- checks in place (packed one-hot batches) ---

// Whether every label of x[0..n) is within [0, 1] (NaN is not).
bool labels_ok(const float* x, std::size_t n);

// Whether every value of x[0..n) is finite.
bool all_finite(const float* x, std::size_t n);

// Index of the first non-finite value of x[0..n), or n.
std::size_t first_non_finite(const float* x, std::size_t n);

// Whether every index of the row-major [m x T] block x is within its table: x[j * T + t] <= max[t]
// as unsigned (so negative indices fail too). `max` holds the T limits repeated for kLimitRows
// rows, so that the loop runs over whole vectors of flat memory.
constexpr int kLimitRows = 8;
bool indices_ok(const std::int32_t* x, std::int64_t m, int T, const std::uint32_t* max);

// --- copies fused with validation ---

// Copies n floats; true when some value is not finite (an all-ones exponent).
bool copy_dense(const float* src, float* dst, std::size_t n);

// Copies n labels; true when some label is outside [0, 1] (or NaN).
bool copy_labels(const float* src, float* dst, std::size_t n);

// --- the index transposes ---

// The per-table index arrays of a batch as one array of pointers (on the stack for up to 256
// tables), for the row-major -> per-table transposes.
class TableColumns {
 public:
  explicit TableColumns(std::vector<std::vector<std::int64_t>>& indices) {
    const std::size_t tables = indices.size();
    if (tables > fixed_.size()) many_.resize(tables);
    std::int64_t** p = data();
    for (std::size_t t = 0; t < tables; ++t) p[t] = indices[t].data();
  }
  std::int64_t** data() { return many_.empty() ? fixed_.data() : many_.data(); }

 private:
  std::array<std::int64_t*, 256> fixed_{};
  std::vector<std::int64_t*> many_;
};

// Row-major [m x T] indices -> T arrays out[t][0..m), widened to int64. Returns true when some
// value v of column t is outside [0, max[t]] (max[t] = table rows - 1, clamped to the source type).
// S is std::int32_t (AVX2 where the CPU has it) or std::int64_t.
template <class S>
bool transpose_widen(const S* src, int T, std::int64_t m, std::int64_t* const* out, const S* max);
extern template bool transpose_widen<std::int32_t>(const std::int32_t*, int, std::int64_t, std::int64_t* const*,
                                                   const std::int32_t*);
extern template bool transpose_widen<std::int64_t>(const std::int64_t*, int, std::int64_t, std::int64_t* const*,
                                                   const std::int64_t*);

}  // namespace recmix::data::detail
