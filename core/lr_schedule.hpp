#pragma once
// The learning-rate schedule of the DLRM references (facebookresearch/dlrm's LRPolicyScheduler,
// which the MLPerf DLRM benchmarks use): a linear warm-up, a constant stretch, then a polynomial
// decay. scale(s) multiplies the optimizers' base rates at step s, counted from 1 (the first step
// taken). Written once for the host and the device: the training step computes it on the device
// from a step count kept there, so that a captured step reads it from memory (docs/math.md).
#include <cmath>
#include <cstdint>

#include "core/host_device.hpp"

namespace recmix {

struct LrSchedule {
  std::int64_t warmup_steps = 0;  // steps 1 .. warmup_steps ramp the rate up to the base: s / warmup_steps
  std::int64_t decay_start = 0;   // the first decayed step is decay_start + 1 (>= warmup_steps)
  std::int64_t decay_steps = 0;   // 0: no decay
  double decay_power = 2.0;

  // Whether the rates ever differ from the base ones.
  RECMIX_HOST_DEVICE bool active() const { return warmup_steps > 0 || decay_steps > 0; }

  // ((decay_steps - k) / decay_steps)^decay_power for the k-th step of the decay (k = 0 at
  // decay_start + 1, as the references count), held at its last value after decay_steps steps.
  RECMIX_HOST_DEVICE float scale(std::int64_t step) const {
    if (warmup_steps > 0 && step <= warmup_steps) return static_cast<float>(double(step) / double(warmup_steps));
    if (decay_steps > 0 && step > decay_start) {
      std::int64_t k = step - decay_start - 1;
      if (k > decay_steps - 1) k = decay_steps - 1;
      return static_cast<float>(::pow(double(decay_steps - k) / double(decay_steps), decay_power));
    }
    return 1.0f;
  }
};

}  // namespace recmix
