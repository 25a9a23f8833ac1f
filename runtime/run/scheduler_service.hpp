#pragma once
// SchedulerService: rank 0's part of `recmix run`. It keeps a sched::ClusterState of the real
// ranks (one "GPU" per rank, its memory the configured capacity), runs the same sched::Policy
// the simulator runs at every arrival, finish, failure and round timer, and turns the decisions
// into start / stop messages. Admission is by the peak-memory estimator; the executors' samples
// (step time, data wait, pool bytes, busy share) go to events.jsonl, feed the interference model
// and are checked against the estimates. At the end it writes summary.json and prints a table.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/run/control_plane.hpp"
#include "runtime/run/network_probe.hpp"
#include "runtime/run/node_layout.hpp"
#include "runtime/run/job_file.hpp"
#include "runtime/run/messages.hpp"
#include "sched/cluster_state.hpp"
#include "sched/interference_model.hpp"
#include "sched/policy.hpp"

namespace recmix::runtime::run {

struct RunOptions {
  std::string run_dir;
  JobFile jobs;
  std::string machine = "cpu-zen3-2vcpu";  // machine model of the roofline profiles
  int cores_per_rank = 1;                  // resolved (scheduler.cores_per_rank or the host's)
  bool quiet = false;                      // no progress lines
  // The ranks' nodes (node k: ranks [k R, (k + 1) R)); none given: one node of every rank.
  NodeLayout nodes;
  // The network between the nodes as measured at start (recmix run, when the jobs file has no
  // [cluster]); a figure of 0 keeps the cluster model's default.
  ProbedNetwork probed_network;
  // The smallest rank's GPU memory as read at start (recmix run, when its jobs use GPUs); 0: not
  // read. [scheduler] memory_capacity, when given, comes first (rank_capacity, device_memory.hpp).
  double device_memory_bytes = 0;
  // When set, every job of the run (in the jobs file, submitted, resumed) runs on this backend
  // whatever its device.kind says ("cpu", "cuda", "cpu-strict"): recmix run --device.
  std::string device_kind;
  // Set (by a signal handler) when the run must end: every running job stops with a checkpoint,
  // nothing new starts, and run() returns once they all stopped. May be null.
  const std::atomic<bool>* terminate = nullptr;
  // Continuing an interrupted run in run_dir: jobs that ended there (its summary.json) are not
  // run again, the others resume from their latest checkpoint, and the jobs submitted to it
  // (spool/accepted/) come back.
  bool resume = false;
  // The run does not end when its last job does: it waits for `recmix close` (a "close" file in
  // the spool), so that jobs can still be submitted to it; it then ends once every job has.
  bool stay_open = false;
  // For tests of moving apart, so that the decision does not hang on the machine's load: the step
  // times a job samples while it shares a rank with a job named here count as that many times
  // longer (RECMIX_SLOWDOWN_INJECTION="<job>:<factor>,..."; recmix run reads it): the named job
  // is a noisy neighbour of the given strength.
  std::map<std::string, double> injected_slowdown;
};

class SchedulerService {
 public:
  SchedulerService(SchedulerLink& plane, RunOptions options);
  ~SchedulerService();
  // Runs every job to its end (finished, failed or rejected), or until terminate is set and the
  // running jobs stopped, then tells every executor to shut down. Returns the summary (also
  // written to RUN_DIR/summary.json; "interrupted" is true when jobs are left to resume).
  nlohmann::json run();

 private:
  struct Record;
  class LiveActions;

  // Seconds since the run began, for durations and log lines.
  double now() const;
  // The scheduling time: the loop turn's time during a turn (now() outside the loop). Every time
  // that enters a decision or an event (starts, ends, preemptions, attained service, queueing,
  // busy time) is this one, so that `recmix sim --replay` sees the times the service used.
  double clock() const;
  std::string network_origin() const;
  void add_job(RunJob job, const std::string& source);
  void take_spool();
  void make_run_directory() const;
  void load_previous_run();
  void handle(const Message& message);
  void note_failure(Record& r, int rank, const JobReport& report);
  void schedule_round();
  void start(Record& r, const std::vector<int>& ranks);
  void release_ranks(Record& r);
  void end_job(Record& r, const std::string& state);
  void restart_with_more_memory(Record& r);
  void stop_job(Record& r, nlohmann::json event);
  void move_apart_if_slowed(Record& r);
  static double alone_step_s(const Record& r);
  void measure_profile(Record& r, const JobSample& sample);
  void check_stuck();
  void check_stalls();
  void progressed(Record& r);
  void grant_next_io();
  void progress_line(bool force);
  void write_status() const;
  nlohmann::json summary() const;
  std::string why_none_colocated() const;
  void event(nlohmann::json e);
  std::vector<std::string> partners_of(const Record& r) const;

  SchedulerLink& plane_;
  RunOptions options_;
  std::unique_ptr<sched::ClusterState> cluster_;
  std::unique_ptr<sched::Policy> policy_;
  sched::InterferenceModel model_;
  std::vector<std::unique_ptr<Record>> records_;  // by job id
  std::unordered_map<std::string, Record*> by_name_;  // job names are unique in a run
  std::map<int, Record*> by_launch_;
  std::vector<int> threads_used_;                 // per rank
  std::vector<double> busy_since_, busy_s_;       // per rank: when it last became busy, busy time
  std::vector<std::size_t> rank_peak_;            // per rank: the largest summed pool bytes seen
  std::map<std::pair<std::int64_t, int>, std::size_t> pool_now_;  // (job, rank) -> current bytes
  std::vector<std::int64_t> io_queue_;            // launches waiting to write a checkpoint
  int io_holder_ = -1;                             // launch writing now, -1 none
  int next_launch_ = 1;
  double start_time_ = 0;
  // When this turn of the service's loop took up its messages and arrivals (-1 outside the loop):
  // the time of the events it handles and of the round that follows them. A replay then meets
  // those events together, at one time, as the policy did.
  double turn_t_ = -1;
  double next_round_ = 0, wake_at_ = 1e300, last_progress_ = -1e300;
  bool model_stale_ = false;  // the interference model has observations it has not fitted yet
  double next_refit_ = 0;
  double next_scan_ = 0;     // the next scan over every job (stuck, stalled, the run's end)
  double next_arrival_ = 0;  // the earliest arrival of a pending job (0: look again)
  bool changed_ = true;
  bool draining_ = false;                          // terminating: waiting for the running jobs to stop
  bool close_requested_ = false;                   // recmix close: a stay_open run may end
  bool stuck_ = false;                             // a job's ranks are stuck: the processes must end
  std::int64_t rounds_ = 0, messages_in_ = 0;
  double round_seconds_ = 0, round_max_s_ = 0;   // wall time of the scheduling rounds
  // The longest round, taken apart: the interference model's refit, the policy with the starts it
  // sent, how many jobs were queued and how many started (summary.json's control_plane).
  struct RoundParts {
    double t = 0, refit_s = 0, policy_s = 0;
    std::size_t queued = 0;
    int starts = 0;
  } longest_round_;
  std::int64_t refits_ = 0;
  double refit_seconds_ = 0;
  std::map<std::string, nlohmann::json> previous_; // resume: the interrupted run's summary, per job
  // Spool entries refused before they became jobs (unreadable, a duplicate name): file and reason,
  // listed in status.json so that `recmix status` reads nothing else.
  std::vector<nlohmann::json> spool_rejections_;
  std::string spool_refused_;  // why the spool is no longer read (its owner or mode changed); "" while it is
  // The run's state in status.json: "running" while run() goes, then "finished", "stopped" or
  // "failed" (docs/run.md, Run states).
  std::string run_state_ = "running";
  std::string events_path_;
  std::unique_ptr<std::ofstream> events_;
};

}  // namespace recmix::runtime::run
