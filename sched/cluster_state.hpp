#pragma once
// The scheduler's picture of the cluster: per GPU the memory in use and the jobs sharing it,
// plus indexes that keep each policy round cheap on thousands of GPUs (free GPUs per node,
// nodes bucketed by free-GPU count, shareable GPUs by free memory and by co-runner type).
// Pure data: the simulator and the live runtime both keep one and apply decisions to it.
#include <cstdint>
#include <limits>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sched/utilisation.hpp"

namespace recmix::sched {

using JobId = std::int64_t;

struct ClusterSpec {
  int nodes = 1;
  int gpus_per_node = 8;
  double gpu_memory_bytes = 80.0 * (1ull << 30);
  double host_memory_bytes = 2e12;
  int host_cores = 128;
  double intra_node_bandwidth = 300e9;  // bytes/s per GPU (NVLink)
  double inter_node_bandwidth = 25e9;   // bytes/s per GPU (NIC share)
  std::string machine = "a100-dgx";     // machine model the DLRM profiles are computed for
  int max_jobs_per_gpu = 2;             // co-location degree allowed
  // Host cores each GPU's jobs may use together (recmix run's cores_per_rank); 0: not counted.
  int cores_per_gpu = 0;
  int gpu_count() const { return nodes * gpus_per_node; }
};
// Throws ConfigError naming the field when out of range (gpus_per_node must be 1..64).
void validate(const ClusterSpec& spec);

// A job as the policies see it: resource demand, profile, length and bookkeeping.
struct Job {
  JobId id = 0;
  std::string name;
  int gpus = 1;
  double arrival_s = 0;
  int priority = 0;
  double work_s = 0;            // solo run time on a consolidated placement (seconds)
  double slowdown_limit = 0;    // 0: the policy's default
  JobProfile profile;
  int type = -1;                // job type in the interference model
  int cores = 0;                // host cores it uses beside each of its GPUs (with cores_per_gpu)
  std::vector<JobId> avoid;     // jobs it must not share a GPU with (moved apart from them)
  // Maintained by the simulator / runtime:
  double attained_gpu_s = 0;    // GPU-seconds received before the current run
  double first_start_s = -1;
  int preemptions = 0;
};

struct RunningJob {
  const Job* job = nullptr;
  std::vector<int> gpus;
  double start_s = 0;
  int nodes_used = 1;
  bool spread() const { return nodes_used > 1; }
};

class ClusterState {
 public:
  explicit ClusterState(ClusterSpec spec);

  const ClusterSpec& spec() const { return spec_; }
  int gpu_count() const { return spec_.gpu_count(); }
  int node_of(int gpu) const { return gpu / spec_.gpus_per_node; }
  double free_memory(int gpu) const { return spec_.gpu_memory_bytes - gpus_[gpu].memory_used; }
  double memory_used(int gpu) const { return gpus_[gpu].memory_used; }
  const std::vector<JobId>& jobs_on(int gpu) const { return gpus_[gpu].jobs; }
  bool is_free(int gpu) const { return gpus_[gpu].jobs.empty(); }
  const UtilisationVector& demand(int gpu) const { return gpus_[gpu].demand; }

  // True when every GPU listed has memory, a co-location slot and cores for `job`, none runs a
  // job it avoids, and no GPU repeats.
  bool fits(const Job& job, std::span<const int> gpus) const;
  // The same for one GPU of a placement: memory, a slot, cores, no avoided job on it.
  bool fits_gpu(const Job& job, int gpu) const;
  // Places a running job; returns false (and changes nothing) when it does not fit.
  bool place(const Job& job, std::span<const int> gpus, double now);
  // Replaces job's utilisation (a measured profile); a running job's GPUs' demand follows.
  void set_job_utilisation(Job& job, const UtilisationVector& util);
  // Removes a running job from its GPUs; returns its record.
  RunningJob remove(JobId job);
  const RunningJob* running(JobId job) const;
  const std::unordered_map<JobId, RunningJob>& running_jobs() const { return running_; }

  // --- indexes ---
  int free_gpu_count() const { return free_gpus_; }
  int free_gpus_on_node(int node) const;
  // The node with the fewest free GPUs that still has at least n (best fit), or -1.
  int best_fit_node(int n) const;
  // Nodes with exactly k free GPUs.
  const std::set<int>& nodes_with_free(int k) const { return nodes_by_free_count_[k]; }
  // n free GPUs of `node` (lowest ids).
  std::vector<int> free_gpus_of(int node, int n) const;
  // n free GPUs over as few nodes as possible (emptiest nodes first); empty if fewer are free.
  std::vector<int> free_gpus_spread(int n) const;
  // GPUs holding 1 .. max_jobs_per_gpu-1 jobs, ordered by (free memory, gpu).
  const std::set<std::pair<double, int>>& shareable() const { return shareable_; }
  // GPUs holding exactly one job, of interference type `type`, by (free memory, gpu).
  const std::set<std::pair<double, int>>* shareable_with_type(int type) const;
  const std::unordered_map<int, std::set<std::pair<double, int>>>& shareable_by_type() const {
    return shareable_by_type_;
  }

 private:
  struct Gpu {
    double memory_used = 0;
    int cores_used = 0;
    std::vector<JobId> jobs;
    std::vector<int> types;
    UtilisationVector demand;
  };
  void unindex(int gpu);
  void reindex(int gpu);

  ClusterSpec spec_;
  std::vector<Gpu> gpus_;
  std::unordered_map<JobId, RunningJob> running_;
  int free_gpus_ = 0;
  void set_free(int gpu, bool free);
  int words_per_node_ = 1;
  std::vector<std::uint64_t> free_mask_;            // words_per_node_ per node, bit i = GPU i of the node is free
  std::vector<int> free_on_node_;                   // per node, its free GPUs
  std::vector<std::set<int>> nodes_by_free_count_;  // [k] = nodes with exactly k free GPUs
  std::set<std::pair<double, int>> shareable_;
  std::unordered_map<int, std::set<std::pair<double, int>>> shareable_by_type_;
};

}  // namespace recmix::sched
