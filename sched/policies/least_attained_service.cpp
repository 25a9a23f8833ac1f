// Least-attained-service (Tiresias-style, discretised into two levels): jobs that have
// received fewer than las_threshold_gpu_s GPU-seconds run before those that have more, FIFO
// within a level. Every las_lease_s a preemptive pass lets waiting first-level jobs take the
// GPUs of demoted running jobs (most attained service first). Placement is exclusive.
#include <algorithm>
#include <cmath>

#include "sched/policies/policies.hpp"

namespace recmix::sched {
namespace {

class LeastAttainedService final : public Policy {
 public:
  explicit LeastAttainedService(const PolicyOptions& options) : options_(options) {}
  std::string_view name() const override { return "las"; }

  void schedule(const SchedulingContext& context, Actions& actions) override {
    const auto& cluster = context.cluster;
    const double now = context.now;
    auto attained = [&](const Job& job) {
      const RunningJob* r = cluster.running(job.id);
      return job.attained_gpu_s + (r ? job.gpus * (now - r->start_s) : 0.0);
    };
    auto level = [&](const Job& job) { return attained(job) >= options_.las_threshold_gpu_s ? 1 : 0; };
    // Window of waiting jobs, first level first, FIFO within a level (waiting jobs' attained
    // service does not change while they wait).
    std::vector<Job*> window;
    for (Job* job : context.queue) {
      if (static_cast<int>(window.size()) >= options_.window) break;
      window.push_back(job);
    }
    std::stable_partition(window.begin(), window.end(),
                          [&](Job* j) { return j->attained_gpu_s < options_.las_threshold_gpu_s; });
    const bool lease = now >= next_lease_;
    std::vector<std::pair<double, JobId>> demoted;  // (attained, job) of running second-level jobs
    if (lease) {
      next_lease_ = now + options_.las_lease_s;
      for (const auto& [id, r] : cluster.running_jobs())
        if (level(*r.job) == 1) demoted.emplace_back(attained(*r.job), id);
      std::sort(demoted.begin(), demoted.end(), std::greater<>());
    }
    std::size_t next_victim = 0;
    for (Job* job : window) {
      if (job->gpus > cluster.free_gpu_count() && !lease) continue;
      auto gpus = find_free_placement(cluster, *job, /*allow_spread=*/true);
      if (gpus.empty() && lease && job->attained_gpu_s < options_.las_threshold_gpu_s) {
        // Preempt demoted jobs until enough GPUs are free (only if that can succeed).
        int freeable = cluster.free_gpu_count();
        std::size_t k = next_victim;
        while (freeable < job->gpus && k < demoted.size()) {
          const RunningJob* r = cluster.running(demoted[k].second);
          if (r != nullptr) freeable += r->job->gpus;
          ++k;
        }
        if (freeable >= job->gpus) {
          for (; next_victim < k; ++next_victim)
            if (cluster.running(demoted[next_victim].second)) actions.preempt(demoted[next_victim].second);
          gpus = find_free_placement(cluster, *job, /*allow_spread=*/true);
        }
      }
      if (!gpus.empty()) actions.start(*job, gpus);
      if (cluster.free_gpu_count() == 0 && (!lease || next_victim >= demoted.size())) break;
    }
    // Wake for the next lease while anything waits or a running job may be demoted.
    if (!context.queue.empty()) actions.wake_at(next_lease_);
  }

 private:
  PolicyOptions options_;
  double next_lease_ = -INFINITY;
};

}  // namespace

std::unique_ptr<Policy> make_least_attained_service(const PolicyOptions& options) {
  return std::make_unique<LeastAttainedService>(options);
}

}  // namespace recmix::sched
