// The sharding plan: automatic placement (table-wise, row-wise, balance by memory and traffic),
// the hand-written grammar, and the validation every plan goes through.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "embedding/sharding_plan.hpp"

using namespace recmix;
using namespace recmix::embedding;

namespace {

// Independent coverage check: every row of every table owned exactly once (ranges sorted per
// table must tile [0, rows)).
void expect_covers(const ShardingPlan& plan, const std::vector<TableSpec>& tables) {
  for (std::size_t t = 0; t < tables.size(); ++t) {
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
    for (const auto& s : plan.shards())
      if (s.table == static_cast<int>(t)) ranges.push_back({s.row_begin, s.row_end});
    std::sort(ranges.begin(), ranges.end());
    std::int64_t next = 0;
    for (auto [b, e] : ranges) {
      ASSERT_EQ(b, next) << "table " << t;
      ASSERT_LT(b, e) << "table " << t;
      next = e;
    }
    ASSERT_EQ(next, tables[t].rows) << "table " << t;
  }
  for (const auto& s : plan.shards()) {
    EXPECT_GE(s.rank, 0);
    EXPECT_LT(s.rank, plan.world_size());
  }
}

std::vector<double> rows_x_dim_per_rank(const ShardingPlan& plan) {
  std::vector<double> load(plan.world_size(), 0);
  for (const auto& s : plan.shards()) load[s.rank] += double(s.row_end - s.row_begin) * plan.tables()[s.table].dim;
  return load;
}

TEST(ShardingPlan, EqualTablesArePlacedWholeAndEvenly) {
  std::vector<TableSpec> tables(8, TableSpec{1000, 16});
  for (int world : {1, 2, 4}) {
    auto plan = ShardingPlan::automatic(tables, world);
    expect_covers(plan, tables);
    EXPECT_EQ(plan.shards().size(), tables.size()) << "no table should be split";
    auto load = rows_x_dim_per_rank(plan);
    for (int r = 0; r < world; ++r) EXPECT_EQ(load[r], 8.0 * 1000 * 16 / world) << "rank " << r;
  }
}

TEST(ShardingPlan, OneRankKeepsEveryTableWhole) {
  std::vector<TableSpec> tables{{10'000'000, 16}, {3, 16}, {100, 16}};
  auto plan = ShardingPlan::automatic(tables, 1);
  expect_covers(plan, tables);
  ASSERT_EQ(plan.shards().size(), 3u);
  for (const auto& s : plan.shards()) EXPECT_EQ(s.rank, 0);
}

TEST(ShardingPlan, LargeTableIsSplitRowWiseOverDistinctRanks) {
  std::vector<TableSpec> tables{{1000, 8}, {10, 8}, {10, 8}, {10, 8}};
  auto plan = ShardingPlan::automatic(tables, 4);
  expect_covers(plan, tables);
  std::vector<Shard> big;
  for (const auto& s : plan.shards())
    if (s.table == 0) big.push_back(s);
  ASSERT_EQ(big.size(), 4u);  // 1000 rows > ceil(1030 / 4): split into one range per rank
  std::vector<int> ranks;
  for (const auto& s : big) {
    ranks.push_back(s.rank);
    EXPECT_EQ(s.row_end - s.row_begin, 250);
  }
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2, 3}));
  for (int t = 1; t < 4; ++t) EXPECT_EQ(plan.shards_of_table(t).size(), 1u) << "small table " << t;
}

TEST(ShardingPlan, MaxRowsPerShardSplitsIntoContiguousRanges) {
  std::vector<TableSpec> tables{{100, 4}, {20, 4}};
  auto plan = ShardingPlan::automatic(tables, 2, {}, 30);
  expect_covers(plan, tables);
  auto ids = plan.shards_of_table(0);
  ASSERT_EQ(ids.size(), 4u);  // ceil(100 / 30)
  for (int i : ids) EXPECT_LE(plan.shards()[i].row_end - plan.shards()[i].row_begin, 30);
  EXPECT_EQ(plan.shards_of_table(1).size(), 1u);
  auto load = rows_x_dim_per_rank(plan);
  EXPECT_LE(std::abs(load[0] - load[1]), 30.0 * 4);  // within one piece of balance
}

TEST(ShardingPlan, AccessCountsSeparateTheHotTables) {
  // Four equal tables; tables 0 and 1 are looked up 100x more often than 2 and 3.
  std::vector<TableSpec> tables(4, TableSpec{50, 8});
  std::vector<std::vector<std::int64_t>> counts(4);
  for (int t = 0; t < 4; ++t) counts[t].assign(50, t < 2 ? 100 : 1);
  auto plan = ShardingPlan::automatic(tables, 2, counts);
  expect_covers(plan, tables);
  int rank_of[4];
  for (const auto& s : plan.shards()) rank_of[s.table] = s.rank;
  EXPECT_NE(rank_of[0], rank_of[1]) << plan.describe();
  EXPECT_NE(rank_of[2], rank_of[3]) << plan.describe();
  auto traffic = plan.traffic_per_rank();
  EXPECT_NEAR(traffic[0], traffic[1], 1e-9);
  // The hottest table's traffic is one lookup x dim per sample.
  EXPECT_NEAR(traffic[0] + traffic[1], 8.0 * (1 + 1 + 0.01 + 0.01), 1e-9);
  // Counts of the wrong length are refused.
  counts[2].pop_back();
  EXPECT_THROW(ShardingPlan::automatic(tables, 2, counts), ConfigError);
}

// The Criteo Kaggle table sizes (a few tables of millions of rows, many tiny ones): every rank
// within 30% of the mean in memory and in traffic, and the largest table split only when it
// cannot fit one rank's share.
TEST(ShardingPlan, CriteoKaggleTablesAreBalanced) {
  const std::int64_t rows[] = {1460,  583,   10131227, 2202608, 305,     24, 12517, 633,   3,
                               93145, 5683,  8351593,  3194,    27,      14992, 5461306, 10, 5652,
                               2173,  4,     7046547,  18,      15,      286181, 105,   142572};
  std::vector<TableSpec> tables;
  for (auto r : rows) tables.push_back({r, 16});
  for (int world : {2, 4, 8}) {
    auto plan = ShardingPlan::automatic(tables, world);
    expect_covers(plan, tables);
    auto mem = plan.memory_bytes_per_rank(), traffic = plan.traffic_per_rank();
    double mem_mean = 0, traffic_mean = 0;
    for (int r = 0; r < world; ++r) {
      mem_mean += mem[r] / world;
      traffic_mean += traffic[r] / world;
    }
    for (int r = 0; r < world; ++r) {
      EXPECT_LE(mem[r], 1.3 * mem_mean) << "world " << world << "\n" << plan.describe();
      EXPECT_LE(traffic[r], 1.3 * traffic_mean) << "world " << world << "\n" << plan.describe();
    }
    EXPECT_EQ(plan.shards_of_table(2).size() > 1, world >= 4) << plan.describe();  // 10.1M rows
    EXPECT_EQ(plan.shards_of_table(0).size(), 1u);
  }
}

TEST(ShardingPlan, ParsesTableWiseRowWiseAndExplicitRanges) {
  std::vector<TableSpec> tables{{10, 4}, {10, 4}, {9, 4}, {100, 4}};
  auto plan = ShardingPlan::parse("0:r0, 1:r1; 2:rowwise\n3:0-40@r1+40-100@r0", tables, 2);
  expect_covers(plan, tables);
  std::map<int, std::vector<Shard>> by_table;
  for (const auto& s : plan.shards()) by_table[s.table].push_back(s);
  ASSERT_EQ(by_table[0].size(), 1u);
  EXPECT_EQ(by_table[0][0].rank, 0);
  ASSERT_EQ(by_table[1].size(), 1u);
  EXPECT_EQ(by_table[1][0].rank, 1);
  ASSERT_EQ(by_table[2].size(), 2u);
  EXPECT_EQ(by_table[2][0].row_begin, 0);
  EXPECT_EQ(by_table[2][0].row_end, 4);
  EXPECT_EQ(by_table[2][0].rank, 0);
  EXPECT_EQ(by_table[2][1].row_end, 9);
  EXPECT_EQ(by_table[2][1].rank, 1);
  ASSERT_EQ(by_table[3].size(), 2u);
  EXPECT_EQ(by_table[3][0].row_end, 40);
  EXPECT_EQ(by_table[3][0].rank, 1);
  EXPECT_EQ(by_table[3][1].rank, 0);
  // The textual form parses back to the same shards.
  auto again = ShardingPlan::parse(plan.to_string(), tables, 2);
  ASSERT_EQ(again.shards().size(), plan.shards().size());
  for (int t = 0; t < 4; ++t) {
    auto a = plan.shards_of_table(t), b = again.shards_of_table(t);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(plan.shards()[a[i]].row_begin, again.shards()[b[i]].row_begin);
      EXPECT_EQ(plan.shards()[a[i]].rank, again.shards()[b[i]].rank);
    }
  }
  // rowwise on a table smaller than the world: only non-empty ranges.
  std::vector<TableSpec> tiny{{2, 4}};
  auto small = ShardingPlan::parse("0:rowwise", tiny, 4);
  expect_covers(small, tiny);
  EXPECT_EQ(small.shards().size(), 2u);
}

TEST(ShardingPlan, InvalidPlansAreConfigErrors) {
  std::vector<TableSpec> tables{{10, 4}, {10, 4}};
  auto expect_error = [&](const std::string& text, const std::string& fragment) {
    try {
      ShardingPlan::parse(text, tables, 2);
      ADD_FAILURE() << "no error for '" << text << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "'" << text << "': " << e.what();
    }
  };
  expect_error("0:r0,1:r2", "rank 2");               // rank >= world size
  expect_error("0:r0", "table 1");                   // table missing
  expect_error("0:r0,0:r1,1:r0", "more than once");  // table twice
  expect_error("0:r0,1:0-4@r0+5-10@r1", "no owner");     // gap
  expect_error("0:r0,1:0-6@r0+5-10@r1", "more than one owner");  // overlap
  expect_error("0:r0,1:0-9@r0", "no owner");         // rows at the end uncovered
  expect_error("0:r0,1:0-11@r0", "rows");            // past the end
  expect_error("0:r0,1:x1", "rank");                 // bad syntax
  expect_error("0:r0,1 r1", "table:placement");
  expect_error("0:r0,1:r1,2:r0", "table 2");         // no such table
  expect_error("0:r-1,1:r0", "rank -1");
  EXPECT_THROW(ShardingPlan::from_shards({{0, 0, 10, 0}, {1, 5, 5, 0}, {1, 0, 10, 1}}, tables, 2), ConfigError);
  EXPECT_THROW(ShardingPlan::automatic(tables, 0), ConfigError);
  EXPECT_THROW(ShardingPlan::automatic({{0, 4}}, 1), ConfigError);
}

TEST(ShardingPlan, DescribeListsEveryRankWithItsShards) {
  std::vector<TableSpec> tables{{1000, 16}, {10, 16}, {10, 16}};
  auto plan = ShardingPlan::parse("0:rowwise,1:r0,2:r1", tables, 2);
  std::string text = plan.describe();
  EXPECT_NE(text.find("3 tables over 2 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("t0[0,500)"), std::string::npos) << text;
  EXPECT_NE(text.find("t0[500,1000)"), std::string::npos) << text;
  EXPECT_NE(text.find("t1"), std::string::npos) << text;
  EXPECT_NE(text.find("t2"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4) << text;  // title, header, two ranks
  auto mem = plan.memory_bytes_per_rank();
  EXPECT_EQ(mem[0], (500.0 + 10) * 16 * 4);
  EXPECT_EQ(mem[1], (500.0 + 10) * 16 * 4);
}

}  // namespace
