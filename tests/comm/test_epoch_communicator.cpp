// The epoch wrapper (comm/epoch): two jobs on the same ranks, each posting device collectives from
// its own thread, against a stand-in for NCCL on a GPU that can hold one kernel at a time: a
// collective takes the process's "GPU" and keeps it while it waits for the same collective on the
// job's other ranks, as a spinning NCCL kernel occupies its device. Unordered, two jobs deadlock
// as soon as two ranks start them in different orders; through the wrapper every collective
// completes with the right result, whatever order the threads arrive in, and the host never waits
// for the device in an epoch. Verdicts summed over ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "comm/epoch/epoch_communicator.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "device/backend.hpp"
#include "core/error.hpp"

namespace recmix::comm {
namespace {

std::mutex gpu;                  // the device: one kernel at a time
std::atomic<int> on_gpu{0};      // kernels on it now (never more than one)
std::atomic<int> most_on_gpu{0};

// NCCL's part as a GPU shows it: the collective holds the device until every rank joined.
// ordered: it says it orders its collectives on the stream given, as NCCL does, so the epoch
// queues them (a stream wait and an event) instead of finishing them under the lock.
class OneKernelDevice final : public Communicator {
 public:
  OneKernelDevice(std::unique_ptr<Communicator> wire, bool ordered) : wire_(std::move(wire)), ordered_(ordered) {}
  bool orders_on_stream() const override { return ordered_; }
  int rank() const override { return wire_->rank(); }
  int size() const override { return wire_->size(); }
  void barrier() override { all_reduce_sum(nullptr, nullptr, 0, DataType::i32, nullptr); }
  void all_reduce_sum(const void* send, void* recv, std::size_t count, DataType type, device::Stream*) override {
    std::lock_guard kernel(gpu);
    const int now = ++on_gpu;
    most_on_gpu.store(std::max(most_on_gpu.load(), now));
    wire_->all_reduce_sum(send, recv, count, type);
    --on_gpu;
  }
  std::unique_ptr<Request> iall_reduce_sum(const void*, void*, std::size_t, DataType, device::Stream*) override {
    throw CommError("not used");
  }
  void broadcast(void*, std::size_t, DataType, int, device::Stream*) override { throw CommError("not used"); }
  void all_gather(const void*, void*, std::size_t, DataType, device::Stream*) override { throw CommError("not used"); }
  void all_to_all_v(const void*, std::span<const std::size_t>, std::span<const std::size_t>, void*,
                    std::span<const std::size_t>, std::span<const std::size_t>, DataType, device::Stream*) override {
    throw CommError("not used");
  }
  std::unique_ptr<Request> iall_to_all_v(const void*, std::span<const std::size_t>, std::span<const std::size_t>,
                                         void*, std::span<const std::size_t>, std::span<const std::size_t>, DataType,
                                         device::Stream*) override {
    throw CommError("not used");
  }
  std::unique_ptr<Communicator> split(int, int) override { throw CommError("not used"); }
  [[noreturn]] void abort(int code, const std::string& why) override {
    wire_->abort(code, why);
    std::abort();
  }

 private:
  std::unique_ptr<Communicator> wire_;
  bool ordered_;
};

std::int64_t sum_over_world(std::int64_t local) {
  std::int64_t total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

// Two jobs, each on its own backend (the strict emulator's) and stream; `ordered` picks whether
// their device communicators order collectives on the stream (NCCL's way) or finish them in the
// call.
class EpochJobs : public ::testing::TestWithParam<bool> {};

TEST_P(EpochJobs, TwoJobsSharingDevicesNeverDeadlockNorWaitForTheDevice) {
  const bool ordered = GetParam();
  auto world = make_mpi_world_communicator();
  const int n = world->size();
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  // Per job: a host communicator (the agreement) and the device's wire; created in one order.
  constexpr int kJobs = 2, kOps = 300;
  const int tag = ordered ? 30 : 10;
  std::vector<std::unique_ptr<device::Backend>> backends;
  std::vector<std::unique_ptr<device::Stream>> streams;
  std::vector<std::unique_ptr<Communicator>> hosts, devices;
  for (int j = 0; j < kJobs; ++j) {
    backends.push_back(device::make_backend(device::BackendKind::cpu_strict));
    streams.push_back(backends.back()->create_stream());
    hosts.push_back(make_mpi_group_communicator(*world, all, tag + 2 * j));
    devices.push_back(make_epoch_communicator(
        std::make_unique<OneKernelDevice>(make_mpi_group_communicator(*world, all, tag + 1 + 2 * j), ordered),
        *hosts.back(), 0, backends.back().get()));
  }
  std::vector<std::int64_t> errors(kJobs, 0);
  std::vector<std::thread> threads;
  for (int j = 0; j < kJobs; ++j)
    threads.emplace_back([&, j] {
      Communicator& c = *devices[j];
      for (int op = 0; op < kOps; ++op) {
        // Uneven host work between collectives, different per rank and job, so the ranks arrive
        // at the device in every order.
        std::this_thread::sleep_for(std::chrono::microseconds((op * 7 + c.rank() * 13 + j * 29) % 50));
        std::int64_t v[3] = {op, c.rank(), j};
        c.all_reduce_sum(v, v, 3, DataType::i64, streams[j].get());
        errors[j] += v[0] != std::int64_t{op} * n || v[1] != std::int64_t{n} * (n - 1) / 2 || v[2] != std::int64_t{j} * n;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(sum_over_world(errors[0] + errors[1]), 0);
  EXPECT_LE(most_on_gpu.load(), 1);
  // The epochs order the device, not the host: no stream or event wait in any of them.
  for (int j = 0; j < kJobs; ++j) EXPECT_EQ(backends[j]->counters().snapshot().host_syncs, 0u) << "job " << j;
  if (world->rank() == 0)
    std::printf("%d ranks, %s: %d x %d device collectives, %lld retries of the agreement on rank 0 so far\n", n,
                ordered ? "stream-ordered" : "finished in the call", kJobs, kOps, epoch_retries(0));
}

INSTANTIATE_TEST_SUITE_P(Device, EpochJobs, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "StreamOrdered" : "FinishedInTheCall"; });

TEST(EpochCommunicator, RejectsMismatchedHostCommunicator) {
  auto world = make_mpi_world_communicator();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  const std::vector<int> all = [&] {
    std::vector<int> v(world->size());
    std::iota(v.begin(), v.end(), 0);
    return v;
  }();
  auto wire = make_mpi_group_communicator(*world, all, 20);
  const std::vector<int> me = {world->rank()};
  auto alone = make_mpi_group_communicator(*world, me, 21);  // size 1 on every rank
  EXPECT_THROW(make_epoch_communicator(std::move(wire), *alone, 0), CommError);
}

}  // namespace
}  // namespace recmix::comm
