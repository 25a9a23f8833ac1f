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
  // Work issued per step, counted the way each kind of machine issues it: the CPU backend starts
  // a parallel region per kernel and per table; a GPU's eager step shares each launch among the
  // tables. dlrm_profile takes the one its machine uses.
  int cpu_regions = 0;
  int gpu_launches = 0;
  double host_indices = 0;     // indices the rank's host reads and checks per step
};

// Per-rank cost of one training step of the busiest rank.
StepCost dlrm_step_cost(const JobSpec& spec);

// The GEMMs' FLOP/s peak in the job's math: fp32 at the plain FP32 rate, tf32 and bf16 at their
// tensor-core rates where the machine has them, else at the fp32 rate (the runtime falls back).
double gemm_peak_flops(const JobSpec& spec, const MachineModel& machine);

// What the host spends issuing one step on a GPU: eagerly its launches, with graphs the graphs'
// step cost, plus its per-index work (machine_model.hpp); 0 on a machine whose device is the host.
double host_issue_s(const JobSpec& spec, const StepCost& cost, const MachineModel& machine);

// Utilisation, solo step time, peak memory (memory_estimator) and communication share. A step
// lasts its longest overlapped part (device work, host issue on a GPU, transfers, host work)
// plus its communication.
JobProfile dlrm_profile(const JobSpec& spec, const MachineModel& machine);

}  // namespace recmix::sched
