#pragma once
// The sharding plan: which rank owns which rows of which table. Small tables are placed whole
// (table-wise); tables too large for one rank's share are split into contiguous row ranges
// (row-wise). Placement balances expected memory (rows x dim) and traffic (lookups x dim).
// Plans can also be written by hand; the grammar is in docs/embedding.md.
#include <cstdint>
#include <string>
#include <vector>

#include "embedding/types.hpp"

namespace recmix::embedding {

// Rows [row_begin, row_end) of `table`, owned by `rank`.
struct Shard {
  int table;
  std::int64_t row_begin, row_end;
  int rank;
};

class ShardingPlan {
 public:
  ShardingPlan() = default;

  // access_counts: optional per table per row counts (may be empty, or empty for some tables).
  // max_rows_per_shard: tables with more rows are split row-wise; 0 picks the per-rank share of
  // all rows (ceil(total rows / world size)), so a table is split when it alone exceeds it.
  static ShardingPlan automatic(const std::vector<TableSpec>& tables, int world_size,
                                const std::vector<std::vector<std::int64_t>>& access_counts = {},
                                std::int64_t max_rows_per_shard = 0);
  // Hand-written plan, e.g. "0:r0, 1:r1, 2:rowwise, 3:0-500@r0+500-1000@r1" (docs/embedding.md).
  static ShardingPlan parse(const std::string& text, const std::vector<TableSpec>& tables,
                            int world_size);
  // An explicit shard list; validated like every plan (ConfigError when invalid).
  static ShardingPlan from_shards(std::vector<Shard> shards, const std::vector<TableSpec>& tables,
                                  int world_size,
                                  const std::vector<std::vector<std::int64_t>>& access_counts = {});

  const std::vector<Shard>& shards() const { return shards_; }
  const std::vector<TableSpec>& tables() const { return tables_; }
  int world_size() const { return world_size_; }

  // Shards of `table` ordered by row_begin (indices into shards()).
  std::vector<int> shards_of_table(int table) const;
  // Shards owned by `rank`, in plan order (indices into shards()).
  std::vector<int> shards_of_rank(int rank) const;

  // Per rank: embedding bytes (fp32 weights) and expected floats received per sample.
  std::vector<double> memory_bytes_per_rank() const;
  std::vector<double> traffic_per_rank() const;

  // Multi-line human table: rank, tables/row ranges, memory, expected traffic.
  std::string describe() const;
  // The plan in the hand-written grammar (parse(to_string()) gives the same plan).
  std::string to_string() const;

 private:
  void validate() const;
  std::vector<Shard> shards_;
  std::vector<TableSpec> tables_;
  int world_size_ = 0;
  // Expected lookups per sample of each shard (1 per table per sample split by access counts).
  std::vector<double> shard_lookups_;
};

}  // namespace recmix::embedding
