// Device collectives captured into graphs (Communicator::captures_on_stream): the staged
// communicator under the strict emulator at 1, 2 and 4 ranks, and NCCL on the CUDA backend where
// every rank has a GPU. A collective issued on a stream being captured does not run then: each
// replay of the graph runs it with the buffers, counts and displacements of the capture, on what
// the buffers hold at that replay. Values come from (seed, rank, index); errors are summed over
// the ranks with plain MPI, so a failure on any rank fails every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/device_communicator.hpp"
#include "comm/epoch/epoch_communicator.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "comm/nccl/nccl_communicator.hpp"
#include "core/error.hpp"
#include "device/backend.hpp"
#include "tests/comm/device_buffers.hpp"

namespace recmix::comm {
namespace {

using test::DeviceFloats;
using test::global_errors;
using test::value;

// A job's device communicator as the trainer makes it, on `kind`'s backend.
struct DeviceJob {
  std::unique_ptr<Communicator> host = make_mpi_world_communicator();
  std::unique_ptr<Communicator> early;
  std::unique_ptr<device::Backend> backend;
  std::unique_ptr<Communicator> comm;
  explicit DeviceJob(device::BackendKind kind) {
    early = device_communicator_before_backend(*host, kind);
    backend = device::make_backend(kind);
    comm = device_communicator(*host, *backend, std::move(early), false);
  }
};

class DeviceCapture : public testing::TestWithParam<device::BackendKind> {
 protected:
  void SetUp() override {
    if (GetParam() != device::BackendKind::cuda) return;
    if (!device::cuda_device_available() || !nccl_compiled()) GTEST_SKIP() << "needs a GPU and NCCL";
    int ranks = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (device::cuda_device_count() < ranks) GTEST_SKIP() << "needs a GPU per rank";
  }
};

// An all-reduce (non-blocking, in place) and an uneven all-to-all-v captured into one graph, then
// replayed three times with new inputs uploaded between the replays.
TEST_P(DeviceCapture, ReplaysRunTheCollectivesOnTheReplaysData) {
  DeviceJob job(GetParam());
  Communicator& comm = *job.comm;
  device::Backend& backend = *job.backend;
  ASSERT_TRUE(comm.captures_on_stream());
  auto stream = backend.create_stream();
  const int me = comm.rank(), p = comm.size();

  const std::size_t n = 1000;
  DeviceFloats a(backend, n);
  auto count = [](int from, int to) { return static_cast<std::size_t>((from * 3 + to * 5) % 4 + 1); };
  std::vector<std::size_t> sc(p), sd(p), rc(p), rd(p);
  std::size_t st = 0, rt = 0;
  for (int q = 0; q < p; ++q) {
    sc[q] = count(me, q), sd[q] = st, st += sc[q];
    rc[q] = count(q, me), rd[q] = rt, rt += rc[q];
  }
  DeviceFloats send(backend, st), recv(backend, rt);
  // Once eagerly first, as the trainer's first step of a shape runs: NCCL makes its connections
  // at a communicator's first calls, which a capture may not do.
  comm.iall_reduce_sum(a.ptr, a.ptr, n, DataType::f32, stream.get())->wait();
  comm.all_to_all_v(send.ptr, sc, sd, recv.ptr, rc, rd, DataType::f32, stream.get());
  const std::vector<float> sentinel_a(n, 7.0f), sentinel_recv(rt, 7.0f);
  a.upload(sentinel_a, *stream);
  recv.upload(sentinel_recv, *stream);

  backend.begin_capture(*stream);
  auto request = comm.iall_reduce_sum(a.ptr, a.ptr, n, DataType::f32, stream.get());
  const bool complete_at_once = request->test();
  comm.all_to_all_v(send.ptr, sc, sd, recv.ptr, rc, rd, DataType::f32, stream.get());
  auto graph = backend.end_capture(*stream);
  long errors = !complete_at_once;
  // Nothing ran at capture: the buffers hold what they held before.
  errors += a.download(*stream) != sentinel_a;
  errors += recv.download(*stream) != sentinel_recv;
  // What the capture took by value is frozen: counts changed afterwards change nothing.
  for (auto& c : sc) c = 0;
  for (auto& c : rc) c = 0;

  for (std::uint64_t round = 1; round <= 3; ++round) {
    std::vector<float> h(n), hs(st);
    for (std::size_t i = 0; i < n; ++i) h[i] = value(round, me, i);
    for (int q = 0; q < p; ++q)
      for (std::size_t i = 0; i < count(me, q); ++i)
        hs[sd[q] + i] = value(100 + round, me, static_cast<std::uint64_t>(q) * 100 + i);
    a.upload(h, *stream);
    send.upload(hs, *stream);
    graph->launch(*stream);
    const auto ra = a.download(*stream), rr = recv.download(*stream);
    for (std::size_t i = 0; i < n; ++i) {
      float e = 0;
      for (int r = 0; r < p; ++r) e += value(round, r, i);
      errors += ra[i] != e;
    }
    for (int q = 0; q < p; ++q)
      for (std::size_t i = 0; i < count(q, me); ++i)
        errors += rr[rd[q] + i] != value(100 + round, q, static_cast<std::uint64_t>(me) * 100 + i);
  }
  EXPECT_EQ(global_errors(errors), 0);
}

// Outside a capture the same calls run when issued, as before.
TEST_P(DeviceCapture, OutsideACaptureCollectivesRunWhenIssued) {
  DeviceJob job(GetParam());
  Communicator& comm = *job.comm;
  auto stream = job.backend->create_stream();
  const int me = comm.rank(), p = comm.size();
  DeviceFloats a(*job.backend, 16);
  std::vector<float> h(16);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = value(9, me, i);
  a.upload(h, *stream);
  auto request = comm.iall_reduce_sum(a.ptr, a.ptr, h.size(), DataType::f32, stream.get());
  request->wait();
  const auto r = a.download(*stream);
  long errors = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    float e = 0;
    for (int q = 0; q < p; ++q) e += value(9, q, i);
    errors += r[i] != e;
  }
  EXPECT_EQ(global_errors(errors), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceCapture,
                         testing::Values(device::BackendKind::cpu_strict, device::BackendKind::cuda),
                         [](const auto& info) { return std::string(device::to_string(info.param)) == "cpu-strict"
                                                           ? std::string("strict")
                                                           : std::string("cuda"); });

// Co-located jobs order their device collectives on the host, one epoch at a time
// (epoch_communicator.hpp): such a collective cannot be replayed from a graph, so the epoch
// communicator says it captures none, and the trainer keeps those collectives out of its graphs.
TEST(DeviceCaptureEpochs, SharedDevicesKeepCollectivesOutOfGraphs) {
  DeviceJob job(device::BackendKind::cpu_strict);
  auto host = make_mpi_world_communicator();
  auto epochs = make_epoch_communicator(std::move(job.comm), *host, 0, job.backend.get());
  EXPECT_FALSE(epochs->captures_on_stream());
  EXPECT_FALSE(host->captures_on_stream());  // MPI on host buffers
}

}  // namespace
}  // namespace recmix::comm
