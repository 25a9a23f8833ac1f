// The strict device emulator (cpu-strict): device memory that host code cannot touch, copies to
// the host visible only after synchronisation, GEMMs equal to the CPU backend's, and a planted
// host read caught with a message naming the allocation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "device/memory_pool.hpp"

using namespace recmix;
using namespace recmix::device;

namespace {

std::vector<float> to_host(Backend& b, const float* device, std::size_t n) {
  std::vector<float> host(n);
  auto s = b.create_stream();
  b.copy(host.data(), device, n * sizeof(float), *s);
  s->synchronize();
  return host;
}

void from_host(Backend& b, float* device, const std::vector<float>& host) {
  auto s = b.create_stream();
  b.copy(device, host.data(), host.size() * sizeof(float), *s);
  s->synchronize();
}

}  // namespace

TEST(StrictBackend, DescribesItselfAndKeepsTheDeviceTierFromTheHost) {
  auto b = make_backend(BackendKind::cpu_strict, 1);
  EXPECT_EQ(b->kind(), BackendKind::cpu_strict);
  EXPECT_EQ(to_string(b->kind()), "cpu-strict");
  EXPECT_EQ(parse_backend_kind("cpu-strict"), BackendKind::cpu_strict);
  EXPECT_FALSE(b->host_accessible(Tier::device));
  EXPECT_TRUE(b->host_accessible(Tier::host));
  EXPECT_TRUE(runs_kernels_on_host(*b));
  EXPECT_NE(b->description().find("cpu-strict"), std::string::npos);
}

TEST(StrictBackend, CopiesRoundTripAndFillZeroClears) {
  auto b = make_backend(BackendKind::cpu_strict, 1);
  MemoryPool pool(*b, Tier::device, "test");
  Buffer<float> x(pool, 1000, "x"), y(pool, 1000, "y");
  std::vector<float> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = 0.5f * i;
  from_host(*b, x.data(), v);
  auto s = b->create_stream();
  b->copy(y.data(), x.data(), x.bytes(), *s);  // device to device
  EXPECT_EQ(to_host(*b, y.data(), 1000), v);
  b->fill_zero(y.data() + 10, 20 * sizeof(float), *s);
  auto back = to_host(*b, y.data(), 1000);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(back[i], i >= 10 && i < 30 ? 0.f : v[i]) << i;
}

TEST(StrictBackend, NewDeviceMemoryIsGarbageNotZeros) {
  auto b = make_backend(BackendKind::cpu_strict, 1);
  MemoryPool pool(*b, Tier::device, "test");
  Buffer<float> x(pool, 64, "x");
  for (float f : to_host(*b, x.data(), 64)) EXPECT_TRUE(std::isnan(f));
}

TEST(StrictBackend, CopyToHostIsVisibleOnlyAfterSynchronisation) {
  auto b = make_backend(BackendKind::cpu_strict, 1);
  MemoryPool pool(*b, Tier::device, "test");
  Buffer<float> x(pool, 8, "x");
  from_host(*b, x.data(), std::vector<float>(8, 3.f));
  std::vector<float> host(8, 1.f);
  auto s = b->create_stream();
  b->copy(host.data(), x.data(), x.bytes(), *s);
  for (float f : host) EXPECT_TRUE(std::isnan(f)) << "a copy to the host was visible before synchronising";
  s->synchronize();
  EXPECT_EQ(host, std::vector<float>(8, 3.f));
  // An event recorded after the copy also delivers it.
  std::vector<float> again(8, 1.f);
  auto e = b->create_event();
  b->copy(again.data(), x.data(), x.bytes(), *s);
  e->record(*s);
  e->synchronize();
  EXPECT_EQ(again, std::vector<float>(8, 3.f));
}

TEST(StrictBackend, StreamOrderHoldsForAHostBufferCopiedBackBeforeSynchronising) {
  auto b = make_backend(BackendKind::cpu_strict, 1);
  MemoryPool pool(*b, Tier::device, "test");
  Buffer<float> x(pool, 8, "x"), y(pool, 8, "y");
  from_host(*b, x.data(), std::vector<float>(8, 7.f));
  std::vector<float> host(8);
  auto s = b->create_stream();
  b->copy(host.data(), x.data(), x.bytes(), *s);
  b->copy(y.data(), host.data(), y.bytes(), *s);  // reads what the previous copy writes
  EXPECT_EQ(to_host(*b, y.data(), 8), std::vector<float>(8, 7.f));
}

TEST(StrictBackend, GemmEqualsTheCpuBackendsBitForBit) {
  auto strict = make_backend(BackendKind::cpu_strict, 1, CpuGemm::openblas);
  auto cpu = make_backend(BackendKind::cpu, 1, CpuGemm::openblas);
  MemoryPool pool(*strict, Tier::device, "test");
  const int m = 37, n = 19, k = 23;
  std::vector<float> a(m * k), bm(k * n), c(m * n, 0.f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.1f * i);
  for (std::size_t i = 0; i < bm.size(); ++i) bm[i] = std::cos(0.3f * i);
  Buffer<float> da(pool, a.size(), "a"), db(pool, bm.size(), "b"), dc(pool, c.size(), "c");
  from_host(*strict, da.data(), a);
  from_host(*strict, db.data(), bm);
  auto s = strict->create_stream();
  strict->gemm(*s, false, false, m, n, k, 1.f, da.data(), k, db.data(), n, 0.f, dc.data(), n);
  auto cs = cpu->create_stream();
  cpu->gemm(*cs, false, false, m, n, k, 1.f, a.data(), k, bm.data(), n, 0.f, c.data(), n);
  EXPECT_EQ(to_host(*strict, dc.data(), c.size()), c);
}

TEST(StrictBackend, HostPointersAndOverrunsAreRefusedByName) {
  auto b = make_backend(BackendKind::cpu_strict, 1);
  MemoryPool pool(*b, Tier::device, "test");
  Buffer<float> x(pool, 1024, "x");
  std::vector<float> host(2048);
  EXPECT_NO_THROW(b->check_device_memory(x.data(), x.bytes(), "x"));
  EXPECT_THROW(b->check_device_memory(host.data(), 16, "send buffer"), DeviceError);
  try {
    b->check_device_memory(x.data(), x.bytes() + 4096, "receive buffer");
    FAIL() << "an overrun was accepted";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("'x' of 'test'"), std::string::npos) << e.what();
  }
  auto s = b->create_stream();
  EXPECT_THROW(b->copy(host.data(), x.data(), 2048 * sizeof(float) + 4096, *s), DeviceError);
}

TEST(StrictBackend, TakesAnL2WindowOverItsDeviceMemoryOnly) {
  auto backend = make_backend(BackendKind::cpu_strict);
  EXPECT_TRUE(backend->has_l2_window());
  auto stream = backend->create_stream();
  const std::size_t big = kStrictL2Window + 4096;
  void* d = backend->allocate(big, Tier::device);
  EXPECT_EQ(backend->set_l2_window(*stream, d, 4096), 4096u);
  EXPECT_EQ(backend->set_l2_window(*stream, d, big), kStrictL2Window);  // cut to the largest window
  EXPECT_EQ(backend->set_l2_window(*stream, d, 0), 0u);
  std::vector<char> host(64);
  EXPECT_THROW(backend->set_l2_window(*stream, host.data(), host.size()), DeviceError);
  EXPECT_THROW(backend->set_l2_window(*stream, d, big + 1), DeviceError);  // past the allocation
  backend->begin_capture(*stream);
  EXPECT_THROW(backend->set_l2_window(*stream, d, 4096), DeviceError);
  backend->end_capture(*stream);
  backend->deallocate(d, Tier::device);
  auto cpu = make_backend(BackendKind::cpu);
  EXPECT_FALSE(cpu->has_l2_window());
  auto cpu_stream = cpu->create_stream();
  EXPECT_EQ(cpu->set_l2_window(*cpu_stream, host.data(), host.size()), 0u);  // no such cache
}

TEST(StrictBackend, KernelsSeeDeviceMemoryInsideDeviceWork) {
  auto b = make_backend(BackendKind::cpu_strict, 1);
  MemoryPool pool(*b, Tier::device, "test");
  Buffer<float> x(pool, 16, "x");
  {
    DeviceWork work(*b);  // what every host-run kernel is wrapped in
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  }
  auto back = to_host(*b, x.data(), 16);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(back[i], float(i));
}

using StrictBackendDeathTest = testing::Test;

TEST_F(StrictBackendDeathTest, PlantedHostReadIsCaughtAndNamesTheAllocation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto b = make_backend(BackendKind::cpu_strict, 1);
  MemoryPool pool(*b, Tier::device, "job-a");
  Buffer<float> x(pool, 4096, "planted buffer");
  EXPECT_DEATH(
      {
        volatile float f = x[100];  // host code reading device memory
        (void)f;
      },
      "host access to device memory at 0x[0-9a-f]+, inside 'planted buffer' of 'job-a'");
  EXPECT_DEATH({ x[5000 / 2] = 1.f; }, "host access to device memory.*'planted buffer'");
}

TEST_F(StrictBackendDeathTest, OneJobsKernelDoesNotOpenAnotherJobsMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto a = make_backend(BackendKind::cpu_strict, 1);
  auto b = make_backend(BackendKind::cpu_strict, 1);
  MemoryPool pa(*a, Tier::device, "job-a"), pb(*b, Tier::device, "job-b");
  Buffer<float> xa(pa, 64, "a weights"), xb(pb, 64, "b weights");
  EXPECT_DEATH(
      {
        DeviceWork work(*a);  // job a's kernel is running ...
        xa[0] = 1.f;          // ... and may touch a's memory,
        std::thread([&] { volatile float f = xb[0]; (void)f; }).join();  // not b's
      },
      "host access to device memory.*'b weights' of 'job-b'");
}
