#include "runtime/run/network_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "core/error.hpp"

namespace recmix::runtime::run {
namespace {

double now_s(const ProbeOptions& options) {
  if (options.clock) return options.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What a rank of an n-rank group sends each peer: bytes_per_peer, less in a large group.
std::size_t bytes_per_peer(const ProbeOptions& options, int n) {
  if (n <= 1) return 0;
  const std::size_t cap = options.max_bytes_per_rank / static_cast<std::size_t>(n - 1);
  return std::max<std::size_t>(1, std::min(options.bytes_per_peer, cap));
}

// Seconds of one all-to-all of `per_peer` bytes over `group` (every group of the world as large),
// the slowest rank's; 0 when there is nothing to send. Collective over `world`.
double timed_all_to_all(comm::Communicator& world, comm::Communicator& group, std::size_t per_peer,
                        const ProbeOptions& options) {
  double mine = 0;
  const int n = group.size();
  if (per_peer > 0) {
    const auto total = per_peer * static_cast<std::size_t>(n);
    std::vector<std::uint8_t> send(total, static_cast<std::uint8_t>(group.rank())), recv(total);
    std::vector<std::size_t> counts(static_cast<std::size_t>(n), per_peer), displs(static_cast<std::size_t>(n));
    for (int p = 0; p < n; ++p) displs[static_cast<std::size_t>(p)] = per_peer * static_cast<std::size_t>(p);
    counts[static_cast<std::size_t>(group.rank())] = 0;  // peers only: a rank's copy to itself is no network
    auto exchange = [&] {
      group.all_to_all_v(send.data(), counts, displs, recv.data(), counts, displs, comm::DataType::u8);
    };
    exchange();  // untimed: connections and buffers are set up here
    group.barrier();
    const double t0 = now_s(options);
    for (int i = 0; i < options.iterations; ++i) exchange();
    mine = (now_s(options) - t0) / options.iterations;
  }
  std::vector<double> all(static_cast<std::size_t>(world.size()));
  world.all_gather(&mine, all.data(), 1, comm::DataType::f64);
  return *std::max_element(all.begin(), all.end());
}

double gbps(std::size_t per_peer, int n, double seconds) {
  if (per_peer == 0 || !(seconds > 0)) return 0;
  return static_cast<double>(per_peer) * (n - 1) / seconds / 1e9;
}

}  // namespace

ProbedNetwork probe_network(comm::Communicator& world, const NodeLayout& nodes, const ProbeOptions& options) {
  RECMIX_REQUIRE(nodes.nodes() * nodes.ranks_per_node == world.size(), ConfigError,
                 "network probe: the node layout is not the world's");
  RECMIX_REQUIRE(options.iterations > 0, ConfigError, "network probe: iterations must be positive");
  const double start = now_s(options);
  const int me = world.rank();
  ProbedNetwork out;
  out.iterations = options.iterations;
  // The ranks of one node; then the ranks at the same place on every node.
  auto node = world.split(nodes.node_of(me), me);
  auto place = world.split(me % nodes.ranks_per_node, me);
  out.intra_bytes_per_peer = bytes_per_peer(options, node->size());
  out.inter_bytes_per_peer = bytes_per_peer(options, place->size());
  out.intra_node_gbps =
      gbps(out.intra_bytes_per_peer, node->size(), timed_all_to_all(world, *node, out.intra_bytes_per_peer, options));
  out.inter_node_gbps = gbps(out.inter_bytes_per_peer, place->size(),
                             timed_all_to_all(world, *place, out.inter_bytes_per_peer, options));
  out.seconds = now_s(options) - start;
  world.broadcast(&out.seconds, 1, comm::DataType::f64, 0);
  return out;
}

}  // namespace recmix::runtime::run
