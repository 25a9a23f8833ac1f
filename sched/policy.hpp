#pragma once
// The one interface every placement policy implements, used unchanged by the simulator and by
// the live runtime: a round sees the cluster state, the waiting jobs and the interference
// model, and answers with decisions through Actions (start a job on GPUs, preempt one, ask
// for a later round). Actions apply each decision at once, so later decisions of the same
// round see its effect; a start that does not fit is refused and counted, never applied.
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "sched/cluster_state.hpp"
#include "sched/interference_model.hpp"

namespace recmix::sched {

// The queue's order, in the simulator and the live runtime alike: higher priority first, then
// by arrival, then by id. So every policy, scanning in queue order, places a higher-priority job
// first.
inline bool queue_before(const Job* a, const Job* b) {
  return a->priority != b->priority ? a->priority > b->priority
                                    : a->arrival_s < b->arrival_s || (a->arrival_s == b->arrival_s && a->id < b->id);
}

struct SchedulingContext {
  double now = 0;
  const ClusterState& cluster;
  std::span<Job* const> queue;      // waiting jobs by queue_before(); preempted jobs included
  const InterferenceModel& model;   // learned slowdown model (updated online by the caller)
};

class Actions {
 public:
  virtual ~Actions() = default;
  // Starts `job` on `gpus` now. Returns false (nothing changes) when it does not fit.
  virtual bool start(const Job& job, std::span<const int> gpus) = 0;
  // Stops a running job (checkpoint); it goes back to the queue for a later round.
  virtual void preempt(JobId job) = 0;
  // Asks for another round at `time` even if no job arrives or finishes before.
  virtual void wake_at(double time) = 0;
};

// One decision, as recorded for the live runtime and for tests.
struct Decision {
  enum class Kind { start, preempt } kind = Kind::start;
  JobId job = 0;
  std::vector<int> gpus;
};

// Applies decisions to a ClusterState and records them (and refusals).
class RecordingActions : public Actions {
 public:
  RecordingActions(ClusterState& state, double now) : state_(state), now_(now) {}
  bool start(const Job& job, std::span<const int> gpus) override;
  void preempt(JobId job) override;
  void wake_at(double time) override { wake_at_ = std::min(wake_at_, time); }
  const std::vector<Decision>& decisions() const { return decisions_; }
  int refused() const { return refused_; }
  double wake_time() const { return wake_at_; }

 private:
  ClusterState& state_;
  double now_;
  std::vector<Decision> decisions_;
  int refused_ = 0;
  double wake_at_ = std::numeric_limits<double>::infinity();
};

struct PolicyOptions {
  int window = 512;                  // queued jobs one round looks at (FIFO order)
  int search_budget = 128;           // distinct job shapes a round may fail to place before it stops
  double slowdown_limit = 1.5;       // interference-aware: default per-job limit
  double min_pair_gain = 1.0;        // complementary: co-locate only if predicted total rate >= this
  double pack_gain = 1.7;            // complementary: pack before using free GPUs if total rate >= this
  double pack_slowdown = 1.2;        // interference-aware: pack before using free GPUs if both <= this
  double pack_free_fraction = 0.1;   // ... only while fewer than this share of GPUs are free
  double dispatch_interval_s = 5;    // complementary: batched dispatch rounds
  double delay_initial_s = 600;      // delay scheduling: initial timer per job size
  double delay_min_s = 30, delay_max_s = 4 * 3600.0;
  double network_sensitive = 0.1;    // delay: comm_fraction above which a spread job may be preempted
  double restart_cost_s = 60;        // checkpoint + restart cost a preemption pays
  double las_threshold_gpu_s = 3600; // LAS: attained GPU-seconds that demote a job
  double las_lease_s = 300;          // LAS: period of the preemptive pass
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  virtual void schedule(const SchedulingContext& context, Actions& actions) = 0;
  // Notifications the tuned policies learn from (default: ignored).
  virtual void on_start(const Job& job, const RunningJob& placement, double now) {}
  virtual void on_finish(const Job& job, double now) {}
  // True when the policy reads the learned model, so the caller should feed it observations.
  virtual bool learns_interference() const { return false; }
};

// "fifo", "memory-first", "complementary", "interference-aware", "delay", "las".
std::unique_ptr<Policy> make_policy(std::string_view name, const PolicyOptions& options = {});
const std::vector<std::string>& policy_names();

// Jobs that failed to place in this round, by what decides placement (type, GPUs, memory):
// a round skips their twins instead of searching again.
class FailedShapes {
 public:
  bool contains(const Job& job) const;
  void add(const Job& job);
  std::size_t size() const { return shapes_.size(); }

 private:
  std::vector<std::tuple<int, int, double>> shapes_;
};

// The scan of the queue that the packing policies share: jobs in queue order, at most
// options.window of them, stopping once full() says nothing more can start or after
// options.search_budget failed shapes, and skipping a job whose shape failed already in this
// round. place(job) returns its GPUs (empty: none found); an empty answer or a refused start
// marks the shape as failed.
template <class Full, class Place>
void scan_queue(const SchedulingContext& context, const PolicyOptions& options, Actions& actions, Full&& full,
                Place&& place) {
  FailedShapes failed;
  int looked = 0;
  for (Job* job : context.queue) {
    if (looked++ >= options.window || full()) break;
    if (failed.contains(*job)) continue;
    if (static_cast<int>(failed.size()) >= options.search_budget) break;
    const std::vector<int> gpus = place(*job);
    if (gpus.empty() || !actions.start(*job, gpus)) failed.add(*job);
  }
}

// Moving apart (recmix run): a job measured slower next to its partners than its slowdown limit
// allows is separated from them by stopping one side with a checkpoint and placing it again away
// from the other. Each job is moved at most once. The side that moves is decided by priority, so
// that a job is never moved apart for one of lower priority: the partners of lower priority than
// the slowed job move, those not moved before; where no partner has a lower priority, the slowed
// job moves itself, if it was not moved before. Empty: nobody moves (the slowed job outranks every
// partner that could, or every candidate has moved once already).
struct MoveApartCandidate {
  JobId id = 0;
  int priority = 0;
  bool moved_before = false;
};
std::vector<JobId> jobs_to_move_apart(const MoveApartCandidate& slowed, std::span<const MoveApartCandidate> partners);

// Shared placement helpers.
// Free GPUs for a job: one node when possible (best fit), else over the fewest nodes when
// allow_spread; empty when not enough are free.
std::vector<int> find_free_placement(const ClusterState& cluster, const Job& job, bool allow_spread);
// The spread penalty of a placement: 1 when on one node; over nodes, the profile's measured
// spread_slowdown when it has one, else the bandwidth model 1 + comm_fraction x (intra/inter
// bandwidth - 1).
double spread_factor(const ClusterSpec& spec, const JobProfile& profile, int nodes_used);

}  // namespace recmix::sched
