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

// The GPU that CUDA numbers `index`; nullopt when NVML cannot be loaded or initialised, the GPU
// is not found, or the query fails. CUDA numbers only the GPUs CUDA_VISIBLE_DEVICES lists, in its
// order, and NVML numbers every GPU of the machine, so the GPU is looked up through that list (by
// index or by UUID) when it is set. NVML is loaded once, from RECMIX_NVML_LIBRARY when set (tests),
// else libnvidia-ml.so.1. Thread-safe.
std::optional<GpuUsage> read_gpu_usage(int index);

// The entry of CUDA_VISIBLE_DEVICES (`visible`, comma-separated) that CUDA numbers `index`: an
// NVML index ("2") or a UUID ("GPU-5f0c..."). With `visible` null, `index` itself; empty when the
// list has no such entry, or when `visible` is set but empty (no GPU is visible).
std::string visible_device_entry(int index, const char* visible);

// Why read_gpu_usage gives nullopt ("NVML not loaded: ..."), or "NVML <version>".
std::string nvml_status();

}  // namespace recmix::device
