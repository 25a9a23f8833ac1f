#pragma once
// metrics.jsonl's `device_per_step`: what the host asked of the device per training step between
// two records (device/counters.hpp), as means over those steps.
#include <cstdint>
#include <nlohmann/json.hpp>

#include "device/counters.hpp"

namespace recmix::runtime {

// {"launches": .., "graph_launches": .., "allocations": .., "host_syncs": .., "buffer_waits": ..,
//  "comm_syncs": .., "pageable_copies": ..}: each count of `d` divided by `steps` (0 with no steps).
nlohmann::json device_per_step(const device::DeviceCounts& d, std::int64_t steps);

}  // namespace recmix::runtime
