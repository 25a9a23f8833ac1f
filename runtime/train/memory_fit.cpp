#include "runtime/train/memory_fit.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "runtime/train/job_spec.hpp"
#include "runtime/train/job_spec_sched.hpp"
#include "sched/machine_model.hpp"

namespace recmix::runtime {
namespace {

// Bytes as people read them; figures past what size_t holds (absurd sizes) in scientific form.
std::string bytes_text(double bytes) {
  if (bytes >= 0 && bytes < 1e18) return device::format_bytes(static_cast<std::size_t>(bytes));
  return fmt::format("{:.3g} bytes", bytes);
}

bool host_memory_backend(device::BackendKind kind) { return kind != device::BackendKind::cuda; }

}  // namespace

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<double>(pages) * static_cast<double>(page);
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemTotal:") return kib * 1024;
  return 0;
}

MemoryCapacity memory_capacity(const JobSpec& spec) {
  MemoryCapacity c;
  const double physical = physical_memory_bytes();
  c.device_is_host = host_memory_backend(spec.device.kind);
  if (spec.device.memory_capacity > 0) {
    c.device = static_cast<double>(spec.device.memory_capacity);
    c.device_source = "device.memory_capacity";
  } else if (c.device_is_host && physical > 0) {
    c.device = physical;
    c.device_source = "this machine's physical memory";
  }
  if (spec.device.host_memory_capacity > 0) {
    c.host = static_cast<double>(spec.device.host_memory_capacity);
    c.host_source = "device.host_memory_capacity";
  } else if (physical > 0) {
    c.host = physical;
    c.host_source = "this machine's physical memory";
  }
  return c;
}

std::string memory_misfit(const std::string& job, const sched::MemoryEstimate& e, const MemoryCapacity& c) {
  const std::vector<std::pair<const char*, double>> terms = {
      {"parameters (embedding tables and MLP weights)", e.parameters},
      {"optimizer state", e.optimizer_state},
      {"activations and their gradients", e.activations},
      {"all-to-all buffers", e.all_to_all},
      {"all-reduce buffer", e.all_reduce},
      {"GEMM workspace", e.gemm_workspace},
      {"prefetched batches", e.prefetch},
      {"staging rows", e.staging},
      {"device index arrays", e.device_indices}};
  const auto largest = *std::max_element(terms.begin(), terms.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
  const double device = e.total() - e.margin;
  // On the cpu backends, a physical-memory limit holds the device memory and the host tier together.
  const bool together = c.device_is_host && c.device_source == c.host_source && c.host > 0;
  if (c.device > 0 && device + (together ? e.host : 0) > c.device)
    return fmt::format("job '{}' cannot fit: its peak memory estimate per rank is {}{}, above {} ({}); the largest "
                       "term: {} {}",
                       job, bytes_text(device + (together ? e.host : 0)),
                       together && e.host > 0 ? " with the host tier" : "", c.device_source, bytes_text(c.device),
                       largest.first, bytes_text(largest.second));
  if (c.host > 0 && e.host > c.host)
    return fmt::format("job '{}' cannot fit: the host tier of its tables is estimated at {} per rank, above {} ({})",
                       job, bytes_text(e.host), c.host_source, bytes_text(c.host));
  return {};
}

void check_memory_fits(const JobSpec& spec, const data::DatasetInfo& info, int ranks) {
  const sched::JobSpec s = to_sched_spec(spec, info, ranks);
  const std::string machine = host_memory_backend(spec.device.kind) ? "cpu-zen3-2vcpu" : "a100-dgx";
  const sched::MemoryEstimate e = sched::estimate_peak_memory(s, sched::machine_model(machine));
  if (const std::string why = memory_misfit(spec.name, e, memory_capacity(spec)); !why.empty())
    throw OutOfMemoryError(why);
}

}  // namespace recmix::runtime
