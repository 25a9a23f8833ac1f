#include "sched/sim/replay.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "core/error.hpp"
#include "sched/run_events.hpp"
#include "sched/sim/ground_truth.hpp"

namespace recmix::sched {
namespace {

bool same_decision(const Decision& a, const Decision& b) {
  return a.kind == b.kind && a.job == b.job && a.gpus == b.gpus;
}

}  // namespace

RunReplay read_run_events(const std::string& events_path) {
  std::ifstream in(events_path);
  if (!in) throw IoError(fmt::format("cannot open '{}'", events_path));
  RunReplay run;
  std::map<std::string, JobId> ids;
  std::map<JobId, double> running_since;
  std::set<JobId> moving;  // moved apart, not yet stopped
  // A run segment of job id ends at t: its measured time counts towards the job's work.
  auto end_segment = [&](JobId id, double t) {
    const auto it = running_since.find(id);
    if (it == running_since.end()) return;
    for (auto& j : run.jobs)
      if (j.id == id) j.work_s += t - it->second;
    running_since.erase(it);
  };
  bool started = false;
  double last_t = 0;
  read_event_lines(in, events_path, BadLines::fail, [&](const RunEvent& event) {
    const nlohmann::json& e = event.fields;
    const std::string& kind = event.kind;
    const double t = event.t;
    if (kind != "run_start" || !started) last_t = std::max(last_t, t);
    try {
      if (kind == "run_start") {
        if (started) return AfterEvent::stop;  // a later run in the same directory (--resume): replay the first one
        started = true;
        // The live cluster's nodes (a run before nodes: one node of every rank).
        run.cluster.gpus_per_node = e.value("ranks_per_node", e.at("ranks").get<int>());
        run.cluster.nodes = e.value("nodes", 1);
        if (e.contains("intra_node_gbps")) run.cluster.intra_node_bandwidth = e.at("intra_node_gbps").get<double>() * 1e9;
        if (e.contains("inter_node_gbps")) run.cluster.inter_node_bandwidth = e.at("inter_node_gbps").get<double>() * 1e9;
        run.cluster.gpu_memory_bytes = e.at("memory_capacity_bytes").get<double>();
        run.cluster.max_jobs_per_gpu = e.at("colocation_limit").get<int>();
        run.cluster.machine = e.value("machine", std::string("cpu-zen3-2vcpu"));
        run.policy = e.at("policy").get<std::string>();
        run.options.dispatch_interval_s = e.value("round_interval_s", run.options.dispatch_interval_s);
        run.options.slowdown_limit = e.value("slowdown_limit", run.options.slowdown_limit);
        run.options.las_threshold_gpu_s = e.value("las_threshold_s", run.options.las_threshold_gpu_s);
        run.options.las_lease_s = e.value("las_lease_s", run.options.las_lease_s);
        run.options.delay_min_s = e.value("delay_min_s", run.options.delay_min_s);
        run.options.delay_max_s = e.value("delay_max_s", run.options.delay_max_s);
        run.cluster.cores_per_gpu = e.value("cores_per_rank", 0);
      } else if ((kind == "submitted" || kind == "rejected") && e.contains("id")) {
        const JobId id = e.at("id").get<JobId>();
        if (run.names.size() <= static_cast<std::size_t>(id)) run.names.resize(static_cast<std::size_t>(id) + 1);
        run.names[static_cast<std::size_t>(id)] = e.at("job").get<std::string>();
        ids[e.at("job").get<std::string>()] = id;
        if (kind == "rejected") return AfterEvent::read_on;
        Job job;
        job.id = id;
        job.name = e.at("job").get<std::string>();
        job.gpus = e.at("ranks").get<int>();
        job.arrival_s = e.at("arrival_s").get<double>();
        job.priority = e.value("priority", 0);
        job.cores = e.value("threads", 0);
        const auto& p = e.at("profile");
        job.profile.type = p.at("type").get<std::string>();
        job.profile.solo_step_s = p.at("solo_step_s").get<double>();
        const auto util = p.at("util").get<std::vector<double>>();
        for (std::size_t r = 0; r < std::min(util.size(), kResourceCount); ++r) job.profile.util.share[r] = util[r];
        job.profile.peak_memory_bytes = e.at("estimate_bytes").get<double>();
        job.profile.dlrm = true;
        run.jobs.push_back(std::move(job));
      } else if (kind == "start" || kind == "preempt") {
        const JobId id = ids.at(e.at("job").get<std::string>());
        Decision d;
        d.kind = kind == "start" ? Decision::Kind::start : Decision::Kind::preempt;
        d.job = id;
        if (kind == "start") {
          d.gpus = e.at("ranks").get<std::vector<int>>();
          running_since[id] = t;
        }
        run.live.push_back({t, d});
        if (kind == "preempt") end_segment(id, t);  // the simulator frees the GPUs at the decision
      } else if (kind == "profile_measured") {
        ProfileUpdate u;
        u.job = ids.at(e.at("job").get<std::string>());
        u.time_s = t;
        const auto util = e.at("util").get<std::vector<double>>();
        for (std::size_t r = 0; r < std::min(util.size(), kResourceCount); ++r) u.util.share[r] = util[r];
        run.profiles.push_back(u);
      } else if (kind == "move_apart") {  // a stop outside the policy: requeued at its "stopped"
        const JobId id = ids.at(e.at("job").get<std::string>());
        ExternalStop x;
        x.job = id;
        x.stop_s = x.requeue_s = t;
        x.slowdown = e.at("slowdown").get<double>();
        for (const auto& name : e.at("partners")) x.avoid.push_back(ids.at(name.get<std::string>()));
        if (e.contains("slowed")) x.slowed = ids.at(e.at("slowed").get<std::string>());
        run.moves.push_back(std::move(x));
        moving.insert(id);
        end_segment(id, t);
      } else if (kind == "stopped" && moving.count(ids.at(e.at("job").get<std::string>()))) {
        const JobId id = ids.at(e.at("job").get<std::string>());
        moving.erase(id);
        for (auto it = run.moves.rbegin(); it != run.moves.rend(); ++it)
          if (it->job == id) {
            it->requeue_s = t;
            break;
          }
      } else if (kind == "arrival") {  // queued when the live service saw the arrival, not at arrival_s
        run.queue_times[ids.at(e.at("job").get<std::string>())] = t;
      } else if (kind == "finished" || kind == "failed" || kind == "memory_restart") {
        const JobId id = ids.at(e.at("job").get<std::string>());
        end_segment(id, t);
        if (kind != "memory_restart") run.end_times[id] = t;
      }
    } catch (const nlohmann::json::exception& x) {
      throw DataError(fmt::format("{}:{}: '{}' event lacks a field ({})", events_path, event.line, kind, x.what()));
    } catch (const std::out_of_range&) {
      throw DataError(fmt::format("{}:{}: '{}' event names a job that was never submitted", events_path, event.line, kind));
    }
    return AfterEvent::read_on;
  });
  if (!started) throw DataError(fmt::format("{}: no run_start event: not the event log of a recmix run", events_path));
  // Jobs still running when the log ends (an interrupted run) ran until then: in the replay they
  // hold their ranks as long, so that the decisions around them are the same.
  std::vector<JobId> still_running;
  for (const auto& [id, since] : running_since) still_running.push_back(id);
  for (JobId id : still_running) {
    end_segment(id, last_t);
    run.end_times[id] = last_t;
  }
  return run;
}

ReplayResult replay_run(const RunReplay& run) {
  auto policy = make_policy(run.policy, run.options);
  // The interference model as the live service built it: one type per job, in submission order,
  // with its profile's utilisation; the replay does not learn (the live service learned only
  // from jobs that finished co-located, after they finished).
  InterferenceModel model;
  std::vector<Job> jobs = run.jobs;
  for (auto& j : jobs) {
    j.type = model.type_index(j.name);
    model.set_utilisation(j.type, j.profile.util);
  }
  SlowdownTruth truth(model, 0.0, 1);
  SimOptions options;
  options.measured_runtimes = true;
  options.learn_online = false;
  options.restart_overhead_s = 0;
  options.external_stops = run.moves;
  options.profile_updates = run.profiles;
  options.end_times = run.end_times;
  options.queue_times = run.queue_times;
  const SimResult sim = simulate(run.cluster, std::move(jobs), *policy, truth, model, options);
  ReplayResult r;
  r.live = run.live;
  r.simulated = sim.decisions;
  const std::size_t n = std::min(r.live.size(), r.simulated.size());
  r.first_difference = n;
  for (std::size_t i = 0; i < n; ++i)
    if (!same_decision(r.live[i].decision, r.simulated[i].decision)) {
      r.first_difference = i;
      break;
    }
  r.same = r.first_difference == n && r.live.size() == r.simulated.size();
  return r;
}

std::string describe(const RunReplay& run, const ReplayResult& result) {
  auto text = [&](const TimedDecision& d) {
    const auto& name = run.names.at(static_cast<std::size_t>(d.decision.job));
    if (d.decision.kind == Decision::Kind::preempt) return fmt::format("{:7.2f}s preempt {}", d.time_s, name);
    return fmt::format("{:7.2f}s start {} on {}", d.time_s, name, fmt::join(d.decision.gpus, ","));
  };
  std::string out = fmt::format("{:<4} {:<40} {:<40}\n", "#", "live run", "simulated");
  const std::size_t n = std::max(result.live.size(), result.simulated.size());
  for (std::size_t i = 0; i < n; ++i) {
    out += fmt::format("{:<4} {:<40} {:<40}{}\n", i, i < result.live.size() ? text(result.live[i]) : "-",
                       i < result.simulated.size() ? text(result.simulated[i]) : "-",
                       !result.same && i == result.first_difference ? "  <- first difference" : "");
  }
  out += result.same ? "the same decisions in the same order\n"
                     : fmt::format("the decisions differ from #{}\n", result.first_difference);
  return out;
}

}  // namespace recmix::sched
