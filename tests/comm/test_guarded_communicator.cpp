// The guarded communicator (comm/guarded): a rank that fails at any point of a sequence of
// collectives of every kind the Communicator interface has (so it cannot post its peers' next one)
// ends the job on every rank: its peers throw PeerFailedError in their next collective, having
// completed exactly the collectives the failing rank completed, and nothing hangs. A non-blocking
// collective the failing rank posted but never waited for still completes everywhere. Another job
// sharing the ranks, running at the same time from another thread, is unaffected. Verdicts are
// summed over ranks. Besides, each kind is checked alone over an inner communicator whose peer
// rank is simulated: one status word ahead of the collective, and none of it once a peer failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
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

// Collective number `op` of a job's sequence is of kind op % kOpsPerRound: one of each
// collective of the Communicator interface per round.
constexpr int kOpsPerRound = 8;
const char* const kKindNames[kOpsPerRound] = {"all_reduce_sum", "all_to_all_v", "iall_reduce_sum", "broadcast",
                                              "all_gather",     "barrier",      "iall_to_all_v",   "split"};

// Element i that rank `rank` contributes to collective `op` of job `job`.
std::int64_t value(int job, int op, int rank, std::size_t i) {
  return 1000003LL * job + 10007LL * rank + 101LL * op + static_cast<std::int64_t>(i);
}

// Rank me's part of the all-to-all of collective `op`: rank r sends 1 + (3r + q + op) % 4
// elements to rank q (what a rank sends to q differs from what it receives from q);
// `expected` is what rank me must receive.
struct Exchange {
  std::vector<std::size_t> send_counts, send_displs, recv_counts, recv_displs;
  std::vector<std::int64_t> send, expected;
};

Exchange exchange_for(int p, int me, int job, int op) {
  Exchange x;
  const auto count = [op](int from, int to) { return static_cast<std::size_t>(1 + (3 * from + to + op) % 4); };
  std::size_t st = 0, rt = 0;
  for (int q = 0; q < p; ++q) {
    x.send_counts.push_back(count(me, q));
    x.send_displs.push_back(st);
    st += x.send_counts.back();
    x.recv_counts.push_back(count(q, me));
    x.recv_displs.push_back(rt);
    rt += x.recv_counts.back();
  }
  for (int q = 0; q < p; ++q) {
    for (std::size_t i = 0; i < x.send_counts[q]; ++i) x.send.push_back(value(job, op, me, 100 * q + i));
    for (std::size_t i = 0; i < x.recv_counts[q]; ++i) x.expected.push_back(value(job, op, q, 100 * me + i));
  }
  return x;
}

// A non-blocking collective posted by one collective() and waited for by the next (as a step
// overlaps its gradient all-reduce and its embedding exchange), with what it must deliver. The
// request is declared last so it is destroyed first: a request dropped unfinished (on the way
// out, as a step's would be) waits for its transfer, which still uses the buffers.
struct Pending {
  Exchange exchange;  // an all-to-all's counts, displacements and send buffer
  std::vector<std::int64_t> recv, expected;
  std::unique_ptr<Request> request;
};

// Waits for the pending collective, if any; returns its wrong elements.
std::int64_t finish(Pending& pending) {
  if (!pending.request) return 0;
  pending.request->wait();
  pending.request.reset();
  std::int64_t errors = pending.recv.size() != pending.expected.size();
  for (std::size_t i = 0; i < pending.recv.size() && i < pending.expected.size(); ++i)
    errors += pending.recv[i] != pending.expected[i];
  return errors;
}

// Collective number `op` of a job's sequence, shapes that depend on op, results checked; wrong
// elements are added to `errors` (also those of the pending collective it waits for first, when
// the collective itself then throws).
void collective(Communicator& comm, int job, int op, Pending& pending, std::int64_t& errors) {
  const int p = comm.size(), me = comm.rank();
  errors += finish(pending);
  switch (op % kOpsPerRound) {
    case 0: {
      std::vector<std::int64_t> v(3 + op % 5);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = value(job, op, me, i);
      comm.all_reduce_sum(v.data(), v.data(), v.size(), DataType::i64);
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::int64_t expected = 0;
        for (int r = 0; r < p; ++r) expected += value(job, op, r, i);
        errors += v[i] != expected;
      }
      break;
    }
    case 1: {
      const Exchange x = exchange_for(p, me, job, op);
      std::vector<std::int64_t> recv(x.expected.size(), -1);
      comm.all_to_all_v(x.send.data(), x.send_counts, x.send_displs, recv.data(), x.recv_counts, x.recv_displs,
                        DataType::i64);
      for (std::size_t i = 0; i < recv.size(); ++i) errors += recv[i] != x.expected[i];
      break;
    }
    case 2: {  // posted here, waited for at the next collective
      pending.recv.resize(64 + op);
      pending.expected.assign(pending.recv.size(), 0);
      for (std::size_t i = 0; i < pending.recv.size(); ++i) {
        pending.recv[i] = value(job, op, me, i);
        for (int r = 0; r < p; ++r) pending.expected[i] += value(job, op, r, i);
      }
      pending.request =
          comm.iall_reduce_sum(pending.recv.data(), pending.recv.data(), pending.recv.size(), DataType::i64);
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
    case 5:
      comm.barrier();
      break;
    case 6: {  // posted here, waited for at the next collective
      pending.exchange = exchange_for(p, me, job, op);
      const Exchange& x = pending.exchange;
      pending.expected = x.expected;
      pending.recv.assign(x.expected.size(), -1);
      pending.request = comm.iall_to_all_v(x.send.data(), x.send_counts, x.send_displs, pending.recv.data(),
                                           x.recv_counts, x.recv_displs, DataType::i64);
      break;
    }
    case 7: {  // parts of two consecutive ranks, highest rank first; one rank in four sits out
      const int round = op / kOpsPerRound;
      const auto color = [&](int r) { return (r + round) % 4 == 3 ? -1 : r / 2; };
      const std::unique_ptr<Communicator> part = comm.split(color(me), -me);
      if (color(me) < 0) {
        errors += part != nullptr;
        break;
      }
      std::vector<std::int32_t> members;  // ordered by key -r
      for (int r = p - 1; r >= 0; --r)
        if (color(r) == color(me)) members.push_back(r);
      if (part == nullptr || part->size() != static_cast<int>(members.size())) {
        ++errors;
        break;
      }
      errors += members[part->rank()] != me;
      std::int32_t mine = me;
      std::vector<std::int32_t> gathered(members.size(), -1);
      part->all_gather(&mine, gathered.data(), 1, DataType::i32);
      errors += gathered != members;
      break;
    }
  }
}

// A job of `ops` collectives; this rank throws instead of collective `fail_here` (-1: never).
struct Outcome {
  int completed = 0;   // collectives completed before leaving
  bool peer_failed = false;
  bool failed_here = false;
  int failed_ranks = -1;  // close()'s answer
  std::int64_t errors = 0;
};

Outcome run_job(GuardedCommunicator& comm, int job, int ops, int fail_here) {
  Outcome out;
  Pending pending;
  try {
    for (int op = 0; op < ops; ++op) {
      if (op == fail_here) throw DataError("injected failure");
      collective(comm, job, op, pending, out.errors);
      ++out.completed;
    }
  } catch (const PeerFailedError&) {
    out.peer_failed = true;
  } catch (const DataError&) {
    out.failed_here = true;
  }
  // A non-blocking collective left behind (the failing rank's, posted before it failed) completes
  // with the right data: every rank posted it.
  out.errors += finish(pending);
  out.failed_ranks = comm.close(out.failed_here);
  return out;
}

TEST(GuardedCommunicator, HealthyJobRunsAndCloses) {
  auto world = make_mpi_world_communicator();
  GuardedCommunicator comm(make_mpi_group_communicator(*world, all_ranks(world->size()), 1));
  const Outcome out = run_job(comm, 1, 5 * kOpsPerRound, -1);
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
    for (int fail_at : {0, 1, 2, 3, 4, 5, 6, 7, 9, 14, 15}) {  // instead of every kind, and later
      GuardedCommunicator comm(make_mpi_group_communicator(*world, all_ranks(n), ++launch));
      const Outcome out = run_job(comm, 2, 3 * kOpsPerRound, world->rank() == fail_rank ? fail_at : -1);
      SCOPED_TRACE(testing::Message() << "rank " << fail_rank << " fails instead of collective " << fail_at
                                      << " (" << kKindNames[fail_at % kOpsPerRound] << ")");
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
  const int at = comm.rank() == 0 ? 4 : comm.rank() == 1 ? 7 : -1;  // rank 0 first: rank 1 never gets there
  const Outcome out = run_job(comm, 3, 2 * kOpsPerRound, at);
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
  std::thread ta([&] { out_a = run_job(a, 4, 40 * kOpsPerRound, a.rank() == n - 1 ? 17 : -1); });
  std::thread tb([&] { out_b = run_job(b, 5, 40 * kOpsPerRound, -1); });
  ta.join();
  tb.join();
  EXPECT_EQ(out_a.completed, 17);
  EXPECT_EQ(out_a.failed_ranks, 1);
  EXPECT_EQ(out_b.completed, 40 * kOpsPerRound);
  EXPECT_EQ(out_b.failed_ranks, 0);
  EXPECT_EQ(sum_over_world(out_a.errors + out_b.errors), 0);
}

// The inner communicator of rank 0 of a two-rank job whose rank 1 is simulated: a status word
// (the all-reduce of two int32, failed and closing) gets rank 1's `peer_word` added; every call
// is logged by name ("status" for a status word), so a test sees what the guard posted, in order.
// Payloads are not moved: their results are checked over MPI above.
class SimulatedPeer final : public Communicator {
 public:
  SimulatedPeer(std::vector<std::string>& log, std::int32_t peer_failed, std::int32_t peer_closing)
      : log_(log), peer_word_{peer_failed, peer_closing} {}

  int rank() const override { return 0; }
  int size() const override { return 2; }

  void barrier() override { log_.push_back("barrier"); }
  void all_reduce_sum(const void* send, void* recv, std::size_t count, DataType type, device::Stream*) override {
    if (count != 2 || type != DataType::i32) {
      log_.push_back("all_reduce_sum");
      return;
    }
    log_.push_back("status");
    const auto* in = static_cast<const std::int32_t*>(send);
    auto* out = static_cast<std::int32_t*>(recv);
    for (int i = 0; i < 2; ++i) out[i] = in[i] + peer_word_[i];
  }
  std::unique_ptr<Request> iall_reduce_sum(const void*, void*, std::size_t, DataType, device::Stream*) override {
    log_.push_back("iall_reduce_sum");
    return std::make_unique<Done>();
  }
  void broadcast(void*, std::size_t, DataType, int, device::Stream*) override { log_.push_back("broadcast"); }
  void all_gather(const void*, void*, std::size_t, DataType, device::Stream*) override {
    log_.push_back("all_gather");
  }
  void all_to_all_v(const void*, std::span<const std::size_t>, std::span<const std::size_t>, void*,
                    std::span<const std::size_t>, std::span<const std::size_t>, DataType, device::Stream*) override {
    log_.push_back("all_to_all_v");
  }
  std::unique_ptr<Request> iall_to_all_v(const void*, std::span<const std::size_t>, std::span<const std::size_t>,
                                         void*, std::span<const std::size_t>, std::span<const std::size_t>, DataType,
                                         device::Stream*) override {
    log_.push_back("iall_to_all_v");
    return std::make_unique<Done>();
  }
  std::unique_ptr<Communicator> split(int color, int) override {
    log_.push_back("split");
    if (color < 0) return nullptr;
    return std::make_unique<SimulatedPeer>(log_, 0, 0);
  }
  [[noreturn]] void abort(int, const std::string& why) override { throw CommError("abort: " + why); }

 private:
  struct Done final : Request {
    bool test() override { return true; }
    void wait() override {}
  };
  std::vector<std::string>& log_;
  std::int32_t peer_word_[2];
};

// Each collective of the Communicator interface, called once with valid arguments for two ranks.
struct CollectiveKind {
  std::string name;
  std::function<bool(Communicator&)> call;  // false when it gave back no request or no part
};

std::vector<CollectiveKind> every_collective_kind() {
  static std::int32_t i32[2] = {1, 2}, i32_out[4];
  static double f64[3] = {1, 2, 3};
  static const std::size_t counts[2] = {1, 1}, displs[2] = {0, 1};
  return {
      {"barrier", [](Communicator& c) { c.barrier(); return true; }},
      {"all_reduce_sum", [](Communicator& c) { c.all_reduce_sum(f64, f64, 3, DataType::f64); return true; }},
      {"iall_reduce_sum",
       [](Communicator& c) { return c.iall_reduce_sum(f64, f64, 3, DataType::f64) != nullptr; }},
      {"broadcast", [](Communicator& c) { c.broadcast(f64, 3, DataType::f64, 1); return true; }},
      {"all_gather", [](Communicator& c) { c.all_gather(i32, i32_out, 2, DataType::i32); return true; }},
      {"all_to_all_v",
       [](Communicator& c) {
         c.all_to_all_v(i32, counts, displs, i32_out, counts, displs, DataType::i32);
         return true;
       }},
      {"iall_to_all_v",
       [](Communicator& c) {
         return c.iall_to_all_v(i32, counts, displs, i32_out, counts, displs, DataType::i32) != nullptr;
       }},
      {"split", [](Communicator& c) { return c.split(0, 0) != nullptr; }},
  };
}

TEST(GuardedCommunicator, EveryCollectiveKindIsPrecededByOneStatusWord) {
  for (const CollectiveKind& kind : every_collective_kind()) {
    SCOPED_TRACE(kind.name);
    std::vector<std::string> log;
    GuardedCommunicator comm(std::make_unique<SimulatedPeer>(log, 0, 0));
    EXPECT_TRUE(kind.call(comm));
    EXPECT_EQ(log, (std::vector<std::string>{"status", kind.name}));
    EXPECT_EQ(comm.status_words(), 1);
    EXPECT_FALSE(comm.closed());
    comm.close(false);  // the job's last word
    EXPECT_EQ(log, (std::vector<std::string>{"status", kind.name, "status"}));
  }
}

// A peer that failed (or ended) is met in the status word of whichever collective comes next: that
// collective throws PeerFailedError and is not posted, and the guard sends nothing more.
TEST(GuardedCommunicator, EveryCollectiveKindStopsWhenAPeerFailedOrEnded) {
  for (const CollectiveKind& kind : every_collective_kind())
    for (const bool peer_failed : {true, false}) {
      SCOPED_TRACE(testing::Message() << kind.name << (peer_failed ? ", peer failed" : ", peer ended"));
      std::vector<std::string> log;
      GuardedCommunicator comm(std::make_unique<SimulatedPeer>(log, peer_failed ? 1 : 0, 1));
      EXPECT_THROW(kind.call(comm), PeerFailedError);
      EXPECT_EQ(log, std::vector<std::string>{"status"});
      EXPECT_TRUE(comm.closed());
      for (const CollectiveKind& next : every_collective_kind()) EXPECT_THROW(next.call(comm), PeerFailedError);
      if (peer_failed) {
        EXPECT_EQ(comm.close(false), 1);
      }
      EXPECT_EQ(log, std::vector<std::string>{"status"});
    }
}

}  // namespace
}  // namespace recmix::comm
