// The sleeping helper threads: every index visited exactly once, over many calls, from several
// calling threads (each with its own helpers), including threads that exit right away.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "mlp/host_workers.hpp"

namespace recmix::mlp::cpu {
namespace {

void check_runs(int calls) {
  for (int call = 0; call < calls; ++call) {
    const std::int64_t n = 1 + call % 37;
    std::vector<std::atomic<int>> visits(n);
    parallel_blocks(1 + call % 3, n, [&](std::int64_t i) { visits[i].fetch_add(1); });
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[i].load(), 1) << "call " << call << " i " << i;
  }
}

TEST(HostWorkers, EveryIndexOnceOverManyCalls) { check_runs(3000); }

TEST(HostWorkers, ShortLivedCallingThreads) {
  for (int t = 0; t < 20; ++t) {
    std::thread caller([] { check_runs(5); });
    caller.join();
  }
  std::thread a([] { check_runs(500); }), b([] { check_runs(500); });
  a.join();
  b.join();
}

}  // namespace
}  // namespace recmix::mlp::cpu
