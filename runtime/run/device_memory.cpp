#include "runtime/run/device_memory.hpp"

#include <vector>

#include "device/gpu_usage.hpp"
#include "runtime/run/job_file.hpp"

namespace recmix::runtime::run {

RankCapacity rank_capacity(std::uint64_t given, double devices) {
  if (given > 0) return {static_cast<double>(given), "jobs file"};
  if (devices > 0) return {devices, "devices"};
  return {static_cast<double>(kDefaultRankCapacity), "default"};
}

DeviceMemory gather_device_memory(comm::Communicator& world, double mine) {
  std::vector<double> all(static_cast<std::size_t>(world.size()));
  world.all_gather(&mine, all.data(), 1, comm::DataType::f64);
  DeviceMemory m;
  for (int r = 0; r < world.size(); ++r) {
    const double bytes = all[static_cast<std::size_t>(r)];
    if (!(bytes > 0)) {
      if (m.unread_ranks++ == 0) m.first_unread_rank = r;
      continue;
    }
    if (m.smallest_rank < 0 || bytes < m.smallest_bytes) m.smallest_bytes = bytes, m.smallest_rank = r;
    if (m.largest_rank < 0 || bytes > m.largest_bytes) m.largest_bytes = bytes, m.largest_rank = r;
  }
  if (m.unread_ranks > 0) m.smallest_bytes = m.largest_bytes = 0, m.smallest_rank = m.largest_rank = -1;
  return m;
}

double read_device_memory(int local_index) {
  const auto gpu = device::read_gpu_usage(local_index);
  return gpu ? static_cast<double>(gpu->memory_total_bytes) : 0.0;
}

}  // namespace recmix::runtime::run
