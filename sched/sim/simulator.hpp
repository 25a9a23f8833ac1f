#pragma once
// The discrete-event cluster simulator. Jobs arrive from a workload; at every arrival, finish
// or requested wake-up the policy runs a round through the same Policy interface the live
// runtime uses. A running job progresses at rate 1 / (largest slowdown over its GPUs x spread
// factor), the slowdowns coming from the ground truth for its current co-runners; rates are
// recomputed whenever a GPU's set of jobs changes. Observed slowdowns feed the learned
// interference model online. The simulator refuses (and counts) any start past a GPU's memory.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sched/cluster_state.hpp"
#include "sched/interference_model.hpp"
#include "sched/policy.hpp"
#include "sched/sim/ground_truth.hpp"

namespace recmix::sched {

// A stop the scheduler service made outside the policy (recmix run's move-apart), for replays: at
// stop_s the job leaves its GPUs (no round runs for that alone) and the interference model
// observes `slowdown` against the types of the jobs in `avoid` (or `slowed`'s, below); at requeue_s (when the live job
// reported its checkpoint) it is queued again, never to share a GPU with those jobs while they run.
struct ExternalStop {
  JobId job = 0;
  double stop_s = 0, requeue_s = 0;
  std::vector<JobId> avoid;
  double slowdown = 1;
  // The job whose slowdown was measured where it is not the stopped one (a partner of higher
  // priority stayed, and this job moved away from it): the model observes that job's slowdown
  // against this one instead.
  std::optional<JobId> slowed;
};

// A job's utilisation measured by the live run (recmix run's profile_measured), for replays: at
// time_s it replaces the job's profile and its type's entry in the interference model.
struct ProfileUpdate {
  JobId job = 0;
  double time_s = 0;
  UtilisationVector util;
};

struct SimOptions {
  double restart_overhead_s = 60;   // solo seconds of work a job redoes after a preemption
  double timeline_interval_s = 0;   // 0: span / 1000, at least 60 s
  bool learn_online = true;         // feed observed slowdowns to the model
  // Replaying a live run: every job runs at rate 1 for its work_s (its measured run time, which
  // already holds whatever its co-runners cost it), whoever shares its GPUs.
  bool measured_runtimes = false;
  // Replays only: when the live run's jobs ended (finished or failed), by id. Such a job's last run
  // ends then, not at its start plus its work: the simulator decides at the event, where the live
  // service took a moment to, so its starts come up to a few milliseconds early, and an end moved
  // up by them could cross an arrival and change a decision.
  std::map<JobId, double> end_times;
  // Replays only: when the live service queued each job (it saw its arrival), by id; arrival_s
  // still orders the queue, as it did there.
  std::map<JobId, double> queue_times;
  std::vector<ExternalStop> external_stops;  // replays only
  std::vector<ProfileUpdate> profile_updates;  // replays only
  int observations_per_pair = 3;    // online observations kept per (type, co-runner type)
  int refit_every = 50;             // refit after this many new observations
  // Called every progress_every_events events (simulated time, finished jobs, total jobs).
  std::function<void(double, std::size_t, std::size_t)> progress;
  std::size_t progress_every_events = 20000;
};

struct JobOutcome {
  JobId id = 0;
  double arrival_s = 0, first_start_s = -1, finish_s = -1;
  double work_s = 0;           // solo run time
  double queued_s = 0;         // time spent waiting (before first start and after preemptions)
  double delivered_s = 0;      // integrated progress (solo seconds), = work + restart overheads
  int preemptions = 0;
  int gpus = 1;
  bool spread = false;         // ever ran across nodes
  bool colocated = false;      // ever shared a GPU
};

struct TimelinePoint {
  double time_s = 0;
  int busy_gpus = 0;
  int running_jobs = 0;
  int queued_jobs = 0;
  double effective_util = 0;   // sum over running jobs of rate x GPUs / all GPUs
};

// Co-located groups of one job type by where the ground truth took each member's slowdown: a
// group is the set of jobs sharing a GPU, counted each time a GPU's set of jobs changes and
// holds two jobs or more, once per member of the type. formula_groups of a type that pair data
// covers are its fallbacks (a pair not measured, or three jobs or more).
struct GroundTruthUse {
  std::size_t pair_data_groups = 0;  // the measured slowdown of the pair (measured, lucid, gavel)
  std::size_t formula_groups = 0;    // the contention formula
};

// A start or preemption the policy made, and when.
struct TimedDecision {
  double time_s = 0;
  Decision decision;
};

struct SimResult {
  std::string policy;
  std::size_t jobs = 0;
  double makespan_s = 0;
  double avg_jct_s = 0, median_jct_s = 0, p99_jct_s = 0;
  double avg_queue_s = 0;
  double avg_gpu_util = 0;        // time-average share of GPUs holding at least one job
  double avg_effective_util = 0;  // time-average of TimelinePoint::effective_util
  double throughput_jobs_per_h = 0;
  double ftf_avg = 0, ftf_p99 = 0;  // finish-time fairness rho = JCT / solo run time
  std::size_t preemptions = 0;
  std::size_t memory_violations = 0;  // starts refused because they exceeded a GPU's memory
  std::size_t refused_starts = 0;     // other refused starts (slots, duplicates)
  double max_memory_fraction = 0;     // largest memory_used / capacity seen on any GPU
  std::size_t colocated_jobs = 0, spread_jobs = 0;
  std::size_t events = 0, rounds = 0;
  std::size_t online_observations = 0;
  double wall_s = 0;
  std::map<std::string, GroundTruthUse> ground_truth;  // by job type (Job::profile.type)
  std::vector<JobOutcome> outcomes;   // by job id order of the workload
  std::vector<TimedDecision> decisions;  // every accepted start and preemption, in order
  std::vector<TimelinePoint> timeline;
};

// Runs `policy` over `jobs` (copied; the caller's stay untouched). `model` is copied too, so
// each policy learns from its own run.
SimResult simulate(const ClusterSpec& cluster, std::vector<Job> jobs, Policy& policy,
                   const SlowdownTruth& truth, InterferenceModel model, const SimOptions& options = {});

}  // namespace recmix::sched
