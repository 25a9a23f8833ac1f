#include <gtest/gtest.h>

#include "core/error.hpp"
#include "device/buffer.hpp"

using namespace recmix;
using namespace recmix::device;

TEST(MemoryPool, CountsCurrentAndPeakBytes) {
  auto backend = make_backend(BackendKind::cpu);
  MemoryPool pool(*backend, Tier::device, "job-a", 0);
  {
    Buffer<float> a(pool, 100);
    EXPECT_EQ(pool.current_bytes(), 400u);
    {
      Buffer<double> b(pool, 10);
      EXPECT_EQ(pool.current_bytes(), 480u);
    }
    EXPECT_EQ(pool.current_bytes(), 400u);
  }
  EXPECT_EQ(pool.current_bytes(), 0u);
  EXPECT_EQ(pool.peak_bytes(), 480u);
}

TEST(MemoryPool, RefusesAllocationPastCapacityAndNamesOwner) {
  auto backend = make_backend(BackendKind::cpu);
  MemoryPool pool(*backend, Tier::device, "job-b", 1000);
  Buffer<float> a(pool, 200);  // 800 bytes
  try {
    Buffer<float> b(pool, 100, "embedding table 3");  // +400 > 1000
    FAIL() << "allocation past capacity succeeded";
  } catch (const OutOfMemoryError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("job-b"), std::string::npos) << msg;
    EXPECT_NE(msg.find("embedding table 3"), std::string::npos) << msg;
  }
  // The failed allocation is not counted, and the pool is still usable up to capacity.
  EXPECT_EQ(pool.current_bytes(), 800u);
  Buffer<float> c(pool, 50);
  EXPECT_EQ(pool.current_bytes(), 1000u);
}

TEST(MemoryPool, MovedBufferIsCountedOnce) {
  auto backend = make_backend(BackendKind::cpu);
  MemoryPool pool(*backend, Tier::host, "job-c");
  Buffer<int> a(pool, 10);
  Buffer<int> b = std::move(a);
  EXPECT_EQ(pool.current_bytes(), 40u);
  EXPECT_EQ(a.data(), nullptr);
  b = Buffer<int>();
  EXPECT_EQ(pool.current_bytes(), 0u);
}
