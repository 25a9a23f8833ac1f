// NVML loaded at run time: a fake library with fixed answers gives them back; without the
// library (this machine) the answer is nullopt with a reason. Each case runs in its own process
// (NVML is loaded once per process): ctest runs this binary twice, with and without the fake.
#include <gtest/gtest.h>

#include <cstdlib>

#include "device/gpu_usage.hpp"

using namespace recmix::device;

TEST(GpuUsage, ReadsNvmlWhenPresentAndSaysWhyNotOtherwise) {
  const char* fake = std::getenv("RECMIX_NVML_LIBRARY");
  if (fake && *fake) {
    auto u = read_gpu_usage(0);
    ASSERT_TRUE(u.has_value()) << nvml_status();
    EXPECT_DOUBLE_EQ(u->utilization, 0.37);
    EXPECT_DOUBLE_EQ(u->memory_utilization, 0.12);
    EXPECT_EQ(u->memory_used_bytes, std::size_t(3) << 30);
    EXPECT_EQ(u->memory_total_bytes, std::size_t(80) << 30);
    EXPECT_EQ(nvml_status(), "NVML (driver 999.1)");
    EXPECT_FALSE(read_gpu_usage(1).has_value());  // no such GPU
    EXPECT_FALSE(read_gpu_usage(-1).has_value());
  } else {
    if (read_gpu_usage(0)) GTEST_SKIP() << "a GPU with NVML is present: " << nvml_status();
    EXPECT_NE(nvml_status().find("NVML not"), std::string::npos) << nvml_status();
  }
}
