// Graphs (device/graph.hpp): work captured from a stream and replayed. On the strict emulator (and
// on CUDA where a GPU is present): a replay computes what the same work issued eagerly computes,
// reads what changes through memory, keeps what was passed by value frozen, and the calls a
// capture refuses are refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "device/backend.hpp"
#include "device/graph.hpp"

using namespace recmix;
using namespace recmix::device;

namespace {

std::unique_ptr<Backend> backend_or_skip(BackendKind kind) {
  if (kind == BackendKind::cuda && !cuda_device_available()) return nullptr;
  return make_backend(kind, 1);
}

// x (pinned, n x k) up to the device, y = x w1 (n x h), z = y w2 (n x 1), z down to pinned.
struct TwoGemms {
  static constexpr int n = 8, k = 5, h = 4;
  Backend& b;
  std::unique_ptr<Stream> s = b.create_stream();
  float* x_host = static_cast<float*>(b.allocate(n * k * sizeof(float), Tier::host));
  float* z_host = static_cast<float*>(b.allocate(n * sizeof(float), Tier::host));
  float* x = static_cast<float*>(b.allocate(n * k * sizeof(float), Tier::device));
  float* w1 = static_cast<float*>(b.allocate(k * h * sizeof(float), Tier::device));
  float* w2 = static_cast<float*>(b.allocate(h * sizeof(float), Tier::device));
  float* y = static_cast<float*>(b.allocate(n * h * sizeof(float), Tier::device));
  float* z = static_cast<float*>(b.allocate(n * sizeof(float), Tier::device));

  explicit TwoGemms(Backend& backend) : b(backend) {
    std::vector<float> w1h(k * h), w2h(h);
    for (int i = 0; i < k * h; ++i) w1h[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    for (int i = 0; i < h; ++i) w2h[i] = 1.f + 0.5f * static_cast<float>(i);
    float* staging = static_cast<float*>(b.allocate(k * h * sizeof(float), Tier::host));
    std::memcpy(staging, w1h.data(), w1h.size() * sizeof(float));
    b.copy(w1, staging, w1h.size() * sizeof(float), *s);
    s->synchronize();
    std::memcpy(staging, w2h.data(), w2h.size() * sizeof(float));
    b.copy(w2, staging, w2h.size() * sizeof(float), *s);
    s->synchronize();
    b.deallocate(staging, Tier::host);
  }
  ~TwoGemms() {
    s->synchronize();
    for (float* p : {x, w1, w2, y, z}) b.deallocate(p, Tier::device);
    for (float* p : {x_host, z_host}) b.deallocate(p, Tier::host);
  }
  void set_input(float seed) {
    for (int i = 0; i < n * k; ++i) x_host[i] = seed + 0.125f * static_cast<float>(i % 11);
  }
  void issue() {
    b.copy(x, x_host, n * k * sizeof(float), *s);
    b.fill_zero(y, n * h * sizeof(float), *s);
    b.gemm(*s, false, false, n, h, k, 1.f, x, k, w1, h, 0.f, y, h);
    b.gemm(*s, false, false, n, 1, h, 1.f, y, h, w2, 1, 0.f, z, 1);
    b.copy(z_host, z, n * sizeof(float), *s);
  }
  std::vector<float> output() {
    s->synchronize();
    return std::vector<float>(z_host, z_host + n);
  }
};

class Graphs : public testing::TestWithParam<BackendKind> {};

TEST_P(Graphs, AReplayComputesWhatEagerWorkComputesFromTheInputsOfTheReplay) {
  auto backend = backend_or_skip(GetParam());
  if (!backend) GTEST_SKIP() << "no GPU";
  ASSERT_TRUE(backend->supports_graphs());
  TwoGemms eager(*backend), captured(*backend);

  captured.set_input(0.f);
  backend->begin_capture(*captured.s);
  captured.issue();
  std::unique_ptr<Graph> graph = backend->end_capture(*captured.s);
  EXPECT_GE(graph->nodes(), 4);  // the copies, the fill and at least one kernel per GEMM

  for (float seed : {1.f, -2.5f, 3.f}) {
    eager.set_input(seed);
    eager.issue();
    const std::vector<float> want = eager.output();
    captured.set_input(seed);  // read from the pinned buffer at each replay
    const DeviceCounts before = backend->counters().snapshot();
    graph->launch(*captured.s);
    const DeviceCounts moved = backend->counters().snapshot() - before;
    EXPECT_EQ(moved.graph_launches, 1u);
    EXPECT_EQ(moved.launches, 0u);
    const std::vector<float> got = captured.output();
    for (int i = 0; i < TwoGemms::n; ++i) EXPECT_EQ(got[i], want[i]) << "seed " << seed << ", row " << i;
  }
}

TEST_P(Graphs, CaptureRefusesAllocationsWaitsAndPageableCopiesByName) {
  auto backend = backend_or_skip(GetParam());
  if (!backend) GTEST_SKIP() << "no GPU";
  auto s = backend->create_stream();
  auto e = backend->create_event();
  auto* d = static_cast<float*>(backend->allocate(64 * sizeof(float), Tier::device));
  std::vector<float> pageable(64, 1.f);
  auto expect_refused = [&](const char* call, auto&& f) {
    backend->begin_capture(*s);
    try {
      f();
      ADD_FAILURE() << call << " was not refused";
    } catch (const DeviceError& err) {
      EXPECT_NE(std::string(err.what()).find(std::string(call) + " during graph capture"), std::string::npos)
          << err.what();
    }
    EXPECT_TRUE(backend->capturing(*s));
    if (GetParam() == BackendKind::cuda) {
      // CUDA itself voids the capture of a refused call; the emulator still has a good one.
      try {
        backend->end_capture(*s);
      } catch (const DeviceError&) {
      }
    } else {
      backend->end_capture(*s);
    }
    EXPECT_FALSE(backend->capturing());
  };
  expect_refused("allocate", [&] { backend->allocate(64, Tier::device); });
  expect_refused("stream synchronize", [&] { s->synchronize(); });
  expect_refused("event synchronize", [&] {
    e->record(*s);
    e->synchronize();
  });
  expect_refused("copy through pageable host memory",
                 [&] { backend->copy(d, pageable.data(), 64 * sizeof(float), *s); });

  // A free cannot throw where it happens: the capture it fell into is void.
  void* spare = backend->allocate(64, Tier::device);
  backend->begin_capture(*s);
  backend->deallocate(spare, Tier::device);
  try {
    backend->end_capture(*s);
    ADD_FAILURE() << "a capture with a free in it gave a graph";
  } catch (const DeviceError& err) {
    EXPECT_NE(std::string(err.what()).find("deallocate during graph capture"), std::string::npos) << err.what();
  }
  EXPECT_FALSE(backend->capturing());
  backend->deallocate(d, Tier::device);
}

TEST_P(Graphs, OnlyTheCapturingThreadIsRefused) {
  auto backend = backend_or_skip(GetParam());
  if (!backend) GTEST_SKIP() << "no GPU";
  auto s = backend->create_stream();
  backend->begin_capture(*s);
  std::string error;
  std::thread other([&] {
    try {
      void* p = backend->allocate(256, Tier::device);  // a staging thread of the same job
      backend->deallocate(p, Tier::device);
    } catch (const std::exception& err) {
      error = err.what();
    }
  });
  other.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(backend->end_capture(*s)->nodes(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, Graphs, testing::Values(BackendKind::cpu_strict, BackendKind::cuda),
                         [](const auto& info) {
                           return std::string(info.param == BackendKind::cuda ? "cuda" : "cpu_strict");
                         });

// Host-run kernels on the emulator: what a kernel was given by value stays as it was captured;
// what it reads through a pointer is read at each replay.
TEST(EmulatedGraphs, AValuePassedByValueIsFrozenAndOneReadFromMemoryIsNot) {
  auto backend = make_backend(BackendKind::cpu_strict, 1);
  auto s = backend->create_stream();
  auto* step_host = static_cast<std::int64_t*>(backend->allocate(sizeof(std::int64_t), Tier::host));
  auto* step_dev = static_cast<std::int64_t*>(backend->allocate(sizeof(std::int64_t), Tier::device));
  auto* out = static_cast<std::int64_t*>(backend->allocate(2 * sizeof(std::int64_t), Tier::device));
  auto* out_host = static_cast<std::int64_t*>(backend->allocate(2 * sizeof(std::int64_t), Tier::host));

  std::int64_t step = 1;
  *step_host = step;
  backend->begin_capture(*s);
  backend->copy(step_dev, step_host, sizeof(std::int64_t), *s);
  backend->run_host_kernel(*s, [out, step, step_dev] {
    out[0] = step;       // frozen: the step of the capture
    out[1] = *step_dev;  // read at each replay
  });
  backend->copy(out_host, out, 2 * sizeof(std::int64_t), *s);
  auto graph = backend->end_capture(*s);
  EXPECT_EQ(graph->nodes(), 3);

  for (step = 2; step <= 4; ++step) {
    *step_host = step;
    graph->launch(*s);
    s->synchronize();
    EXPECT_EQ(out_host[0], 1) << "the value passed at capture";
    EXPECT_EQ(out_host[1], step) << "the value read from device memory";
  }
  backend->deallocate(out_host, Tier::host);
  backend->deallocate(step_host, Tier::host);
  backend->deallocate(out, Tier::device);
  backend->deallocate(step_dev, Tier::device);
}

TEST(EmulatedGraphs, TheCpuBackendHasNone) {
  auto backend = make_backend(BackendKind::cpu, 1);
  auto s = backend->create_stream();
  EXPECT_FALSE(backend->supports_graphs());
  EXPECT_THROW(backend->begin_capture(*s), DeviceError);
  EXPECT_FALSE(backend->capturing());
}

}  // namespace
