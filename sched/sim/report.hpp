#pragma once
// Presenting simulation results: the side-by-side terminal table, JSON for tools, and the
// utilisation timeline as CSV (one row per sample and policy).
#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "sched/sim/simulator.hpp"

namespace recmix::sched {

// Policies as columns, metrics as rows.
std::string format_table(const std::vector<SimResult>& results);
nlohmann::json to_json(const SimResult& result);
// Columns: policy,time_s,busy_gpus,gpu_util,effective_util,running_jobs,queued_jobs.
void write_timeline_csv(std::ostream& out, const std::vector<SimResult>& results, int gpu_count);

}  // namespace recmix::sched
