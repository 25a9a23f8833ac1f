#pragma once
// Whether a job can fit its memory, decided before anything is allocated: the peak-memory
// estimator (sched/memory_estimator.hpp, as recmix run uses it, on the spec's view in job_spec_sched.hpp) against device.memory_capacity
// and host_memory_capacity, or this machine's physical memory where the memory is host memory.
// A job sized far past the machine is refused with the estimate, the capacity and the largest
// term, instead of failing on some allocation late and unnamed.
#include <cstdint>
#include <string>

#include "data/format.hpp"
#include "sched/job_spec.hpp"
#include "sched/memory_estimator.hpp"

namespace recmix::runtime {

struct JobSpec;

// The memory one rank may use, in bytes (0: not checked), and where each figure comes from.
struct MemoryCapacity {
  double device = 0;
  std::string device_source;  // "device.memory_capacity", "this machine's physical memory"
  double host = 0;            // the host tier
  std::string host_source;
  bool device_is_host = false;  // cpu backends: device memory and the host tier share host memory
};

// The capacity of `spec`'s job: the spec's capacities where set, else the physical memory for
// memory that lives in host memory (the cpu backends' device memory, the host tier); a GPU's
// memory without device.memory_capacity is left to its allocator (0).
MemoryCapacity memory_capacity(const JobSpec& spec);

// "" when `estimate` fits `capacity`; else one line naming the job, the estimate, the capacity and
// the largest term. The allocator's margin is left out of the comparison: a job refused here does
// not fit even without it.
std::string memory_misfit(const std::string& job, const sched::MemoryEstimate& estimate, const MemoryCapacity& capacity);

// Throws OutOfMemoryError with memory_misfit's line when the job cannot fit.
void check_memory_fits(const JobSpec& spec, const data::DatasetInfo& info, int ranks);

// Bytes of physical memory (sysconf; /proc/meminfo's MemTotal when sysconf has no answer); 0 unknown.
double physical_memory_bytes();

}  // namespace recmix::runtime
