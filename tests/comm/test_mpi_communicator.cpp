// Collectives of the MPI communicator, in the style of nccl-tests: every rank fills its buffers
// from (seed, rank, index), computes locally what it must receive, and counts mismatches; the
// counts are summed over ranks with plain MPI so every rank reaches the same verdict.
#include <gtest/gtest.h>
#include <mpi.h>

#include <time.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <numeric>
#include <thread>
#include <type_traits>
#include <vector>

#include "comm/mpi/mpi_communicator.hpp"
#include "comm/mpi/mpi_handle.hpp"
#include "core/error.hpp"
#include "core/random.hpp"
#include "device/stream.hpp"

namespace recmix::comm {
namespace {

// Small integers (exact in every type, sums over 4 ranks fit a u8), signed where the type is.
template <class T>
T value(std::uint64_t seed, int rank, std::uint64_t index) {
  int v = static_cast<int>(random::hash(seed, static_cast<std::uint64_t>(rank), index) % 61);
  if constexpr (std::is_signed_v<T>) v -= 30;
  return static_cast<T>(v);
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// Sum of mismatches over every rank of the world (independent of the code under test).
long global_errors(long local) {
  long total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

template <class T>
long all_reduce_errors(Communicator& comm, std::size_t count, bool in_place, std::uint64_t seed) {
  std::vector<T> send(count), recv(count, T(99));
  for (std::size_t i = 0; i < count; ++i) send[i] = value<T>(seed, comm.rank(), i);
  if (in_place) {
    comm.all_reduce_sum(send.data(), send.data(), count, data_type_of<T>());
    recv = send;
  } else {
    comm.all_reduce_sum(send.data(), recv.data(), count, data_type_of<T>());
  }
  long errors = 0;
  for (std::size_t i = 0; i < count; ++i) {
    T expected = 0;
    for (int r = 0; r < comm.size(); ++r) expected = static_cast<T>(expected + value<T>(seed, r, i));
    errors += recv[i] != expected;
  }
  return errors;
}

TEST(MpiCommunicator, RankAndSizeMatchTheWorld) {
  auto comm = make_mpi_world_communicator();
  EXPECT_EQ(comm->rank(), world_rank());
  EXPECT_EQ(comm->size(), world_size());
  EXPECT_TRUE(is_mpi_communicator(*comm));
  EXPECT_NE(mpi_handle(*comm), MPI_COMM_WORLD);  // a private duplicate
  comm->barrier();
}

TEST(MpiCommunicator, AllReduceSumEveryTypeAndLength) {
  auto comm = make_mpi_world_communicator();
  long errors = 0;
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1000}}) {
    for (bool in_place : {false, true}) {
      errors += all_reduce_errors<float>(*comm, count, in_place, 11);
      errors += all_reduce_errors<double>(*comm, count, in_place, 12);
      errors += all_reduce_errors<std::int32_t>(*comm, count, in_place, 13);
      errors += all_reduce_errors<std::int64_t>(*comm, count, in_place, 14);
      errors += all_reduce_errors<std::uint8_t>(*comm, count, in_place, 15);
    }
  }
  EXPECT_EQ(global_errors(errors), 0);
}

TEST(MpiCommunicator, LongBuffersAreSplitIntoSeveralCalls) {
  MpiOptions options;
  options.max_elements_per_call = 7;  // forces 100 elements into 15 calls
  auto comm = make_mpi_world_communicator(options);
  long errors = all_reduce_errors<float>(*comm, 100, false, 21) + all_reduce_errors<double>(*comm, 100, true, 22);

  std::vector<std::int64_t> data(100);
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = comm->rank() == 0 ? value<std::int64_t>(23, 0, i) : -1;
  comm->broadcast(data.data(), data.size(), DataType::i64, 0);
  for (std::size_t i = 0; i < data.size(); ++i) errors += data[i] != value<std::int64_t>(23, 0, i);

  std::vector<float> one(100), all(100 * static_cast<std::size_t>(comm->size()));
  EXPECT_THROW(comm->all_gather(one.data(), all.data(), one.size(), DataType::f32), CommError);
  EXPECT_EQ(global_errors(errors), 0);
}

TEST(MpiCommunicator, BroadcastFromEveryRoot) {
  auto comm = make_mpi_world_communicator();
  long errors = 0;
  for (int root = 0; root < comm->size(); ++root) {
    for (std::size_t count : {std::size_t{0}, std::size_t{5}, std::size_t{777}}) {
      std::vector<double> data(count, -1.0);
      if (comm->rank() == root)
        for (std::size_t i = 0; i < count; ++i) data[i] = value<double>(31, root, i);
      comm->broadcast(data.data(), count, DataType::f64, root);
      for (std::size_t i = 0; i < count; ++i) errors += data[i] != value<double>(31, root, i);
    }
  }
  EXPECT_THROW(comm->broadcast(nullptr, 0, DataType::f64, comm->size()), CommError);
  EXPECT_THROW(comm->broadcast(nullptr, 0, DataType::f64, -1), CommError);
  EXPECT_EQ(global_errors(errors), 0);
}

TEST(MpiCommunicator, AllGatherInOrderOfRank) {
  auto comm = make_mpi_world_communicator();
  const auto p = static_cast<std::size_t>(comm->size());
  const auto me = static_cast<std::size_t>(comm->rank());
  long errors = 0;
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{129}}) {
    for (bool in_place : {false, true}) {
      std::vector<std::int32_t> send(count), recv(p * count, -99);
      for (std::size_t i = 0; i < count; ++i) send[i] = value<std::int32_t>(41, comm->rank(), i);
      if (in_place) {
        std::copy(send.begin(), send.end(), recv.begin() + static_cast<std::ptrdiff_t>(me * count));
        comm->all_gather(recv.data() + me * count, recv.data(), count, DataType::i32);
      } else {
        comm->all_gather(send.data(), recv.data(), count, DataType::i32);
      }
      for (std::size_t r = 0; r < p; ++r)
        for (std::size_t i = 0; i < count; ++i)
          errors += recv[r * count + i] != value<std::int32_t>(41, static_cast<int>(r), i);
    }
  }
  EXPECT_EQ(global_errors(errors), 0);
}

// Uneven all-to-all-v: rank s sends count(s, d) elements to rank d (zero for some pairs), with a
// gap between blocks on both sides so displacements matter. Element i of the block from s to d
// is value(seed, s, d * 1000 + i).
struct AllToAllCase {
  std::vector<std::size_t> send_counts, send_displs, recv_counts, recv_displs;
  std::size_t send_total = 0, recv_total = 0;
};

std::size_t pair_count(int from, int to, std::uint64_t seed) {
  return static_cast<std::size_t>((static_cast<std::uint64_t>(from) * 3 + static_cast<std::uint64_t>(to) * 5 + seed) % 6);
}

AllToAllCase make_case(int me, int p, std::uint64_t seed, bool all_zero) {
  AllToAllCase c;
  const std::size_t gap = 2;
  for (int q = 0; q < p; ++q) {
    c.send_counts.push_back(all_zero ? 0 : pair_count(me, q, seed));
    c.send_displs.push_back(c.send_total + gap);
    c.send_total += gap + c.send_counts.back();
    c.recv_counts.push_back(all_zero ? 0 : pair_count(q, me, seed));
    c.recv_displs.push_back(c.recv_total + gap);
    c.recv_total += gap + c.recv_counts.back();
  }
  return c;
}

long all_to_all_errors(Communicator& comm, std::uint64_t seed, bool all_zero, bool non_blocking) {
  const int me = comm.rank(), p = comm.size();
  AllToAllCase c = make_case(me, p, seed, all_zero);
  std::vector<float> send(c.send_total, -1.0f), recv(c.recv_total, -7.0f);
  for (int q = 0; q < p; ++q)
    for (std::size_t i = 0; i < c.send_counts[q]; ++i)
      send[c.send_displs[q] + i] = value<float>(seed, me, static_cast<std::uint64_t>(q) * 1000 + i);
  if (non_blocking) {
    auto request = comm.iall_to_all_v(send.data(), c.send_counts, c.send_displs, recv.data(), c.recv_counts,
                                      c.recv_displs, DataType::f32);
    while (!request->test()) {
    }
    EXPECT_TRUE(request->test());  // stays complete
    request->wait();               // and wait() on a completed request returns at once
  } else {
    comm.all_to_all_v(send.data(), c.send_counts, c.send_displs, recv.data(), c.recv_counts, c.recv_displs,
                      DataType::f32);
  }
  long errors = 0;
  std::size_t pos = 0;
  for (int q = 0; q < p; ++q) {
    for (; pos < c.recv_displs[q]; ++pos) errors += recv[pos] != -7.0f;  // gaps untouched
    for (std::size_t i = 0; i < c.recv_counts[q]; ++i, ++pos)
      errors += recv[pos] != value<float>(seed, q, static_cast<std::uint64_t>(me) * 1000 + i);
  }
  return errors;
}

TEST(MpiCommunicator, AllToAllVUnevenCountsAndGaps) {
  auto comm = make_mpi_world_communicator();
  long errors = 0;
  for (std::uint64_t seed = 0; seed < 6; ++seed) errors += all_to_all_errors(*comm, seed, false, false);
  errors += all_to_all_errors(*comm, 7, true, false);  // every message empty
  EXPECT_EQ(global_errors(errors), 0);
}

TEST(MpiCommunicator, NonBlockingCompletesWhenPolled) {
  auto comm = make_mpi_world_communicator();
  long errors = 0;
  for (std::uint64_t seed = 0; seed < 3; ++seed) errors += all_to_all_errors(*comm, seed, false, true);
  errors += all_to_all_errors(*comm, 9, true, true);

  // Two all-reduces in flight at once, completed in reverse order.
  const std::size_t n = 50000;
  std::vector<float> a(n), b(n), out(n);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = value<float>(51, comm->rank(), i);
    b[i] = value<float>(52, comm->rank(), i);
  }
  auto ra = comm->iall_reduce_sum(a.data(), out.data(), n, DataType::f32);
  auto rb = comm->iall_reduce_sum(b.data(), b.data(), n, DataType::f32);
  long polls = 0;
  while (!rb->test()) ++polls;
  while (!ra->test()) ++polls;
  for (std::size_t i = 0; i < n; ++i) {
    float ea = 0, eb = 0;
    for (int r = 0; r < comm->size(); ++r) {
      ea += value<float>(51, r, i);
      eb += value<float>(52, r, i);
    }
    errors += (out[i] != ea) + (b[i] != eb);
  }
  // A request destroyed unfinished completes in its destructor instead of leaking.
  { auto dropped = comm->iall_reduce_sum(a.data(), out.data(), n, DataType::f32); }
  EXPECT_EQ(global_errors(errors), 0);
}

TEST(MpiCommunicator, SplitIntoEvenAndOddRanks) {
  auto comm = make_mpi_world_communicator();
  const int me = comm->rank(), p = comm->size();
  // key = -rank reverses the order inside each group.
  auto sub = comm->split(me % 2, -me);
  ASSERT_NE(sub, nullptr);
  std::vector<int> members;
  for (int r = p - 1; r >= 0; --r)
    if (r % 2 == me % 2) members.push_back(r);
  long errors = 0;
  errors += sub->size() != static_cast<int>(members.size());
  errors += members[static_cast<std::size_t>(sub->rank())] != me;
  // The sub-communicator reduces over its own members only.
  std::int64_t x = 1 + me, sum = 0;
  sub->all_reduce_sum(&x, &sum, 1, DataType::i64);
  std::int64_t expected = 0;
  for (int r : members) expected += 1 + r;
  errors += sum != expected;
  // Sub-communicators split again; a negative color leaves the rank out.
  auto sub2 = sub->split(sub->rank() == 0 ? -1 : 0, 0);
  errors += (sub->rank() == 0) != (sub2 == nullptr);
  if (sub2) {
    std::int64_t one = 1, count = 0;
    sub2->all_reduce_sum(&one, &count, 1, DataType::i64);
    errors += count != sub->size() - 1;
  }
  EXPECT_EQ(global_errors(errors), 0);
}

// Every collective gives the same results whichever way the ranks wait for it.
TEST(MpiCommunicator, EveryCollectiveUnderEitherWait) {
  for (MpiWait wait : {MpiWait::poll_then_sleep, MpiWait::blocking}) {
    MpiOptions options;
    options.wait = wait;
    options.max_elements_per_call = 7;  // several requests for one all-reduce or broadcast
    auto comm = make_mpi_world_communicator(options);
    EXPECT_EQ(mpi_wait(*comm), wait);
    long errors = all_reduce_errors<float>(*comm, 100, false, 61) + all_reduce_errors<std::int64_t>(*comm, 30, true, 62);
    errors += all_to_all_errors(*comm, 63, false, false) + all_to_all_errors(*comm, 64, false, true);
    std::vector<std::int32_t> data(20);
    for (std::size_t i = 0; i < data.size(); ++i)
      data[i] = comm->rank() == comm->size() - 1 ? value<std::int32_t>(65, 0, i) : -1;
    comm->broadcast(data.data(), data.size(), DataType::i32, comm->size() - 1);
    for (std::size_t i = 0; i < data.size(); ++i) errors += data[i] != value<std::int32_t>(65, 0, i);
    std::vector<std::int32_t> mine{comm->rank()}, all(static_cast<std::size_t>(comm->size()), -1);
    comm->all_gather(mine.data(), all.data(), 1, DataType::i32);
    for (int r = 0; r < comm->size(); ++r) errors += all[static_cast<std::size_t>(r)] != r;
    auto request = comm->iall_reduce_sum(data.data(), data.data(), data.size(), DataType::i32);
    request->wait();
    for (std::size_t i = 0; i < data.size(); ++i) errors += data[i] != comm->size() * value<std::int32_t>(65, 0, i);
    comm->barrier();
    // Split and group communicators wait as the world does.
    errors += mpi_wait(*comm->split(0, 0)) != wait;
    const std::vector<int> everyone = [&] {
      std::vector<int> v(static_cast<std::size_t>(comm->size()));
      std::iota(v.begin(), v.end(), 0);
      return v;
    }();
    errors += mpi_wait(*make_mpi_group_communicator(*comm, everyone, 5)) != wait;
    EXPECT_EQ(global_errors(errors), 0) << "wait " << static_cast<int>(wait);
  }
  EXPECT_NE(mpi_wait(*make_mpi_world_communicator()), MpiWait::automatic);
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// A rank that waits for a late peer sleeps after its short poll instead of taking the core: the
// last rank arrives 300 ms late, and each other rank's thread uses well under half of that.
// (MPI's own blocking wait polls throughout and uses about all of it.)
TEST(MpiCommunicator, ARankWaitingForALatePeerSleeps) {
  MpiOptions options;
  options.wait = MpiWait::poll_then_sleep;
  auto comm = make_mpi_world_communicator(options);
  if (comm->size() == 1) GTEST_SKIP() << "needs a peer";
  const bool late = comm->rank() == comm->size() - 1;
  for (int kind = 0; kind < 2; ++kind) {
    comm->barrier();
    if (late) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double cpu = thread_cpu_seconds();
    std::int64_t x = 1, sum = 0;
    if (kind == 0) {
      comm->all_reduce_sum(&x, &sum, 1, DataType::i64);
    } else {
      std::vector<std::size_t> ones(static_cast<std::size_t>(comm->size()), 1), displs(ones.size());
      std::iota(displs.begin(), displs.end(), std::size_t{0});
      std::vector<std::int64_t> send(ones.size(), 1), recv(ones.size(), 0);
      comm->iall_to_all_v(send.data(), ones, displs, recv.data(), ones, displs, DataType::i64)->wait();
      sum = std::accumulate(recv.begin(), recv.end(), std::int64_t{0});
    }
    EXPECT_EQ(sum, comm->size());
    if (!late) {
      EXPECT_LT(thread_cpu_seconds() - cpu, 0.1) << (kind == 0 ? "all_reduce_sum" : "iall_to_all_v wait");
    }
  }
  comm->barrier();
}

class FakeDeviceStream : public device::Stream {
 public:
  void do_synchronize() override {}
  void* native() override { return this; }
};

TEST(MpiCommunicator, BadArgumentsThrowCommErrorOnEveryRank) {
  auto comm = make_mpi_world_communicator();
  const auto p = static_cast<std::size_t>(comm->size());
  std::vector<std::size_t> zeros(p, 0), short_list(p + 1, 0), huge(p, 0);
  huge[0] = std::size_t{1} << 31;  // beyond INT_MAX elements
  float x = 0;
  EXPECT_THROW(comm->all_to_all_v(&x, short_list, zeros, &x, zeros, zeros, DataType::f32), CommError);
  EXPECT_THROW(comm->all_to_all_v(&x, huge, zeros, &x, zeros, zeros, DataType::f32), CommError);
  EXPECT_THROW(comm->iall_to_all_v(&x, zeros, zeros, &x, zeros, huge, DataType::f32), CommError);
  FakeDeviceStream device_stream;
  EXPECT_THROW(comm->all_reduce_sum(&x, &x, 1, DataType::f32, &device_stream), CommError);
  try {
    comm->all_to_all_v(&x, huge, zeros, &x, zeros, zeros, DataType::f32);
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("send count for rank 0"), std::string::npos) << e.what();
  }
  comm->barrier();  // every rank is still in step after the errors
}

}  // namespace
}  // namespace recmix::comm
