#pragma once
// Presenting simulation results: the side-by-side terminal table, JSON for tools, and the
// utilisation timeline as CSV (one row per sample and policy).
#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "sched/interference_model.hpp"
#include "sched/sim/simulator.hpp"
#include "sched/sim/workload.hpp"

namespace recmix::sched {

// Policies as columns, metrics as rows.
std::string format_table(const std::vector<SimResult>& results);
nlohmann::json to_json(const SimResult& result);
// Per job type of a workload: its jobs, where its profile and its ground truth come from
// (profile_source, SlowdownTruth::type_source), the measured names mapped onto it and how its
// multi-GPU jobs were priced (Workload::multi_gpu).
struct JobTypeTruth {
  std::string type;
  std::size_t jobs = 0;
  std::string profile, ground_truth;
  std::vector<std::string> measured_as;
  MultiGpuUse multi_gpu;
};
std::vector<JobTypeTruth> job_type_truth(const SimEnvironment& env, const Workload& workload);
// Job types as rows: jobs, profile, ground truth, its multi-GPU jobs as "k-GPU / scaled / spread
// meas." (all / priced by the scaling rule / with a measured spread slowdown), and per policy the
// co-located groups that took the formula out of all co-located groups of the type (fallbacks,
// unless the truth is "formula").
std::string format_ground_truth(const std::vector<JobTypeTruth>& types, const std::vector<SimResult>& results);
// {type: {jobs, profile, ground_truth, measured_as, formula_fallbacks: {policy: n},
//  multi_gpu: {jobs, measured_throughput, scaling_fallbacks, spread_measured, spread_bandwidth_model}}}.
nlohmann::json ground_truth_json(const std::vector<JobTypeTruth>& types, const std::vector<SimResult>& results);

// The interference model's held-out error per pair dataset (evaluate_held_out), as rows.
struct HeldOutRow {
  std::string source;
  HeldOutReport report;
  std::string error;  // set when the data could not be split (too few pairs)
};
std::vector<HeldOutRow> held_out_rows(const std::vector<PairDataset>& datasets, double test_fraction,
                                      std::uint64_t seed);
std::string format_held_out(const std::vector<HeldOutRow>& rows);
nlohmann::json to_json(const HeldOutRow& row);

// Columns: policy,time_s,busy_gpus,gpu_util,effective_util,running_jobs,queued_jobs.
void write_timeline_csv(std::ostream& out, const std::vector<SimResult>& results, int gpu_count);

}  // namespace recmix::sched
