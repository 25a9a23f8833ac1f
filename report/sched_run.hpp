#pragma once
// What `recmix run` leaves in its RUN_DIR (docs/run.md), read back for a report: events.jsonl
// turned into placements per rank and samples, summary.json's per-job and per-rank figures, and
// each job's own training run under jobs/<name>/.
#include <cstdint>
#include <string>
#include <vector>

#include "report/training_run.hpp"

namespace recmix::report {

// A job on one rank from its start to what ended it there.
struct Placement {
  std::string job;
  int rank = 0;
  int slot = 0;  // jobs sharing a rank at once take slots 0, 1, ...
  double begin_s = 0, end_s = 0;  // end: when the job left the rank (a stopped job: its checkpoint)
  // finished, failed, preempt, move_apart, stop, memory_restart, stuck, or "running" (the log ends first)
  std::string ended_by;
  double ended_at_s = 0;  // when the event in ended_by came (a stop: asked for, before end_s)
  bool resumed = false;
};

struct RankSample {
  double t = 0;
  int job = 0;  // index into SchedRun::job_names
  int rank = 0;
  double busy_share = 0, pool_current_bytes = 0, pool_peak_bytes = 0;
  double gpu_util = 0;  // NaN unless the sample has NVML's gpu_util
};

struct JobFigures {
  std::string name, state, ranks, partners, error;
  double arrival_s = 0, first_start_s = 0, queued_s = 0, jct_s = 0;  // NaN where unknown
  std::int64_t steps = 0, preemptions = 0;
  double samples_per_s_alone = 0, samples_per_s_colocated = 0;
  double estimate_bytes = 0, measured_peak_bytes = 0;
};

struct RankFigures {
  int rank = 0;
  double busy_share = 0, peak_bytes = 0;  // summary.json's: after a resume, of the last part only
};

// One `recmix run` over the directory, from its run_start. A resumed run appends a part whose
// event times start at 0 again; each part is moved to its place on one time axis, the wall clock
// of its run_start (unix_s) after the first part's.
struct RunPart {
  double begin_s = 0, end_s = 0;  // on the report's axis: its run_start and its last event
  double unix_s = 0;              // NaN where run_start has none (a log written before it had)
  bool after_previous = false;    // placed right after the previous part's last event: no unix_s
};

struct SchedRun {
  std::string dir, policy;
  int ranks = 0;
  int ranks_per_node = 0;           // run_start's (0: a run before nodes, one node of every rank)
  std::vector<std::string> node_hosts;
  double span_s = 0;  // the last part's run_end (its makespan), else the last event's time
  std::vector<RunPart> parts;  // in order; more than one: the run was stopped and resumed
  double memory_capacity_bytes = 0;
  std::vector<std::string> job_names;  // in order of submission
  std::vector<Placement> placements;
  std::vector<RankSample> samples;
  // From summary.json, else from the events; after a resume the times (arrival, first start,
  // queued, JCT) and stops from the events of every part, on the report's axis.
  std::vector<JobFigures> jobs;
  std::vector<RankFigures> rank_figures;  // from summary.json only (the last part's)
  bool have_summary = false;
  std::vector<TrainingRun> job_runs;  // jobs/<name>/, those that hold metrics or a log
  std::int64_t event_lines = 0, skipped_lines = 0;
  std::vector<std::string> notes;
};

// True where `dir` holds events.jsonl or summary.json.
bool is_sched_run(const std::string& dir);
SchedRun read_sched_run(const std::string& dir);

// Gives each placement the lowest slot on its rank that no placement overlapping it holds.
void assign_slots(std::vector<Placement>& placements);

}  // namespace recmix::report
