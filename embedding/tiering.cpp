#include "embedding/tiering.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numeric>
#include <queue>
#include <stdexcept>

#include "core/error.hpp"
#include "core/hot_rows.hpp"

namespace recmix::embedding {

ShardTiers ShardTiers::by_counts(std::int64_t rows, std::span<const std::int64_t> counts, std::int64_t hot) {
  RECMIX_REQUIRE(rows >= 0, ConfigError, fmt::format("tiers: a shard of {} rows", rows));
  RECMIX_REQUIRE(hot >= 0 && hot <= rows, ConfigError,
                 fmt::format("tiers: {} hot rows asked of a shard of {} rows", hot, rows));
  RECMIX_REQUIRE(counts.empty() || static_cast<std::int64_t>(counts.size()) == rows, ConfigError,
                 fmt::format("tiers: {} access counts for a shard of {} rows", counts.size(), rows));
  ShardTiers t;
  t.slot_.assign(static_cast<std::size_t>(rows), -1);
  std::vector<std::int64_t> order(static_cast<std::size_t>(rows));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (!counts.empty())  // highest counts first, ties to the lower row
    std::partial_sort(order.begin(), order.begin() + hot, order.end(), [&](std::int64_t a, std::int64_t b) {
      return counts[a] != counts[b] ? counts[a] > counts[b] : a < b;
    });
  std::vector<char> chosen(static_cast<std::size_t>(rows), 0);
  for (std::int64_t i = 0; i < hot; ++i) chosen[order[i]] = 1;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (chosen[r]) {
      t.slot_[r] = static_cast<std::int64_t>(t.hot_rows_.size());
      t.hot_rows_.push_back(r);
    } else {
      t.slot_[r] = -static_cast<std::int64_t>(t.cold_rows_.size()) - 1;
      t.cold_rows_.push_back(r);
    }
  }
  return t;
}

TierMoves tier_moves(const ShardTiers& before, const ShardTiers& after) {
  RECMIX_REQUIRE(before.rows() == after.rows(), Error,
                 fmt::format("tiers: re-rank of a shard of {} rows into one of {}", before.rows(), after.rows()));
  TierMoves m;
  for (std::int64_t r = 0; r < before.rows(); ++r) {
    if (!before.is_hot(r) && after.is_hot(r)) m.to_device.push_back(r);
    if (before.is_hot(r) && !after.is_hot(r)) m.to_host.push_back(r);
  }
  return m;
}

std::vector<std::int64_t> hot_rows_per_shard(std::int64_t budget_rows, const std::vector<std::int64_t>& shard_rows,
                                             const std::vector<std::vector<std::int64_t>>& counts) {
  RECMIX_REQUIRE(counts.size() == shard_rows.size(), Error, "tiers: counts and shards differ in number");
  const std::size_t n = shard_rows.size();
  std::vector<std::int64_t> hot(n, 0);
  std::int64_t total = 0;
  for (std::size_t s = 0; s < n; ++s) total += shard_rows[s];
  if (budget_rows >= total) return shard_rows;
  // Merge the shards' rows in descending count (each shard's rows sorted once), taking the budget.
  struct Head {
    std::int64_t count;  // -1: unknown
    std::size_t shard;
    std::int64_t row, next;
  };
  auto later = [](const Head& a, const Head& b) {  // priority order: count desc, shard asc, row asc
    if (a.count != b.count) return a.count < b.count;
    if (a.shard != b.shard) return a.shard > b.shard;
    return a.row > b.row;
  };
  std::vector<std::vector<std::int64_t>> order(n);
  std::priority_queue<Head, std::vector<Head>, decltype(later)> heads(later);
  auto count_of = [&](std::size_t s, std::int64_t r) { return counts[s].empty() ? -1 : counts[s][r]; };
  for (std::size_t s = 0; s < n; ++s) {
    RECMIX_REQUIRE(counts[s].empty() || static_cast<std::int64_t>(counts[s].size()) == shard_rows[s], Error,
                   fmt::format("tiers: shard {} has {} counts for {} rows", s, counts[s].size(), shard_rows[s]));
    order[s].resize(static_cast<std::size_t>(shard_rows[s]));
    std::iota(order[s].begin(), order[s].end(), std::int64_t{0});
    if (!counts[s].empty())
      std::stable_sort(order[s].begin(), order[s].end(),
                       [&](std::int64_t a, std::int64_t b) { return counts[s][a] > counts[s][b]; });
    if (!order[s].empty()) heads.push({count_of(s, order[s][0]), s, order[s][0], 1});
  }
  for (std::int64_t taken = 0; taken < budget_rows && !heads.empty(); ++taken) {
    Head h = heads.top();
    heads.pop();
    ++hot[h.shard];
    if (h.next < shard_rows[h.shard]) {
      const std::int64_t r = order[h.shard][static_cast<std::size_t>(h.next)];
      heads.push({count_of(h.shard, r), h.shard, r, h.next + 1});
    }
  }
  return hot;
}

std::int64_t hot_rows_for_fraction(std::int64_t rows, double hot_fraction) {
  // The job spec's parser owns the rule (with the key in its error); this is the invariant.
  if (!(hot_fraction > 0 && hot_fraction <= 1))
    throw std::invalid_argument(fmt::format("hot_rows_for_fraction: hot fraction {} is outside (0, 1]", hot_fraction));
  return hot_rows_of_fraction(rows, hot_fraction);
}

}  // namespace recmix::embedding
