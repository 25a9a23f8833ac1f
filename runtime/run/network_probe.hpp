#pragma once
// The network between the live nodes, measured at start when the jobs file has no [cluster]
// (docs/run.md, Nodes): an all-to-all among each node's ranks, then one among the ranks that hold
// the same place on every node, the way a spread job's exchange crosses the nodes. Each figure is
// one rank's share, as the scheduler's cluster model counts bandwidth (bytes a rank sends to its
// peers a second), taken from the slowest rank of the world.
#include <cstddef>
#include <functional>

#include "comm/communicator.hpp"
#include "runtime/run/node_layout.hpp"

namespace recmix::runtime::run {

struct ProbeOptions {
  // Bytes a rank sends to each peer in one all-to-all, at most; a large group sends less to each,
  // so that no rank sends more than max_bytes_per_rank in one.
  std::size_t bytes_per_peer = std::size_t{1} << 20;
  std::size_t max_bytes_per_rank = std::size_t{8} << 20;
  int iterations = 4;  // timed all-to-alls, after one untimed
  // Seconds from any fixed point; a test passes its own clock. Empty: std::chrono::steady_clock.
  std::function<double()> clock;
};

struct ProbedNetwork {
  // GB/s a rank; 0 where there was nothing to measure: one rank a node (intra), one node (inter).
  double intra_node_gbps = 0;
  double inter_node_gbps = 0;
  std::size_t intra_bytes_per_peer = 0;  // what each all-to-all sent a peer
  std::size_t inter_bytes_per_peer = 0;
  int iterations = 0;
  double seconds = 0;  // the whole probe, on rank 0's clock
};

// Collective over `world`, whose ranks sit on nodes as `nodes` says; every rank gets the same
// figures. Splits `world` twice (by node, by place on the node).
ProbedNetwork probe_network(comm::Communicator& world, const NodeLayout& nodes, const ProbeOptions& options = {});

}  // namespace recmix::runtime::run
