// recmix sim: runs the scheduler's policies over a cluster trace in the discrete-event
// simulator and prints their metrics side by side (table, JSON, utilisation timeline CSV).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "core/error.hpp"
#include "core/half.hpp"
#include "runtime/cli/commands.hpp"
#include "sched/machine_model.hpp"
#include "sched/policy.hpp"
#include "sched/sim/cluster_config.hpp"
#include "sched/sim/replay.hpp"
#include "sched/sim/report.hpp"
#include "sched/sim/simulator.hpp"
#include "sched/sim/trace_reader.hpp"
#include "sched/sim/workload.hpp"

namespace recmix::cli {
namespace {

struct SimArgs {
  std::string trace, trace_format = "auto", traces_dir, cluster_file, machine = "a100-dgx";
  int nodes = 0, gpus = 0, gpus_per_node = 0, max_jobs_per_gpu = 0;
  double gpu_mem_gib = 0, host_mem_gib = 0, intra_gbps = 0, inter_gbps = 0;
  int host_cores = 0;
  std::string policy = "all", mix = "dlrm-heavy", json, timeline_csv, jobs_csv;
  std::uint64_t seed = 1;
  double arrival_scale = 1.0;
  int repeat_trace = 1;
  std::size_t max_jobs = 0;
  sched::PolicyOptions policy_options;
  double restart_overhead = 60;
  bool quiet = false;
  std::string replay;
  std::string table_storage = "fp32";  // the DLRM presets' tables
  std::string dense = "fp32";          // the DLRM presets' GEMM operands
  std::vector<std::string> pairs, pairs_types;  // measured pair files; NAME=TYPE aliases
};

// recmix sim --replay RUN_DIR: the live run's decisions against the simulator's on the same jobs.
void run_replay(const std::string& run_dir) {
  const auto run = sched::read_run_events((std::filesystem::path(run_dir) / "events.jsonl").string());
  const auto result = sched::replay_run(run);
  std::printf("replay of %s: %zu jobs on %d ranks, policy %s\n%s", run_dir.c_str(), run.jobs.size(),
              run.cluster.gpu_count(), run.policy.c_str(), sched::describe(run, result).c_str());
  std::fflush(stdout);
  if (!result.same)
    throw Error(fmt::format("the simulator decided otherwise than the live run from decision #{}", result.first_difference));
}

std::string default_traces_dir(const std::string& trace) {
  namespace fs = std::filesystem;
  const fs::path beside = fs::path(trace).parent_path();
  if (fs::exists(beside / "lucid_single_jobs.csv")) return beside.string();
  if (const char* shared = std::getenv("RECMIX_SHARED_DIR")) return (fs::path(shared) / "traces").string();
  return beside.string();
}

// --trace takes a path, or the name of one of the public traces the project is calibrated on
// (docs/scheduler.md), looked up in --traces-dir, else $RECMIX_SHARED_DIR/traces.
std::string resolve_trace(const std::string& trace, const std::string& traces_dir) {
  namespace fs = std::filesystem;
  static const std::vector<std::pair<std::string, std::string>> kNames = {
      {"philly", "philly_jobs.csv"},         {"gavel", "gavel_msr_seed0.trace"}, {"muri", "muri_trace1.csv"},
      {"muri1", "muri_trace1.csv"},          {"muri2", "muri_trace2.csv"},       {"alibaba", "alibaba_dlrm_2025.csv"}};
  if (fs::exists(trace)) return trace;
  for (const auto& [name, file] : kNames) {
    if (trace != name) continue;
    std::string dir = traces_dir;
    if (dir.empty())
      if (const char* shared = std::getenv("RECMIX_SHARED_DIR")) dir = (fs::path(shared) / "traces").string();
    if (dir.empty())
      throw ConfigError(fmt::format("--trace {} names {}, a public trace recmix does not ship: fetch it with "
                                    "scripts/fetch-traces.sh DIR and give --traces-dir DIR, or give the file's path",
                                    trace, file));
    const fs::path path = fs::path(dir) / file;
    if (!fs::exists(path))
      throw IoError(fmt::format("--trace {}: {} is not in '{}' (scripts/fetch-traces.sh '{}' fetches it)", trace, file,
                                dir, dir));
    return path.string();
  }
  return trace;  // read_trace names the missing file
}

sched::ClusterSpec make_cluster(const SimArgs& a) {
  sched::ClusterSpec spec = sched::cluster_spec_for(sched::machine_model(a.machine), 1);
  if (!a.cluster_file.empty()) spec = sched::load_cluster_spec(a.cluster_file, spec);
  if (a.gpus_per_node > 0) spec.gpus_per_node = a.gpus_per_node;
  if (a.nodes > 0) spec.nodes = a.nodes;
  if (a.gpus > 0) {
    RECMIX_REQUIRE(a.nodes == 0 || a.nodes * spec.gpus_per_node == a.gpus, ConfigError,
                   "--gpus and --nodes disagree with --gpus-per-node");
    RECMIX_REQUIRE(a.gpus % spec.gpus_per_node == 0, ConfigError,
                   fmt::format("--gpus {} is not a multiple of {} GPUs per node", a.gpus, spec.gpus_per_node));
    spec.nodes = a.gpus / spec.gpus_per_node;
  }
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (a.gpu_mem_gib > 0) spec.gpu_memory_bytes = a.gpu_mem_gib * kGiB;
  if (a.host_mem_gib > 0) spec.host_memory_bytes = a.host_mem_gib * kGiB;
  if (a.host_cores > 0) spec.host_cores = a.host_cores;
  if (a.intra_gbps > 0) spec.intra_node_bandwidth = a.intra_gbps * 1e9;
  if (a.inter_gbps > 0) spec.inter_node_bandwidth = a.inter_gbps * 1e9;
  if (a.max_jobs_per_gpu > 0) spec.max_jobs_per_gpu = a.max_jobs_per_gpu;
  sched::validate(spec);
  return spec;
}

std::vector<std::string> policies_to_run(const std::string& arg) {
  if (arg == "all") return sched::policy_names();
  std::vector<std::string> out;
  std::stringstream ss(arg);
  for (std::string name; std::getline(ss, name, ',');) {
    sched::make_policy(name);  // validates the name
    out.push_back(name);
  }
  RECMIX_REQUIRE(!out.empty(), ConfigError, "--policy: no policy named");
  return out;
}

void run_sim(const SimArgs& a) {
  const sched::ClusterSpec cluster = make_cluster(a);
  const auto names = policies_to_run(a.policy);
  const std::string trace_path = resolve_trace(a.trace, a.traces_dir);
  const sched::Trace trace = sched::read_trace(trace_path, sched::parse_trace_format(a.trace_format));
  auto env = sched::make_environment(cluster, a.traces_dir.empty() ? default_traces_dir(trace_path) : a.traces_dir,
                                     half::storage_bytes(half::parse_storage(a.table_storage)), a.dense == "bf16");
  RECMIX_REQUIRE(a.pairs_types.empty() || !a.pairs.empty(), ConfigError,
                 "--pairs-type maps the type names of measured pair files: give them with --pairs");
  sched::add_measured_pairs(*env, a.pairs, sched::parse_type_aliases(a.pairs_types));
  for (const auto& w : env->pairs.warnings) std::fprintf(stderr, "recmix sim: warning: %s\n", w.c_str());
  sched::WorkloadOptions wo;
  wo.mix = a.mix;
  wo.seed = a.seed;
  wo.arrival_scale = a.arrival_scale;
  wo.repeat_trace = a.repeat_trace;
  wo.max_jobs = a.max_jobs;
  const sched::Workload workload = sched::build_workload(trace, cluster, *env, wo);
  std::fprintf(stderr, "recmix sim: %zu jobs from %s (%s), %zu skipped, %zu too large for this cluster; %d nodes x %d GPUs (%s)\n",
               workload.jobs.size(), trace_path.c_str(), std::string(sched::trace_format_name(trace.format)).c_str(),
               trace.skipped, workload.unplaceable, cluster.nodes, cluster.gpus_per_node, cluster.machine.c_str());
  if (!env->pairs.empty()) {
    std::string mapped;
    for (const auto& [name, type] : env->pairs.mapping)
      mapped += fmt::format("{}{}{}{}", mapped.empty() ? "" : ", ", name, name == type ? "" : " as " + type,
                            env->pairs.profiles.count(type) ? " (measured profile)" : "");
    std::fprintf(stderr, "recmix sim: %zu measured pairs of %zu types from %zu file(s): %s\n",
                 env->pairs.dataset.pairs.size(), env->pairs.mapping.size(), a.pairs.size(),
                 mapped.empty() ? "no type of the simulator" : mapped.c_str());
  }
  std::vector<sched::SimResult> results;
  for (const auto& name : names) {
    auto policy = sched::make_policy(name, a.policy_options);
    sched::SimOptions so;
    so.restart_overhead_s = a.restart_overhead;
    auto last = std::chrono::steady_clock::now();
    bool line_open = false;  // a progress line without its newline yet
    if (!a.quiet) {
      so.progress = [&, name](double t, std::size_t done, std::size_t total) {
        const auto now = std::chrono::steady_clock::now();
        if (now - last < std::chrono::seconds(1)) return;
        last = now;
        std::fprintf(stderr, "\r  %s: simulated %.1f h, %zu / %zu jobs finished   ", name.c_str(), t / 3600.0, done, total);
        std::fflush(stderr);
        line_open = true;
      };
    }
    try {
      results.push_back(sched::simulate(cluster, workload.jobs, *policy, *env->truth, env->model, so));
    } catch (...) {
      if (line_open) std::fputc('\n', stderr);  // the error goes on a line of its own
      throw;
    }
    if (!a.quiet) std::fprintf(stderr, "\r  %s: done in %.1f s%40s\n", name.c_str(), results.back().wall_s, "");
  }
  // With --json -, stdout carries the JSON alone (the table goes to stderr).
  std::ostream& text = a.json == "-" ? std::cerr : std::cout;
  text << sched::format_table(results);
  const auto types = sched::job_type_truth(*env, workload);
  text << "\n" << sched::format_ground_truth(types, results);
  std::vector<sched::HeldOutRow> held_out;
  if (!env->pairs.empty()) {
    held_out = sched::held_out_rows(env->measured, 0.2, 42);
    text << "\ninterference model, held-out error (unordered pairs 80/20, seed 42):\n" << sched::format_held_out(held_out);
  }
  if (!a.json.empty()) {
    nlohmann::json j;
    // Keys come out sorted: "format" stays within the first few hundred bytes however long the
    // per-type tables grow, so that readers (recmix report) can tell the file by its head.
    j["format"] = "recmix-sim";
    j["trace"] = trace_path;
    j["mix"] = a.mix;
    j["arrival_scale"] = a.arrival_scale;
    j["cluster"] = {{"nodes", cluster.nodes}, {"gpus_per_node", cluster.gpus_per_node},
                    {"gpu_memory_bytes", cluster.gpu_memory_bytes}, {"machine", cluster.machine},
                    {"max_jobs_per_gpu", cluster.max_jobs_per_gpu}};
    j["unplaceable_jobs"] = workload.unplaceable;
    for (const auto& r : results) j["policies"].push_back(sched::to_json(r));
    j["job_types"] = sched::ground_truth_json(types, results);
    j["pairs_files"] = a.pairs;
    j["pairs_mapping"] = env->pairs.mapping;
    j["pairs_warnings"] = env->pairs.warnings;
    j["held_out"] = nlohmann::json::array();
    for (const auto& row : held_out) j["held_out"].push_back(sched::to_json(row));
    if (a.json == "-") {
      std::cout << j.dump(2) << "\n";
    } else {
      std::ofstream out(a.json);
      RECMIX_REQUIRE(out, IoError, "cannot write " + a.json);
      out << j.dump(2) << "\n";
    }
  }
  if (!a.timeline_csv.empty()) {
    std::ofstream out(a.timeline_csv);
    RECMIX_REQUIRE(out, IoError, "cannot write " + a.timeline_csv);
    sched::write_timeline_csv(out, results, cluster.gpu_count());
  }
  if (!a.jobs_csv.empty()) {
    // One line per policy and job: the job's index in the trace (by arrival), type, GPUs and
    // its simulated times; slowdown = JCT / solo run time.
    std::ofstream out(a.jobs_csv);
    RECMIX_REQUIRE(out, IoError, "cannot write " + a.jobs_csv);
    out << "policy,job,type,gpus,arrival_s,first_start_s,finish_s,work_s,queued_s,jct_s,slowdown,colocated,preemptions\n";
    std::map<sched::JobId, const sched::Job*> by_id;
    for (const auto& j : workload.jobs) by_id[j.id] = &j;
    for (const auto& r : results)
      for (const auto& o : r.outcomes) {
        const double jct = o.finish_s >= 0 ? o.finish_s - o.arrival_s : -1;
        out << fmt::format("{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{}\n", r.policy, o.id,
                           by_id.count(o.id) ? by_id[o.id]->profile.type : "", o.gpus, o.arrival_s, o.first_start_s,
                           o.finish_s, o.work_s, o.queued_s, jct, jct >= 0 ? jct / o.work_s : -1,
                           o.colocated ? 1 : 0, o.preemptions);
      }
  }
}

}  // namespace

void add_sim_command(CLI::App& app) {
  auto args = std::make_shared<SimArgs>();
  auto* sim = app.add_subcommand("sim", "Simulate scheduling policies on a cluster trace");
  auto* trace = sim->add_option("--trace", args->trace,
                                "Trace file (philly, gavel, muri, alibaba or recmix CSV), or the name of a public "
                                "trace: philly, gavel, muri1, muri2, alibaba (found in --traces-dir)");
  sim->add_option("--replay", args->replay,
                  "Replay a recmix run (its RUN_DIR): the same jobs, measured run times and policy; prints the live "
                  "and simulated decisions and fails when they differ")
      ->excludes(trace);
  sim->add_option("--trace-format", args->trace_format, "auto|philly|gavel|muri|alibaba|recmix");
  sim->add_option("--traces-dir", args->traces_dir, "Directory with lucid_*.csv and gavel_throughputs.json");
  sim->add_option("--cluster", args->cluster_file, "TOML file with a [cluster] table");
  sim->add_option("--machine", args->machine, "Machine model: cpu-zen3-2vcpu, v100-dgx1, a100-dgx, h100-dgx, h200-dgx");
  sim->add_option("--nodes", args->nodes, "Nodes");
  sim->add_option("--gpus", args->gpus, "Total GPUs (a multiple of GPUs per node)");
  sim->add_option("--gpus-per-node", args->gpus_per_node, "GPUs per node");
  sim->add_option("--gpu-mem-gib", args->gpu_mem_gib, "GPU memory (GiB)");
  sim->add_option("--host-mem-gib", args->host_mem_gib, "Host memory per node (GiB)");
  sim->add_option("--host-cores", args->host_cores, "Host cores per node");
  sim->add_option("--intra-gbps", args->intra_gbps, "Intra-node bandwidth per GPU (GB/s)");
  sim->add_option("--inter-gbps", args->inter_gbps, "Inter-node bandwidth per GPU (GB/s)");
  sim->add_option("--max-jobs-per-gpu", args->max_jobs_per_gpu, "Co-location degree allowed");
  sim->add_option("--policy", args->policy, "Policy name, comma list, or 'all'");
  sim->add_option("--mix", args->mix, "dlrm-heavy|mixed|dlrm-only|other-only|trace");
  sim->add_option("--table-storage", args->table_storage,
                  "How the DLRM presets store their embedding tables ([precision] embedding): fp32, fp16 or bf16 "
                  "(2 bytes a weight: smaller peaks, more jobs packed)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  sim->add_option("--dense", args->dense,
                  "The DLRM presets' GEMM operands ([precision] dense): fp32 or bf16 (at the machine's bf16 rate "
                  "where it has one; the operands' bf16 copies count in memory)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  sim->add_option("--seed", args->seed, "Seed for the workload mapping and ground truth");
  sim->add_option("--arrival-scale", args->arrival_scale, "Compress arrivals by this factor (raises load)");
  sim->add_option("--repeat-trace", args->repeat_trace,
                  "Play the trace N times in a row, each copy shifted by the trace's span (N x the jobs)");
  sim->add_option("--max-jobs", args->max_jobs, "Use only the first N jobs of the trace");
  sim->add_option("--window", args->policy_options.window, "Queued jobs a round looks at");
  sim->add_option("--slowdown-limit", args->policy_options.slowdown_limit, "Interference-aware: default slowdown limit");
  sim->add_option("--search-budget", args->policy_options.search_budget, "Job shapes a round may fail to place before it stops");
  sim->add_option("--min-pair-gain", args->policy_options.min_pair_gain, "Complementary: least summed rate of a pair");
  sim->add_option("--pack-gain", args->policy_options.pack_gain, "Complementary: summed rate that packs before free GPUs");
  sim->add_option("--pack-slowdown", args->policy_options.pack_slowdown, "Interference-aware: slowdown that packs before free GPUs");
  sim->add_option("--pack-free-fraction", args->policy_options.pack_free_fraction, "Pack only below this share of free GPUs");
  sim->add_option("--dispatch-interval", args->policy_options.dispatch_interval_s, "Complementary: seconds between rounds");
  sim->add_option("--restart-cost", args->restart_overhead, "Seconds of work a preempted job redoes");
  sim->add_option("--pairs", args->pairs,
                  "Measured pair file of recmix pairs (repeatable): the ground-truth slowdowns and profiles of the "
                  "job types it covers, and more pairs for the interference model")
      ->check(CLI::ExistingFile);
  sim->add_option("--pairs-type", args->pairs_types,
                  "NAME=TYPE: the measured type NAME of the pair files is the simulator's job type TYPE (repeatable); "
                  "NAME=NAME: a measured type that is no simulator type is one of its own, with its measured profile");
  sim->add_option("--json", args->json, "Write metrics as JSON to a file ('-' for stdout)");
  sim->add_option("--timeline-csv", args->timeline_csv, "Write the GPU utilisation timeline as CSV");
  sim->add_option("--jobs-csv", args->jobs_csv,
                  "Write each policy's jobs as CSV: arrival, first start, finish, JCT, slowdown (JCT / solo run time)");
  sim->add_flag("--quiet", args->quiet, "No progress line");
  sim->callback([args] {
    if (!args->replay.empty()) return run_replay(args->replay);
    if (args->trace.empty()) throw ConfigError("sim: --trace (a cluster trace) or --replay (a recmix run) is required");
    args->policy_options.restart_cost_s = args->restart_overhead;
    run_sim(*args);
  });
}

}  // namespace recmix::cli
