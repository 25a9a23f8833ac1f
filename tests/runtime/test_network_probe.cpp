// The network probe of `recmix run` (runtime/run/network_probe.hpp) at 1, 2 and 4 ranks: which
// figures it measures for a node layout, and its arithmetic (bytes a rank sends its peers over the
// slowest rank's time) against a clock whose readings the test chooses.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "runtime/run/network_probe.hpp"

namespace recmix::runtime::run {
namespace {

NodeLayout layout(int ranks, int ranks_per_node) {
  NodeLayout l;
  l.ranks_per_node = ranks_per_node;
  l.hosts.assign(static_cast<std::size_t>(ranks / ranks_per_node), "host");
  return l;
}

TEST(NetworkProbe, OneNodeMeasuresOnlyWithinIt) {
  auto world = comm::make_mpi_world_communicator();
  const ProbedNetwork p = probe_network(*world, layout(world->size(), world->size()));
  EXPECT_EQ(p.inter_node_gbps, 0) << "one node: nothing between nodes to measure";
  EXPECT_EQ(p.inter_bytes_per_peer, 0u);
  if (world->size() == 1) {
    EXPECT_EQ(p.intra_node_gbps, 0) << "one rank: no peer to measure";
  } else {
    EXPECT_TRUE(std::isfinite(p.intra_node_gbps) && p.intra_node_gbps > 0) << p.intra_node_gbps;
    EXPECT_EQ(p.intra_bytes_per_peer, std::size_t{1} << 20);
  }
  EXPECT_GE(p.seconds, 0);
}

TEST(NetworkProbe, NodesOfOneRankMeasureOnlyBetweenThem) {
  auto world = comm::make_mpi_world_communicator();
  const ProbedNetwork p = probe_network(*world, layout(world->size(), 1));
  EXPECT_EQ(p.intra_node_gbps, 0);
  if (world->size() > 1) {
    EXPECT_TRUE(std::isfinite(p.inter_node_gbps) && p.inter_node_gbps > 0) << p.inter_node_gbps;
  }
}

TEST(NetworkProbe, EmulatedNodesOfTwoMeasureBoth) {
  auto world = comm::make_mpi_world_communicator();
  if (world->size() != 4) GTEST_SKIP() << "4 ranks: 2 nodes of 2";
  const ProbedNetwork p = probe_network(*world, layout(4, 2));
  EXPECT_GT(p.intra_node_gbps, 0);
  EXPECT_GT(p.inter_node_gbps, 0);
}

// Rank r's clock moves r + 1 seconds a reading, so rank r times `iterations` all-to-alls at r + 1
// seconds: the slowest rank's time is the world's size over the iterations, on every rank.
TEST(NetworkProbe, FiguresAreThePeerBytesOverTheSlowestRanksTime) {
  auto world = comm::make_mpi_world_communicator();
  const int n = world->size();
  if (n == 1) GTEST_SKIP() << "no peer at 1 rank";
  ProbeOptions options;
  options.bytes_per_peer = 3000;
  options.iterations = 4;
  double reading = 0;
  const double step = world->rank() + 1.0;
  options.clock = [&] { return reading += step; };
  const ProbedNetwork within = probe_network(*world, layout(n, n), options);
  const double slowest = static_cast<double>(n) / options.iterations;
  EXPECT_DOUBLE_EQ(within.intra_node_gbps, 3000.0 * (n - 1) / slowest / 1e9);
  EXPECT_EQ(within.inter_node_gbps, 0);
  EXPECT_EQ(within.iterations, 4);
  const ProbedNetwork between = probe_network(*world, layout(n, 1), options);
  EXPECT_DOUBLE_EQ(between.inter_node_gbps, 3000.0 * (n - 1) / slowest / 1e9);
  EXPECT_EQ(between.intra_node_gbps, 0);
}

// A large group sends each peer less, so that no rank sends more than max_bytes_per_rank.
TEST(NetworkProbe, ALargeGroupSendsEachPeerLess) {
  auto world = comm::make_mpi_world_communicator();
  const int n = world->size();
  if (n == 1) GTEST_SKIP() << "no peer at 1 rank";
  ProbeOptions options;
  options.bytes_per_peer = 1 << 20;
  options.max_bytes_per_rank = 4096;
  const ProbedNetwork p = probe_network(*world, layout(n, n), options);
  EXPECT_EQ(p.intra_bytes_per_peer, 4096u / static_cast<unsigned>(n - 1));
}

TEST(NetworkProbe, ALayoutThatIsNotTheWorldsIsRefused) {
  auto world = comm::make_mpi_world_communicator();
  EXPECT_THROW(probe_network(*world, layout(2 * world->size(), 1)), ConfigError);
  ProbeOptions none;
  none.iterations = 0;
  EXPECT_THROW(probe_network(*world, layout(world->size(), 1), none), ConfigError);
}

}  // namespace
}  // namespace recmix::runtime::run
