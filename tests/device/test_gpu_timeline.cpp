// The GPU timeline's analysis (bench/device/timeline/gpu_timeline.hpp), on records made up here
// whose busy time and gaps are worked out by hand.
#include <gtest/gtest.h>

#include <vector>

#include "bench/device/timeline/gpu_timeline.hpp"

namespace recmix::bench {
namespace {

using Kind = GpuActivity::Kind;

GpuActivity kernel(std::uint64_t start_us, std::uint64_t end_us, std::uint32_t graph = 0, std::uint32_t launch = 0) {
  return {start_us * 1000, end_us * 1000, graph, launch, Kind::kernel};
}

constexpr double kUs = 1e-6;

TEST(GpuTimeline, BusyAndIdleOfRecordsOneAfterAnother) {
  // 0-10 busy, 10-14 idle, 14-20 busy, 20-30 idle, 30-40 busy: 26 us of 40 busy.
  const GpuTimeline t = summarize({kernel(0, 10), kernel(14, 20), kernel(30, 40)}, 0, 1);
  EXPECT_EQ(t.kernels, 3u);
  EXPECT_NEAR(t.span_s, 40 * kUs, 1e-12);
  EXPECT_NEAR(t.busy_s, 26 * kUs, 1e-12);
  EXPECT_NEAR(t.idle_share(), 14.0 / 40.0, 1e-12);
  EXPECT_EQ(t.between_gaps, 2u);
  EXPECT_NEAR(t.between_gap_s, 14 * kUs, 1e-12);
  EXPECT_NEAR(t.largest_gap_s, 10 * kUs, 1e-12);
  EXPECT_EQ(t.in_graph_gaps, 0u);
}

TEST(GpuTimeline, OverlapsOnSeveralStreamsCountOnce) {
  // Given out of order: 0-10 and 5-12 overlap, 11-13 inside their union, a copy 20-25, and a
  // fill 21-22 inside the copy: busy 0-13 and 20-25, 18 us of 25.
  std::vector<GpuActivity> records{kernel(5, 12), {20000, 25000, 0, 7, Kind::copy}, kernel(0, 10), kernel(11, 13),
                                   {21000, 22000, 0, 8, Kind::fill}};
  const GpuTimeline t = summarize(records, 0, 1);
  EXPECT_EQ(t.kernels, 3u);
  EXPECT_EQ(t.copies, 1u);
  EXPECT_EQ(t.fills, 1u);
  EXPECT_NEAR(t.busy_s, 18 * kUs, 1e-12);
  EXPECT_NEAR(t.span_s, 25 * kUs, 1e-12);
  EXPECT_EQ(t.between_gaps, 1u);
  EXPECT_NEAR(t.between_gap_s, 7 * kUs, 1e-12);
}

TEST(GpuTimeline, GapsInsideAGraphLaunchAreToldFromGapsBetweenLaunches) {
  // Graph 3 launched twice (launches 100 and 101), a lone kernel between them:
  // launch 100: 0-5, 6-9 (1 us inside); lone 12-14 (3 us between); launch 101: 20-25, 27-30
  // (6 us between, then 2 us inside).
  const GpuTimeline t = summarize({kernel(0, 5, 3, 100), kernel(6, 9, 3, 100), kernel(12, 14), kernel(20, 25, 3, 101),
                                   kernel(27, 30, 3, 101)},
                                  0, 1);
  EXPECT_EQ(t.graph_launches, 2u);
  EXPECT_EQ(t.in_graph_gaps, 2u);
  EXPECT_NEAR(t.in_graph_gap_s, 3 * kUs, 1e-12);
  EXPECT_EQ(t.between_gaps, 2u);
  EXPECT_NEAR(t.between_gap_s, 9 * kUs, 1e-12);
  EXPECT_NEAR(t.busy_s + t.in_graph_gap_s + t.between_gap_s, t.span_s, 1e-12);
}

TEST(GpuTimeline, TwoLaunchesOfOneGraphBackToBackAreNotOneLaunch) {
  // The same graph's nodes, but of two launches: the gap between them is the host's.
  const GpuTimeline t = summarize({kernel(0, 5, 3, 100), kernel(8, 10, 3, 101)}, 0, 1);
  EXPECT_EQ(t.in_graph_gaps, 0u);
  EXPECT_EQ(t.between_gaps, 1u);
}

TEST(GpuTimeline, TheWindowLeavesOutTheStartAndTheEnd) {
  // Ten records 10 us apart, each 5 us long; the window 0.2-0.9 keeps records 2..8 (by start).
  std::vector<GpuActivity> records;
  for (std::uint64_t i = 0; i < 10; ++i) records.push_back(kernel(10 * i, 10 * i + 5));
  const GpuTimeline t = summarize(records, 0.2, 0.9);
  EXPECT_EQ(t.kernels, 7u);
  EXPECT_NEAR(t.span_s, 65 * kUs, 1e-12);  // 20 to 85
  EXPECT_NEAR(t.busy_s, 35 * kUs, 1e-12);
}

TEST(GpuTimeline, NoRecordsOrAnEmptyWindowGiveZeros) {
  EXPECT_EQ(summarize({}, 0, 1).kernels, 0u);
  const GpuTimeline t = summarize({kernel(0, 1), kernel(2, 3)}, 0.9, 0.2);
  EXPECT_EQ(t.kernels, 0u);
  EXPECT_EQ(t.idle_share(), 0.0);
  EXPECT_FALSE(describe(t).empty());
}

}  // namespace
}  // namespace recmix::bench
