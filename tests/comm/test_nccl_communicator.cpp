// The NCCL communicator. Without a GPU (or without NCCL in the build) setting it up must fail
// with one clear error on every rank rather than hang; with GPUs, its collectives are checked
// like the MPI ones: values from (seed, rank, index), expectations computed locally, error
// counts summed over ranks with plain MPI.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

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

TEST(NcclCommunicator, WithoutGpuEveryRankGetsOneClearError) {
  if (device::cuda_device_available()) GTEST_SKIP() << "a GPU is present; the collectives test covers it";
  auto bootstrap = make_mpi_world_communicator();
  try {
    auto nccl = make_nccl_communicator(*bootstrap);
    FAIL() << "make_nccl_communicator succeeded without a GPU";
  } catch (const NotCompiledError& e) {
    EXPECT_FALSE(nccl_compiled());
    EXPECT_NE(std::string(e.what()).find("NCCL"), std::string::npos) << e.what();
  } catch (const DeviceError& e) {
    EXPECT_TRUE(nccl_compiled());
    EXPECT_NE(std::string(e.what()).find("no usable CUDA device"), std::string::npos) << e.what();
  }
  bootstrap->barrier();  // no rank was left inside the set-up
}

TEST(NcclCommunicator, CollectivesOnDeviceBuffers) {
  if (!device::cuda_device_available() || !nccl_compiled()) GTEST_SKIP() << "needs a GPU and NCCL";
  auto bootstrap = make_mpi_world_communicator();
  if (device::cuda_device_count() < bootstrap->size()) {
    // More ranks than GPUs: every rank gets one clear error naming the launch.
    try {
      make_nccl_communicator(*bootstrap);
      ADD_FAILURE() << "ranks sharing a GPU were accepted";
    } catch (const DeviceError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("rank(s) per node") != std::string::npos || what.find("other rank(s)") != std::string::npos)
          << what;
    }
    GTEST_SKIP() << "needs a GPU per rank";
  }
  auto backend = device::make_backend(device::BackendKind::cuda);
  auto stream = backend->create_stream();
  auto comm = make_nccl_communicator(*bootstrap);
  const int me = comm->rank(), p = comm->size();
  long errors = (me != bootstrap->rank()) + (p != bootstrap->size());

  // all-reduce, blocking and non-blocking on the caller's stream
  const std::size_t n = 10000;
  std::vector<float> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = value(1, me, i);
  DeviceFloats a(*backend, n);
  a.upload(h, *stream);
  comm->all_reduce_sum(a.ptr, a.ptr, n, DataType::f32);
  auto r1 = a.download(*stream);
  a.upload(h, *stream);
  auto req = comm->iall_reduce_sum(a.ptr, a.ptr, n, DataType::f32, stream.get());
  while (!req->test()) {
  }
  auto r2 = a.download(*stream);
  for (std::size_t i = 0; i < n; ++i) {
    float e = 0;
    for (int r = 0; r < p; ++r) e += value(1, r, i);
    errors += (r1[i] != e) + (r2[i] != e);
  }

  // uneven all-to-all-v, zero-length pairs included
  auto count = [](int from, int to) { return static_cast<std::size_t>((from * 3 + to * 5) % 4); };
  std::vector<std::size_t> sc(p), sd(p), rc(p), rd(p);
  std::size_t st = 0, rt = 0;
  for (int q = 0; q < p; ++q) {
    sc[q] = count(me, q), sd[q] = st, st += sc[q];
    rc[q] = count(q, me), rd[q] = rt, rt += rc[q];
  }
  std::vector<float> hs(st);
  for (int q = 0; q < p; ++q)
    for (std::size_t i = 0; i < sc[q]; ++i) hs[sd[q] + i] = value(2, me, static_cast<std::uint64_t>(q) * 100 + i);
  DeviceFloats ds(*backend, st), dr(*backend, rt);
  ds.upload(hs, *stream);
  comm->all_to_all_v(ds.ptr, sc, sd, dr.ptr, rc, rd, DataType::f32);
  auto hr = dr.download(*stream);
  for (int q = 0; q < p; ++q)
    for (std::size_t i = 0; i < rc[q]; ++i) errors += hr[rd[q] + i] != value(2, q, static_cast<std::uint64_t>(me) * 100 + i);

  // broadcast and all-gather
  std::vector<float> hb(100);
  for (std::size_t i = 0; i < hb.size(); ++i) hb[i] = me == p - 1 ? value(3, p - 1, i) : -1.0f;
  DeviceFloats db(*backend, hb.size()), dg(*backend, hb.size() * static_cast<std::size_t>(p));
  db.upload(hb, *stream);
  comm->broadcast(db.ptr, hb.size(), DataType::f32, p - 1);
  auto rb = db.download(*stream);
  for (std::size_t i = 0; i < hb.size(); ++i) errors += rb[i] != value(3, p - 1, i);
  comm->all_gather(db.ptr, dg.ptr, hb.size(), DataType::f32);
  auto rg = dg.download(*stream);
  for (std::size_t i = 0; i < rg.size(); ++i) errors += rg[i] != value(3, p - 1, i % hb.size());

  // split into even and odd ranks
  auto sub = comm->split(me % 2, me);
  float one = 1.0f;
  DeviceFloats d1(*backend, 1);
  d1.upload({one}, *stream);
  sub->all_reduce_sum(d1.ptr, d1.ptr, 1, DataType::f32);
  errors += d1.download(*stream)[0] != static_cast<float>((p + (me % 2 == 0 ? 1 : 0)) / 2);
  comm->barrier();
  EXPECT_EQ(global_errors(errors), 0);
}

}  // namespace
}  // namespace recmix::comm
