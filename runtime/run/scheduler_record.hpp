#pragma once
// The scheduler service's record of one job (internal to runtime/run/scheduler_service*.cpp): its
// specs, its state in the run and what its ranks measured.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/run/scheduler_service.hpp"
#include "sched/cluster_state.hpp"

namespace recmix::runtime::run {

struct SchedulerService::Record {
  RunJob job;
  sched::Job sjob;
  double estimate = 0;
  std::string state = "pending";  // pending, queued, running, stopping, finished, failed, rejected
  std::vector<int> ranks;
  int launch = -1;
  int reports = 0;
  bool failed = false;          // a rank of the current launch reported a failure
  double failed_at = -1;        // when the first rank of this launch reported it
  bool error_from_peer = false;
  bool resume = false;
  double first_start = -1, finish = -1, queued_since = -1, queued_s = 0;
  double last_sample_t = -1;
  double last_start = -1;
  double progress_t = -1;       // when its step last went up, or it was started
  double stalled_since = -1;    // warned of: its step has not moved since then (-1: it moves)
  std::int64_t line_step = 0;   // its step at the last progress line, and when: the rate since
  double line_t = -1;
  double samples_per_s = 0;     // over the last progress line's interval
  std::string error;
  std::set<std::string> partners;
  std::int64_t step = 0, total_steps = 0;
  double loss = 0;
  std::map<int, std::size_t> peak_by_rank;
  double alone_sum = 0, shared_sum = 0;  // step seconds from the job's rank-0 samples
  int alone_n = 0, shared_n = 0;
  std::vector<double> alone_steps;  // the last 64 of its step times alone (the median: its slowdowns' baseline)
  nlohmann::json eval;
  bool estimate_below_peak = false;
  int preemptions = 0;
  double share = 0;             // bytes its pool may hold on each rank
  std::vector<double> recent_shared;  // the last step times measured while co-located
  bool moved_apart = false;
  bool profile_measured = false;  // its compute share comes from its own samples
  bool out_of_memory = false;   // a rank of the current launch ran out of its share
  int memory_restarts = 0;
};

// finished, failed and rejected jobs are done with.
inline bool terminal(const std::string& state) { return state == "finished" || state == "failed" || state == "rejected"; }

}  // namespace recmix::runtime::run
