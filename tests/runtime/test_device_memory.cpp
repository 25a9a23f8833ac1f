// The ranks' GPU memory gathered at the start of recmix run (runtime/run/device_memory.hpp), at
// 1, 2 and 4 ranks, from figures the test gives each rank: the smallest and largest GPU and their
// ranks, and no figure at all once one rank could not read its GPU.
#include <gtest/gtest.h>

#include "comm/mpi/mpi_communicator.hpp"
#include "runtime/run/device_memory.hpp"

namespace recmix::runtime::run {
namespace {

constexpr double kGiB = double(1ull << 30);

TEST(DeviceMemory, EqualGpusGiveTheirSize) {
  auto world = comm::make_mpi_world_communicator();
  const DeviceMemory m = gather_device_memory(*world, 80 * kGiB);
  EXPECT_EQ(m.smallest_bytes, 80 * kGiB);
  EXPECT_EQ(m.largest_bytes, 80 * kGiB);
  EXPECT_EQ(m.smallest_rank, 0);
  EXPECT_EQ(m.unread_ranks, 0);
  EXPECT_EQ(m.first_unread_rank, -1);
}

TEST(DeviceMemory, TheSmallestGpuAndItsRank) {
  auto world = comm::make_mpi_world_communicator();
  const int last = world->size() - 1;
  // The last rank has 40 GiB, rank 0 141 GiB, the others 80.
  const double mine = world->rank() == last ? 40 * kGiB : world->rank() == 0 ? 141 * kGiB : 80 * kGiB;
  const DeviceMemory m = gather_device_memory(*world, mine);
  EXPECT_EQ(m.smallest_bytes, 40 * kGiB);
  EXPECT_EQ(m.smallest_rank, last);
  EXPECT_EQ(m.largest_bytes, world->size() == 1 ? 40 * kGiB : 141 * kGiB);
  EXPECT_EQ(m.largest_rank, 0);
  EXPECT_EQ(m.unread_ranks, 0);
}

TEST(DeviceMemory, ARankThatCouldNotReadItsGpuLeavesNoFigure) {
  auto world = comm::make_mpi_world_communicator();
  const int last = world->size() - 1;
  const DeviceMemory m = gather_device_memory(*world, world->rank() == last ? 0.0 : 80 * kGiB);
  EXPECT_EQ(m.smallest_bytes, 0);
  EXPECT_EQ(m.largest_bytes, 0);
  EXPECT_EQ(m.smallest_rank, -1);
  EXPECT_EQ(m.unread_ranks, 1);
  EXPECT_EQ(m.first_unread_rank, last);
}

TEST(DeviceMemory, TheJobsFileThenTheGpusThenTheDefault) {
  EXPECT_EQ(rank_capacity(64ull << 30, 40 * kGiB).bytes, 64 * kGiB);
  EXPECT_STREQ(rank_capacity(64ull << 30, 40 * kGiB).origin, "jobs file");
  EXPECT_EQ(rank_capacity(0, 40 * kGiB).bytes, 40 * kGiB);
  EXPECT_STREQ(rank_capacity(0, 40 * kGiB).origin, "devices");
  EXPECT_EQ(rank_capacity(0, 0).bytes, 8 * kGiB);
  EXPECT_STREQ(rank_capacity(0, 0).origin, "default");
}

}  // namespace
}  // namespace recmix::runtime::run
