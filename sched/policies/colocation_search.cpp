#include <algorithm>
#include <cmath>

#include "sched/policies/policies.hpp"

namespace recmix::sched {

std::vector<int> find_shared_placement(const ClusterState& cluster, const Job& job,
                                       const std::function<double(int gpu)>& score, int scan_limit) {
  const double need = job.profile.peak_memory_bytes;
  struct Group {
    double score;
    const std::set<std::pair<double, int>>* gpus;
  };
  std::vector<Group> groups;
  // Only GPUs that hold the job (memory, slot, cores, no job it avoids) are candidates.
  const auto fits = [&](int gpu) { return cluster.fits_gpu(job, gpu); };
  for (const auto& [type, gpus] : cluster.shareable_by_type()) {
    auto it = gpus.lower_bound({need, -1});
    while (it != gpus.end() && !fits(it->second)) ++it;
    if (it == gpus.end()) continue;
    const double s = score(it->second);
    if (std::isfinite(s)) groups.push_back({s, &gpus});
  }
  std::vector<std::pair<double, int>> singles;
  if (cluster.spec().max_jobs_per_gpu > 2) {
    int scanned = 0;
    for (auto it = cluster.shareable().lower_bound({need, -1});
         it != cluster.shareable().end() && scanned < scan_limit; ++it) {
      if (cluster.jobs_on(it->second).size() < 2 || !fits(it->second)) continue;
      ++scanned;
      const double s = score(it->second);
      if (std::isfinite(s)) singles.emplace_back(s, it->second);
    }
  }
  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.score > b.score; });
  std::sort(singles.begin(), singles.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int> out;
  std::size_t gi = 0, si = 0;
  while (static_cast<int>(out.size()) < job.gpus && (gi < groups.size() || si < singles.size())) {
    const bool take_group =
        gi < groups.size() && (si >= singles.size() || groups[gi].score >= singles[si].first);
    if (take_group) {
      for (auto it = groups[gi].gpus->lower_bound({need, -1});
           it != groups[gi].gpus->end() && static_cast<int>(out.size()) < job.gpus; ++it)
        if (fits(it->second)) out.push_back(it->second);
      ++gi;
    } else {
      out.push_back(singles[si++].second);
    }
  }
  if (static_cast<int>(out.size()) < job.gpus) return {};
  return out;
}

}  // namespace recmix::sched
