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
    window_.clear();
    second_level_.clear();
    for (Job* job : context.queue) {
      if (static_cast<int>(window_.size() + second_level_.size()) >= options_.window) break;
      (job->attained_gpu_s < options_.las_threshold_gpu_s ? window_ : second_level_).push_back(job);
    }
    window_.insert(window_.end(), second_level_.begin(), second_level_.end());
    const bool lease = now >= next_lease_;
    if (lease) next_lease_ = now + options_.las_lease_s;
    // (attained, job) of the second-level jobs running when the round began, most attained
    // first. Listed only once a lease round needs it (a job does not fit, or no GPU is left
    // free): listing sorts every running job, and most rounds start jobs without preempting.
    std::vector<std::pair<double, JobId>> demoted;
    bool listed = false;
    started_.clear();  // started in this round before the list was made
    auto demoted_jobs = [&]() -> const std::vector<std::pair<double, JobId>>& {
      if (listed) return demoted;
      listed = true;
      std::sort(started_.begin(), started_.end());
      for (const auto& [id, r] : cluster.running_jobs())
        if (level(*r.job) == 1 && !std::binary_search(started_.begin(), started_.end(), id))
          demoted.emplace_back(attained(*r.job), id);
      std::sort(demoted.begin(), demoted.end(), std::greater<>());
      return demoted;
    };
    std::size_t next_victim = 0;
    for (Job* job : window_) {
      if (job->gpus > cluster.free_gpu_count() && !lease) continue;
      auto gpus = find_free_placement(cluster, *job, /*allow_spread=*/true);
      if (gpus.empty() && lease && job->attained_gpu_s < options_.las_threshold_gpu_s) {
        // Preempt demoted jobs until enough GPUs are free (only if that can succeed).
        int freeable = cluster.free_gpu_count();
        std::size_t k = next_victim;
        const auto& victims = demoted_jobs();
        // A job of higher priority than the one waiting is never a victim.
        auto victim = [&](std::size_t v) -> const RunningJob* {
          const RunningJob* r = cluster.running(victims[v].second);
          return r != nullptr && r->job->priority <= job->priority ? r : nullptr;
        };
        while (freeable < job->gpus && k < victims.size()) {
          if (const RunningJob* r = victim(k)) freeable += r->job->gpus;
          ++k;
        }
        if (freeable >= job->gpus) {
          for (; next_victim < k; ++next_victim)
            if (victim(next_victim)) actions.preempt(victims[next_victim].second);
          gpus = find_free_placement(cluster, *job, /*allow_spread=*/true);
        }
      }
      if (!gpus.empty() && actions.start(*job, gpus) && !listed) started_.push_back(job->id);
      if (cluster.free_gpu_count() == 0 && (!lease || next_victim >= demoted_jobs().size())) break;
    }
    // Wake for the next lease while anything waits or a running job may be demoted.
    if (!context.queue.empty()) actions.wake_at(next_lease_);
  }

 private:
  PolicyOptions options_;
  double next_lease_ = -INFINITY;
  std::vector<Job*> window_, second_level_;  // kept between rounds for their memory
  std::vector<JobId> started_;
};

}  // namespace

std::unique_ptr<Policy> make_least_attained_service(const PolicyOptions& options) {
  return std::make_unique<LeastAttainedService>(options);
}

}  // namespace recmix::sched
