// Resource-complementary co-location (RMixer-style). Each job, in queue order, gets the
// placement that maximises predicted total throughput. When the cluster runs short of free
// GPUs (< pack_free_fraction free), a job whose best co-runner complements it so well that
// the pair's predicted summed rate reaches pack_gain shares that GPU at once, keeping free
// GPUs for jobs without such a partner and for multi-GPU jobs. Otherwise a free placement
// (rate 1, nobody slowed) when there is one; when there is none, in the batched dispatch
// round (every dispatch_interval_s), a GPU whose co-runner's utilisation
// vector complements its own, i.e. where the contention prior predicts the largest summed rate
// 1/s_new + 1/s_old, minus a small penalty on the busiest resource of the pair so load stays
// balanced within the GPU and spread across GPUs. A pair must predict a summed rate of at
// least min_pair_gain, and it must fit in memory.
#include <algorithm>
#include <cmath>
#include <limits>

#include "sched/policies/policies.hpp"

namespace recmix::sched {
namespace {

constexpr double kReject = -std::numeric_limits<double>::infinity();

class Complementary final : public Policy {
 public:
  explicit Complementary(const PolicyOptions& options) : options_(options) {}
  std::string_view name() const override { return "complementary"; }

  void schedule(const SchedulingContext& context, Actions& actions) override {
    // Free placements and complementary packing happen at once; co-location under scarcity
    // waits for the batched round.
    const bool batch_round = options_.dispatch_interval_s <= 0 || context.now >= next_round_;
    if (batch_round) next_round_ = context.now + options_.dispatch_interval_s;
    const auto& cluster = context.cluster;
    const auto& model = context.model;
    const int pack_below = static_cast<int>(options_.pack_free_fraction * cluster.gpu_count());
    bool deferred = false;  // a job may co-locate at the next batched round
    auto full = [&] {
      if (cluster.free_gpu_count() > 0 || (!cluster.shareable().empty() && batch_round)) return false;
      deferred = !batch_round && !cluster.shareable().empty();
      return true;
    };
    scan_queue(context, options_, actions, full, [&](const Job& job) {
      const UtilisationVector self = job.profile.util;
      double best_rate = 0;
      auto score = [&](int gpu) {
        const UtilisationVector other = cluster.demand(gpu);
        const double s_new = model.prior_slowdown(self, std::span<const UtilisationVector>(&other, 1));
        const double s_old = model.prior_slowdown(other, std::span<const UtilisationVector>(&self, 1));
        const double rate = 1.0 / s_new + 1.0 / s_old;
        if (rate < options_.min_pair_gain) return kReject;
        best_rate = std::max(best_rate, rate);
        double peak = 0;
        for (std::size_t r = 0; r < kResourceCount; ++r) peak = std::max(peak, self.share[r] + other.share[r]);
        return rate - 0.05 * peak;
      };
      std::vector<int> gpus;
      if (cluster.free_gpu_count() < pack_below) {
        gpus = find_shared_placement(cluster, job, score);
        if (best_rate < options_.pack_gain) gpus.clear();  // not complementary enough to pack
      }
      if (gpus.empty()) gpus = find_free_placement(cluster, job, /*allow_spread=*/false);
      if (gpus.empty() && batch_round) gpus = find_shared_placement(cluster, job, score);
      if (gpus.empty() && !batch_round && !cluster.shareable().empty()) deferred = true;
      if (gpus.empty()) gpus = find_free_placement(cluster, job, /*allow_spread=*/true);
      return gpus;
    });
    // A batched round is only worth running if something changed since the last one: every
    // arrival or finish calls schedule(), and such a call asks for the next round.
    if (deferred && options_.dispatch_interval_s > 0) actions.wake_at(next_round_);
  }

 private:
  PolicyOptions options_;
  double next_round_ = -INFINITY;
};

}  // namespace

std::unique_ptr<Policy> make_complementary(const PolicyOptions& options) {
  return std::make_unique<Complementary>(options);
}

}  // namespace recmix::sched
