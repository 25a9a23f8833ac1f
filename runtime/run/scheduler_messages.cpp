// SchedulerService: what the ranks report (samples, failures, ends) and the decisions those
// feed: a job's measured profile, moving a slowed pair apart, a restart with more memory.
#include "runtime/run/scheduler_service.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "device/memory_pool.hpp"
#include "runtime/run/messages.hpp"
#include "runtime/run/scheduler_record.hpp"

namespace recmix::runtime::run {
namespace fs = std::filesystem;

// The first sample a job's first rank takes alone replaces the roofline's compute share in its
// profile with a measured one: on a GPU, the device's kernel time (NVML's gpu_util, the device's
// own view, meaningful while the job is alone on it); on the CPU, the share of the interval the
// job's main thread was busy, times its threads over the rank's cores (its other threads are
// taken to be as busy). The ranks' demand and the interference model follow at once, in the
// live run and in its replay (event profile_measured).
void SchedulerService::measure_profile(Record& r, const JobSample& sample) {
  sched::UtilisationVector util = r.sjob.profile.util;
  const double roofline = util[sched::Resource::compute];
  std::string source = "gpu_util";
  double compute = sample.gpu ? sample.gpu->util : -1.0;
  if (compute < 0) {
    source = "busy_share";
    compute = sample.busy_share * r.job.spec.device.threads / std::max(1, options_.cores_per_rank);
  }
  util[sched::Resource::compute] = std::clamp(compute, 0.0, 1.0);
  cluster_->set_job_utilisation(r.sjob, util);
  model_.set_utilisation(r.sjob.type, util);
  r.profile_measured = true;
  event({{"event", "profile_measured"}, {"job", r.job.spec.name}, {"source", source}, {"util", util.share},
         {"roofline_compute", roofline}});
}

// A job's step time alone, the baseline of its slowdowns: the median of its last 64 samples alone, so
// that its first, slower steps (a cold cache, the first allocations) do not raise it.
double SchedulerService::alone_step_s(const Record& r) {
  std::vector<double> v = r.alone_steps;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return (*mid + *std::max_element(v.begin(), mid)) / 2;
}

// A job measured slower next to its partners than alone by more than the slowdown limit (the
// mean of its last three co-located samples against its median alone) is moved apart: one side
// stops with a checkpoint and is placed again, never next to the other while it runs. Which side
// is priority's call (sched::jobs_to_move_apart): the job itself, or its partners of lower
// priority; each job moves once at most. The interference model learns the slowdown against the
// jobs it is moved apart from.
void SchedulerService::move_apart_if_slowed(Record& r) {
  constexpr std::size_t kWindow = 3;
  if (r.state != "running" || r.alone_n == 0 || r.recent_shared.size() < kWindow) return;
  double shared = 0;
  for (double v : r.recent_shared) shared += v;
  const double slowdown = (shared / static_cast<double>(r.recent_shared.size())) / alone_step_s(r);
  const double limit = options_.jobs.scheduler.slowdown_limit;
  if (slowdown <= limit) return;
  std::vector<Record*> partners;
  std::vector<sched::MoveApartCandidate> candidates;
  for (int g : r.ranks)
    for (auto other : cluster_->jobs_on(g)) {
      Record* o = records_[static_cast<std::size_t>(other)].get();
      if (other == r.sjob.id || std::find(partners.begin(), partners.end(), o) != partners.end()) continue;
      partners.push_back(o);
      candidates.push_back({other, o->job.priority, o->moved_apart});
    }
  const std::vector<sched::JobId> moving =
      sched::jobs_to_move_apart({r.sjob.id, r.job.priority, r.moved_apart}, candidates);
  if (moving.empty()) return;
  r.recent_shared.clear();
  auto avoid = [](Record& a, const Record& b) {
    if (std::find(a.sjob.avoid.begin(), a.sjob.avoid.end(), b.sjob.id) == a.sjob.avoid.end())
      a.sjob.avoid.push_back(b.sjob.id);
  };
  auto say = [&](const Record& moved, const std::vector<std::string>& from) {
    if (options_.quiet) return;
    const std::string why = &moved == &r ? "" : fmt::format(" ('{}' has the lower priority)", moved.job.spec.name);
    std::fprintf(stderr, "[%7.1fs] '%s' runs %.2fx slower next to %s than alone (limit %.2f): moving '%s' apart%s\n",
                 now(), r.job.spec.name.c_str(), slowdown, fmt::format("{}", fmt::join(from, ", ")).c_str(), limit,
                 moved.job.spec.name.c_str(), why.c_str());
  };
  if (moving.front() == r.sjob.id) {  // the job itself, away from every partner
    std::vector<std::string> names;
    for (Record* o : partners) {
      avoid(r, *o);
      model_.observe(r.sjob.type, o->sjob.type, slowdown);
      names.push_back(o->job.spec.name);
    }
    model_.refit();
    r.moved_apart = true;
    say(r, names);
    stop_job(r, {{"event", "move_apart"}, {"slowdown", slowdown}, {"limit", limit}, {"partners", names}});
    return;
  }
  for (sched::JobId id : moving) {  // partners of lower priority, each away from the job
    Record& o = *records_[static_cast<std::size_t>(id)];
    avoid(o, r);
    model_.observe(r.sjob.type, o.sjob.type, slowdown);
    model_.refit();
    o.moved_apart = true;
    say(o, {o.job.spec.name});
    stop_job(o, {{"event", "move_apart"}, {"slowdown", slowdown}, {"limit", limit},
                 {"partners", {r.job.spec.name}}, {"slowed", r.job.spec.name}});
  }
}

// A job that ran out of its memory share gets one more try with twice the share (the whole rank
// at most), booked as its memory so that it is placed where that fits, from its latest
// checkpoint if it has one.
void SchedulerService::restart_with_more_memory(Record& r) {
  const double old_share = r.share;
  r.share = std::min(cluster_->spec().gpu_memory_bytes, 2 * r.share);
  ++r.memory_restarts;
  release_ranks(r);
  by_launch_.erase(r.launch);
  r.sjob.profile.peak_memory_bytes = std::max(r.estimate, r.share);
  r.state = "queued";
  r.queued_since = clock();
  r.resume = fs::exists(r.job.spec.checkpoint.dir) && !fs::is_empty(r.job.spec.checkpoint.dir);
  event({{"event", "memory_restart"}, {"job", r.job.spec.name}, {"error", r.error}, {"old_share_bytes", old_share},
         {"new_share_bytes", r.share}, {"resume", r.resume}});
  if (!options_.quiet)
    std::fprintf(stderr, "[%7.1fs] '%s' ran out of its memory share (%s): restarting it with %s\n", now(),
                 r.job.spec.name.c_str(), device::format_bytes(static_cast<std::size_t>(old_share)).c_str(),
                 device::format_bytes(static_cast<std::size_t>(r.share)).c_str());
  changed_ = true;
}

// Every rank of a failed job reports (its guarded communicator makes the peers of a failing rank
// stop too); the error of a rank that failed by itself names the cause, not its peers' "peer
// failed". The first notice starts the stuck-job clock.
void SchedulerService::note_failure(Record& r, int rank, const JobReport& report) {
  if (!r.failed) r.failed_at = now();
  r.failed = true;
  r.out_of_memory = r.out_of_memory || report.out_of_memory;
  const bool peer = report.peer;
  if (r.error.empty() || (!peer && r.error_from_peer)) {
    r.error = fmt::format("rank {}: {}", rank, report.error.empty() ? std::string("unknown error") : report.error);
    r.error_from_peer = peer;
  }
}

void SchedulerService::handle(const Message& m) {
  const int launch = launch_of(m);
  if (m.kind == "io_release") {
    if (io_holder_ == launch) io_holder_ = -1;
    grant_next_io();
    return;
  }
  auto it = by_launch_.find(launch);
  if (it == by_launch_.end()) return;  // a late report of a launch that ended
  Record& r = *it->second;
  if (m.kind == "io_request") {
    io_queue_.push_back(launch);
    grant_next_io();
  } else if (m.kind == "sample") {
    const JobSample sample = JobSample::from_json(m.body);
    const int rank = sample.rank;
    const bool moved = sample.step > r.step;
    r.step = sample.step;
    if (moved) progressed(r);
    r.total_steps = sample.total_steps;
    r.loss = sample.loss;
    r.last_sample_t = now();
    const auto pool_peak = sample.pool_peak_bytes;
    r.peak_by_rank[rank] = std::max(r.peak_by_rank[rank], pool_peak);
    pool_now_[{r.sjob.id, rank}] = sample.pool_current_bytes;
    std::size_t on_rank = 0;
    for (auto id : cluster_->jobs_on(rank)) {
      auto p = pool_now_.find({id, rank});
      if (p != pool_now_.end()) on_rank += p->second;
    }
    rank_peak_[rank] = std::max(rank_peak_[rank], on_rank);
    const auto partners = partners_of(r);
    const bool colocated = !partners.empty();
    const bool first_rank = rank == r.ranks.front();
    if (first_rank) {
      double step_s = sample.step_s;
      for (const auto& p : partners)
        if (auto f = options_.injected_slowdown.find(p); f != options_.injected_slowdown.end()) step_s *= f->second;
      (colocated ? r.shared_sum : r.alone_sum) += step_s;
      ++(colocated ? r.shared_n : r.alone_n);
      if (!colocated) r.alone_steps.push_back(step_s);
      if (r.alone_steps.size() > 64) r.alone_steps.erase(r.alone_steps.begin());
      if (!colocated) r.recent_shared.clear();
      if (colocated) r.recent_shared.push_back(step_s);
      if (r.recent_shared.size() > 3) r.recent_shared.erase(r.recent_shared.begin());
    }
    nlohmann::json e = sample.to_json();
    e["event"] = "sample";
    e["job"] = r.job.spec.name;
    e["partners"] = partners;
    e["colocated"] = colocated;
    event(e);
    if (static_cast<double>(pool_peak) > r.estimate && !r.estimate_below_peak) {
      r.estimate_below_peak = true;
      event({{"event", "estimate_below_peak"}, {"level", "error"}, {"job", r.job.spec.name}, {"rank", rank},
             {"estimate_bytes", r.estimate}, {"measured_peak_bytes", pool_peak}});
    }
    if (first_rank && !colocated && !r.profile_measured) measure_profile(r, sample);
    if (first_rank) move_apart_if_slowed(r);
  } else if (m.kind == "failing") {  // a rank failed by itself; its report follows once its peers know
    const JobReport report = JobReport::from_json(m.body);
    note_failure(r, report.rank >= 0 ? report.rank : m.from, report);
  } else if (m.kind == "finished" || m.kind == "stopped" || m.kind == "failed") {
    const JobReport report = JobReport::from_json(m.body);
    const int rank = report.rank >= 0 ? report.rank : m.from;
    if (report.pool_peak_bytes) r.peak_by_rank[rank] = std::max(r.peak_by_rank[rank], *report.pool_peak_bytes);
    if (static_cast<double>(r.peak_by_rank[rank]) > r.estimate && !r.estimate_below_peak) {
      r.estimate_below_peak = true;
      event({{"event", "estimate_below_peak"}, {"level", "error"}, {"job", r.job.spec.name}, {"rank", rank},
             {"estimate_bytes", r.estimate}, {"measured_peak_bytes", r.peak_by_rank[rank]}});
    }
    if (report.steps) r.step = *report.steps;
    if (report.loss) r.loss = *report.loss;
    if (report.eval) r.eval = {{"auc", report.eval->auc}, {"logloss", report.eval->logloss}};
    if (m.kind == "failed") note_failure(r, rank, report);
    if (++r.reports < static_cast<int>(r.ranks.size())) return;
    // The job's own device.memory_capacity, when it binds, is the user's limit: no second try.
    const auto own = static_cast<double>(r.job.spec.device.memory_capacity);
    const bool share_binds = own == 0 || own > r.share;
    if (r.failed && r.out_of_memory && share_binds && r.memory_restarts == 0 &&
        r.share < cluster_->spec().gpu_memory_bytes) {
      restart_with_more_memory(r);
    } else if (r.failed) {
      end_job(r, "failed");
    } else if (m.kind == "finished") {
      end_job(r, "finished");
    } else {  // stopped by a preemption: back to the queue, to resume from its checkpoint
      by_launch_.erase(r.launch);
      r.state = "queued";
      r.resume = true;
      r.queued_since = clock();
      event({{"event", "stopped"}, {"job", r.job.spec.name}, {"step", r.step}});
      changed_ = true;
    }
  }
}

}  // namespace recmix::runtime::run
