#include "sched/policy.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "sched/policies/policies.hpp"

namespace recmix::sched {

bool RecordingActions::start(const Job& job, std::span<const int> gpus) {
  if (!state_.place(job, gpus, now_)) {
    ++refused_;
    return false;
  }
  decisions_.push_back({Decision::Kind::start, job.id, std::vector<int>(gpus.begin(), gpus.end())});
  return true;
}

void RecordingActions::preempt(JobId job) {
  state_.remove(job);
  decisions_.push_back({Decision::Kind::preempt, job, {}});
}

bool FailedShapes::contains(const Job& job) const {
  const auto key = std::make_tuple(job.type, job.gpus, job.profile.peak_memory_bytes);
  return std::find(shapes_.begin(), shapes_.end(), key) != shapes_.end();
}

void FailedShapes::add(const Job& job) { shapes_.emplace_back(job.type, job.gpus, job.profile.peak_memory_bytes); }

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = {"fifo", "memory-first", "complementary",
                                                 "interference-aware", "delay", "las"};
  return names;
}

std::unique_ptr<Policy> make_policy(std::string_view name, const PolicyOptions& options) {
  if (name == "fifo") return make_exclusive_fifo(options);
  if (name == "memory-first") return make_memory_first(options);
  if (name == "complementary") return make_complementary(options);
  if (name == "interference-aware") return make_interference_aware(options);
  if (name == "delay") return make_delay_scheduling(options);
  if (name == "las") return make_least_attained_service(options);
  std::string known;
  for (const auto& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("unknown policy '" + std::string(name) + "' (known: " + known + ", all)");
}

std::vector<JobId> jobs_to_move_apart(const MoveApartCandidate& slowed, std::span<const MoveApartCandidate> partners) {
  std::vector<JobId> out;
  bool outranks_one = false;
  for (const MoveApartCandidate& p : partners) {
    if (p.priority >= slowed.priority) continue;
    outranks_one = true;
    if (!p.moved_before) out.push_back(p.id);
  }
  if (!outranks_one && !slowed.moved_before) out.push_back(slowed.id);
  return out;
}

std::vector<int> find_free_placement(const ClusterState& cluster, const Job& job, bool allow_spread) {
  if (job.gpus <= cluster.spec().gpus_per_node) {
    const int node = cluster.best_fit_node(job.gpus);
    if (node >= 0) return cluster.free_gpus_of(node, job.gpus);
    if (!allow_spread) return {};
  } else if (!allow_spread) {
    // Larger than a node: the consolidated placement is whole free nodes.
    const int whole = (job.gpus + cluster.spec().gpus_per_node - 1) / cluster.spec().gpus_per_node;
    std::vector<int> out;
    int found = 0;
    for (int n : cluster.nodes_with_free(cluster.spec().gpus_per_node)) {
      if (found++ == whole) break;
      const auto take = cluster.free_gpus_of(n, job.gpus - static_cast<int>(out.size()));
      out.insert(out.end(), take.begin(), take.end());
    }
    return static_cast<int>(out.size()) == job.gpus ? out : std::vector<int>{};
  }
  return cluster.free_gpus_spread(job.gpus);
}

double spread_factor(const ClusterSpec& spec, const JobProfile& profile, int nodes_used) {
  if (nodes_used <= 1) return 1.0;
  if (profile.spread_slowdown > 0) return profile.spread_slowdown;
  const double ratio = spec.intra_node_bandwidth / spec.inter_node_bandwidth;
  return 1.0 + profile.comm_fraction * std::max(0.0, ratio - 1.0);
}

}  // namespace recmix::sched
