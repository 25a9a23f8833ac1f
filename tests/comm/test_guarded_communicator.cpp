// The guarded communicator (comm/guarded): a rank that fails at any point of a sequence of
// collectives of different shapes (so it cannot post its peers' next one) ends the job on every
// rank: its peers throw PeerFailedError in their next collective, having completed exactly the
// collectives the failing rank completed, and nothing hangs. A non-blocking collective the failing
// rank posted but never waited for still completes everywhere. Another job sharing the ranks,
// running at the same time from another thread, is unaffected. Verdicts are summed over ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "comm/guarded/guarded_communicator.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "comm/mpi/mpi_handle.hpp"
#include "core/error.hpp"

namespace recmix::comm {
namespace {

std::int64_t sum_over_world(std::int64_t local) {
  std::int64_t total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

std::vector<int> all_ranks(int n) {
  std::vector<int> r(n);
  std::iota(r.begin(), r.end(), 0);
  return r;
}

constexpr int kOpsPerRound = 6;

// Collective number `op` of a job's sequence: six kinds, shapes that depend on op, results
// checked. Returns the number of wrong elements. A pending non-blocking all-reduce is left in
// `pending` for the next call to wait for (as a step overlaps its gradient all-reduce).
std::int64_t collective(Communicator& comm, int job, int op, std::unique_ptr<Request>& pending,
                        std::vector<std::int64_t>& pending_buf) {
  const int p = comm.size(), me = comm.rank();
  std::int64_t errors = 0;
  const auto value = [&](int rank, std::size_t i) { return 1000003LL * job + 10007LL * rank + 101LL * op + std::int64_t(i); };
  if (pending) {
    pending->wait();
    pending.reset();
    for (std::size_t i = 0; i < pending_buf.size(); ++i) errors += pending_buf[i] % p != 0;
  }
  switch (op % kOpsPerRound) {
    case 0: {
      std::vector<std::int64_t> v(3 + op % 5);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = value(me, i);
      comm.all_reduce_sum(v.data(), v.data(), v.size(), DataType::i64);
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::int64_t expected = 0;
        for (int r = 0; r < p; ++r) expected += value(r, i);
        errors += v[i] != expected;
      }
      break;
    }
    case 1: {  // rank r sends r + q + 1 + op elements to q
      std::vector<std::size_t> sc(p), sd(p), rc(p), rd(p);
      std::size_t st = 0, rt = 0;
      for (int q = 0; q < p; ++q) {
        sc[q] = me + q + 1 + op;
        sd[q] = st;
        st += sc[q];
        rc[q] = q + me + 1 + op;
        rd[q] = rt;
        rt += rc[q];
      }
      std::vector<std::int64_t> send(st), recv(rt, -1);
      for (int q = 0; q < p; ++q)
        for (std::size_t i = 0; i < sc[q]; ++i) send[sd[q] + i] = value(me, 100 * q + i);
      comm.all_to_all_v(send.data(), sc, sd, recv.data(), rc, rd, DataType::i64);
      for (int q = 0; q < p; ++q)
        for (std::size_t i = 0; i < rc[q]; ++i) errors += recv[rd[q] + i] != value(q, 100 * me + i);
      break;
    }
    case 2: {  // posted here, waited for at the next collective
      pending_buf.assign(64 + op, me + 1);
      for (auto& x : pending_buf) x = p;  // sums to p * p: a multiple of p
      pending = comm.iall_reduce_sum(pending_buf.data(), pending_buf.data(), pending_buf.size(), DataType::i64);
      break;
    }
    case 3: {
      std::vector<double> b(5, me == 0 ? 2.5 + op : -1.0);
      comm.broadcast(b.data(), b.size(), DataType::f64, 0);
      for (double x : b) errors += x != 2.5 + op;
      break;
    }
    case 4: {
      std::int32_t mine = 7 * me + op;
      std::vector<std::int32_t> all(p);
      comm.all_gather(&mine, all.data(), 1, DataType::i32);
      for (int r = 0; r < p; ++r) errors += all[r] != 7 * r + op;
      break;
    }
    default:
      comm.barrier();
  }
  return errors;
}

// A job of `ops` collectives; rank `fail_rank` throws instead of collective `fail_at`.
struct Outcome {
  int completed = 0;   // collectives completed before leaving
  bool peer_failed = false;
  bool failed_here = false;
  int failed_ranks = -1;  // close()'s answer
  std::int64_t errors = 0;
};

Outcome run_job(GuardedCommunicator& comm, int job, int ops, int fail_rank, int fail_at) {
  Outcome out;
  {
    // The buffer outlives the request: a request destroyed unfinished (on the way out, as a
    // step's would be) waits for its transfer, which still writes into the buffer.
    std::vector<std::int64_t> pending_buf;
    std::unique_ptr<Request> pending;
    try {
      for (int op = 0; op < ops; ++op) {
        if (comm.rank() == fail_rank && op == fail_at) throw DataError("injected failure");
        out.errors += collective(comm, job, op, pending, pending_buf);
        ++out.completed;
      }
    } catch (const PeerFailedError&) {
      out.peer_failed = true;
    } catch (const DataError&) {
      out.failed_here = true;
    }
  }
  out.failed_ranks = comm.close(out.failed_here);
  return out;
}

TEST(GuardedCommunicator, HealthyJobRunsAndCloses) {
  auto world = make_mpi_world_communicator();
  GuardedCommunicator comm(make_mpi_group_communicator(*world, all_ranks(world->size()), 1));
  const Outcome out = run_job(comm, 1, 5 * kOpsPerRound, -1, -1);
  EXPECT_EQ(sum_over_world(out.errors), 0);
  EXPECT_EQ(out.completed, 5 * kOpsPerRound);
  EXPECT_FALSE(out.peer_failed);
  EXPECT_EQ(out.failed_ranks, 0);
  EXPECT_EQ(comm.status_words(), 5 * kOpsPerRound + 1);  // one per collective, one to close
  EXPECT_TRUE(comm.closed());
  EXPECT_THROW(comm.barrier(), PeerFailedError);  // closed: no traffic
  EXPECT_NO_THROW((void)mpi_handle(comm));        // the MPI handle underneath (parallel HDF5)
}

TEST(GuardedCommunicator, OneRankFailingAnywhereEndsTheJobOnEveryRank) {
  auto world = make_mpi_world_communicator();
  const int n = world->size();
  int launch = 10;
  for (int fail_rank = 0; fail_rank < n; ++fail_rank)
    for (int fail_at : {0, 1, 2, 3, 4, 5, 8, 13}) {
      GuardedCommunicator comm(make_mpi_group_communicator(*world, all_ranks(n), ++launch));
      const Outcome out = run_job(comm, 2, 3 * kOpsPerRound, fail_rank, fail_at);
      SCOPED_TRACE(testing::Message() << "rank " << fail_rank << " fails at collective " << fail_at);
      EXPECT_EQ(sum_over_world(out.errors), 0);
      EXPECT_EQ(out.completed, fail_at);  // every rank left after the same collectives
      EXPECT_EQ(out.failed_here, world->rank() == fail_rank);
      EXPECT_EQ(out.peer_failed, world->rank() != fail_rank && n > 1);
      EXPECT_EQ(out.failed_ranks, 1);
    }
}

TEST(GuardedCommunicator, TwoRanksFailingAtDifferentPoints) {
  auto world = make_mpi_world_communicator();
  const int n = world->size();
  if (n < 2) GTEST_SKIP() << "needs two ranks";
  GuardedCommunicator comm(make_mpi_group_communicator(*world, all_ranks(n), 3));
  Outcome out;
  const int at = comm.rank() == 0 ? 4 : comm.rank() == 1 ? 7 : 100;  // rank 0 first: rank 1 never gets there
  try {
    std::unique_ptr<Request> pending;
    std::vector<std::int64_t> buf;
    for (int op = 0; op < 2 * kOpsPerRound; ++op) {
      if (op == at) throw DataError("injected");
      out.errors += collective(comm, 3, op, pending, buf);
      ++out.completed;
    }
  } catch (const PeerFailedError&) {
    out.peer_failed = true;
  } catch (const DataError&) {
    out.failed_here = true;
  }
  out.failed_ranks = comm.close(out.failed_here);
  EXPECT_EQ(out.completed, 4);
  EXPECT_EQ(out.failed_here, comm.rank() == 0);
  EXPECT_EQ(out.failed_ranks, 1);
  EXPECT_EQ(sum_over_world(out.errors), 0);
}

TEST(GuardedCommunicator, AFailingJobLeavesAnotherJobOnTheSameRanksAlone) {
  auto world = make_mpi_world_communicator();
  const int n = world->size();
  // Created in one order on every rank, as the executor does; then used from two threads.
  GuardedCommunicator a(make_mpi_group_communicator(*world, all_ranks(n), 4));
  GuardedCommunicator b(make_mpi_group_communicator(*world, all_ranks(n), 5));
  Outcome out_a, out_b;
  std::thread ta([&] { out_a = run_job(a, 4, 40 * kOpsPerRound, n - 1, 17); });
  std::thread tb([&] { out_b = run_job(b, 5, 40 * kOpsPerRound, -1, -1); });
  ta.join();
  tb.join();
  EXPECT_EQ(out_a.completed, 17);
  EXPECT_EQ(out_a.failed_ranks, 1);
  EXPECT_EQ(out_b.completed, 40 * kOpsPerRound);
  EXPECT_EQ(out_b.failed_ranks, 0);
  EXPECT_EQ(sum_over_world(out_a.errors + out_b.errors), 0);
}

}  // namespace
}  // namespace recmix::comm
