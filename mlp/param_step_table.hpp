#pragma once
// Several parameters' optimizer steps issued as one launch (kernels::ParamSteps), for the dense
// optimizers and the MLPs' folded SGD bias steps. Internal to recmix_mlp.
#include <cstring>
#include <vector>

#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "device/memory_pool.hpp"
#include "mlp/kernels.hpp"
#include "mlp/launch.hpp"

namespace recmix::mlp::detail {

// Copies `bytes` from the host to device memory through a host-tier staging buffer (set-up only:
// it waits).
inline void write_device(device::Backend& backend, void* dst, const void* src, std::size_t bytes) {
  auto stream = backend.create_stream();
  void* host = backend.allocate(bytes, device::Tier::host);
  std::memcpy(host, src, bytes);
  backend.copy(dst, host, bytes, *stream);
  stream->synchronize();
  backend.deallocate(host, device::Tier::host);
}

// The parameters' step functors, on the host and, where the device memory is not the host's, in
// device memory for one launch over them all (kernels::ParamSteps). Written once: the functors
// hold only addresses and constants, so a captured step replays them as they are.
template <class Step>
class ParamStepTable {
 public:
  ParamStepTable() = default;
  ParamStepTable(device::Backend& backend, device::MemoryPool& pool, std::vector<Step> steps)
      : backend_(&backend), steps_(std::move(steps)) {
    std::vector<kernels::Index> starts{0};
    for (const Step& f : steps_) starts.push_back(starts.back() + f.count);
    total_ = starts.back();
    if (device::device_memory_is_host(backend)) {
      for (std::size_t p = 0; p < steps_.size(); ++p)
        for (kernels::Index b = 0; b < detail::flat_blocks(steps_[p].count); ++b) blocks_.push_back({p, b});
      return;
    }
    if (steps_.empty()) return;
    device_steps_ = device::Buffer<Step>(pool, steps_.size(), "dense optimizer steps");
    starts_ = device::Buffer<kernels::Index>(pool, starts.size(), "dense optimizer parameter starts");
    write_device(backend, device_steps_.data(), steps_.data(), device_steps_.bytes());
    write_device(backend, starts_.data(), starts.data(), starts_.bytes());
  }

  // Issues every parameter's step: one launch on a device, the parameters' blocks in one loop on
  // the CPU (at most one thread wake-up per step, not one per tensor).
  void issue(device::Stream& s) const {
    if (total_ == 0) return;
    if (!device::device_memory_is_host(*backend_)) {
      const kernels::ParamSteps<Step> f{device_steps_.data(), starts_.data(), static_cast<int>(steps_.size()), total_};
      detail::launch(*backend_, s, detail::flat_blocks(total_), f, total_);
      return;
    }
    // By reference: the host's memory is the device's here, and that backend has no graphs, so the
    // work runs now (device/graph.hpp).
    detail::launch_host(*backend_, s, detail::cpu_threads_for(*backend_, total_),
                        static_cast<kernels::Index>(blocks_.size()),
                        [this](std::int64_t i) { steps_[blocks_[i].param](blocks_[i].item); });
  }

 private:
  device::Backend* backend_ = nullptr;
  struct Block {  // a CPU work item: block `item` of parameter `param`
    std::size_t param;
    kernels::Index item;
  };
  std::vector<Step> steps_;
  std::vector<Block> blocks_;  // where the device memory is the host's
  kernels::Index total_ = 0;
  device::Buffer<Step> device_steps_;
  device::Buffer<kernels::Index> starts_;
};

}  // namespace recmix::mlp::detail
