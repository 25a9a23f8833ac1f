// The scheduler service's outputs: the progress line on stderr, status.json (rewritten on the
// round timer) and the summary (summary.json and the table at the end).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "device/memory_pool.hpp"
#include "runtime/run/scheduler_record.hpp"
#include "runtime/run/scheduler_service.hpp"

namespace recmix::runtime::run {
namespace fs = std::filesystem;

namespace {

// 950, 12.3k, 4.56M: a rate as a progress line shows it.
std::string short_rate(double v) {
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e4) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

}  // namespace

// A running job whose step has not gone up for stall_warning_s is warned of once, on stderr and
// as a "stalled" event, until it moves again: a stopped (SIGSTOP) or swapping rank, a hung
// file system. The run goes on; check_stuck handles ranks that failed.
void SchedulerService::check_stalls() {
  const double limit = options_.jobs.scheduler.stall_warning_s;
  if (limit <= 0) return;
  const double t = now();
  for (auto& rp : records_) {
    Record& r = *rp;
    if (r.state != "running" || r.stalled_since >= 0 || r.progress_t < 0 || t - r.progress_t < limit) continue;
    r.stalled_since = r.progress_t;
    const std::string ranks = fmt::format("{}", fmt::join(r.ranks, ","));
    event({{"event", "stalled"}, {"level", "warning"}, {"job", r.job.spec.name}, {"step", r.step},
           {"total_steps", r.total_steps}, {"no_progress_s", t - r.progress_t}, {"ranks", r.ranks}});
    std::fprintf(stderr,
                 "[%7.1fs] warning: job '%s' has made no progress for %.0f s (step %lld/%lld, ranks %s): is a rank "
                 "stopped, swapping or waiting on its file system?\n",
                 t, r.job.spec.name.c_str(), t - r.progress_t, static_cast<long long>(r.step),
                 static_cast<long long>(r.total_steps), ranks.c_str());
  }
}

// Its step went up: a stall it was warned of has ended.
void SchedulerService::progressed(Record& r) {
  const double t = now();
  if (r.stalled_since >= 0) {
    event({{"event", "progressing"}, {"job", r.job.spec.name}, {"step", r.step}, {"stalled_s", t - r.stalled_since}});
    std::fprintf(stderr, "[%7.1fs] job '%s' progresses again after %.0f s without a step\n", t,
                 r.job.spec.name.c_str(), t - r.stalled_since);
  }
  r.stalled_since = -1;
  r.progress_t = t;
}

// One line every progress_interval_s (5 s): per running job its progress, loss, samples/s over the last interval and
// ETA at that rate, or how long it has been stalled; the queue; how many jobs ended.
void SchedulerService::progress_line(bool force) {
  const double t = now();
  if (options_.quiet || (!force && t - last_progress_ < options_.jobs.scheduler.progress_interval_s)) return;
  last_progress_ = t;
  std::string running, queued;
  int done = 0;
  for (auto& rp : records_) {
    Record& r = *rp;
    if (r.state == "running" || r.state == "stopping") {
      const double pct = r.total_steps > 0 ? 100.0 * r.step / r.total_steps : 0;
      if (r.line_t >= 0 && t > r.line_t) {
        const double batch = static_cast<double>(r.job.spec.train.batch_size);
        r.samples_per_s = batch * static_cast<double>(r.step - r.line_step) / (t - r.line_t);
      }
      r.line_step = r.step;
      r.line_t = t;
      std::string what = fmt::format("{} {:.0f}%", r.job.spec.name, pct);
      if (r.step > 0) what += fmt::format(" loss {:.4g}", r.loss);
      if (r.stalled_since >= 0) {
        what += fmt::format(" STALLED {:.0f}s", t - r.stalled_since);
      } else if (r.samples_per_s > 0) {
        const double steps_per_s = r.samples_per_s / static_cast<double>(r.job.spec.train.batch_size);
        what += fmt::format(" {} samples/s ETA {:.0f}s", short_rate(r.samples_per_s),
                            static_cast<double>(r.total_steps - r.step) / steps_per_s);
      } else {
        what += " ETA ?";
      }
      running += (running.empty() ? "" : ", ") + what;
    } else if (r.state == "queued" || r.state == "pending") {
      queued += fmt::format("{}{}", queued.empty() ? "" : ", ", r.job.spec.name);
    } else {
      ++done;
    }
  }
  std::fprintf(stderr, "[%7.1fs] running: %s | queued: %s | ended %d/%zu\n", t, running.empty() ? "-" : running.c_str(),
               queued.empty() ? "-" : queued.c_str(), done, records_.size());
}

void SchedulerService::write_status() const {
  nlohmann::json jobs = nlohmann::json::array();
  const double t = now();
  for (const auto& r : records_) {
    nlohmann::json j = {{"name", r->job.spec.name}, {"state", r->state}, {"ranks", r->ranks},
                        {"step", r->step},          {"total_steps", r->total_steps}};
    if (r->state == "running" && r->step > 0 && r->first_start >= 0)
      j["eta_s"] = (r->total_steps - r->step) * (t - r->first_start) / r->step;
    if (r->step > 0) j["loss"] = r->loss;
    if (r->state == "running" && r->stalled_since >= 0) j["stalled_s"] = t - r->stalled_since;
    if (!r->error.empty()) j["error"] = r->error;
    jobs.push_back(j);
  }
  // The heartbeat: rewritten every round (round_interval_s) while the scheduler lives, so that a
  // reader tells a run that died (kill -9, a lost node) from one that runs (docs/run.md, Run states).
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const double unix_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const nlohmann::json heartbeat = {{"unix_s", unix_s},
                                    {"pid", static_cast<long>(getpid())},
                                    {"host", std::string(host)},
                                    {"interval_s", options_.jobs.scheduler.round_interval_s}};
  nlohmann::json rejections = spool_rejections_;
  const nlohmann::json status = {{"time_s", t},
                                 {"state", run_state_},
                                 {"heartbeat", heartbeat},
                                 {"ranks", plane_.size()},
                                 {"policy", std::string(policy_->name())},
                                 // Every job ended, and no --stay-open waits for recmix close.
                                 {"finished", (!options_.stay_open || close_requested_) &&
                                                  std::all_of(records_.begin(), records_.end(),
                                                              [](const auto& r) { return terminal(r->state); })},
                                 {"jobs", jobs},
                                 {"rejected_submissions", rejections},
                                 {"spool_refused", spool_refused_}};
  const fs::path path = fs::path(options_.run_dir) / "status.json";
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream(tmp) << status.dump(2) << '\n';
  fs::rename(tmp, path);
}

// Why no two jobs shared a rank in this run, for its summary, or "" when some did (or fewer than
// two jobs ran): the first of the colocation limit, the cores, the memory, the policy that holds.
std::string SchedulerService::why_none_colocated() const {
  std::vector<const Record*> ran;
  for (const auto& r : records_) {
    if (!r->partners.empty()) return {};
    if (r->first_start >= 0) ran.push_back(r.get());
  }
  if (ran.size() < 2) return {};
  if (cluster_->spec().max_jobs_per_gpu <= 1) return "colocation_limit is 1";
  const int cores = options_.cores_per_rank;
  const double capacity = cluster_->spec().gpu_memory_bytes;
  int fewest_threads = 1 << 30;
  bool cores_fit = false, memory_fit = false;
  for (std::size_t a = 0; a < ran.size(); ++a)
    for (std::size_t b = a + 1; b < ran.size(); ++b) {
      const int threads = ran[a]->job.spec.device.threads + ran[b]->job.spec.device.threads;
      fewest_threads = std::min(fewest_threads, threads);
      if (threads > cores) continue;
      cores_fit = true;
      memory_fit = memory_fit || ran[a]->share + ran[b]->share <= capacity;
    }
  if (!cores_fit)
    return fmt::format("each rank has {} core(s) for jobs and no two jobs' threads fit on one (the fewest two need "
                       "{}); with {} cores a rank (more cores, or fewer ranks a host) they would share",
                       cores, fewest_threads, fewest_threads);
  if (!memory_fit)
    return fmt::format("no two jobs' memory shares fit in a rank's {}", device::format_bytes(static_cast<std::size_t>(capacity)));
  return fmt::format("the {} policy placed no two side by side (too little predicted gain, or they never waited "
                     "together)", policy_->name());
}

nlohmann::json SchedulerService::summary() const {
  const double makespan = now();
  nlohmann::json jobs = nlohmann::json::array();
  double samples = 0;
  for (const auto& r : records_) {
    std::size_t peak = 0;
    for (auto& [rank, bytes] : r->peak_by_rank) peak = std::max(peak, bytes);
    const double batch = static_cast<double>(r->job.spec.train.batch_size);
    nlohmann::json j = {{"name", r->job.spec.name},
                        {"state", r->state},
                        {"ranks", r->ranks},
                        {"steps", r->step},
                        {"loss", r->loss},
                        {"queued_s", r->first_start >= 0 ? nlohmann::json(r->queued_s) : nlohmann::json(nullptr)},
                        {"jct_s", r->finish >= 0 && r->first_start >= 0 ? r->finish - r->sjob.arrival_s : -1},
                        {"partners", std::vector<std::string>(r->partners.begin(), r->partners.end())},
                        {"samples_per_s_alone", r->alone_n ? batch * r->alone_n / r->alone_sum : 0.0},
                        {"samples_per_s_colocated", r->shared_n ? batch * r->shared_n / r->shared_sum : 0.0},
                        {"estimate_bytes", r->estimate},
                        {"measured_peak_bytes", peak},
                        {"estimate_below_peak", r->estimate_below_peak},
                        {"preemptions", r->preemptions},
                        {"memory_restarts", r->memory_restarts}};
    if (!r->error.empty()) j["error"] = r->error;
    if (!r->eval.is_null()) j["eval"] = r->eval;
    if (r->state == "finished") samples += batch * static_cast<double>(r->step);
    jobs.push_back(j);
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (int g = 0; g < plane_.size(); ++g)
    ranks.push_back({{"rank", g}, {"busy_share", makespan > 0 ? busy_s_[g] / makespan : 0.0},
                     {"peak_bytes", rank_peak_[g]}});
  const nlohmann::json control = {{"rounds", rounds_},
                                  {"mean_round_ms", rounds_ ? 1e3 * round_seconds_ / rounds_ : 0.0},
                                  {"max_round_ms", 1e3 * round_max_s_},
                                  {"longest_round", {{"t", longest_round_.t},
                                                     {"refit_ms", 1e3 * longest_round_.refit_s},
                                                     {"policy_ms", 1e3 * longest_round_.policy_s},
                                                     {"queued", longest_round_.queued},
                                                     {"starts", longest_round_.starts}}},
                                  {"refits", refits_},
                                  {"mean_refit_ms", refits_ ? 1e3 * refit_seconds_ / refits_ : 0.0},
                                  {"messages_received", messages_in_}};
  nlohmann::json out = {{"policy", std::string(policy_->name())},
                        {"ranks", plane_.size()},
                        {"makespan_s", makespan},
                        {"control_plane", control},
                        {"samples_per_s", makespan > 0 ? samples / makespan : 0.0},
                        {"jobs", jobs},
                        {"rank_usage", ranks}};
  if (const std::string why = why_none_colocated(); !why.empty()) out["none_colocated"] = why;
  return out;
}

}  // namespace recmix::runtime::run
