#pragma once
// What `recmix sim` writes, read back for a report: the --json file (per policy, the summary
// metrics of sched/sim/report.cpp's to_json) and the --timeline-csv file (per policy, GPUs busy,
// effective utilisation, running and queued jobs over simulated time).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace recmix::report {

struct SimPolicy {
  std::string name;
  std::vector<std::pair<std::string, double>> metrics;  // every number of the policy's object, in file order
  double metric(const std::string& key) const;          // NaN when absent
  // Per-job completion and queueing times, where the file holds them (a "job_outcomes" array of
  // objects with jct_s or arrival_s and finish_s, and queued_s); empty otherwise.
  std::vector<double> jct_s, queued_s;
  // jct_s holds the 0th..100th percentiles the file gives (recmix sim's jct_percentiles_s), not
  // every job's time: a point k of n is at level k / (n - 1).
  bool jct_percentiles = false;
};

struct SimFile {
  std::string path;
  std::string description;  // trace, mix, cluster
  std::vector<SimPolicy> policies;
  std::vector<std::string> notes;
};

struct TimelineSeries {
  std::string policy;
  std::vector<double> time_s, gpu_util, effective_util, running_jobs, queued_jobs;
};

struct SimTimeline {
  std::string path;
  std::vector<TimelineSeries> policies;
  std::int64_t lines = 0, skipped_lines = 0;
  std::vector<std::string> notes;
};

// Looks at a file's first bytes: a JSON object with "policies", or a CSV with the timeline's header.
bool is_sim_json(const std::string& path);
bool is_sim_timeline(const std::string& path);
SimFile read_sim_json(const std::string& path);
SimTimeline read_sim_timeline(const std::string& path);

}  // namespace recmix::report
