#pragma once
// JobFile: what `recmix run` reads (docs/run.md): [[job]] tables with the keys of a `recmix train`
// job spec plus ranks, priority and arrival; `include = [...]` naming more job specs (or job
// files); and a [scheduler] table. Errors are ConfigErrors naming the file, the job and the key.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/train/job_spec.hpp"

namespace recmix::runtime {

// One job of a run: the trainer's spec plus what the scheduler needs.
struct RunJob {
  JobSpec spec;           // parsed; run_dir and checkpoint.dir are set by the run (jobs/<name>)
  std::string spec_text;  // the job's TOML as the trainer parses it (sent to every rank)
  std::string origin;     // where it came from, for messages: "jobs.toml, [[job]] 2 ('small')"
  std::string base_dir;   // relative data paths resolve against it
  int ranks = 1;
  int priority = 0;
  double arrival_s = 0;   // seconds after the run starts
};

// A rank's memory for jobs when neither [scheduler] memory_capacity nor the ranks' GPUs give it.
inline constexpr std::uint64_t kDefaultRankCapacity = 8ull << 30;

struct SchedulerSettings {
  std::string policy = "complementary";  // exclusive-fifo | memory-first | complementary |
                                         // interference-aware | delay | las
  double round_interval_s = 1.0;         // seconds between scheduling rounds (also on events)
  int colocation_limit = 2;              // jobs at most on one rank
  std::uint64_t memory_capacity = 0;     // device memory per rank for jobs; 0: the GPUs', or 8 GiB
  double slowdown_limit = 1.5;           // measured slowdown past which a pair is moved apart
  int cores_per_rank = 0;                // 0: the CPUs the rank is bound to, else host cores / ranks on it
  double memory_headroom = 1.25;        // a job's pool may hold this many times its estimate
  double stuck_timeout_s = 60;           // a failed job's other ranks that have not reported by then are stuck
  double progress_interval_s = 5;        // seconds between progress lines on stderr
  double stall_warning_s = 60;           // a running job whose step has not moved for this long is warned of; 0: never
  double las_threshold_s = 3600;         // las: attained rank-seconds that demote a job
  double las_lease_s = 300;              // las: period of the preemptive pass
  double delay_min_s = 30;               // delay: the shortest and longest a multi-rank job waits for
  double delay_max_s = 4 * 3600.0;       // one node before it spreads over several
};

// The jobs file's [cluster] table: the network the policies assume between the live nodes (their
// shape is the world's). A machine preset of the simulator's, then any key given over it.
struct LiveNetwork {
  std::string machine;             // empty: the cluster model's defaults
  double intra_node_gbps = 0;      // per GPU (rank); 0: the preset's
  double inter_node_gbps = 0;
};

struct JobFile {
  std::vector<RunJob> jobs;
  SchedulerSettings scheduler;
  LiveNetwork network;
};

// `origin` names the file in errors; relative paths (includes, data) resolve against base_dir.
JobFile parse_job_file(const std::string& toml_text, const std::string& origin, const std::string& base_dir);
JobFile load_job_file(const std::string& path);
// One job from a `recmix train` job spec that may also hold ranks, priority and arrival
// (recmix submit, include).
RunJob parse_run_job(const std::string& toml_text, const std::string& origin, const std::string& base_dir);
RunJob load_run_job(const std::string& path);

// Checks what can be checked before a job runs: names are unique in `jobs`, every data file
// exists, ranks fit in `world_ranks`. Throws ConfigError naming the job.
void check_run_job(const RunJob& job, int world_ranks);
void check_unique_names(const std::vector<RunJob>& jobs);

// The policy name the sched library knows ("exclusive-fifo" -> "fifo"); ConfigError if unknown.
std::string sched_policy_name(const std::string& name);

}  // namespace recmix::runtime
