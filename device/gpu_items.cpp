// The process-wide choice between the GPU decompositions of a kernel (device/fine_grained.hpp).
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "device/fine_grained.hpp"

namespace recmix::device {
namespace {

GpuItems from_environment() {
  const char* v = std::getenv("RECMIX_GPU_ITEMS");
  return v && std::string_view(v) == "fine" ? GpuItems::fine : GpuItems::lanes;
}

std::atomic<GpuItems>& chosen() {
  static std::atomic<GpuItems> items{from_environment()};
  return items;
}

}  // namespace

GpuItems gpu_items() { return chosen().load(std::memory_order_relaxed); }
void set_gpu_items(GpuItems items) { chosen().store(items); }

}  // namespace recmix::device
