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
