#include "runtime/train/device_metrics.hpp"

namespace recmix::runtime {

nlohmann::json device_per_step(const device::DeviceCounts& d, std::int64_t steps) {
  const double n = steps > 0 ? static_cast<double>(steps) : 0.0;
  auto mean = [n](std::uint64_t v) { return n > 0 ? static_cast<double>(v) / n : 0.0; };
  return {{"launches", mean(d.launches)},         {"graph_launches", mean(d.graph_launches)},
          {"allocations", mean(d.allocations)},   {"host_syncs", mean(d.host_syncs)},
          {"buffer_waits", mean(d.buffer_waits)}, {"comm_syncs", mean(d.comm_syncs)},
          {"pageable_copies", mean(d.pageable_copies)}};
}

}  // namespace recmix::runtime
