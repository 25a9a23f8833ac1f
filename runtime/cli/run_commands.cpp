// recmix run / recmix submit / recmix close / recmix status: the co-location runtime's command line.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "device/backend.hpp"
#include "device/gpu_usage.hpp"
#include "device/memory_pool.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/run_directory.hpp"
#include "runtime/cli/run_state.hpp"
#include "runtime/cli/stop_signals.hpp"
#include "runtime/train/demo.hpp"
#include "runtime/cli/mpi_session.hpp"
#include "runtime/run/control_plane.hpp"
#include "runtime/run/device_memory.hpp"
#include "runtime/run/executor.hpp"
#include "runtime/run/job_file.hpp"
#include "runtime/run/network_probe.hpp"
#include "runtime/run/scheduler_service.hpp"

namespace recmix::cli {
namespace fs = std::filesystem;
namespace {

struct RunArgs {
  std::string jobs_file;
  std::string resume_dir;
  bool demo = false;
  std::string run_dir;
  std::string policy;
  std::string device;
  bool quiet = false;
  bool stay_open = false;
  bool force = false;
  int cores_per_rank = 0;
  int ranks_per_node = 0;
};

// The cores a rank may use: the CPUs it is bound to when the launcher bound it (mpirun --bind,
// Slurm's task binding), else this host's cores shared evenly by the ranks on it.
int cores_per_rank(int ranks_on_host) {
  const long online = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int bound = CPU_COUNT(&set);
    if (bound > 0 && bound < online) return bound;
  }
  return static_cast<int>(std::max(1L, online / std::max(1, ranks_on_host)));
}

// The summary's first line says how the run ended: finished, interrupted (jobs left for --resume)
// or failed (no job finished; "nothing ran" when every job was rejected).
std::string summary_headline(const nlohmann::json& s) {
  const std::string state = s.value("state", std::string("finished"));
  const double makespan = s["makespan_s"].get<double>();
  if (state == "stopped") return fmt::format("run interrupted after {:.1f} s", makespan);
  if (state != "failed") return fmt::format("run finished in {:.1f} s", makespan);
  std::size_t rejected = 0;
  for (const auto& j : s["jobs"]) rejected += j["state"] == "rejected";
  if (rejected == s["jobs"].size()) return fmt::format("nothing ran: every job ({}) was rejected", rejected);
  return fmt::format("run failed after {:.1f} s: no job finished ({} failed, {} rejected)", makespan,
                     s["jobs"].size() - rejected, rejected);
}

void print_summary(const nlohmann::json& s) {
  std::printf("\n%s; policy %s on %d rank(s): %.0f samples/s in all\n", summary_headline(s).c_str(),
              s["policy"].get<std::string>().c_str(), s["ranks"].get<int>(), s["samples_per_s"].get<double>());
  std::printf("%-18s %-9s %-8s %8s %8s %8s %10s %10s %10s %10s  %s\n", "job", "state", "ranks", "steps", "queued",
              "JCT", "alone/s", "shared/s", "estimate", "peak", "partners");
  for (const auto& j : s["jobs"]) {
    const std::string ranks = fmt::format("{}", fmt::join(j["ranks"].get<std::vector<int>>(), ","));
    const std::string partners = fmt::format("{}", fmt::join(j["partners"].get<std::vector<std::string>>(), ", "));
    const double queued = j["queued_s"].is_null() ? -1 : j["queued_s"].get<double>();
    const double jct = j["jct_s"].get<double>();
    const std::string queued_text = queued < 0 ? "-" : fmt::format("{:.1f}s", queued);
    const std::string jct_text = jct < 0 ? "-" : fmt::format("{:.1f}s", jct);
    std::printf("%-18s %-9s %-8s %8lld %8s %8s %10.0f %10.0f %10s %10s  %s\n",
                j["name"].get<std::string>().c_str(), j["state"].get<std::string>().c_str(),
                ranks.empty() ? "-" : ranks.c_str(), static_cast<long long>(j["steps"].get<std::int64_t>()),
                queued_text.c_str(), jct_text.c_str(), j["samples_per_s_alone"].get<double>(),
                j["samples_per_s_colocated"].get<double>(),
                device::format_bytes(static_cast<std::size_t>(j["estimate_bytes"].get<double>())).c_str(),
                device::format_bytes(j["measured_peak_bytes"].get<std::size_t>()).c_str(),
                partners.empty() ? "-" : partners.c_str());
    if (j.contains("error")) std::printf("%-18s   error: %s\n", "", j["error"].get<std::string>().c_str());
  }
  if (s.contains("none_colocated"))
    std::printf("no two jobs shared a rank: %s\n", s["none_colocated"].get<std::string>().c_str());
  std::printf("%-6s %10s %12s\n", "rank", "busy", "peak memory");
  for (const auto& r : s["rank_usage"])
    std::printf("%-6d %9.0f%% %12s\n", r["rank"].get<int>(), 100 * r["busy_share"].get<double>(),
                device::format_bytes(r["peak_bytes"].get<std::size_t>()).c_str());
  std::fflush(stdout);
}

// For tests of moving apart (RunOptions::injected_slowdown):
// RECMIX_SLOWDOWN_INJECTION="<job>:<factor>[,<job>:<factor>...]".
std::map<std::string, double> injected_slowdown() {
  std::map<std::string, double> out;
  const char* env = std::getenv("RECMIX_SLOWDOWN_INJECTION");
  if (env == nullptr || *env == '\0') return out;
  std::stringstream items(env);
  std::string item;
  while (std::getline(items, item, ',')) {
    const auto colon = item.rfind(':');
    char* end = nullptr;
    const double factor = colon == std::string::npos ? 0.0 : std::strtod(item.c_str() + colon + 1, &end);
    RECMIX_REQUIRE(colon != std::string::npos && colon > 0 && end != nullptr && *end == '\0' && factor >= 1.0,
                   ConfigError,
                   fmt::format("RECMIX_SLOWDOWN_INJECTION: '{}' is not <job>:<factor> with a factor of 1 or more", item));
    out[item.substr(0, colon)] = factor;
  }
  return out;
}

// "" when the run in run_dir has jobs left to run; otherwise the line that says it ended (its
// summary.json: not interrupted, every job finished, failed or rejected).
std::string ended_run(const std::string& run_dir) {
  const fs::path path = fs::path(run_dir) / "summary.json";
  std::ifstream in(path);
  if (!in) return "";
  nlohmann::json s;
  try {
    s = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return "";  // half a summary: the run did not end cleanly, resuming it is the way on
  }
  if (s.value("interrupted", false) || s.value("stuck", false) || !s.contains("jobs")) return "";
  std::map<std::string, int> states;
  for (const auto& j : s["jobs"]) {
    const std::string state = j.value("state", std::string());
    if (state != "finished" && state != "failed" && state != "rejected") return "";
    ++states[state];
  }
  std::string counts;
  for (const auto& [state, n] : states) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, state);
  return fmt::format("the run in {} has ended ({}; {}): nothing to resume, every file left as it was", run_dir,
                     s.value("state", std::string("finished")), counts.empty() ? "no jobs" : counts);
}

// The run directory and whether the run in it continues: --resume DIR, --resume auto (continues
// the run in --run-dir when there is one), or a new run, which needs a directory without a run
// or --force. Empty when there is nothing to do (the run ended: said on stdout) or, on ranks
// other than 0, when rank 0 throws the reason.
std::optional<std::pair<std::string, bool>> choose_run_directory(const RunArgs& a, comm::Communicator& world) {
  std::string run_dir = a.run_dir;
  // --resume auto: the run in --run-dir (or the default one) continues when it exists, else a new
  // run starts there; the one command every start of a requeued batch job can give.
  bool resume = !a.resume_dir.empty();
  if (resume && a.resume_dir != "auto") {
    if (!run_dir.empty() && run_dir != a.resume_dir) throw ConfigError("run: --resume names the run directory; drop --run-dir");
    if (!fs::exists(fs::path(a.resume_dir) / "events.jsonl"))
      throw ConfigError(fmt::format("--resume: '{}' is not the directory of a recmix run (no events.jsonl)", a.resume_dir));
    run_dir = a.resume_dir;
  }
  if (run_dir.empty()) run_dir = a.demo ? "runs/demo-run" : "runs/" + fs::path(a.jobs_file).stem().string();
  if (a.resume_dir == "auto") resume = fs::exists(fs::path(run_dir) / "events.jsonl");
  if (resume && a.force) throw ConfigError("run: --resume continues the run in its directory, --force starts another; give one");
  // A resume with nothing to do says so and leaves every file as it was.
  const std::string ended = from_rank0(world, resume && world.rank() == 0 ? ended_run(run_dir) : "");
  if (!ended.empty()) {
    if (world.rank() == 0) std::printf("%s\n", ended.c_str());
    return std::nullopt;
  }
  if (a.resume_dir == "auto" && world.rank() == 0)
    std::printf("%s\n", resume ? fmt::format("--resume auto: continuing the run in {}", run_dir).c_str()
                               : fmt::format("--resume auto: no run in {} yet, starting one", run_dir).c_str());
  const std::string taken =
      claim_run_directory(world, run_dir, {"events.jsonl", "status.json", "summary.json"}, resume, a.force, "run");
  if (!taken.empty()) {  // every rank ends with status 1; rank 0 prints the line
    runtime::error_known_to_every_rank();
    throw ConfigError(taken);
  }
  return std::pair{run_dir, resume};
}

// The network between the nodes, when there are several and the jobs file (read on rank 0) has
// no [cluster]: measured on every rank, said on rank 0's stderr.
runtime::run::ProbedNetwork probe_network_if_unset(comm::Communicator& world, const runtime::run::NodeLayout& nodes,
                                                   const runtime::JobFile& jobs) {
  if (nodes.nodes() < 2) return {};
  const bool unset = world.rank() == 0 && jobs.network.intra_node_gbps <= 0;
  if (from_rank0(world, unset ? "probe" : "") != "probe") return {};
  const runtime::run::ProbedNetwork p = runtime::run::probe_network(world, nodes);
  auto figure = [](double gbps, std::size_t bytes) {
    return gbps > 0 ? fmt::format("{:.2f} GB/s ({:g} KiB a peer)", gbps, bytes / 1024.0) : std::string("not measured");
  };
  if (world.rank() == 0)
    std::fprintf(stderr, "recmix run: no [cluster] in the jobs file: network probed in %.2f s, a rank's all-to-all "
                 "within a node %s, across nodes %s\n",
                 p.seconds, figure(p.intra_node_gbps, p.intra_bytes_per_peer).c_str(),
                 figure(p.inter_node_gbps, p.inter_bytes_per_peer).c_str());
  return p;
}

// When the run's jobs use GPUs (--device cuda, or a job of the jobs file on "cuda"), every rank
// reads its GPU's memory, and rank 0 says what the scheduler plans each rank with. Returns the
// smallest GPU's bytes, or 0 when there is none to read or a rank could not read its GPU.
double device_memory_if_gpus(comm::Communicator& world, const runtime::RankPlaces& places,
                             const runtime::JobFile& jobs, const std::string& device_flag) {
  bool gpus = false;
  if (world.rank() == 0)
    gpus = !device_flag.empty() ? device_flag == "cuda"
                                : std::any_of(jobs.jobs.begin(), jobs.jobs.end(), [](const runtime::RunJob& j) {
                                    return j.spec.device.kind == device::BackendKind::cuda;
                                  });
  if (from_rank0(world, gpus ? "gpus" : "") != "gpus") return 0;
  // The GPU a rank takes is its place among its host's ranks.
  const auto me = static_cast<std::size_t>(world.rank());
  const int local = static_cast<int>(std::count(places.node_key.begin(), places.node_key.begin() + static_cast<long>(me),
                                                places.node_key[me]));
  const runtime::run::DeviceMemory m = runtime::run::gather_device_memory(world, runtime::run::read_device_memory(local));
  if (world.rank() != 0) return m.smallest_bytes;
  auto gib = [](double bytes) { return fmt::format("{:.4g} GiB", bytes / double(1ull << 30)); };
  const std::uint64_t given = jobs.scheduler.memory_capacity;
  const runtime::run::RankCapacity c = runtime::run::rank_capacity(given, m.smallest_bytes);
  const std::string plan = given > 0                              ? "[scheduler] memory_capacity, " + gib(c.bytes)
                           : std::string(c.origin) == "default" ? gib(c.bytes) + " (set [scheduler] memory_capacity)"
                                                                : gib(c.bytes);
  if (m.unread_ranks > 0)
    std::fprintf(stderr, "recmix run: %d of %d rank(s) could not read their GPU's memory (the first: rank %d; rank 0: "
                 "%s); the scheduler plans each rank with %s\n",
                 m.unread_ranks, world.size(), m.first_unread_rank, device::nvml_status().c_str(), plan.c_str());
  else if (m.smallest_bytes < m.largest_bytes)
    std::fprintf(stderr, "recmix run: the ranks' GPUs differ: %s (rank %d) to %s (rank %d); the scheduler plans each "
                 "rank with %s\n",
                 gib(m.smallest_bytes).c_str(), m.smallest_rank, gib(m.largest_bytes).c_str(), m.largest_rank,
                 plan.c_str());
  else
    std::fprintf(stderr, "recmix run: each rank's GPU has %s; the scheduler plans each rank with %s\n",
                 gib(m.smallest_bytes).c_str(), plan.c_str());
  if (given > 0 && m.smallest_bytes > 0 && static_cast<double>(given) > m.smallest_bytes)
    std::fprintf(stderr, "recmix run: warning: [scheduler] memory_capacity (%s) is more than rank %d's GPU has (%s): "
                 "a job the scheduler places may not fit there\n",
                 gib(static_cast<double>(given)).c_str(), m.smallest_rank, gib(m.smallest_bytes).c_str());
  return m.smallest_bytes;
}

void run_run(const RunArgs& a) {
  runtime::ensure_mpi();
  auto slowdowns = injected_slowdown();  // a malformed value fails before any work
  auto world = comm::make_mpi_world_communicator();
  if (a.demo && !a.jobs_file.empty()) throw ConfigError("run: give either a jobs file or --demo, not both");
  if (!a.demo && a.jobs_file.empty()) throw ConfigError("run: a jobs file (TOML) is required, or --demo for the built-in example");
  const auto place = choose_run_directory(a, *world);
  if (!place) return;  // nothing to do, or rank 0 reports why not
  const auto& [run_dir, resume] = *place;
  if (a.demo) runtime::prepare_demo_data(run_dir, *world);

  // Rank 0 reads the jobs file; its verdict goes to every rank so a bad file ends the run at once.
  runtime::JobFile jobs;
  std::string error;
  if (world->rank() == 0) {
    try {
      jobs = a.demo ? runtime::parse_job_file(runtime::demo_jobs_toml(), "<built-in demo run>", run_dir)
                    : runtime::load_job_file(a.jobs_file);
      if (a.demo)
        for (auto& j : jobs.jobs) j.ranks = std::min(j.ranks, world->size());
      if (!a.policy.empty()) {
        runtime::sched_policy_name(a.policy);
        jobs.scheduler.policy = a.policy;
      }
    } catch (const Error& e) {
      error = e.what();
    }
  }
  error = from_rank0(*world, error);
  if (!error.empty()) {  // every rank ends with status 1 in order; rank 0 prints the line
    runtime::error_known_to_every_rank();
    throw ConfigError(error);
  }

  // Several jobs' backends in one process: OpenBLAS's process-wide count stays at one thread,
  // each job's threads come from OpenMP and its dense replicas.
  device::pin_process_blas_threads(1);
  const std::atomic<bool>& terminate = install_stop_signals();  // checkpoint every running job and end
  // Where every rank runs (its host's ranks share its cores), and the live cluster's nodes: the
  // world's shape, or --ranks-per-node's emulated one. Every rank computes the same layout, so a
  // launch it cannot take is the same error on every rank.
  const runtime::RankPlaces places = runtime::rank_places();
  const int on_my_host = static_cast<int>(std::count(places.node_key.begin(), places.node_key.end(),
                                                     places.node_key[static_cast<std::size_t>(world->rank())]));
  const int cores = cores_per_rank(on_my_host);
  runtime::run::NodeLayout nodes;
  {
    try {
      nodes = runtime::run::node_layout(places.node_key, places.host, a.ranks_per_node);
    } catch (const ConfigError&) {
      runtime::error_known_to_every_rank();
      throw;
    }
  }
  const runtime::run::ProbedNetwork probed = probe_network_if_unset(*world, nodes, jobs);
  const double device_memory = device_memory_if_gpus(*world, places, jobs, a.device);
  runtime::run::ControlPlane plane;
  if (plane.rank() != 0) {
    runtime::run::Executor(plane, &terminate).run();
    return;
  }
  runtime::run::RunOptions options;
  options.run_dir = run_dir;
  options.jobs = std::move(jobs);
  options.cores_per_rank = a.cores_per_rank > 0                         ? a.cores_per_rank
                           : options.jobs.scheduler.cores_per_rank > 0 ? options.jobs.scheduler.cores_per_rank
                                                                       : cores;
  options.quiet = a.quiet;
  options.nodes = std::move(nodes);
  options.probed_network = probed;
  options.device_memory_bytes = device_memory;
  options.device_kind = a.device;
  options.terminate = &terminate;
  options.resume = resume;
  options.stay_open = a.stay_open;
  options.injected_slowdown = std::move(slowdowns);
  std::fprintf(stderr, "recmix run: %zu job(s) on %d rank(s) of %d core(s), policy %s, run directory %s\n",
               options.jobs.jobs.size(), plane.size(), options.cores_per_rank, options.jobs.scheduler.policy.c_str(),
               run_dir.c_str());
  std::thread executor([&plane, &terminate] {
    try {
      runtime::run::Executor(plane, &terminate).run();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: executor: %s\n", runtime::error_prefix().c_str(), e.what());
      runtime::abort_other_ranks_on_failure();
      std::_Exit(1);
    }
  });
  nlohmann::json summary;
  try {
    runtime::run::SchedulerService service(plane, std::move(options));
    summary = service.run();
  } catch (const std::exception& e) {
    // The executors cannot be told reliably any more: end the run on every rank.
    std::fprintf(stderr, "%s: scheduler: %s\n", runtime::error_prefix().c_str(), e.what());
    std::fflush(stderr);
    runtime::abort_other_ranks_on_failure();
    std::_Exit(1);
  }
  if (summary.value("stuck", false)) {
    // A stuck job's threads wait in a collective for ever: end every process of the run.
    print_summary(summary);
    std::printf("a job's ranks are stuck: every other job stopped with a checkpoint; continue with\n  %s run %s "
                "--resume %s\n",
                relaunch_prefix(plane.size()).c_str(), a.demo ? "--demo" : a.jobs_file.c_str(), run_dir.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    runtime::abort_other_ranks_on_failure();
    std::_Exit(3);
  }
  executor.join();
  print_summary(summary);
  std::printf("events: %s/events.jsonl  summary: %s/summary.json\n", run_dir.c_str(), run_dir.c_str());
  if (summary.value("interrupted", false)) {
    std::printf("interrupted: every running job stopped with a checkpoint; continue with\n  %s run %s --resume %s\n",
                relaunch_prefix(plane.size()).c_str(), a.demo ? "--demo" : a.jobs_file.c_str(), run_dir.c_str());
    std::fflush(stdout);
    std::exit(kStoppedBySignal);
  }
  if (summary.value("state", std::string()) == "failed") {  // no job finished: the run did none of its work
    std::fflush(stdout);
    std::exit(1);
  }
}

// The run takes submissions only while it runs; a stopped or stale one keeps them with --queue
// for its next --resume (which takes the spool at its first round).
void run_submit(const std::string& spec_path, const std::string& run_dir, bool queue) {
  auto job = runtime::load_run_job(spec_path);
  const RunState rs = read_run_state(run_dir);
  const auto& st = rs.status;
  if (rs.state == "finished" || rs.state == "failed")
    throw ConfigError(fmt::format("the run in '{}' has {}: it takes no more jobs and has nothing to resume", run_dir,
                                  rs.state == "finished" ? "finished" : "ended (failed)"));
  if (const std::string refused = st.value("spool_refused", std::string()); !refused.empty())
    throw ConfigError(fmt::format("the run in '{}' takes no more jobs from its spool: {}", run_dir, refused));
  if (rs.state != "running" && !queue) {
    const std::string why = rs.state == "stale" ? "stale: " + rs.why : "stopped (a clean stop, resumable)";
    throw ConfigError(fmt::format("the run in '{}' is {}; nothing takes the job now: `recmix submit --queue` keeps it "
                                  "for the run's next --resume", run_dir, why));
  }
  runtime::check_run_job(job, st.value("ranks", 1));
  for (const auto& j : st["jobs"])
    if (j["name"] == job.spec.name)
      throw ConfigError(fmt::format("a job named '{}' exists already in the run '{}'", job.spec.name, run_dir));
  const std::string text = runtime::read_text_file(spec_path, "job spec");
  const nlohmann::json envelope = {{"origin", spec_path},
                                   {"base_dir", fs::absolute(fs::path(spec_path)).parent_path().string()},
                                   {"spec_text", text}};
  const fs::path spool = fs::path(run_dir) / "spool";
  const auto stamp = std::chrono::system_clock::now().time_since_epoch().count();
  const fs::path tmp = spool / fmt::format(".{}-{}.tmp", job.spec.name, stamp);
  const fs::path dst = spool / fmt::format("{}-{}.json", stamp, job.spec.name);
  {
    std::ofstream out(tmp);
    if (!out) throw IoError(fmt::format("cannot write into '{}'", spool.string()));
    out << envelope.dump() << '\n';
  }
  fs::permissions(tmp, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  fs::rename(tmp, dst);  // atomic: the scheduler never sees half a file
  if (rs.state == "running")
    std::printf("submitted '%s' to %s (%s)\n", job.spec.name.c_str(), run_dir.c_str(), dst.filename().c_str());
  else
    std::printf("queued '%s' in %s (%s): the run is %s; its next --resume takes it\n", job.spec.name.c_str(),
                run_dir.c_str(), dst.filename().c_str(), rs.state.c_str());
}

// recmix close: a run started with --stay-open ends once its jobs have (a "close" file in its
// spool, which the scheduler looks for at each round).
void run_close(const std::string& run_dir) {
  const RunState rs = read_run_state(run_dir);
  if (rs.state == "finished" || rs.state == "failed")
    throw ConfigError(fmt::format("the run in '{}' has finished", run_dir));
  if (rs.state != "running")
    throw ConfigError(fmt::format("the run in '{}' is {}: nothing to close", run_dir,
                                  rs.state == "stale" ? "stale: " + rs.why : rs.state));
  if (const std::string refused = rs.status.value("spool_refused", std::string()); !refused.empty())
    throw ConfigError(fmt::format("the run in '{}' reads its spool no more ({}): stop it with SIGTERM, and it resumes "
                                  "with --resume", run_dir, refused));
  const fs::path spool = fs::path(run_dir) / "spool";
  const fs::path tmp = spool / ".close.tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw IoError(fmt::format("cannot write into '{}'", spool.string()));
  }
  fs::rename(tmp, spool / "close");
  std::printf("asked %s to end once its jobs have\n", run_dir.c_str());
}

}  // namespace

void add_run_commands(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* run = app.add_subcommand("run", "Run several training jobs co-located on the ranks by the scheduler "
                                        "(jobs file: see docs/run.md)");
  run->add_option("jobs", args->jobs_file, "Jobs file (TOML: [[job]] tables, include, [scheduler])")
      ->check(CLI::ExistingFile);
  run->add_flag("--demo", args->demo, "Run the built-in example: four small jobs on a generated dataset");
  run->add_option("--resume", args->resume_dir,
                  "Continue the interrupted run in this directory: finished jobs stay finished, the others resume "
                  "from their latest checkpoint; \"auto\": continue the run in --run-dir if there is one, else start it "
                  "(the same command for every start of a requeued batch job)");
  run->add_option("--run-dir", args->run_dir, "Run directory (default: runs/<jobs file name>, runs/demo-run for --demo)");
  run->add_option("--policy", args->policy, "Override scheduler.policy")
      ->check(CLI::IsMember({"exclusive-fifo", "fifo", "memory-first", "complementary", "interference-aware", "delay", "las"}));
  run->add_option("--device", args->device,
                  "Run every job on this backend, whatever its device.kind: cpu, cuda, or cpu-strict (the strict "
                  "device emulator, for tests: docs/device.md)")
      ->check(CLI::IsMember({"cpu", "cuda", "cpu-strict"}));
  run->add_flag("--force", args->force,
                "Start over when the run directory holds a run: the old one is moved aside to RUN_DIR.<UTC time> "
                "(never deleted); without it (or --resume) such a directory is refused");
  run->add_option("--cores-per-rank", args->cores_per_rank,
                  "Cores each rank's jobs may use together, which decides how many share a rank (overrides "
                  "[scheduler] cores_per_rank; default: the CPUs the rank is bound to, else the host's cores over "
                  "its ranks). More than the host has oversubscribes it: jobs that share a rank share cores")
      ->check(CLI::Range(1, 4096));
  run->add_option("--ranks-per-node", args->ranks_per_node,
                  "For tests and emulation: cut the world into nodes of this many consecutive ranks, whatever "
                  "hosts they run on (default: the ranks of each host are a node; docs/run.md, Nodes)")
      ->check(CLI::Range(1, 1 << 20));
  run->add_flag("-q,--quiet", args->quiet, "No progress lines (the summary is still printed)");
  run->add_flag("--stay-open", args->stay_open,
                "Do not end when the last job does: wait for `recmix close RUN_DIR`, taking submissions meanwhile");
  run->footer(
      "Run under MPI: launch/recmix-mpirun -np 4 build/recmix run jobs.toml\n"
      "Writes RUN_DIR/events.jsonl, RUN_DIR/status.json, RUN_DIR/summary.json and each job's outputs\n"
      "(train.log, metrics.jsonl, checkpoints/) under RUN_DIR/jobs/<name>/.\n"
      "SIGTERM, SIGINT or SIGUSR1 (launch/recmix-mpirun and Slurm deliver them) stops every running job\n"
      "with a checkpoint and exits with status 3; --resume RUN_DIR continues the run. A run in which no job\n"
      "finished (every job rejected or failed) exits with status 1.");
  run->callback([args] { run_run(*args); });

  auto spec = std::make_shared<std::string>();
  auto dir = std::make_shared<std::string>();
  auto* submit = app.add_subcommand("submit", "Add a job to a running `recmix run` (checked here, taken at the next round)");
  submit->add_option("job", *spec, "Job spec (TOML, the keys of recmix train plus ranks, priority, arrival)")
      ->required()
      ->check(CLI::ExistingFile);
  submit->add_option("--run", *dir, "The run directory of the running recmix run")->required();
  auto queue = std::make_shared<bool>(false);
  submit->add_flag("--queue", *queue,
                   "When the run is stopped or stale (not running), keep the job in its spool for its next --resume "
                   "instead of refusing it");
  submit->callback([spec, dir, queue] { run_submit(*spec, *dir, *queue); });

  auto cdir = std::make_shared<std::string>();
  auto* close = app.add_subcommand("close", "Let a `recmix run --stay-open` end once its jobs have");
  close->add_option("run_dir", *cdir, "The run directory")->required();
  close->callback([cdir] { run_close(*cdir); });

  auto sdir = std::make_shared<std::string>();
  auto* status = app.add_subcommand("status", "What a recmix run is doing: each job's state, ranks, progress and ETA");
  status->add_option("run_dir", *sdir, "The run directory")->required();
  status->footer("Reads RUN_DIR/status.json only. The run is running, stopped (a clean stop: --resume continues it),\n"
                 "finished, failed (no job finished) or stale (its scheduler is gone or has been silent for 10 of its\n"
                 "rounds, 5 s at least; --resume continues it).");
  status->callback([sdir] { print_run_status(*sdir); });
}

}  // namespace recmix::cli
