#include "embedding/sharding_plan.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <numeric>
#include <fmt/format.h>

#include "core/error.hpp"
#include "device/memory_pool.hpp"

namespace recmix::embedding {
namespace {

void check_tables(const std::vector<TableSpec>& tables, int world_size) {
  RECMIX_REQUIRE(world_size >= 1, ConfigError,
                 "sharding plan: world size must be >= 1, got " + std::to_string(world_size));
  for (std::size_t t = 0; t < tables.size(); ++t) {
    RECMIX_REQUIRE(tables[t].rows > 0, ConfigError,
                   fmt::format("sharding plan: table {} has {} rows (must be > 0)", t, tables[t].rows));
    RECMIX_REQUIRE(tables[t].dim > 0, ConfigError,
                   fmt::format("sharding plan: table {} has dim {} (must be > 0)", t, tables[t].dim));
  }
}

// Expected lookups per sample of each shard: a table without counts is looked up once per sample,
// spread evenly over its rows; with counts, the table's lookups relative to the most looked-up
// table (which counts as one per sample), spread by the counts.
std::vector<double> expected_lookups(const std::vector<Shard>& shards,
                                     const std::vector<TableSpec>& tables,
                                     const std::vector<std::vector<std::int64_t>>& counts) {
  RECMIX_REQUIRE(counts.empty() || counts.size() == tables.size(), ConfigError,
                 fmt::format("sharding plan: access counts given for {} tables, the model has {}",
                             counts.size(), tables.size()));
  std::vector<double> table_total(tables.size(), 0.0);
  double max_total = 0.0;
  for (std::size_t t = 0; t < counts.size(); ++t) {
    if (counts[t].empty()) continue;
    RECMIX_REQUIRE(static_cast<std::int64_t>(counts[t].size()) == tables[t].rows, ConfigError,
                   fmt::format("sharding plan: table {} has {} rows but {} access counts", t,
                               tables[t].rows, counts[t].size()));
    for (auto c : counts[t]) {
      RECMIX_REQUIRE(c >= 0, ConfigError,
                     fmt::format("sharding plan: negative access count in table {}", t));
      table_total[t] += static_cast<double>(c);
    }
    max_total = std::max(max_total, table_total[t]);
  }
  std::vector<double> lookups(shards.size());
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const Shard& s = shards[i];
    const auto& spec = tables[s.table];
    const double frac_rows = double(s.row_end - s.row_begin) / double(spec.rows);
    const bool has_counts = s.table < static_cast<int>(counts.size()) && !counts[s.table].empty();
    if (!has_counts || max_total <= 0.0) {
      lookups[i] = frac_rows;
    } else if (table_total[s.table] <= 0.0) {
      lookups[i] = 0.0;
    } else {
      double in_shard = 0.0;
      for (std::int64_t r = s.row_begin; r < s.row_end; ++r) in_shard += double(counts[s.table][r]);
      lookups[i] = in_shard / max_total;
    }
  }
  return lookups;
}

std::string trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::int64_t parse_int(const std::string& text, const std::string& what, const std::string& entry) {
  std::string t = trim(text);
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  RECMIX_REQUIRE(!t.empty() && used == t.size(), ConfigError,
                 "sharding plan: bad " + what + " '" + t + "' in entry '" + entry + "'");
  return v;
}

int parse_rank(const std::string& text, const std::string& entry) {
  std::string t = trim(text);
  RECMIX_REQUIRE(t.size() >= 2 && (t[0] == 'r' || t[0] == 'R'), ConfigError,
                 "sharding plan: expected a rank like 'r0', got '" + t + "' in entry '" + entry + "'");
  return static_cast<int>(parse_int(t.substr(1), "rank", entry));
}

// Contiguous, nearly equal row ranges: `parts` of them (fewer when the table has fewer rows).
std::vector<std::pair<std::int64_t, std::int64_t>> even_ranges(std::int64_t rows, std::int64_t parts) {
  parts = std::max<std::int64_t>(1, std::min(parts, rows));
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::int64_t i = 0; i < parts; ++i) out.push_back({rows * i / parts, rows * (i + 1) / parts});
  return out;
}

}  // namespace

ShardingPlan ShardingPlan::from_shards(std::vector<Shard> shards,
                                       const std::vector<TableSpec>& tables, int world_size,
                                       const std::vector<std::vector<std::int64_t>>& access_counts) {
  check_tables(tables, world_size);
  ShardingPlan plan;
  plan.shards_ = std::move(shards);
  plan.tables_ = tables;
  plan.world_size_ = world_size;
  plan.validate();
  plan.shard_lookups_ = expected_lookups(plan.shards_, tables, access_counts);
  return plan;
}

void ShardingPlan::validate() const {
  const int num_tables = static_cast<int>(tables_.size());
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    const Shard& s = shards_[i];
    RECMIX_REQUIRE(s.table >= 0 && s.table < num_tables, ConfigError,
                   fmt::format("sharding plan: shard {} names table {}, the model has {} tables", i,
                               s.table, num_tables));
    RECMIX_REQUIRE(s.rank >= 0 && s.rank < world_size_, ConfigError,
                   fmt::format("sharding plan: shard {} (table {}) is on rank {}, world size is {}", i,
                               s.table, s.rank, world_size_));
    RECMIX_REQUIRE(0 <= s.row_begin && s.row_begin < s.row_end && s.row_end <= tables_[s.table].rows,
                   ConfigError,
                   fmt::format("sharding plan: shard {} of table {} has rows [{}, {}), the table has "
                               "rows [0, {})",
                               i, s.table, s.row_begin, s.row_end, tables_[s.table].rows));
  }
  for (int t = 0; t < num_tables; ++t) {
    std::int64_t next = 0;
    for (int i : shards_of_table(t)) {
      const Shard& s = shards_[i];
      RECMIX_REQUIRE(s.row_begin == next, ConfigError,
                     s.row_begin > next
                         ? fmt::format("sharding plan: rows [{}, {}) of table {} have no owner", next,
                                       s.row_begin, t)
                         : fmt::format("sharding plan: rows [{}, {}) of table {} have more than one "
                                       "owner",
                                       s.row_begin, std::min(next, s.row_end), t));
      next = s.row_end;
    }
    RECMIX_REQUIRE(next == tables_[t].rows, ConfigError,
                   next == 0 ? fmt::format("sharding plan: table {} has no owner", t)
                             : fmt::format("sharding plan: rows [{}, {}) of table {} have no owner",
                                           next, tables_[t].rows, t));
  }
}

namespace {

// One candidate placement: pieces with ranks, and its imbalance (world x the largest share of
// memory or traffic any rank holds: 1 is perfect balance).
struct Placement {
  std::vector<Shard> pieces;
  double imbalance;
};

// Cuts tables longer than `limit` rows into nearly equal ranges (at most `max_parts`), then
// places the pieces largest first, each on the rank where the larger of its memory share and its
// traffic share ends lowest (both dimensions are balanced, not their sum), preferring ranks that
// hold no other piece of the same table so row-wise pieces pool in parallel. Ties go to the
// lowest rank, so the result is deterministic.
Placement place(const std::vector<TableSpec>& tables, int world_size,
                const std::vector<std::vector<std::int64_t>>& counts, std::int64_t limit,
                std::int64_t max_parts) {
  Placement out;
  auto& pieces = out.pieces;
  for (int t = 0; t < static_cast<int>(tables.size()); ++t) {
    const std::int64_t parts = std::min((tables[t].rows + limit - 1) / limit, max_parts);
    for (auto [b, e] : even_ranges(tables[t].rows, parts)) pieces.push_back({t, b, e, 0});
  }
  const auto lookups = expected_lookups(pieces, tables, counts);
  double total_mem = 0, total_traffic = 0;
  std::vector<double> mem(pieces.size()), traffic(pieces.size());
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const int dim = tables[pieces[i].table].dim;
    mem[i] = double(pieces[i].row_end - pieces[i].row_begin) * dim;
    traffic[i] = lookups[i] * dim;
    total_mem += mem[i];
    total_traffic += traffic[i];
  }
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    mem[i] /= std::max(total_mem, 1e-30);
    traffic[i] /= std::max(total_traffic, 1e-30);
  }
  std::vector<std::size_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::max(mem[a], traffic[a]) > std::max(mem[b], traffic[b]);
  });
  std::vector<double> rank_mem(world_size, 0.0), rank_traffic(world_size, 0.0);
  std::vector<std::vector<int>> tables_on_rank(world_size);
  for (std::size_t i : order) {
    int best = -1;
    bool best_shares = true;
    double best_peak = 0, best_sum = 0;
    for (int r = 0; r < world_size; ++r) {
      const auto& held = tables_on_rank[r];
      const bool shares = std::find(held.begin(), held.end(), pieces[i].table) != held.end();
      const double peak = std::max(rank_mem[r] + mem[i], rank_traffic[r] + traffic[i]);
      const double sum = rank_mem[r] + rank_traffic[r];
      const bool better = best < 0 || (best_shares && !shares) ||
                          (shares == best_shares &&
                           (peak < best_peak - 1e-12 || (peak <= best_peak + 1e-12 && sum < best_sum - 1e-12)));
      if (better) {
        best = r;
        best_shares = shares;
        best_peak = peak;
        best_sum = sum;
      }
    }
    pieces[i].rank = best;
    rank_mem[best] += mem[i];
    rank_traffic[best] += traffic[i];
    tables_on_rank[best].push_back(pieces[i].table);
  }
  double peak = 0;
  for (int r = 0; r < world_size; ++r) peak = std::max({peak, rank_mem[r], rank_traffic[r]});
  out.imbalance = peak * world_size;
  return out;
}

}  // namespace

ShardingPlan ShardingPlan::automatic(const std::vector<TableSpec>& tables, int world_size,
                                     const std::vector<std::vector<std::int64_t>>& access_counts,
                                     std::int64_t max_rows_per_shard) {
  check_tables(tables, world_size);
  RECMIX_REQUIRE(max_rows_per_shard >= 0, ConfigError,
                 "sharding plan: max_rows_per_shard must be >= 0");
  expected_lookups({}, tables, access_counts);  // checks the counts' shapes once
  if (max_rows_per_shard > 0) {
    auto p = place(tables, world_size, access_counts, max_rows_per_shard,
                   std::numeric_limits<std::int64_t>::max());
    return from_shards(std::move(p.pieces), tables, world_size, access_counts);
  }
  // Automatic limit: one rank's share of all rows, so only a table that cannot fit a balanced
  // rank is split (into at most world_size ranges). When big pieces still leave ranks unbalanced,
  // finer cuts (a half, a quarter, an eighth of the share) are tried; a finer plan is kept only
  // when it is clearly better (5 points of imbalance), as every cut adds partial-sum traffic.
  std::int64_t total_rows = 0;
  for (const auto& t : tables) total_rows += t.rows;
  const std::int64_t share = (total_rows + world_size - 1) / world_size;
  Placement best = place(tables, world_size, access_counts, share, world_size);
  for (int k = 1; k <= 3 && world_size > 1; ++k) {
    Placement finer = place(tables, world_size, access_counts, std::max<std::int64_t>(1, share >> k), world_size);
    if (finer.imbalance < best.imbalance - 0.05) best = std::move(finer);
  }
  return from_shards(std::move(best.pieces), tables, world_size, access_counts);
}

ShardingPlan ShardingPlan::parse(const std::string& text, const std::vector<TableSpec>& tables,
                                 int world_size) {
  check_tables(tables, world_size);
  std::vector<Shard> shards;
  std::vector<bool> seen(tables.size(), false);
  std::string normalized = text;
  for (char& c : normalized)
    if (c == ';' || c == '\n') c = ',';
  std::size_t pos = 0;
  while (pos <= normalized.size()) {
    std::size_t comma = normalized.find(',', pos);
    if (comma == std::string::npos) comma = normalized.size();
    std::string entry = trim(normalized.substr(pos, comma - pos));
    pos = comma + 1;
    if (entry.empty()) continue;
    std::size_t colon = entry.find(':');
    RECMIX_REQUIRE(colon != std::string::npos, ConfigError,
                   "sharding plan: entry '" + entry + "' is not 'table:placement'");
    const std::int64_t t = parse_int(entry.substr(0, colon), "table", entry);
    RECMIX_REQUIRE(t >= 0 && t < static_cast<std::int64_t>(tables.size()), ConfigError,
                   fmt::format("sharding plan: entry '{}' names table {}, the model has {} tables",
                               entry, t, tables.size()));
    RECMIX_REQUIRE(!seen[t], ConfigError,
                   fmt::format("sharding plan: table {} appears more than once", t));
    seen[t] = true;
    const int table = static_cast<int>(t);
    std::string spec = trim(entry.substr(colon + 1));
    if (spec == "rowwise") {
      int r = 0;
      for (auto [b, e] : even_ranges(tables[table].rows, world_size)) shards.push_back({table, b, e, r++});
    } else if (spec.find('@') == std::string::npos) {
      shards.push_back({table, 0, tables[table].rows, parse_rank(spec, entry)});
    } else {
      std::size_t p = 0;
      while (p <= spec.size()) {
        std::size_t plus = spec.find('+', p);
        if (plus == std::string::npos) plus = spec.size();
        std::string range = trim(spec.substr(p, plus - p));
        p = plus + 1;
        std::size_t at = range.find('@'), dash = range.find('-');
        RECMIX_REQUIRE(at != std::string::npos && dash != std::string::npos && dash < at, ConfigError,
                       "sharding plan: range '" + range + "' in entry '" + entry +
                           "' is not 'begin-end@rN'");
        shards.push_back({table, parse_int(range.substr(0, dash), "row", entry),
                          parse_int(range.substr(dash + 1, at - dash - 1), "row", entry),
                          parse_rank(range.substr(at + 1), entry)});
      }
    }
  }
  for (std::size_t t = 0; t < tables.size(); ++t)
    RECMIX_REQUIRE(seen[t], ConfigError,
                   fmt::format("sharding plan: table {} is not placed (every table needs an entry)", t));
  return from_shards(std::move(shards), tables, world_size);
}

std::vector<int> ShardingPlan::shards_of_table(int table) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(shards_.size()); ++i)
    if (shards_[i].table == table) out.push_back(i);
  std::stable_sort(out.begin(), out.end(),
                   [&](int a, int b) { return shards_[a].row_begin < shards_[b].row_begin; });
  return out;
}

std::vector<int> ShardingPlan::shards_of_rank(int rank) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(shards_.size()); ++i)
    if (shards_[i].rank == rank) out.push_back(i);
  return out;
}

std::vector<double> ShardingPlan::memory_bytes_per_rank() const {
  std::vector<double> out(world_size_, 0.0);
  for (const auto& s : shards_)
    out[s.rank] += double(s.row_end - s.row_begin) * tables_[s.table].dim * sizeof(float);
  return out;
}

std::vector<double> ShardingPlan::traffic_per_rank() const {
  std::vector<double> out(world_size_, 0.0);
  for (std::size_t i = 0; i < shards_.size(); ++i)
    out[shards_[i].rank] += shard_lookups_[i] * tables_[shards_[i].table].dim;
  return out;
}

std::string ShardingPlan::describe() const {
  const auto mem = memory_bytes_per_rank();
  const auto traffic = traffic_per_rank();
  std::string out = fmt::format("sharding plan: {} tables over {} rank{}\n", tables_.size(),
                                world_size_, world_size_ == 1 ? "" : "s");
  out += fmt::format("{:>5}  {:>12}  {:>16}  {}\n", "rank", "memory", "lookups x dim", "shards");
  for (int r = 0; r < world_size_; ++r) {
    std::string list;
    for (int i : shards_of_rank(r)) {
      const Shard& s = shards_[i];
      if (!list.empty()) list += ' ';
      if (s.row_begin == 0 && s.row_end == tables_[s.table].rows)
        list += fmt::format("t{}", s.table);
      else
        list += fmt::format("t{}[{},{})", s.table, s.row_begin, s.row_end);
    }
    out += fmt::format("{:>5}  {:>12}  {:>16.2f}  {}\n", r,
                       device::format_bytes(static_cast<std::size_t>(mem[r])), traffic[r],
                       list.empty() ? "-" : list);
  }
  return out;
}

std::string ShardingPlan::to_string() const {
  std::string out;
  for (int t = 0; t < static_cast<int>(tables_.size()); ++t) {
    if (!out.empty()) out += ", ";
    auto ids = shards_of_table(t);
    if (ids.size() == 1) {
      out += fmt::format("{}:r{}", t, shards_[ids[0]].rank);
      continue;
    }
    out += fmt::format("{}:", t);
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const Shard& s = shards_[ids[k]];
      out += fmt::format("{}{}-{}@r{}", k ? "+" : "", s.row_begin, s.row_end, s.rank);
    }
  }
  return out;
}

}  // namespace recmix::embedding
