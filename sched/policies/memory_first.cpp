// Memory-first packing (Gandiva-style): each job goes to the GPUs with the least free memory
// that still hold it, already-busy GPUs first, ignoring how the co-runners interfere; only when
// no shared GPU fits does it take free GPUs. Packing keeps whole GPUs free for large jobs.
#include "sched/policies/policies.hpp"

namespace recmix::sched {
namespace {

class MemoryFirst final : public Policy {
 public:
  explicit MemoryFirst(const PolicyOptions& options) : options_(options) {}
  std::string_view name() const override { return "memory-first"; }
  void schedule(const SchedulingContext& context, Actions& actions) override {
    const auto& cluster = context.cluster;
    scan_queue(
        context, options_, actions, [&] { return cluster.free_gpu_count() == 0 && cluster.shareable().empty(); },
        [&](const Job& job) {
          std::vector<int> gpus;
          const double need = job.profile.peak_memory_bytes;
          for (auto it = cluster.shareable().lower_bound({need, -1});
               it != cluster.shareable().end() && static_cast<int>(gpus.size()) < job.gpus; ++it)
            if (cluster.fits_gpu(job, it->second)) gpus.push_back(it->second);
          if (static_cast<int>(gpus.size()) < job.gpus) gpus = find_free_placement(cluster, job, true);
          return gpus;
        });
  }

 private:
  PolicyOptions options_;
};

}  // namespace

std::unique_ptr<Policy> make_memory_first(const PolicyOptions& options) {
  return std::make_unique<MemoryFirst>(options);
}

}  // namespace recmix::sched
