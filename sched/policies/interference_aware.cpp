// Interference-aware placement: free GPUs first (one node when possible); when none are free,
// the job shares the GPU where the learned interference model predicts the smallest summed
// slowdown of newcomer and co-runner, provided neither exceeds its slowdown limit (the job's
// own, or the policy default). While fewer than pack_free_fraction of the GPUs are free, a
// job also shares before taking a free GPU when both predicted slowdowns stay under
// pack_slowdown, keeping free GPUs for jobs that need them whole. The model is learned online
// from observed slowdowns, so pairs of types never seen together are predicted from the
// types' other pairs.
#include <algorithm>
#include <cmath>
#include <limits>

#include "sched/policies/policies.hpp"

namespace recmix::sched {
namespace {

constexpr double kReject = -std::numeric_limits<double>::infinity();

class InterferenceAware final : public Policy {
 public:
  explicit InterferenceAware(const PolicyOptions& options) : options_(options) {}
  std::string_view name() const override { return "interference-aware"; }
  bool learns_interference() const override { return true; }

  void schedule(const SchedulingContext& context, Actions& actions) override {
    const auto& cluster = context.cluster;
    const int pack_below = static_cast<int>(options_.pack_free_fraction * cluster.gpu_count());
    scan_queue(
        context, options_, actions, [&] { return cluster.free_gpu_count() == 0 && cluster.shareable().empty(); },
        [&](const Job& job) {
          const double limit = limit_of(job);
          std::vector<int> gpus;
          if (job.type >= 0 && cluster.free_gpu_count() < pack_below)
            gpus = shared(context, job, std::min(limit, options_.pack_slowdown), options_.pack_slowdown);
          if (gpus.empty()) gpus = find_free_placement(cluster, job, /*allow_spread=*/false);
          if (gpus.empty() && job.type >= 0) gpus = shared(context, job, limit, INFINITY);
          if (gpus.empty()) gpus = find_free_placement(cluster, job, /*allow_spread=*/true);
          return gpus;
        });
  }

 private:
  double limit_of(const Job& job) const {
    return job.slowdown_limit > 0 ? job.slowdown_limit : options_.slowdown_limit;
  }

  // Shared GPUs minimising the predicted summed slowdown, with the newcomer under own_limit
  // and every co-runner under min(its limit, others_cap).
  std::vector<int> shared(const SchedulingContext& context, const Job& job, double own_limit, double others_cap) {
    const auto& cluster = context.cluster;
    const auto& model = context.model;
    auto score = [&](int gpu) {
      std::vector<int> others;
      double limit_others = others_cap;
      for (JobId id : cluster.jobs_on(gpu)) {
        const RunningJob* r = cluster.running(id);
        if (r == nullptr || r->job->type < 0) return kReject;
        others.push_back(r->job->type);
        limit_others = std::min(limit_others, limit_of(*r->job));
      }
      if (others.size() == 1) {
        const double s_new = model.predict_pair(job.type, others[0]);
        const double s_old = model.predict_pair(others[0], job.type);
        if (s_new > own_limit || s_old > limit_others) return kReject;
        return -(s_new + s_old);
      }
      const double s_new = model.predict(job.type, others);
      if (s_new > own_limit) return kReject;
      double s_old = 0;
      for (std::size_t i = 0; i < others.size(); ++i) {
        std::vector<int> rest = others;
        rest[i] = job.type;
        const double s = model.predict(others[i], rest);
        if (s > limit_others) return kReject;
        s_old = std::max(s_old, s);
      }
      return -(s_new + s_old);
    };
    return find_shared_placement(cluster, job, score);
  }

  PolicyOptions options_;
};

}  // namespace

std::unique_ptr<Policy> make_interference_aware(const PolicyOptions& options) {
  return std::make_unique<InterferenceAware>(options);
}

}  // namespace recmix::sched
