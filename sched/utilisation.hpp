#pragma once
// A job's utilisation vector (the share of each contended resource it uses when alone) and the
// profile the scheduler keeps per job type: utilisation, solo step time, peak memory per rank
// and how much of a step is inter-rank communication. Profiles come from the DLRM roofline
// (dlrm_profile.hpp), from public traces (profile_library.hpp), and later from runtime samples.
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace recmix::sched {

enum class Resource : int { compute = 0, memory_bandwidth, host_device, host_cpu, network };
inline constexpr std::size_t kResourceCount = 5;
std::string_view resource_name(Resource r);

struct UtilisationVector {
  std::array<double, kResourceCount> share{};  // each in [0, 1]
  double& operator[](Resource r) { return share[static_cast<std::size_t>(r)]; }
  double operator[](Resource r) const { return share[static_cast<std::size_t>(r)]; }
  double total() const {
    double s = 0;
    for (double v : share) s += v;
    return s;
  }
};

struct JobProfile {
  std::string type;  // profile name; the key of the interference model's job types
  UtilisationVector util;
  double solo_step_s = 1.0;        // seconds per step alone, consolidated placement
  double peak_memory_bytes = 0;    // per rank
  double comm_fraction = 0;        // share of a solo step in inter-rank communication (intra-node)
  // Measured slowdown of the job over nodes (consolidated / spread throughput at its GPU count);
  // 0: not measured, the bandwidth model prices a spread (spread_factor).
  double spread_slowdown = 0;
  bool dlrm = false;
};

}  // namespace recmix::sched
