#pragma once
// A GPU's utilisation and memory in use, from NVML (the NVIDIA driver's management library),
// loaded at run time: builds and machines without the driver need nothing, and get nullopt.
// recmix run adds these to its samples for jobs on the CUDA backend.
#include <cstddef>
#include <optional>
#include <string>

namespace recmix::device {

struct GpuUsage {
  double utilization = 0;        // share of the last sample period a kernel ran, in [0, 1]
  double memory_utilization = 0;  // share of it the memory was read or written, in [0, 1]
  std::size_t memory_used_bytes = 0, memory_total_bytes = 0;
};

// GPU `index` (CUDA's numbering, as NVML's when CUDA_VISIBLE_DEVICES is unset); nullopt when NVML
// cannot be loaded or initialised, or the query fails. NVML is loaded once, from
// RECMIX_NVML_LIBRARY when set (tests), else libnvidia-ml.so.1. Thread-safe.
std::optional<GpuUsage> read_gpu_usage(int index);

// Why read_gpu_usage gives nullopt ("NVML not loaded: ..."), or "NVML <version>".
std::string nvml_status();

}  // namespace recmix::device
