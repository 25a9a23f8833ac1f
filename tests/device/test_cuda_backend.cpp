#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "device/backend.hpp"

using namespace recmix::device;

TEST(CudaBackend, FailsClearlyOrWorks) {
  if (!cuda_compiled()) {
    EXPECT_THROW(make_backend(BackendKind::cuda), recmix::NotCompiledError);
    return;
  }
  if (!cuda_device_available()) {
    EXPECT_THROW(make_backend(BackendKind::cuda), recmix::DeviceError);
    GTEST_SKIP() << "no CUDA device present";
  }
  auto backend = make_backend(BackendKind::cuda);
  auto stream = backend->create_stream();
  float host_a[6] = {1, 2, 3, 4, 5, 6}, host_b[6] = {1, 0, 0, 1, 1, 1}, host_c[4] = {};
  auto* a = static_cast<float*>(backend->allocate(sizeof host_a, Tier::device));
  auto* b = static_cast<float*>(backend->allocate(sizeof host_b, Tier::device));
  auto* c = static_cast<float*>(backend->allocate(sizeof host_c, Tier::device));
  backend->copy(a, host_a, sizeof host_a, *stream);
  backend->copy(b, host_b, sizeof host_b, *stream);
  // A (2x3) * B (3x2) row-major = [[1+0+3, 0+2+3], [4+0+6, 0+5+6]]
  backend->gemm(*stream, false, false, 2, 2, 3, 1.f, a, 3, b, 2, 0.f, c, 2);
  backend->copy(host_c, c, sizeof host_c, *stream);
  stream->synchronize();
  EXPECT_EQ(host_c[0], 4);
  EXPECT_EQ(host_c[1], 5);
  EXPECT_EQ(host_c[2], 10);
  EXPECT_EQ(host_c[3], 11);
  backend->deallocate(a, Tier::device);
  backend->deallocate(b, Tier::device);
  backend->deallocate(c, Tier::device);
}

// The L2 window on a GPU: set over device memory (cut to the device's largest window, or 0 on a
// GPU without a persisting L2), and a graph captured under it replays what eager work computes.
TEST(CudaBackend, L2WindowIsSetAndAGraphUnderItReplays) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  auto backend = make_backend(BackendKind::cuda);
  auto stream = backend->create_stream();
  const int m = 64, n = 64, k = 64;
  const std::size_t big = std::size_t(512) << 20;  // past any GPU's window today
  auto* w = static_cast<float*>(backend->allocate(big, Tier::device));
  const std::size_t covered = backend->set_l2_window(*stream, w, big);
  RecordProperty("window_bytes", std::to_string(covered));
  EXPECT_LE(covered, big);
  std::vector<float> host(m * k, 0.5f), eager(m * n), replayed(m * n);
  backend->copy(w, host.data(), host.size() * sizeof(float), *stream);
  float* c = w + m * k;
  backend->gemm(*stream, false, true, m, n, k, 1.f, w, k, w, k, 0.f, c, n);
  backend->copy(eager.data(), c, eager.size() * sizeof(float), *stream);
  backend->fill_zero(c, eager.size() * sizeof(float), *stream);
  backend->begin_capture(*stream);
  backend->gemm(*stream, false, true, m, n, k, 1.f, w, k, w, k, 0.f, c, n);
  auto graph = backend->end_capture(*stream);
  graph->launch(*stream);
  backend->copy(replayed.data(), c, replayed.size() * sizeof(float), *stream);
  stream->synchronize();
  EXPECT_EQ(eager, replayed);
  EXPECT_EQ(backend->set_l2_window(*stream, w, 0), 0u);
  backend->deallocate(w, Tier::device);
}

// Co-located jobs on one GPU: each job's backend allocates from a stream-ordered pool of its own
// (device/cuda/job_memory.cuh), so one job's free is queued behind that job's own work and does
// not wait for the device. With cudaFree it would: job B's GEMMs would have finished by the time
// job A's free returned.
TEST(CudaBackend, OneJobsFreeDoesNotWaitForAnotherJobsWork) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  auto job_a = make_backend(BackendKind::cuda);
  auto job_b = make_backend(BackendKind::cuda);
  ASSERT_TRUE(job_a->stream_ordered_memory()) << "the device has no memory pools";
  auto stream_a = job_a->create_stream();
  auto stream_b = job_b->create_stream();
  // Job B: ten fp32 GEMMs of 8192^3, about 11 TFLOP, so a tenth of a second or more on any GPU.
  const int n = 8192;
  const std::size_t bytes = std::size_t(n) * n * sizeof(float);
  auto* x = static_cast<float*>(job_b->allocate(bytes, Tier::device));
  auto* y = static_cast<float*>(job_b->allocate(bytes, Tier::device));
  job_b->fill_zero(x, bytes, *stream_b);
  for (int i = 0; i < 10; ++i) job_b->gemm(*stream_b, false, false, n, n, n, 1.f, x, n, x, n, 0.f, y, n);
  auto b_done = job_b->create_event();
  b_done->record(*stream_b);
  // Job A: a buffer made, used and freed, then made again, while B's GEMMs run.
  void* p = job_a->allocate(std::size_t(1) << 20, Tier::device);
  job_a->fill_zero(p, std::size_t(1) << 20, *stream_a);
  job_a->deallocate(p, Tier::device);
  void* q = job_a->allocate(std::size_t(1) << 20, Tier::device);
  EXPECT_FALSE(b_done->query()) << "job A's free or allocation waited for job B's work";
  job_a->fill_zero(q, std::size_t(1) << 20, *stream_a);
  stream_a->synchronize();
  job_a->deallocate(q, Tier::device);
  b_done->synchronize();
  job_b->deallocate(x, Tier::device);
  job_b->deallocate(y, Tier::device);
}

// The CPU backends have no such pool (and need none: their frees wait for nothing).
TEST(CudaBackend, OnlyCudaHasStreamOrderedMemory) {
  EXPECT_FALSE(make_backend(BackendKind::cpu)->stream_ordered_memory());
  EXPECT_FALSE(make_backend(BackendKind::cpu_strict)->stream_ordered_memory());
}
