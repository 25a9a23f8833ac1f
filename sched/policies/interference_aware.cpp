// Interference-aware placement: free GPUs first (one node when possible); when none are free,
// the job shares the GPU where the learned interference model predicts the smallest summed
// slowdown of newcomer and co-runner, provided neither exceeds its slowdown limit (the job's
// own, or the policy default). The model is learned online from observed slowdowns, so pairs
// of types never seen together are predicted from the types' other pairs.
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
    const auto& model = context.model;
    int looked = 0;
    for (Job* job : context.queue) {
      if (looked++ >= options_.window) break;
      if (cluster.free_gpu_count() == 0 && cluster.shareable().empty()) break;
      auto gpus = find_free_placement(cluster, *job, /*allow_spread=*/false);
      if (gpus.empty() && job->type >= 0) {
        const double own_limit = job->slowdown_limit > 0 ? job->slowdown_limit : options_.slowdown_limit;
        auto score = [&](int gpu) {
          std::vector<int> others;
          double limit_others = std::numeric_limits<double>::infinity();
          for (JobId id : cluster.jobs_on(gpu)) {
            const RunningJob* r = cluster.running(id);
            if (r == nullptr || r->job->type < 0) return kReject;
            others.push_back(r->job->type);
            limit_others = std::min(limit_others, r->job->slowdown_limit > 0 ? r->job->slowdown_limit
                                                                             : options_.slowdown_limit);
          }
          if (others.size() == 1) {
            const double s_new = model.predict_pair(job->type, others[0]);
            const double s_old = model.predict_pair(others[0], job->type);
            if (s_new > own_limit || s_old > limit_others) return kReject;
            return -(s_new + s_old);
          }
          const double s_new = model.predict(job->type, others);
          double s_old = 0;
          for (std::size_t i = 0; i < others.size(); ++i) {
            std::vector<int> rest = others;
            rest[i] = job->type;
            const double s = model.predict(others[i], rest);
            if (s > limit_others) return kReject;
            s_old = std::max(s_old, s);
          }
          if (s_new > own_limit) return kReject;
          return -(s_new + s_old);
        };
        gpus = find_shared_placement(cluster, *job, score);
      }
      if (gpus.empty()) gpus = find_free_placement(cluster, *job, /*allow_spread=*/true);
      if (!gpus.empty()) actions.start(*job, gpus);
    }
  }

 private:
  PolicyOptions options_;
};

}  // namespace

std::unique_ptr<Policy> make_interference_aware(const PolicyOptions& options) {
  return std::make_unique<InterferenceAware>(options);
}

}  // namespace recmix::sched
