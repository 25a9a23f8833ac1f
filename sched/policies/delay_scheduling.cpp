// Delay scheduling for multi-GPU jobs. A job needing several GPUs waits for a placement within
// one node (or on whole nodes when larger than a node) up to a timer, then accepts a spread
// placement. The timer is ski-rental: the extra time spreading would cost the job,
// (spread_factor - 1) x solo run time, scaled by a per-size-class factor that tunes itself
// (waits that ended in a spread anyway shrink it, waits that ended consolidated grow it).
// A running spread job whose communication share is high is preempted and re-placed on one
// node once that frees up, when the time it saves exceeds the restart cost. Placement is
// exclusive; jobs that cannot start yet do not block the ones behind them.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <unordered_map>

#include "sched/policies/policies.hpp"

namespace recmix::sched {
namespace {

class DelayScheduling final : public Policy {
 public:
  explicit DelayScheduling(const PolicyOptions& options) : options_(options) { tune_.fill(1.0); }
  std::string_view name() const override { return "delay"; }

  double timer(const ClusterSpec& spec, const Job& job) const {
    const int nodes_if_spread = 2;
    const double penalty = (spread_factor(spec, job.profile, nodes_if_spread) - 1.0) * job.work_s;
    return std::clamp(penalty * tune_[size_class(job.gpus)], options_.delay_min_s, options_.delay_max_s);
  }

  void schedule(const SchedulingContext& context, Actions& actions) override {
    const auto& cluster = context.cluster;
    // Re-place network-sensitive spread jobs when one node can now hold them and it pays.
    std::vector<JobId> to_preempt;
    for (const auto& [id, network_sensitive] : spread_jobs_) {
      if (!network_sensitive) continue;
      const RunningJob* r = cluster.running(id);
      if (r == nullptr) continue;
      const Job& job = *r->job;
      if (job.profile.comm_fraction < options_.network_sensitive || job.gpus > cluster.spec().gpus_per_node) continue;
      if (!fits_one_node(cluster, *r)) continue;
      const double factor = spread_factor(cluster.spec(), job.profile, r->nodes_used);
      const double done = job.attained_gpu_s / job.gpus + (context.now - r->start_s) / factor;
      const double remaining = std::max(0.0, job.work_s - done);
      if (remaining * (factor - 1.0) > options_.restart_cost_s) to_preempt.push_back(id);
    }
    for (JobId id : to_preempt) {
      spread_jobs_.erase(id);
      actions.preempt(id);
    }
    int looked = 0;
    for (Job* job : context.queue) {
      if (looked++ >= options_.window) break;
      if (cluster.free_gpu_count() == 0) break;
      if (job->gpus > cluster.free_gpu_count()) continue;
      auto gpus = find_free_placement(cluster, *job, /*allow_spread=*/false);
      if (gpus.empty()) {
        const double since = waiting_since(*job);
        const double deadline = since + timer(cluster.spec(), *job);
        if (context.now + 1e-9 < deadline) {
          actions.wake_at(deadline);
          continue;
        }
        gpus = find_free_placement(cluster, *job, /*allow_spread=*/true);
      }
      if (!gpus.empty()) actions.start(*job, gpus);
    }
  }

  void on_start(const Job& job, const RunningJob& placement, double now) override {
    if (job.gpus <= 1) return;
    const int c = size_class(job.gpus);
    const auto it = since_.find(job.id);
    const bool waited = it != since_.end() && now > it->second + 1e-9;
    if (placement.spread()) {
      spread_jobs_.emplace(job.id, job.profile.comm_fraction >= options_.network_sensitive);
      if (waited) tune_[c] = std::max(0.05, tune_[c] * 0.8);  // the wait bought nothing
    } else if (waited) {
      tune_[c] = std::min(4.0, tune_[c] * 1.1);  // waiting paid off
    }
    since_.erase(job.id);
  }
  void on_finish(const Job& job, double) override {
    spread_jobs_.erase(job.id);
    since_.erase(job.id);
  }

 private:
  // True when some node could hold the whole job once its own GPUs there are released.
  static bool fits_one_node(const ClusterState& cluster, const RunningJob& r) {
    if (cluster.best_fit_node(r.job->gpus) >= 0) return true;
    std::unordered_map<int, int> own;
    for (int g : r.gpus)
      if (cluster.jobs_on(g).size() == 1) ++own[cluster.node_of(g)];
    for (const auto& [node, count] : own)
      if (cluster.free_gpus_on_node(node) + count >= r.job->gpus) return true;
    return false;
  }
  static int size_class(int gpus) { return std::min(15, static_cast<int>(std::bit_width(static_cast<unsigned>(gpus)))); }
  double waiting_since(const Job& job) {
    // A job's timer starts when it is first looked at for placement (arrival or re-queue).
    return since_.try_emplace(job.id, job.arrival_s).first->second;
  }

  PolicyOptions options_;
  std::array<double, 16> tune_{};
  std::unordered_map<JobId, double> since_;
  // Running spread jobs, each with whether it is network-sensitive: only those are ever
  // re-placed, and a round passes over the others without looking them up.
  std::unordered_map<JobId, bool> spread_jobs_;
};

}  // namespace

std::unique_ptr<Policy> make_delay_scheduling(const PolicyOptions& options) {
  return std::make_unique<DelayScheduling>(options);
}

}  // namespace recmix::sched
