// The scheduler service's outputs: the progress line on stderr, status.json (rewritten on the
// round timer) and the summary (summary.json and the table at the end).
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "runtime/run/scheduler_record.hpp"
#include "runtime/run/scheduler_service.hpp"

namespace recmix::runtime::run {
namespace fs = std::filesystem;

void SchedulerService::progress_line(bool force) {
  const double t = now();
  if (options_.quiet || (!force && t - last_progress_ < 5.0)) return;
  last_progress_ = t;
  std::string running, queued;
  int done = 0;
  for (const auto& r : records_) {
    if (r->state == "running" || r->state == "stopping") {
      const double pct = r->total_steps > 0 ? 100.0 * r->step / r->total_steps : 0;
      std::string eta = "?";
      if (r->step > 0 && r->first_start >= 0) {
        const double rate = r->step / std::max(1e-9, t - r->first_start - 0.0);
        eta = fmt::format("{:.0f}s", (r->total_steps - r->step) / std::max(rate, 1e-9));
      }
      running += fmt::format("{}{} {:.0f}% ETA {}", running.empty() ? "" : ", ", r->job.spec.name, pct, eta);
    } else if (r->state == "queued" || r->state == "pending") {
      queued += fmt::format("{}{}", queued.empty() ? "" : ", ", r->job.spec.name);
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
                                 {"rejected_submissions", rejections}};
  const fs::path path = fs::path(options_.run_dir) / "status.json";
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream(tmp) << status.dump(2) << '\n';
  fs::rename(tmp, path);
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
                                  {"messages_received", messages_in_}};
  return {{"policy", std::string(policy_->name())}, {"ranks", plane_.size()}, {"makespan_s", makespan},
          {"control_plane", control},
          {"samples_per_s", makespan > 0 ? samples / makespan : 0.0}, {"jobs", jobs}, {"rank_usage", ranks}};
}

}  // namespace recmix::runtime::run
