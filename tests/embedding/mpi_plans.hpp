#pragma once
// The tables and sharding plans the distributed embedding tests share: five small tables of one
// dim, placed whole ("auto"), split by rows over every rank ("rowwise"), or a mix ("mixed": even
// tables by rows, odd ones whole on a rank).
#include <string>
#include <vector>

#include "embedding/sharding_plan.hpp"
#include "embedding/types.hpp"

namespace recmix::embedding::test {

inline const std::vector<TableSpec> kMpiTables{{40, 6}, {7, 6}, {200, 6}, {31, 6}, {3, 6}};

inline ShardingPlan make_plan(const std::string& kind, int world) {
  if (kind == "auto") return ShardingPlan::automatic(kMpiTables, world);
  std::string text;
  for (int t = 0; t < static_cast<int>(kMpiTables.size()); ++t) {
    if (t) text += ",";
    const bool rowwise = kind == "rowwise" || t % 2 == 0;
    text += std::to_string(t) + (rowwise ? ":rowwise" : ":r" + std::to_string((t * 3 + 1) % world));
  }
  return ShardingPlan::parse(text, kMpiTables, world);
}

}  // namespace recmix::embedding::test
