#pragma once
// Turns trace jobs into scheduler jobs: each trace job keeps its arrival, length and GPU count
// and gets a profile. With a mix ("dlrm-heavy", "mixed", "dlrm-only", "other-only") a job is a
// DLRM of one of the preset sizes with the mix's probability (otherwise a measured non-DLRM
// type from the Lucid solo profiles), drawn from (seed, job index); "trace" keeps the trace's
// own job types (Gavel, Muri, own CSV). The environment holds the profile library, the
// scheduler's learned interference model and the simulator's ground truth.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sched/cluster_state.hpp"
#include "sched/interference_model.hpp"
#include "sched/multi_gpu_scaling.hpp"
#include "sched/pair_data.hpp"
#include "sched/profile_library.hpp"
#include "sched/sim/ground_truth.hpp"
#include "sched/sim/measured_input.hpp"
#include "sched/sim/trace_reader.hpp"

namespace recmix::sched {

struct WorkloadMix {
  std::string name;
  double dlrm_share = 0.8;
  std::map<std::string, double> dlrm_sizes;  // preset -> weight
};
WorkloadMix parse_mix(const std::string& name);  // ConfigError listing the known mixes
const std::vector<std::string>& mix_names();

struct WorkloadOptions {
  std::string mix = "dlrm-heavy";
  std::uint64_t seed = 1;
  double arrival_scale = 1.0;  // arrivals compressed by this factor (load x scale)
  // The trace played this many times in a row: copy k is every trace job with its arrival
  // shifted by k x span (span = last arrival - first), so there are repeat_trace x as many
  // jobs over repeat_trace x the time, each copy with its own draws of job types.
  int repeat_trace = 1;
  std::size_t max_jobs = 0;    // 0 = every job of the (repeated) trace
  double truth_noise = 0.15;   // log-normal sigma of unmeasured pairs' ground truth
};

struct SimEnvironment {
  explicit SimEnvironment(MachineModel machine) : library(std::move(machine)) {}
  ProfileLibrary library;
  InterferenceModel model;              // what the policies use (calibrated offline, learned online)
  std::unique_ptr<SlowdownTruth> truth; // what the simulator applies
  std::vector<PairDataset> measured;    // pair data loaded (Lucid, Gavel, then recmix's "measured")
  std::vector<std::string> other_types; // non-DLRM types a mix draws from
  MeasuredInput pairs;                  // the --pairs files, mapped onto the simulator's types
  MultiGpuScaling scaling;              // k-GPU throughputs of the Gavel types (empty without the file)
};

// Loads the pair data found in traces_dir (lucid_*.csv, gavel_throughputs.json, whose k-GPU
// throughputs also go to env.scaling) into a new
// environment for `cluster`. Missing files are skipped; "other" types then come only from what
// was found (a mix needing them throws ConfigError).
// table_bytes: the DLRM presets' bytes a table weight (ProfileLibrary::set_table_bytes);
// bf16_gemms: their MLPs' GEMMs in bf16 (ProfileLibrary::set_bf16_gemms).
std::unique_ptr<SimEnvironment> make_environment(const ClusterSpec& cluster, const std::string& traces_dir,
                                                 int table_bytes = 4, bool bf16_gemms = false);

// Loads measured pair files (recmix pairs) into `env`, after make_environment and before
// build_workload: their pairs become ground truth (overriding Lucid / Gavel values of the same
// pair), observations of the interference model (refit), and a type's solo line with its parts
// replaces that type's utilisation vector and solo step time (peak memory and communication
// share stay the roofline's). Type names are mapped as measured_input.hpp says; unknown ones
// end up in env.pairs.warnings, except those given as NAME=NAME in `aliases`: a measured name that
// is no simulator type then becomes a type of its own (the measured profile; peak memory from the
// trace's memory_gib, else 0). Nothing happens for no files.
void add_measured_pairs(SimEnvironment& env, const std::vector<std::string>& files,
                        const std::map<std::string, std::string>& aliases = {});

// Where the simulator's profile of `type` comes from: "measured" (a --pairs file), "roofline"
// (a DLRM preset), the pair data's source holding its solo profile ("lucid", "gavel-v100"), or
// "trace" (a profile the trace carries, as Muri's).
std::string profile_source(const SimEnvironment& env, const std::string& type);

// How a type's multi-GPU jobs were priced. A job of a type env.scaling holds (a Gavel type, its
// length in steps) runs steps / its k-GPU throughput (throughput_on): measured, or the scaling
// rule (a fallback). Its spread slowdown is measured (measured_spread_slowdown) or, for every
// other multi-GPU job, the bandwidth model.
struct MultiGpuUse {
  std::size_t jobs = 0;             // jobs on more than one GPU
  std::size_t measured = 0;         // of those, priced by a measured k-GPU throughput
  std::size_t scaled = 0;           // of those, priced by the scaling rule (fallbacks)
  std::size_t spread_measured = 0;  // of those, with a measured spread slowdown (others: bandwidth model)
};

struct Workload {
  std::vector<Job> jobs;          // by arrival
  std::size_t unplaceable = 0;    // trace jobs wider than the cluster, or larger than a GPU's memory
  std::map<std::string, std::size_t> types;  // jobs per type
  std::map<std::string, MultiGpuUse> multi_gpu;  // per type with multi-GPU jobs
};

// Builds the jobs and finishes the environment (registers types, builds the ground truth).
Workload build_workload(const Trace& trace, const ClusterSpec& cluster, SimEnvironment& env,
                        const WorkloadOptions& options);

}  // namespace recmix::sched
