#include "sched/sim/workload.hpp"

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/random.hpp"
#include "sched/machine_model.hpp"

namespace recmix::sched {

const std::vector<std::string>& mix_names() {
  static const std::vector<std::string> names = {"dlrm-heavy", "mixed", "dlrm-only", "other-only", "trace"};
  return names;
}

WorkloadMix parse_mix(const std::string& name) {
  WorkloadMix mix;
  mix.name = name;
  mix.dlrm_sizes = {{"dlrm-small", 0.4}, {"dlrm-medium", 0.35}, {"dlrm-large", 0.2}, {"dlrm-xlarge", 0.05}};
  if (name == "dlrm-heavy") {
    mix.dlrm_share = 0.8;
  } else if (name == "mixed") {
    mix.dlrm_share = 0.4;
  } else if (name == "dlrm-only") {
    mix.dlrm_share = 1.0;
  } else if (name == "other-only") {
    mix.dlrm_share = 0.0;
  } else if (name == "trace") {
    mix.dlrm_share = -1;
  } else {
    std::string known;
    for (const auto& n : mix_names()) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError("unknown workload mix '" + name + "' (known: " + known + ")");
  }
  return mix;
}

std::unique_ptr<SimEnvironment> make_environment(const ClusterSpec& cluster, const std::string& traces_dir,
                                                 int table_bytes, bool bf16_gemms) {
  auto env = std::make_unique<SimEnvironment>(machine_model(cluster.machine));
  env->library.set_table_bytes(table_bytes);
  env->library.set_bf16_gemms(bf16_gemms);
  namespace fs = std::filesystem;
  const fs::path dir(traces_dir);
  for (const auto& preset : dlrm_preset_names()) {
    const int t = env->model.type_index(preset);
    env->model.set_utilisation(t, env->library.dlrm(preset, 1).util);
  }
  const fs::path pairs = dir / "lucid_colocate_pairs.csv", singles = dir / "lucid_single_jobs.csv";
  if (fs::exists(pairs) && fs::exists(singles)) {
    PairDataset lucid = read_lucid_pairs(pairs.string(), singles.string());
    env->other_types = env->library.add_measured(lucid, 0);
    add_pairs(env->model, lucid);
    env->model.calibrate_prior();
    env->measured.push_back(std::move(lucid));
  }
  const fs::path gavel = dir / "gavel_throughputs.json";
  if (fs::exists(gavel)) {
    PairDataset g = read_gavel_pairs(gavel.string(), "v100");
    env->library.add_measured(g, 0.4 * cluster.gpu_memory_bytes);
    add_pairs(env->model, g);
    env->measured.push_back(std::move(g));
    env->scaling = read_gavel_scaling(gavel.string(), "v100");
  }
  env->model.refit();
  return env;
}

namespace {

bool is_dlrm_preset(const std::string& type) {
  const auto& names = dlrm_type_names();
  return std::find(names.begin(), names.end(), type) != names.end();
}

std::string draw_weighted(const std::map<std::string, double>& weights, double u) {
  double total = 0;
  for (const auto& [name, w] : weights) total += w;
  double acc = 0;
  for (const auto& [name, w] : weights) {
    acc += w / total;
    if (u < acc) return name;
  }
  return weights.rbegin()->first;
}

}  // namespace

void add_measured_pairs(SimEnvironment& env, const std::vector<std::string>& files,
                        const std::map<std::string, std::string>& aliases) {
  if (files.empty()) return;
  const MergedPairs merged = read_pairs_files(files);
  const auto is_sim_type = [&](const std::string& name) {
    return is_dlrm_preset(name) || env.library.find(name) != nullptr;
  };
  // NAME=NAME: a measured type that is no simulator type becomes one of its own, with its measured
  // profile (peak memory 0 unless the trace gives it; communication share = its all-reduce share).
  for (const auto& [name, type] : aliases) {
    if (name != type || is_sim_type(name)) continue;
    for (const auto& t : merged.pairs.types) {
      const UtilisationVector util = measured_utilisation(t);
      if (t.type != name || !(util.total() > 0) || !(t.solo_step_s > 0)) continue;
      JobProfile p;
      p.type = name;
      p.util = util;
      p.solo_step_s = t.solo_step_s;
      p.peak_memory_bytes = 0;
      p.comm_fraction = std::min(1.0, t.allreduce_share);
      env.library.add(p);
    }
  }
  env.pairs = map_measured_pairs(merged, files, is_sim_type, aliases);
  for (const auto& [type, profile] : env.pairs.profiles)
    env.model.set_utilisation(env.model.type_index(type), profile.util);
  add_pairs(env.model, env.pairs.dataset);
  env.model.refit();
  env.measured.push_back(env.pairs.dataset);  // last: its pairs override the public data's
}

std::string profile_source(const SimEnvironment& env, const std::string& type) {
  if (env.pairs.profiles.count(type)) return "measured";
  if (is_dlrm_preset(type)) return "roofline";
  for (const auto& data : env.measured)
    if (data.source != env.pairs.dataset.source && data.solo.count(type)) return data.source;
  return "trace";
}

Workload build_workload(const Trace& trace, const ClusterSpec& cluster, SimEnvironment& env,
                        const WorkloadOptions& options) {
  const WorkloadMix mix = parse_mix(options.mix);
  RECMIX_REQUIRE(options.arrival_scale > 0, ConfigError, "--arrival-scale must be positive");
  RECMIX_REQUIRE(options.repeat_trace >= 1, ConfigError, "--repeat-trace must be at least 1");
  RECMIX_REQUIRE(mix.dlrm_share >= 1.0 || mix.dlrm_share < 0 || !env.other_types.empty(), ConfigError,
                 "mix '" + mix.name + "' needs non-DLRM profiles (lucid_single_jobs.csv) in the traces directory");
  Workload w;
  // Copies are made job by job below rather than as a repeated trace, which would hold
  // another TraceJob per job for the whole run.
  const std::size_t per_copy = trace.jobs.size();
  const std::size_t all = per_copy * static_cast<std::size_t>(options.repeat_trace);
  const std::size_t n = options.max_jobs > 0 ? std::min(options.max_jobs, all) : all;
  const double span = trace.jobs.empty() ? 0 : trace.jobs.back().arrival_s - trace.jobs.front().arrival_s;
  w.jobs.reserve(n);
  // Smallest first, for downgrading a DLRM that does not fit.
  const std::vector<std::string> sizes = dlrm_preset_names();
  for (std::size_t i = 0; i < n; ++i) {
    const TraceJob& tj = trace.jobs[i % per_copy];
    const std::size_t copy = i / per_copy;
    const double arrival_s = copy == 0 ? tj.arrival_s : tj.arrival_s + static_cast<double>(copy) * span;
    const std::string at = trace.path + ":" + std::to_string(tj.line);
    std::string type;
    if (mix.dlrm_share < 0) {
      RECMIX_REQUIRE(!tj.type.empty(), ConfigError,
                     at + ": the trace has no job types; use --mix dlrm-heavy|mixed|dlrm-only|other-only");
      type = tj.type;
    } else if (static_cast<double>(random::uniform01(options.seed, 1, i)) < mix.dlrm_share) {
      type = draw_weighted(mix.dlrm_sizes, random::uniform01(options.seed, 2, i));
    } else {
      type = env.other_types[random::hash(options.seed, 3, i) % env.other_types.size()];
    }
    Job job;
    job.id = static_cast<JobId>(i);
    job.gpus = tj.gpus;
    job.arrival_s = arrival_s / options.arrival_scale;
    job.priority = tj.priority;
    job.slowdown_limit = tj.slowdown_limit;
    if (is_dlrm_preset(type)) {
      auto pos = std::find(sizes.begin(), sizes.end(), type) - sizes.begin();
      job.profile = env.library.dlrm(sizes[pos], tj.gpus);
      while (tj.memory_bytes <= 0 && job.profile.peak_memory_bytes > cluster.gpu_memory_bytes && pos > 0)
        job.profile = env.library.dlrm(sizes[--pos], tj.gpus);
      type = sizes[pos];
    } else if (tj.profile) {
      job.profile = *tj.profile;
      if (job.profile.peak_memory_bytes <= 0) job.profile.peak_memory_bytes = 8.0 * (1ull << 30);
      const int t = env.model.type_index(type);
      if (!env.model.has_utilisation(t)) env.model.set_utilisation(t, job.profile.util);
    } else if (const JobProfile* p = env.library.find(type)) {
      job.profile = *p;
    } else {
      throw ConfigError(at + ": unknown job type '" + type + "' (not a DLRM preset nor a measured profile)");
    }
    if (tj.memory_bytes > 0) job.profile.peak_memory_bytes = tj.memory_bytes;
    if (job.profile.peak_memory_bytes > cluster.gpu_memory_bytes || tj.gpus > cluster.gpu_count()) {
      ++w.unplaceable;
      continue;
    }
    if (const auto m = env.pairs.profiles.find(type); m != env.pairs.profiles.end()) {
      job.profile.util = m->second.util;
      job.profile.solo_step_s = m->second.solo_step_s;
    }
    job.profile.type = type;
    job.type = env.model.type_index(type);
    if (job.gpus > 1) {
      MultiGpuUse& use = w.multi_gpu[type];
      ++use.jobs;
      // A type whose profile is the throughputs file's own (not a measured --pairs profile nor
      // one the trace carries) runs at its k-GPU throughput, spreads at its measured slowdown.
      const bool scaled_type = tj.duration_s < 0 && !tj.profile && !env.pairs.profiles.count(type) &&
                               !is_dlrm_preset(type) && env.scaling.has(type);
      if (scaled_type) {
        const ScaledThroughput t = throughput_on(env.scaling, type, job.gpus);
        job.profile.solo_step_s = 1.0 / t.steps_per_s;
        ++(t.measured ? use.measured : use.scaled);
        if (t.measured) job.profile.spread_slowdown = measured_spread_slowdown(env.scaling, type, job.gpus);
      }
      if (job.profile.spread_slowdown > 0) ++use.spread_measured;
    }
    if (tj.duration_s >= 0) {
      job.work_s = std::max(1.0, tj.duration_s);
    } else {
      job.work_s = std::max(1.0, tj.steps * job.profile.solo_step_s);
    }
    job.name = type + "#" + std::to_string(i);
    ++w.types[type];
    w.jobs.push_back(std::move(job));
  }
  RECMIX_REQUIRE(!w.jobs.empty(), ConfigError, trace.path + ": no job fits a GPU of this cluster");
  env.truth = std::make_unique<SlowdownTruth>(env.model, options.truth_noise, options.seed);
  for (const auto& data : env.measured) env.truth->add_measured(data, env.model);
  return w;
}

}  // namespace recmix::sched
