// The hot/cold plan of a rank's shards (tiering.hpp) against hand-worked cases.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "core/error.hpp"
#include "embedding/tiering.hpp"

using namespace recmix;
using namespace recmix::embedding;

TEST(Tiering, HottestRowsByCountTiesToTheLowerRow) {
  const std::vector<std::int64_t> counts = {5, 9, 0, 9, 1, 5};
  auto t = ShardTiers::by_counts(6, counts, 3);
  EXPECT_EQ(t.hot_rows(), (std::vector<std::int64_t>{0, 1, 3}));  // 9, 9, then the first 5
  EXPECT_EQ(t.cold_rows(), (std::vector<std::int64_t>{2, 4, 5}));
  EXPECT_TRUE(t.is_hot(3));
  EXPECT_FALSE(t.is_hot(5));
  EXPECT_EQ(t.slot(3), 2);  // device slot
  EXPECT_EQ(t.slot(4), 1);  // host slot
  EXPECT_EQ(t.hot_count() + t.cold_count(), t.rows());
}

TEST(Tiering, WithoutCountsTheLowestRowsAreHot) {
  auto t = ShardTiers::by_counts(5, {}, 2);
  EXPECT_EQ(t.hot_rows(), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(ShardTiers::by_counts(4, {}, 0).hot_count(), 0);
  EXPECT_EQ(ShardTiers::by_counts(4, {}, 4).cold_count(), 0);
}

TEST(Tiering, BadRequestsAreConfigErrors) {
  EXPECT_THROW(ShardTiers::by_counts(4, {}, 5), ConfigError);
  EXPECT_THROW(ShardTiers::by_counts(4, std::vector<std::int64_t>{1, 2}, 1), ConfigError);
}

// The job spec's parser owns the (0, 1] rule and names the key; below it a fraction outside is a
// caller's mistake.
TEST(Tiering, AFractionOutsideItsRangeIsAnInvalidArgument) {
  EXPECT_THROW(hot_rows_for_fraction(10, 0.0), std::invalid_argument);
  EXPECT_THROW(hot_rows_for_fraction(10, 1.5), std::invalid_argument);
}

TEST(Tiering, MovesOfAReRank) {
  auto before = ShardTiers::by_counts(5, std::vector<std::int64_t>{9, 8, 0, 0, 0}, 2);
  auto after = ShardTiers::by_counts(5, std::vector<std::int64_t>{9, 0, 0, 7, 0}, 2);
  auto m = tier_moves(before, after);
  EXPECT_EQ(m.to_device, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(m.to_host, (std::vector<std::int64_t>{1}));
  EXPECT_TRUE(tier_moves(after, after).to_device.empty());
}

TEST(Tiering, FractionRoundsUpButNotPastAWholeProduct) {
  EXPECT_EQ(hot_rows_for_fraction(1000, 0.1), 100);
  EXPECT_EQ(hot_rows_for_fraction(1000, 0.1001), 101);
  EXPECT_EQ(hot_rows_for_fraction(3, 0.01), 1);  // at least one row
  EXPECT_EQ(hot_rows_for_fraction(7, 1.0), 7);
  EXPECT_EQ(hot_rows_for_fraction(0, 0.5), 0);
}

TEST(Tiering, ABudgetFollowsAccessCountsAcrossShards) {
  // Shard 0: counts 10, 1, 1; shard 1: 7, 7, 0, 0; shard 2: unknown counts.
  const std::vector<std::int64_t> rows = {3, 4, 2};
  const std::vector<std::vector<std::int64_t>> counts = {{10, 1, 1}, {7, 7, 0, 0}, {}};
  EXPECT_EQ(hot_rows_per_shard(3, rows, counts), (std::vector<std::int64_t>{1, 2, 0}));
  EXPECT_EQ(hot_rows_per_shard(5, rows, counts), (std::vector<std::int64_t>{3, 2, 0}));  // the 1s, then 0s
  EXPECT_EQ(hot_rows_per_shard(8, rows, counts), (std::vector<std::int64_t>{3, 4, 1}));  // unknown rows last
  EXPECT_EQ(hot_rows_per_shard(100, rows, counts), rows);
  EXPECT_EQ(hot_rows_per_shard(0, rows, counts), (std::vector<std::int64_t>{0, 0, 0}));
}
