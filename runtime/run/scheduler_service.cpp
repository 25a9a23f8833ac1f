#include "runtime/run/scheduler_service.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.hpp"
#include "core/half.hpp"
#include "data/format.hpp"
#include "device/memory_pool.hpp"
#include "runtime/run/device_memory.hpp"
#include "sched/dlrm_profile.hpp"
#include "sched/machine_model.hpp"
#include "sched/memory_estimator.hpp"
#include "runtime/run/messages.hpp"
#include "runtime/run/scheduler_record.hpp"

namespace recmix::runtime::run {
namespace fs = std::filesystem;
namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// " (node 1)", " (nodes 0,1)": where a job's ranks are, for the start line.
std::string node_text(std::vector<int> nodes) {
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return fmt::format(" (node{} {})", nodes.size() > 1 ? "s" : "", fmt::join(nodes, ","));
}

}  // namespace

// Policies' actions applied to the live ranks: an accepted start or preemption is sent to the
// executors at once.
class SchedulerService::LiveActions final : public sched::Actions {
 public:
  explicit LiveActions(SchedulerService& s) : s_(s) {}
  bool start(const sched::Job& job, std::span<const int> gpus) override {
    Record& r = *s_.records_.at(static_cast<std::size_t>(job.id));
    // The ranks' cores and the jobs it was moved apart from are the cluster state's to check
    // (sched::ClusterState::fits), as in the simulator, so a replay refuses the same starts.
    if (!s_.cluster_->place(job, gpus, s_.clock())) return false;
    s_.start(r, std::vector<int>(gpus.begin(), gpus.end()));
    ++starts;
    return true;
  }
  void preempt(sched::JobId id) override {
    Record& r = *s_.records_.at(static_cast<std::size_t>(id));
    if (r.state == "running") s_.stop_job(r, {{"event", "preempt"}});
  }
  void wake_at(double time) override { s_.wake_at_ = std::min(s_.wake_at_, time); }

  int starts = 0;  // accepted this round

 private:
  SchedulerService& s_;
};

SchedulerService::SchedulerService(SchedulerLink& plane, RunOptions options)
    : plane_(plane), options_(std::move(options)) {
  const auto& cfg = options_.jobs.scheduler;
  // The live cluster is the world's shape: a node of ranks per host (or as --ranks-per-node
  // cuts it), each rank one GPU of its node, as the simulator's clusters are.
  if (options_.nodes.hosts.empty()) options_.nodes = NodeLayout{plane_.size(), {"local"}};
  RECMIX_REQUIRE(options_.nodes.nodes() * options_.nodes.ranks_per_node == plane_.size(), ConfigError,
                 fmt::format("recmix run: {} nodes of {} ranks are not the world's {} ranks", options_.nodes.nodes(),
                             options_.nodes.ranks_per_node, plane_.size()));
  sched::ClusterSpec spec;
  spec.nodes = options_.nodes.nodes();
  spec.gpus_per_node = options_.nodes.ranks_per_node;
  // The network between them: the jobs file's [cluster], else what the probe measured at start,
  // else (one node, or one rank a node for the figure within a node) the cluster model's defaults.
  if (const auto& net = options_.jobs.network; net.intra_node_gbps > 0) {
    spec.intra_node_bandwidth = net.intra_node_gbps * 1e9;
    spec.inter_node_bandwidth = net.inter_node_gbps * 1e9;
  } else {
    const auto& probed = options_.probed_network;
    if (probed.intra_node_gbps > 0) spec.intra_node_bandwidth = probed.intra_node_gbps * 1e9;
    if (probed.inter_node_gbps > 0) spec.inter_node_bandwidth = probed.inter_node_gbps * 1e9;
  }
  spec.gpu_memory_bytes = rank_capacity(cfg.memory_capacity, options_.device_memory_bytes).bytes;
  spec.max_jobs_per_gpu = cfg.colocation_limit;
  spec.host_cores = options_.cores_per_rank * plane_.size();
  spec.cores_per_gpu = options_.cores_per_rank;
  spec.machine = options_.machine;
  cluster_ = std::make_unique<sched::ClusterState>(spec);
  sched::PolicyOptions po;
  po.slowdown_limit = cfg.slowdown_limit;
  po.dispatch_interval_s = cfg.round_interval_s;
  po.las_threshold_gpu_s = cfg.las_threshold_s;
  po.las_lease_s = cfg.las_lease_s;
  po.delay_min_s = cfg.delay_min_s;
  po.delay_max_s = cfg.delay_max_s;
  policy_ = sched::make_policy(sched_policy_name(cfg.policy), po);
  threads_used_.assign(plane_.size(), 0);
  busy_since_.assign(plane_.size(), -1);
  busy_s_.assign(plane_.size(), 0);
  rank_peak_.assign(plane_.size(), 0);
  make_run_directory();
  events_path_ = (fs::path(options_.run_dir) / "events.jsonl").string();
  events_ = std::make_unique<std::ofstream>(events_path_, std::ios::app);
  if (!*events_) throw IoError(fmt::format("cannot write '{}'", events_path_));
  start_time_ = wall_seconds();
}

SchedulerService::~SchedulerService() = default;

double SchedulerService::now() const { return wall_seconds() - start_time_; }

// The scheduling time: the loop's turn, or now outside the loop.
double SchedulerService::clock() const { return turn_t_ >= 0 ? turn_t_ : now(); }

void SchedulerService::event(nlohmann::json e) {
  e["t"] = std::round(clock() * 1e4) / 1e4;
  *events_ << e.dump() << '\n' << std::flush;
}

std::vector<std::string> SchedulerService::partners_of(const Record& r) const {
  std::vector<std::string> out;
  for (int g : r.ranks)
    for (auto id : cluster_->jobs_on(g))
      if (id != r.sjob.id) {
        const auto& name = records_[static_cast<std::size_t>(id)]->job.spec.name;
        if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
      }
  return out;
}

void SchedulerService::start(Record& r, const std::vector<int>& ranks) {
  const double t = clock();
  r.ranks = ranks;
  r.launch = next_launch_++;
  r.reports = 0;
  r.failed = false;
  r.out_of_memory = false;
  r.error.clear();
  r.error_from_peer = false;
  r.state = "running";
  if (r.first_start < 0) r.first_start = t;
  if (r.sjob.first_start_s < 0) r.sjob.first_start_s = t;
  r.last_start = t;
  r.progress_t = r.line_t = t;
  r.line_step = r.step;
  r.stalled_since = -1;
  if (r.queued_since >= 0) r.queued_s += t - r.queued_since;
  r.queued_since = -1;
  by_launch_[r.launch] = &r;
  for (int g : ranks) {
    if (threads_used_[g] == 0) busy_since_[g] = t;
    threads_used_[g] += r.job.spec.device.threads;
  }
  const auto partners = partners_of(r);
  for (const auto& p : partners) {
    r.partners.insert(p);
    by_name_.at(p)->partners.insert(r.job.spec.name);
  }
  JobPlacement p;
  p.job = r.sjob.id;
  p.launch = r.launch;
  p.name = r.job.spec.name;
  p.spec_text = r.job.spec_text;
  p.origin = r.job.origin;
  p.base_dir = r.job.base_dir;
  p.run_dir = r.job.spec.run_dir;
  p.ranks = ranks;
  p.threads = r.job.spec.device.threads;
  p.device_kind = r.job.spec.device.kind;
  p.memory_share = static_cast<std::uint64_t>(std::ceil(r.share));
  p.priority = r.job.priority;
  p.resume = r.resume;
  p.sample_interval_s = std::max(0.2, std::min(1.0, options_.jobs.scheduler.round_interval_s));
  std::vector<int> nodes;  // the node of each of its ranks
  for (int g : ranks) nodes.push_back(options_.nodes.node_of(g));
  event({{"event", "start"}, {"job", r.job.spec.name}, {"ranks", ranks}, {"nodes", nodes}, {"launch", r.launch},
         {"threads", p.threads}, {"device", std::string(spelling(p.device_kind))}, {"estimate_bytes", r.estimate},
         {"memory_share_bytes", p.memory_share},
         {"partners", partners}, {"resume", r.resume}, {"policy", policy_->name()}});
  if (!options_.quiet)
    std::fprintf(stderr, "[%7.1fs] start '%s' on rank%s %s%s%s%s\n", t, r.job.spec.name.c_str(),
                 ranks.size() > 1 ? "s" : "", fmt::format("{}", fmt::join(ranks, ",")).c_str(),
                 options_.nodes.nodes() > 1 ? node_text(nodes).c_str() : "", partners.empty() ? "" : ", with ",
                 fmt::format("{}", fmt::join(partners, ", ")).c_str());
  // Every rank gets its starts in this one order (MPI keeps a sender's order per receiver).
  const auto body = p.to_json();
  for (int g : ranks) plane_.send_to_executor(g, {"start", r.sjob.id, -1, body});
  policy_->on_start(r.sjob, *cluster_->running(r.sjob.id), t);
}

// The job leaves the cluster state (when it is still placed there): its ranks' threads and
// memory are free for the next decisions, and a rank left without jobs stops counting as busy.
void SchedulerService::release_ranks(Record& r) {
  if (!cluster_->running(r.sjob.id)) return;
  cluster_->remove(r.sjob.id);
  const double t = clock();
  for (int g : r.ranks) {
    threads_used_[g] -= r.job.spec.device.threads;
    if (threads_used_[g] == 0 && busy_since_[g] >= 0) {
      busy_s_[g] += t - busy_since_[g];
      busy_since_[g] = -1;
    }
  }
}

void SchedulerService::end_job(Record& r, const std::string& state) {
  const double t = clock();
  release_ranks(r);
  by_launch_.erase(r.launch);
  r.state = state;
  r.finish = t;
  policy_->on_finish(r.sjob, t);
  std::size_t peak = 0;
  for (auto& [rank, bytes] : r.peak_by_rank) peak = std::max(peak, bytes);
  nlohmann::json e = {{"event", state}, {"job", r.job.spec.name}, {"ranks", r.ranks}, {"step", r.step},
                      {"loss", r.loss}, {"estimate_bytes", r.estimate}, {"measured_peak_bytes", peak}};
  if (!r.error.empty()) e["error"] = r.error;
  if (!r.eval.is_null()) e["eval"] = r.eval;
  event(e);
  // A measured slowdown next to the partners: the interference model learns it.
  if (state == "finished" && r.alone_n > 0 && r.shared_n > 0 && !r.partners.empty()) {
    const double slowdown = (r.shared_sum / r.shared_n) / alone_step_s(r);
    for (const auto& p : r.partners) model_.observe(r.sjob.type, by_name_.at(p)->sjob.type, slowdown);
    model_stale_ = true;  // refit by the next round, at most once a second (schedule_round)
    event({{"event", "observed_slowdown"}, {"job", r.job.spec.name}, {"slowdown", slowdown},
           {"partners", std::vector<std::string>(r.partners.begin(), r.partners.end())}});
  }
  if (!options_.quiet) {
    if (state == "failed")
      std::fprintf(stderr, "[%7.1fs] failed '%s': %s\n", t, r.job.spec.name.c_str(), r.error.c_str());
    else
      std::fprintf(stderr, "[%7.1fs] %s '%s' after %lld steps (loss %.5f)\n", t, state.c_str(), r.job.spec.name.c_str(),
                   static_cast<long long>(r.step), r.loss);
  }
  changed_ = true;
}

void SchedulerService::grant_next_io() {
  while (io_holder_ < 0 && !io_queue_.empty()) {
    const int launch = static_cast<int>(io_queue_.front());
    io_queue_.erase(io_queue_.begin());
    auto it = by_launch_.find(launch);
    if (it == by_launch_.end()) continue;  // the job ended meanwhile
    io_holder_ = launch;
    plane_.send_to_executor(it->second->ranks.front(), launch_message("io_grant", it->second->sjob.id, launch));
  }
}

// A job some of whose ranks failed while the others have not reported for stuck_timeout_s: those
// others wait in a collective that will never complete (MPI cannot cancel it, and Open MPI 4.1
// has no ULFM). The job is failed, every other running job stops with a checkpoint, and the run
// ends for `recmix run --resume` to continue; the processes are ended by the caller.
void SchedulerService::check_stuck() {
  const double timeout = options_.jobs.scheduler.stuck_timeout_s;
  for (auto& rec : records_) {
    Record& r = *rec;
    if (!r.failed || r.failed_at < 0 || r.state != "running" || now() - r.failed_at < timeout) continue;
    const int missing = static_cast<int>(r.ranks.size()) - r.reports;
    r.error += fmt::format(" ({} of its ranks never reported: stuck in a collective)", missing);
    event({{"event", "stuck"}, {"job", r.job.spec.name}, {"ranks", r.ranks}, {"missing_reports", missing},
           {"error", r.error}});
    if (!options_.quiet)
      std::fprintf(stderr, "[%7.1fs] '%s' failed and %d of its ranks are stuck in a collective: stopping every job "
                   "with a checkpoint and ending the run (continue it with --resume)\n",
                   now(), r.job.spec.name.c_str(), missing);
    // A job stuck inside a checkpoint write holds the run's checkpoint writer (and the HDF5 lock of
    // its ranks' processes): no other job can write one, so the others end where they are, to
    // resume from their last periodic checkpoint (or from the start).
    const bool writer_held = io_holder_ == r.launch;
    end_job(r, "failed");
    stuck_ = true;
    draining_ = true;
    for (auto& other : records_) {
      if (other->state != "running") continue;
      if (!writer_held) {
        stop_job(*other, {{"event", "stop"}, {"reason", "a stuck job ends the run"}});
        continue;
      }
      release_ranks(*other);
      other->state = "queued";
      other->resume = true;
      other->queued_since = clock();
      event({{"event", "stop"}, {"job", other->job.spec.name}, {"ranks", other->ranks}, {"launch", other->launch},
             {"reason", "a job stuck in a checkpoint write ends the run: resumes from its last checkpoint"}});
    }
  }
}

// Checkpoint-and-stop: the job leaves the cluster state at once (its ranks are free for the
// decisions that follow) and its executors stop it at a step its ranks agree on; its "stopped"
// reports put it back in the queue, to resume from that checkpoint.
void SchedulerService::stop_job(Record& r, nlohmann::json e) {
  release_ranks(r);
  r.state = "stopping";
  ++r.preemptions;
  r.sjob.attained_gpu_s += static_cast<double>(r.ranks.size()) * (clock() - r.last_start);
  ++r.sjob.preemptions;
  e["job"] = r.job.spec.name;
  e["ranks"] = r.ranks;
  e["launch"] = r.launch;
  event(e);
  for (int g : r.ranks) plane_.send_to_executor(g, launch_message("stop", r.sjob.id, r.launch));
}

void SchedulerService::schedule_round() {
  const double t = clock();
  const double began = now();
  // What finished jobs measured next to their partners, learnt at most once a second: a refit
  // costs 0.1 s at 10,000 job types (bench_service_rounds), and each finish would ask for one.
  double refit_s = 0;
  if (model_stale_ && t >= next_refit_) {
    model_.refit();
    model_stale_ = false;
    next_refit_ = t + std::max(1.0, options_.jobs.scheduler.round_interval_s);
    refit_s = now() - began;
    ++refits_;
    refit_seconds_ += refit_s;
  }
  std::vector<sched::Job*> queue;
  for (auto& r : records_)
    if (r->state == "queued") queue.push_back(&r->sjob);
  std::stable_sort(queue.begin(), queue.end(), sched::queue_before);
  wake_at_ = 1e300;
  LiveActions actions(*this);
  sched::SchedulingContext context{t, *cluster_, std::span<sched::Job* const>(queue), model_};
  policy_->schedule(context, actions);
  const double took = now() - began;  // the refit, the policy and the start messages it sent
  ++rounds_;
  round_seconds_ += took;
  if (took > round_max_s_) longest_round_ = {t, refit_s, took - refit_s, queue.size(), actions.starts};
  round_max_s_ = std::max(round_max_s_, took);
}

// Where the run's network figures came from, for run_start: the jobs file's [cluster] (its
// preset's name, or "jobs file"), the probe at start, or the cluster model's defaults.
std::string SchedulerService::network_origin() const {
  const auto& net = options_.jobs.network;
  if (net.intra_node_gbps > 0) return net.machine.empty() ? "jobs file" : net.machine;
  const auto& probed = options_.probed_network;
  return probed.intra_node_gbps > 0 || probed.inter_node_gbps > 0 ? "probed" : "default";
}

nlohmann::json SchedulerService::run() {
  const auto& cfg = options_.jobs.scheduler;
  // unix_s: the wall clock at the start, so that a reader puts the parts of a resumed run (each
  // with its own t from 0) on one time axis.
  nlohmann::json start = {{"event", "run_start"}, {"ranks", plane_.size()}, {"policy", std::string(policy_->name())},
         {"unix_s", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()},
         {"round_interval_s", cfg.round_interval_s}, {"slowdown_limit", cfg.slowdown_limit},
         {"las_threshold_s", cfg.las_threshold_s}, {"las_lease_s", cfg.las_lease_s}, {"machine", options_.machine},
         {"delay_min_s", cfg.delay_min_s}, {"delay_max_s", cfg.delay_max_s},
         {"resume", options_.resume}, {"stay_open", options_.stay_open},
         {"cores_per_rank", options_.cores_per_rank}, {"memory_capacity_bytes", cluster_->spec().gpu_memory_bytes},
         {"memory_capacity", rank_capacity(cfg.memory_capacity, options_.device_memory_bytes).origin},
         {"nodes", options_.nodes.nodes()}, {"ranks_per_node", options_.nodes.ranks_per_node},
         {"node_hosts", options_.nodes.hosts},
         {"network", network_origin()},
         {"intra_node_gbps", cluster_->spec().intra_node_bandwidth / 1e9},
         {"inter_node_gbps", cluster_->spec().inter_node_bandwidth / 1e9},
         {"colocation_limit", cluster_->spec().max_jobs_per_gpu}};
  if (start["network"] == "probed") {
    const auto& p = options_.probed_network;
    start["network_probe"] = {{"intra_bytes_per_peer", p.intra_bytes_per_peer},
                              {"inter_bytes_per_peer", p.inter_bytes_per_peer},
                              {"iterations", p.iterations},
                              {"seconds", p.seconds}};
  }
  event(std::move(start));
  if (options_.resume) load_previous_run();
  for (auto& job : options_.jobs.jobs) add_job(std::move(job), "jobs file");
  options_.jobs.jobs.clear();
  for (;;) {
    const double previous_turn = std::max(turn_t_, 0.0);
    turn_t_ = now();
    // A round the policy asked for runs before this turn's messages and at the time it asked for
    // (never before the last turn), as the simulator runs it: what this turn takes up comes after.
    if (!draining_ && turn_t_ >= wake_at_) {
      const double t = turn_t_;
      turn_t_ = std::max(wake_at_, previous_turn);
      schedule_round();
      turn_t_ = t;
    }
    while (auto m = plane_.poll_scheduler()) {
      ++messages_in_;
      handle(*m);
    }
    const double t = turn_t_;
    if (!draining_ && options_.terminate && options_.terminate->load()) {
      draining_ = true;  // the executors stop their jobs themselves (every rank got the signal)
      event({{"event", "terminating"}});
      if (!options_.quiet) std::fprintf(stderr, "[%7.1fs] terminating: every running job stops with a checkpoint\n", t);
    }
    // The scans over every job (stuck and stalled ranks, the end of the run) run every 10 ms and
    // when something changed, not at every turn of this 2 ms loop: at 10,000 jobs a scan costs
    // about a millisecond (bench_service_rounds, docs/scheduler.md).
    const bool scan = changed_ || t >= next_scan_;
    if (scan) {
      next_scan_ = t + 0.01;
      check_stuck();
      check_stalls();
    }
    if (draining_) {
      if (t >= next_round_) {  // the heartbeat goes on while the jobs write their checkpoints
        next_round_ = t + options_.jobs.scheduler.round_interval_s;
        write_status();
      }
      if (std::none_of(records_.begin(), records_.end(),
                       [](const auto& r) { return r->state == "running" || r->state == "stopping"; }))
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    if (t >= next_round_) take_spool();
    if (t >= next_arrival_) {  // the jobs whose arrival time has come, in submission order
      next_arrival_ = 1e300;
      for (auto& r : records_) {
        if (r->state != "pending") continue;
        if (r->sjob.arrival_s > t) {
          next_arrival_ = std::min(next_arrival_, r->sjob.arrival_s);
          continue;
        }
        r->state = "queued";
        r->queued_since = t;
        event({{"event", "arrival"}, {"job", r->job.spec.name}});
        changed_ = true;
      }
    }
    // Rounds run on events (arrival, finish, failure, stop, submission) and when the policy asked
    // to be woken, as in the simulator, so a run can be replayed there decision for decision.
    if (changed_ || t >= wake_at_) {
      schedule_round();
      changed_ = false;
    }
    if (t >= next_round_) {  // the spool and status.json are looked after on the timer
      next_round_ = t + options_.jobs.scheduler.round_interval_s;
      write_status();
    }
    progress_line(false);
    if (scan && (!options_.stay_open || close_requested_) &&
        std::all_of(records_.begin(), records_.end(), [](const auto& r) { return terminal(r->state); }))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  turn_t_ = -1;
  // With a stuck job its threads never end, so the executors cannot shut down: the caller ends
  // the processes (after this summary) instead.
  if (!stuck_)
    for (int g = 0; g < plane_.size(); ++g) plane_.send_to_executor(g, {"shutdown", -1, -1, {}});
  for (int g = 0; g < plane_.size(); ++g)
    if (busy_since_[g] >= 0) busy_s_[g] += now() - busy_since_[g];
  auto s = summary();
  s["stuck"] = stuck_;
  s["interrupted"] = draining_ && !std::all_of(records_.begin(), records_.end(),
                                               [](const auto& r) { return terminal(r->state); });
  // Stopped: jobs are left for --resume. Failed: every job ended and none finished (all rejected
  // or failed), so the run did none of its work.
  const bool none_finished = std::none_of(records_.begin(), records_.end(),
                                          [](const auto& r) { return r->state == "finished"; });
  run_state_ = s["interrupted"].get<bool>() || stuck_ ? "stopped" : none_finished ? "failed" : "finished";
  s["state"] = run_state_;
  write_status();
  event({{"event", "run_end"}, {"makespan_s", s["makespan_s"]}});
  const fs::path path = fs::path(options_.run_dir) / "summary.json";
  std::ofstream(path.string() + ".tmp") << s.dump(2) << '\n';
  fs::rename(path.string() + ".tmp", path);
  return s;
}

}  // namespace recmix::runtime::run
