#pragma once
// Which embedding rows are hot (kept in device memory) and which cold (in the host tier), per
// shard a rank owns: the plan the hot/cold tiers are built on. Pure bookkeeping, no memory: rows
// are ranked by access count (the dataset's /access_counts, or counts gathered online), ties to
// the lower row, so every rank and every run derives the same plan from the same counts.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace recmix::embedding {

// One shard's split. Rows are shard-local ([0, rows)); slots number the hot rows [0, hot) in the
// device tier and the cold rows [0, cold) in the host tier, each in row order.
class ShardTiers {
 public:
  ShardTiers() = default;
  // The `hot` rows with the highest counts (counts.size() == rows; empty counts: none known, the
  // lowest rows are hot). ConfigError when hot is outside [0, rows].
  static ShardTiers by_counts(std::int64_t rows, std::span<const std::int64_t> counts, std::int64_t hot);

  std::int64_t rows() const { return static_cast<std::int64_t>(slot_.size()); }
  std::int64_t hot_count() const { return static_cast<std::int64_t>(hot_rows_.size()); }
  std::int64_t cold_count() const { return static_cast<std::int64_t>(cold_rows_.size()); }
  bool is_hot(std::int64_t row) const { return slot_[static_cast<std::size_t>(row)] >= 0; }
  // Hot: the device slot. Cold: the host slot.
  std::int64_t slot(std::int64_t row) const {
    const std::int64_t s = slot_[static_cast<std::size_t>(row)];
    return s >= 0 ? s : -s - 1;
  }
  const std::vector<std::int64_t>& hot_rows() const { return hot_rows_; }    // by device slot
  const std::vector<std::int64_t>& cold_rows() const { return cold_rows_; }  // by host slot

 private:
  std::vector<std::int64_t> slot_;  // per row: device slot, or -(host slot) - 1
  std::vector<std::int64_t> hot_rows_, cold_rows_;
};

// What a re-rank moves: rows that turn hot (from the host tier to the device) and rows that turn
// cold, each in row order.
struct TierMoves {
  std::vector<std::int64_t> to_device, to_host;
};
TierMoves tier_moves(const ShardTiers& before, const ShardTiers& after);

// Hot rows per shard for a rank whose hot rows may take `budget_rows` rows in all: the rows with
// the highest counts over all its shards together (ties: lower shard, then lower row), so the
// budget follows access frequency. counts[i] holds shard i's counts (empty: unknown, ranked below
// every counted row, lower rows first). Never more than a shard's rows.
std::vector<std::int64_t> hot_rows_per_shard(std::int64_t budget_rows,
                                             const std::vector<std::int64_t>& shard_rows,
                                             const std::vector<std::vector<std::int64_t>>& counts);

// Hot rows of a shard of `rows` rows for a hot fraction in (0, 1]: the fraction rounded up, at
// least one row. ConfigError outside (0, 1].
std::int64_t hot_rows_for_fraction(std::int64_t rows, double hot_fraction);

}  // namespace recmix::embedding
