// The process-wide choice between the GPU decompositions of a kernel (device/fine_grained.hpp):
// lanes unless RECMIX_GPU_ITEMS=fine.
#include "core/env_switch.hpp"
#include "device/fine_grained.hpp"

namespace recmix::device {
namespace {

EnvSwitch& lanes_switch() {
  static EnvSwitch s("RECMIX_GPU_ITEMS", "fine");
  return s;
}

}  // namespace

GpuItems gpu_items() { return lanes_switch().on() ? GpuItems::lanes : GpuItems::fine; }
void set_gpu_items(GpuItems items) { lanes_switch().set(items == GpuItems::lanes); }

}  // namespace recmix::device
