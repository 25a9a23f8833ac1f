// The backends' counts of what the host asks of them (device/counters.hpp), one request at a
// time, on the CPU backend and the strict emulator: each count moves by exactly what was asked.
#include <gtest/gtest.h>

#include <vector>

#include "device/backend.hpp"
#include "device/counters.hpp"

using namespace recmix;
using namespace recmix::device;

namespace {

class Counters : public testing::TestWithParam<BackendKind> {
 protected:
  std::unique_ptr<Backend> backend = make_backend(GetParam(), 1);
  DeviceCounts before = backend->counters().snapshot();
  DeviceCounts moved() { return backend->counters().snapshot() - before; }
};

TEST_P(Counters, AllocationsAndFreesOfEitherTier) {
  void* d = backend->allocate(256, Tier::device);
  void* h = backend->allocate(256, Tier::host);
  backend->deallocate(d, Tier::device);
  backend->deallocate(h, Tier::host);
  const DeviceCounts m = moved();
  EXPECT_EQ(m.allocations, 2u);
  EXPECT_EQ(m.frees, 2u);
  EXPECT_EQ(m.launches, 0u);
  EXPECT_EQ(m.host_syncs, 0u);
}

TEST_P(Counters, PageableCopiesAreThoseWithAHostSideTheBackendDidNotAllocate) {
  auto s = backend->create_stream();
  auto* dev = static_cast<float*>(backend->allocate(64 * sizeof(float), Tier::device));
  auto* pinned = static_cast<float*>(backend->allocate(64 * sizeof(float), Tier::host));
  std::vector<float> pageable(64, 1.f);
  before = backend->counters().snapshot();
  backend->copy(dev, pinned, 64 * sizeof(float), *s);                 // pinned -> device
  backend->copy(pinned + 8, dev + 8, 8 * sizeof(float), *s);          // device -> pinned, inside both
  EXPECT_EQ(moved().pageable_copies, 0u);
  backend->copy(dev, pageable.data(), 64 * sizeof(float), *s);        // pageable -> device
  EXPECT_EQ(moved().pageable_copies, 1u);
  EXPECT_EQ(moved().host_syncs, 0u);
  backend->copy(pageable.data(), dev, 64 * sizeof(float), *s);        // device -> pageable
  EXPECT_EQ(moved().pageable_copies, 2u);
  // CUDA returns from a copy into pageable memory once it has landed: a host wait where the
  // device tier is the GPU's (the emulator), none where it is host memory (the CPU backend).
  EXPECT_EQ(moved().host_syncs, backend->host_accessible(Tier::device) ? 0u : 1u);
  {
    CommSyncScope staging;  // a staged communicator's copies: only their waits count
    backend->copy(pageable.data(), dev, 64 * sizeof(float), *s);
    s->synchronize();
  }
  EXPECT_EQ(moved().pageable_copies, 2u);
  EXPECT_EQ(moved().comm_syncs, backend->host_accessible(Tier::device) ? 1u : 2u);
  s->synchronize();
  backend->deallocate(dev, Tier::device);
  backend->deallocate(pinned, Tier::host);
}

TEST_P(Counters, WaitsOnRecentWorkAreHostSyncsAndOnOldEventsBufferWaits) {
  auto s = backend->create_stream();
  auto e = backend->create_event();
  auto& c = backend->counters();
  c.set_step(10);
  e->record(*s);
  s->synchronize();
  e->synchronize();  // recorded this step
  c.set_step(11);
  e->synchronize();  // the step before
  EXPECT_EQ(moved().host_syncs, 3u);
  EXPECT_EQ(moved().buffer_waits, 0u);
  c.set_step(12);
  e->synchronize();  // two steps old: a rotated buffer's event
  EXPECT_EQ(moved().host_syncs, 3u);
  EXPECT_EQ(moved().buffer_waits, 1u);
  EXPECT_TRUE(e->query());  // a query is no wait
  EXPECT_EQ(moved().host_syncs + moved().buffer_waits, 4u);
}

TEST_P(Counters, GemmsAndFillsAreLaunches) {
  auto s = backend->create_stream();
  auto* a = static_cast<float*>(backend->allocate(16 * sizeof(float), Tier::device));
  before = backend->counters().snapshot();
  backend->fill_zero(a, 16 * sizeof(float), *s);
  backend->gemm(*s, false, false, 2, 2, 2, 1.f, a, 2, a + 4, 2, 0.f, a + 8, 2);
  backend->note_launch();  // what the kernel launchers outside device/ call
  EXPECT_EQ(moved().launches, 3u);
  EXPECT_EQ(moved().allocations, 0u);
  backend->deallocate(a, Tier::device);
}

INSTANTIATE_TEST_SUITE_P(Backends, Counters, testing::Values(BackendKind::cpu, BackendKind::cpu_strict),
                         [](const auto& info) { return info.param == BackendKind::cpu ? "cpu" : "cpu_strict"; });

}  // namespace
