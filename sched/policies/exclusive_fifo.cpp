// Exclusive FIFO: jobs start in arrival order, each on GPUs of its own (one node when it
// fits, else spread); the first job that cannot start blocks the ones behind it.
#include "sched/policies/policies.hpp"

namespace recmix::sched {
namespace {

class ExclusiveFifo final : public Policy {
 public:
  std::string_view name() const override { return "fifo"; }
  void schedule(const SchedulingContext& context, Actions& actions) override {
    for (Job* job : context.queue) {
      const auto gpus = find_free_placement(context.cluster, *job, /*allow_spread=*/true);
      if (gpus.empty() || !actions.start(*job, gpus)) return;
    }
  }
};

}  // namespace

std::unique_ptr<Policy> make_exclusive_fifo(const PolicyOptions&) { return std::make_unique<ExclusiveFifo>(); }

}  // namespace recmix::sched
