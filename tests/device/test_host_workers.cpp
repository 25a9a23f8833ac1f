// The CPU backend's sleeping helper threads: every index visited exactly once, over many calls,
// from several calling threads (each with its own helpers), including threads that exit right
// away; ranges are contiguous, in order, and run inline below the grain.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <utility>
#include <thread>
#include <vector>

#include "device/cpu/host_workers.hpp"

namespace recmix::device::cpu {
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

TEST(HostWorkers, RangesAreContiguousAndInlineBelowTheGrain) {
  for (const std::int64_t n : {1, 2, 7, 100, 4097}) {
    for (const int threads : {1, 2, 3}) {
      std::vector<std::pair<std::int64_t, std::int64_t>> parts(4, {-1, -1});
      std::atomic<int> count{0};
      parallel_ranges(threads, n, [&](std::int64_t b, std::int64_t e) {
        const int k = count.fetch_add(1);
        ASSERT_LT(k, 4);
        parts[k] = {b, e};
      });
      parts.resize(count.load());
      std::sort(parts.begin(), parts.end());
      ASSERT_EQ(static_cast<std::int64_t>(parts.size()), std::min<std::int64_t>(threads, n)) << n << " " << threads;
      std::int64_t next = 0;
      for (const auto& [b, e] : parts) {
        EXPECT_EQ(b, next);
        EXPECT_GT(e, b);
        next = e;
      }
      EXPECT_EQ(next, n);
    }
  }
  const auto caller = std::this_thread::get_id();
  int calls = 0;
  parallel_ranges(2, 100, [&](std::int64_t b, std::int64_t e) {
    ++calls;
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 100);
  }, 101);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace recmix::device::cpu
