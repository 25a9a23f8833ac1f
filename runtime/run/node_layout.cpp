#include "runtime/run/node_layout.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "core/error.hpp"

namespace recmix::runtime::run {

NodeLayout node_layout(const std::vector<int>& node_key_of_rank, const std::vector<std::string>& host_of_rank,
                       int emulate_ranks_per_node) {
  const int ranks = static_cast<int>(node_key_of_rank.size());
  RECMIX_REQUIRE(ranks > 0 && host_of_rank.size() == node_key_of_rank.size(), ConfigError,
                 "node layout: one node key and one host a rank");
  NodeLayout out;
  if (emulate_ranks_per_node > 0) {
    if (ranks % emulate_ranks_per_node != 0)
      throw ConfigError(fmt::format("--ranks-per-node {}: the world's {} ranks are not whole nodes of {}",
                                    emulate_ranks_per_node, ranks, emulate_ranks_per_node));
    out.ranks_per_node = emulate_ranks_per_node;
    std::map<std::string, int> on_host;
    for (int r = 0; r < ranks; r += emulate_ranks_per_node)
      out.hosts.push_back(fmt::format("{}#{}", host_of_rank[r], on_host[host_of_rank[r]]++));
    return out;
  }
  // Each node a block of consecutive ranks, every block as long.
  std::vector<std::pair<int, int>> blocks;  // first rank, rank count
  std::map<int, std::vector<int>> ranks_of_key;
  for (int r = 0; r < ranks; ++r) {
    ranks_of_key[node_key_of_rank[r]].push_back(r);
    if (r == 0 || node_key_of_rank[r] != node_key_of_rank[r - 1]) blocks.push_back({r, 0});
    ++blocks.back().second;
  }
  const auto describe = [&] {
    std::string text;
    for (const auto& [key, rs] : ranks_of_key)
      text += fmt::format("{}{}: ranks {}", text.empty() ? "" : "; ", host_of_rank[rs.front()], fmt::join(rs, ","));
    return text;
  };
  if (blocks.size() != ranks_of_key.size())
    throw ConfigError(fmt::format("recmix run needs each node's ranks to be consecutive ({}): launch with mpirun "
                                  "--map-by slot (Open MPI's default) or Slurm's block distribution",
                                  describe()));
  for (const auto& [first, count] : blocks)
    if (count != blocks.front().second)
      throw ConfigError(fmt::format("recmix run needs as many ranks on every node ({}): launch with mpirun "
                                    "--npernode N or sbatch --ntasks-per-node N",
                                    describe()));
  out.ranks_per_node = blocks.front().second;
  for (const auto& [first, count] : blocks) out.hosts.push_back(host_of_rank[first]);
  return out;
}

}  // namespace recmix::runtime::run
