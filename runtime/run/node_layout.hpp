#pragma once
// How the world's ranks sit on nodes, for `recmix run`'s live cluster (docs/run.md, Nodes): node k
// holds ranks [k R, (k + 1) R), each rank one "GPU" of its node, as in the simulator's clusters.
#include <string>
#include <vector>

namespace recmix::runtime::run {

struct NodeLayout {
  int ranks_per_node = 1;
  std::vector<std::string> hosts;  // per node: its host ("host#k" for the k-th emulated node on a host)
  int nodes() const { return static_cast<int>(hosts.size()); }
  int node_of(int rank) const { return rank / ranks_per_node; }
};

// The layout from each rank's node (any key shared by the ranks of one node: the smallest world
// rank of its MPI_COMM_TYPE_SHARED communicator) and host name, in world order. With
// emulate_ranks_per_node > 0 (recmix run --ranks-per-node, a testing aid) the world is cut into
// nodes of that many ranks whatever the hosts. ConfigError, naming the hosts and their ranks, when
// a node's ranks are not consecutive or the nodes hold different numbers of ranks.
NodeLayout node_layout(const std::vector<int>& node_key_of_rank, const std::vector<std::string>& host_of_rank,
                       int emulate_ranks_per_node);

}  // namespace recmix::runtime::run
