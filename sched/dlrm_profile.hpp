#pragma once
// Roofline profile of a DLRM job on a machine model: per step, the GEMM FLOPs, the device
// memory traffic of embeddings and activations, host-device bytes (batches, cold rows), host
// work and the all-to-all / all-reduce bytes, each turned into time by the machine's peak
// figures. The shares of the step each resource is busy form the utilisation vector.
#include "sched/job_spec.hpp"
#include "sched/machine_model.hpp"
#include "sched/utilisation.hpp"

namespace recmix::sched {

struct StepCost {
  double gemm_flops = 0;       // forward + both backward GEMMs and the interaction
  double device_bytes = 0;     // embedding reads/updates, activation and weight traffic
  double host_device_bytes = 0;
  double host_bytes = 0;       // host memory traffic (batch assembly, cold-row updates)
  double network_bytes = 0;    // all-to-all + all-reduce bytes sent per rank
  int kernels = 0;             // kernels / parallel regions launched per step
};

// Per-rank cost of one training step of the busiest rank.
StepCost dlrm_step_cost(const JobSpec& spec);

// Utilisation, solo step time, peak memory (memory_estimator) and communication share.
JobProfile dlrm_profile(const JobSpec& spec, const MachineModel& machine);

}  // namespace recmix::sched
