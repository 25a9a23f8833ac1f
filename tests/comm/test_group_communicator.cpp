// Group communicators (make_mpi_group_communicator): created by their members alone, and two of
// them over overlapping rank sets carrying collectives at the same time from two threads of each
// rank without mixing messages, as two co-located jobs do. Expected values come from
// (job, rank, step, index); mismatches are summed over ranks so every rank reaches one verdict.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"

namespace recmix::comm {
namespace {

int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::int64_t value(int job, int rank, int step, std::size_t index) {
  return 1000003LL * job + 10007LL * rank + 101LL * step + static_cast<std::int64_t>(index);
}

// Collectives of one "job" on its communicator: an all-reduce and an all-to-all-v per step.
// Returns the number of wrong elements seen on this rank.
std::int64_t run_job(Communicator& comm, int job, int steps) {
  const int p = comm.size(), me = comm.rank();
  std::int64_t errors = 0;
  for (int step = 0; step < steps; ++step) {
    std::vector<std::int64_t> sum(7);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = value(job, me, step, i);
    comm.all_reduce_sum(sum.data(), sum.data(), sum.size(), DataType::i64);
    for (std::size_t i = 0; i < sum.size(); ++i) {
      std::int64_t expected = 0;
      for (int r = 0; r < p; ++r) expected += value(job, r, step, i);
      errors += sum[i] != expected;
    }
    // Rank r sends r + q + 1 elements to peer q.
    std::vector<std::size_t> sc(p), sd(p), rc(p), rd(p);
    std::size_t send_total = 0, recv_total = 0;
    for (int q = 0; q < p; ++q) {
      sc[q] = static_cast<std::size_t>(me + q + 1);
      sd[q] = send_total;
      send_total += sc[q];
      rc[q] = static_cast<std::size_t>(q + me + 1);
      rd[q] = recv_total;
      recv_total += rc[q];
    }
    std::vector<std::int64_t> send(send_total), recv(recv_total, -1);
    for (int q = 0; q < p; ++q)
      for (std::size_t i = 0; i < sc[q]; ++i) send[sd[q] + i] = value(job, me, step, 100 * q + i);
    comm.all_to_all_v(send.data(), sc, sd, recv.data(), rc, rd, DataType::i64);
    for (int q = 0; q < p; ++q)
      for (std::size_t i = 0; i < rc[q]; ++i) errors += recv[rd[q] + i] != value(job, q, step, 100 * me + i);
  }
  return errors;
}

std::int64_t sum_over_world(std::int64_t local) {
  std::int64_t total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

// Job A on the first min(2, n) ranks, job B on the last max(1, n - 1) ranks, listed in reverse,
// so the two overlap on rank 1 (or share every rank when n <= 2).
std::vector<int> ranks_of_a(int n) {
  std::vector<int> r;
  for (int i = 0; i < std::min(2, n); ++i) r.push_back(i);
  return r;
}
std::vector<int> ranks_of_b(int n) {
  std::vector<int> r;
  for (int i = n - 1; i >= std::min(1, n - 1); --i) r.push_back(i);
  if (n == 2) r = {1, 0};
  return r;
}

TEST(GroupCommunicator, MembersOnlyAndRankOrder) {
  auto world = make_mpi_world_communicator();
  const int n = world->size();
  const auto b = ranks_of_b(n);
  auto comm = make_mpi_group_communicator(*world, b, 7);
  const auto pos = std::find(b.begin(), b.end(), world->rank());
  if (pos == b.end()) {
    EXPECT_EQ(comm, nullptr);
  } else {
    ASSERT_NE(comm, nullptr);
    EXPECT_EQ(comm->size(), static_cast<int>(b.size()));
    EXPECT_EQ(comm->rank(), pos - b.begin());  // the order given, not the world's
  }
  world->barrier();
}

TEST(GroupCommunicator, RejectsBadRanks) {
  auto world = make_mpi_world_communicator();
  const std::vector<int> twice = {0, 0};
  const std::vector<int> outside = {world_size()};
  EXPECT_THROW(make_mpi_group_communicator(*world, twice, 1), CommError);
  EXPECT_THROW(make_mpi_group_communicator(*world, outside, 1), CommError);
  EXPECT_THROW(make_mpi_group_communicator(*world, std::vector<int>{0}, 40000), CommError);
}

TEST(GroupCommunicator, TwoJobsOnOverlappingRanksRunConcurrently) {
  auto world = make_mpi_world_communicator();
  const int n = world->size();
  // Created in one order on every rank, as the executor does; then used from two threads.
  auto a = make_mpi_group_communicator(*world, ranks_of_a(n), 1);
  auto b = make_mpi_group_communicator(*world, ranks_of_b(n), 2);
  std::int64_t errors_a = 0, errors_b = 0;
  std::thread ta([&] {
    if (a) errors_a = run_job(*a, 1, 300);
  });
  std::thread tb([&] {
    if (b) errors_b = run_job(*b, 2, 300);
  });
  ta.join();
  tb.join();
  EXPECT_EQ(sum_over_world(errors_a), 0);
  EXPECT_EQ(sum_over_world(errors_b), 0);
}

}  // namespace
}  // namespace recmix::comm
