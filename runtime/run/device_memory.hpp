#pragma once
// Each rank's GPU memory, read at the start of a recmix run whose jobs use GPUs (docs/run.md,
// Nodes): NVML's total for the GPU the rank takes, gathered over the world. The scheduler plans
// every rank with the smallest, unless [scheduler] memory_capacity gives the figure.
#include <cstdint>

#include "comm/communicator.hpp"

namespace recmix::runtime::run {

struct DeviceMemory {
  // The smallest and the largest GPU of the world, in bytes, and a rank that has each; 0 and -1
  // when any rank could not read its GPU.
  double smallest_bytes = 0, largest_bytes = 0;
  int smallest_rank = -1, largest_rank = -1;
  int unread_ranks = 0;       // ranks that could not read their GPU's memory
  int first_unread_rank = -1;
};

// The one rule for a rank's memory in recmix run: `given` ([scheduler] memory_capacity; 0: none),
// else `devices` (the smallest GPU as read at start; 0: not read), else kDefaultRankCapacity.
struct RankCapacity {
  double bytes = 0;
  const char* origin = "default";  // "jobs file", "devices" or "default" (run_start's memory_capacity)
};
RankCapacity rank_capacity(std::uint64_t given, double devices);

// Collective: `mine` is what this rank read, in bytes (0: nothing). Every rank gets the same.
DeviceMemory gather_device_memory(comm::Communicator& world, double mine);

// The memory of the GPU this rank takes, in bytes, from NVML; 0 when it cannot be read.
// `local_index` is the rank's place among the ranks of its host, which is the GPU it takes in
// CUDA's numbering, as the NCCL set-up picks it.
double read_device_memory(int local_index);

}  // namespace recmix::runtime::run
