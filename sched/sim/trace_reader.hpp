#pragma once
// Readers for the cluster traces in shared/traces and for the simulator's own CSV. Each gives
// a list of trace jobs (arrival, solo length, GPUs, and a job type when the trace has one);
// the workload mapping (workload.hpp) turns them into scheduler jobs with profiles.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sched/utilisation.hpp"

namespace recmix::sched {

enum class TraceFormat { automatic, philly, gavel, muri, alibaba, recmix };
TraceFormat parse_trace_format(std::string_view name);  // "auto", "philly", ...; ConfigError otherwise
std::string_view trace_format_name(TraceFormat format);

struct TraceJob {
  double arrival_s = 0;
  double duration_s = -1;   // solo run time; -1 when the trace gives steps instead (Gavel)
  double steps = 0;         // Gavel: total steps
  int gpus = 1;
  int priority = 0;
  double slowdown_limit = 0;
  double memory_bytes = 0;  // recmix CSV: the job's peak memory per GPU (memory_gib); 0: its type's
  std::string type;         // "" when the trace has no job types (Philly, Alibaba)
  std::optional<JobProfile> profile;  // Muri: the job's own per-stage profile
  std::size_t line = 0;     // line in the trace file, for error messages
};

struct Trace {
  std::string path;
  TraceFormat format = TraceFormat::automatic;
  std::vector<TraceJob> jobs;   // sorted by arrival, first arrival at 0
  std::size_t skipped = 0;      // rows that describe no GPU job (CPU instances, unfinished)
};

// Reads a trace; automatic detection looks at the header line. Errors (missing columns,
// non-numeric fields, negative durations, zero GPUs) throw DataError naming file and line.
//   philly  : timestamp,duration,num_gpus,gpu_time,cluster      (arrival from timestamp)
//   gavel   : TSV job_type, command, steps_arg, needs_data_dir, total_steps, arrival_s, scale_factor
//   muri    : job_id,num_gpu,submit_time,iterations,model_name,...,resource_time_0..2 (times in ms)
//   alibaba : instance rows; GPU instances with creation and deletion times become jobs
//   recmix  : arrival_s,duration_s,gpus[,type][,priority][,slowdown_limit][,memory_gib] (columns by name)
Trace read_trace(const std::string& path, TraceFormat format = TraceFormat::automatic);

}  // namespace recmix::sched
