// NVML loaded at run time: a fake library with fixed answers gives them back; without the
// library (this machine) the answer is nullopt with a reason. Each case runs in its own process
// (NVML is loaded once per process): ctest runs this binary twice, with and without the fake.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "device/gpu_usage.hpp"

using namespace recmix::device;

TEST(GpuUsage, ReadsNvmlWhenPresentAndSaysWhyNotOtherwise) {
  const char* fake = std::getenv("RECMIX_NVML_LIBRARY");
  if (fake && *fake) {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    ::unsetenv("RECMIX_FAKE_NVML_GIB");
    auto u = read_gpu_usage(0);
    ASSERT_TRUE(u.has_value()) << nvml_status();
    EXPECT_DOUBLE_EQ(u->utilization, 0.37);
    EXPECT_DOUBLE_EQ(u->memory_utilization, 0.12);
    EXPECT_EQ(u->memory_used_bytes, std::size_t(3) << 30);
    EXPECT_EQ(u->memory_total_bytes, std::size_t(80) << 30);
    EXPECT_EQ(nvml_status(), "NVML (driver 999.1)");
    EXPECT_FALSE(read_gpu_usage(1).has_value());  // no such GPU
    EXPECT_FALSE(read_gpu_usage(-1).has_value());
    // CUDA's numbering goes through CUDA_VISIBLE_DEVICES, by index or by UUID.
    ::setenv("RECMIX_FAKE_NVML_GIB", "80,40,24", 1);
    ::setenv("CUDA_VISIBLE_DEVICES", "2,GPU-fake-1", 1);
    auto first = read_gpu_usage(0), second = read_gpu_usage(1);
    ASSERT_TRUE(first && second);
    EXPECT_EQ(first->memory_total_bytes, std::size_t(24) << 30);
    EXPECT_EQ(second->memory_total_bytes, std::size_t(40) << 30);
    EXPECT_FALSE(read_gpu_usage(2).has_value());  // the list has two
    ::setenv("CUDA_VISIBLE_DEVICES", "GPU-other", 1);
    EXPECT_FALSE(read_gpu_usage(0).has_value());
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    ::unsetenv("RECMIX_FAKE_NVML_GIB");
  } else {
    if (read_gpu_usage(0)) GTEST_SKIP() << "a GPU with NVML is present: " << nvml_status();
    EXPECT_NE(nvml_status().find("NVML not"), std::string::npos) << nvml_status();
  }
}

TEST(GpuUsage, CudaNumbersTheVisibleDevicesInTheirOrder) {
  EXPECT_EQ(visible_device_entry(3, nullptr), "3");
  EXPECT_EQ(visible_device_entry(-1, nullptr), "");
  EXPECT_EQ(visible_device_entry(0, "2,0"), "2");
  EXPECT_EQ(visible_device_entry(1, "2, 0"), "0");
  EXPECT_EQ(visible_device_entry(2, "2,0"), "");
  EXPECT_EQ(visible_device_entry(1, "GPU-aa,GPU-bb"), "GPU-bb");
  EXPECT_EQ(visible_device_entry(0, ""), "");     // set and empty: no GPU is visible
  EXPECT_EQ(visible_device_entry(1, "1,,2"), "");  // CUDA stops at an entry it cannot use
}
