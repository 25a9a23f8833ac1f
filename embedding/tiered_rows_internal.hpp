#pragma once
// What the source files of TieredRows share (tiered_rows.cpp, tiered_rows_staging.cpp,
// tiered_rows_write_back.cpp): the prefetch distance of their loops over rows and the clock that
// times staging. Internal to recmix_embedding.
#include <chrono>
#include <cstdint>

namespace recmix::embedding::detail {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The loops over rows touch per-row arrays (over every local row) and host-tier rows at random:
// each asks for the entry kAhead iterations on before it needs it, so that the misses overlap.
inline constexpr std::int64_t kAhead = 16;

}  // namespace recmix::embedding::detail
