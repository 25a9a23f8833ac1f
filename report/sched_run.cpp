#include "report/sched_run.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "core/error.hpp"

namespace recmix::report {

namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kReasonsShown = 3;

double number_or_nan(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return kNaN;
  return it->get<double>();
}

std::string string_or_empty(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::vector<int> int_list(const nlohmann::json& j, const char* key) {
  std::vector<int> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it)
    if (v.is_number_integer()) out.push_back(v.get<int>());
  return out;
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// What the events say of one job, for the per-job table when summary.json is absent.
struct JobTrack {
  JobFigures figures;
  double queued_since = kNaN;
  bool stopping = false;
  std::vector<std::size_t> open;  // its placements not yet ended
};

}  // namespace

bool is_sched_run(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "events.jsonl", ec) || fs::is_regular_file(fs::path(dir) / "summary.json", ec);
}

void assign_slots(std::vector<Placement>& placements) {
  std::vector<std::size_t> order(placements.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return placements[a].begin_s < placements[b].begin_s; });
  // Per rank, the end of what each slot holds.
  std::map<int, std::vector<double>> slot_end;
  for (std::size_t i : order) {
    Placement& p = placements[i];
    auto& ends = slot_end[p.rank];
    std::size_t s = 0;
    while (s < ends.size() && ends[s] > p.begin_s) ++s;
    if (s == ends.size()) ends.push_back(0);
    ends[s] = std::max(p.end_s, p.begin_s);
    p.slot = static_cast<int>(s);
  }
}

SchedRun read_sched_run(const std::string& dir) {
  SchedRun run;
  run.dir = dir;
  if (!is_sched_run(dir)) throw IoError(fmt::format("{}: not a recmix run directory (no events.jsonl or summary.json)", dir));
  const fs::path events_path = fs::path(dir) / "events.jsonl", summary_path = fs::path(dir) / "summary.json";

  std::map<std::string, JobTrack> tracks;
  auto track = [&](const std::string& name) -> JobTrack& {
    auto it = tracks.find(name);
    if (it != tracks.end()) return it->second;
    run.job_names.push_back(name);
    JobTrack& t = tracks[name];
    t.figures.name = name;
    t.figures.state = "queued";
    t.figures.arrival_s = t.figures.first_start_s = t.figures.jct_s = kNaN;
    t.figures.estimate_bytes = t.figures.measured_peak_bytes = kNaN;
    t.figures.samples_per_s_alone = t.figures.samples_per_s_colocated = kNaN;
    return t;
  };
  auto end_open = [&](JobTrack& t, double at, const std::string& why, bool close) {
    for (std::size_t i : t.open) {
      Placement& p = run.placements[i];
      if (p.ended_by == "running") {
        p.ended_by = why;
        p.ended_at_s = at;
      }
      p.end_s = at;
    }
    if (close) t.open.clear();
  };

  double last_t = 0, run_end = kNaN;
  if (fs::is_regular_file(events_path)) {
    std::ifstream in(events_path);
    if (!in) throw IoError(fmt::format("{}: cannot read", events_path.string()));
    std::string line;
    std::vector<std::string> reasons;
    while (std::getline(in, line)) {
      ++run.event_lines;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
      const bool usable = !e.is_discarded() && e.is_object() && e.contains("event") && e["event"].is_string() &&
                          e.contains("t") && e["t"].is_number();
      if (!usable) {
        ++run.skipped_lines;
        if (reasons.size() < kReasonsShown)
          reasons.push_back(fmt::format("line {}: {}", run.event_lines,
                                        e.is_discarded() ? "not JSON (truncated?)" : "not an event (no \"event\" or \"t\")"));
        continue;
      }
      try {  // a field of another type than the event kind documents: the line is skipped
        const std::string kind = e["event"].get<std::string>();
        const double t = e["t"].get<double>();
        last_t = std::max(last_t, t);
        const std::string job = string_or_empty(e, "job");
        if (kind == "run_start") {
          run.ranks = std::max(run.ranks, e.value("ranks", 0));
          run.policy = string_or_empty(e, "policy");
          run.memory_capacity_bytes = number_or_nan(e, "memory_capacity_bytes");
        } else if (kind == "run_end") {
          run_end = number_or_nan(e, "makespan_s");
          if (!std::isfinite(run_end)) run_end = t;
        } else if (job.empty()) {
          continue;  // rejected files, terminating
        } else if (kind == "submitted") {
          JobTrack& tr = track(job);
          tr.figures.estimate_bytes = number_or_nan(e, "estimate_bytes");
          if (e.contains("ranks") && e["ranks"].is_number_integer()) tr.figures.ranks = std::to_string(e["ranks"].get<int>());
        } else if (kind == "arrival") {
          JobTrack& tr = track(job);
          tr.figures.arrival_s = t;
          tr.queued_since = t;
        } else if (kind == "start") {
          JobTrack& tr = track(job);
          const std::vector<int> ranks = int_list(e, "ranks");
          if (!std::isfinite(tr.figures.first_start_s)) tr.figures.first_start_s = t;
          if (std::isfinite(tr.queued_since)) tr.figures.queued_s += t - tr.queued_since;
          tr.queued_since = kNaN;
          tr.figures.state = "running";
          if (std::isfinite(number_or_nan(e, "estimate_bytes"))) tr.figures.estimate_bytes = number_or_nan(e, "estimate_bytes");
          std::vector<std::string> names;
          for (int r : ranks) {
            names.push_back(std::to_string(r));
            Placement p;
            p.job = job;
            p.rank = r;
            p.begin_s = p.end_s = t;
            p.ended_by = "running";
            p.resumed = e.value("resume", false);
            tr.open.push_back(run.placements.size());
            run.placements.push_back(p);
            run.ranks = std::max(run.ranks, r + 1);
          }
          tr.figures.ranks = join(names, ",");
        } else if (kind == "sample") {
          JobTrack& tr = track(job);
          (void)tr;
          RankSample s;
          s.t = t;
          s.job = static_cast<int>(std::find(run.job_names.begin(), run.job_names.end(), job) - run.job_names.begin());
          s.rank = e.value("rank", 0);
          s.busy_share = number_or_nan(e, "busy_share");
          s.pool_current_bytes = number_or_nan(e, "pool_current_bytes");
          s.pool_peak_bytes = number_or_nan(e, "pool_peak_bytes");
          s.gpu_util = number_or_nan(e, "gpu_util");
          run.samples.push_back(s);
          run.ranks = std::max(run.ranks, s.rank + 1);
        } else if (kind == "preempt" || kind == "move_apart" || kind == "stop") {
          JobTrack& tr = track(job);
          end_open(tr, t, kind, false);  // the job runs on until its checkpoint ("stopped")
          tr.stopping = true;
          ++tr.figures.preemptions;
        } else if (kind == "stopped") {
          JobTrack& tr = track(job);
          end_open(tr, t, "stop", true);
          tr.stopping = false;
          tr.figures.state = "queued";
          tr.queued_since = t;
        } else if (kind == "finished" || kind == "failed" || kind == "stuck" || kind == "memory_restart") {
          JobTrack& tr = track(job);
          end_open(tr, t, kind, true);
          if (kind == "memory_restart") {
            tr.figures.state = "queued";
            tr.queued_since = t;
            continue;
          }
          tr.figures.state = kind == "stuck" ? "failed" : kind;
          tr.figures.steps = e.value("step", tr.figures.steps);
          if (std::isfinite(number_or_nan(e, "measured_peak_bytes")))
            tr.figures.measured_peak_bytes = number_or_nan(e, "measured_peak_bytes");
          if (e.contains("error") && e["error"].is_string()) tr.figures.error = e["error"].get<std::string>();
          if (std::isfinite(tr.figures.arrival_s)) tr.figures.jct_s = t - tr.figures.arrival_s;
        }
      } catch (const nlohmann::json::exception& x) {
        ++run.skipped_lines;
        if (reasons.size() < kReasonsShown)
          reasons.push_back(fmt::format("line {}: a field of the wrong type ({})", run.event_lines, x.what()));
      }
    }
    if (in.bad()) throw IoError(fmt::format("{}: read error after line {}", events_path.string(), run.event_lines));
    if (run.skipped_lines > 0)
      run.notes.push_back(fmt::format("{}: skipped {} of {} lines ({}{})", events_path.string(), run.skipped_lines,
                                      run.event_lines, join(reasons, "; "), run.skipped_lines > kReasonsShown ? "; ..." : ""));
  } else {
    run.notes.push_back(fmt::format("{}: absent; no placements, utilisation or memory over time", events_path.string()));
  }
  run.span_s = std::isfinite(run_end) ? std::max(run_end, last_t) : last_t;
  for (Placement& p : run.placements)
    if (p.ended_by == "running") p.end_s = run.span_s;
  if (!std::isfinite(run_end) && !run.placements.empty())
    run.notes.push_back(fmt::format("{}: no run_end event (the run is going on, or was interrupted); jobs still running "
                                    "are drawn to the last event, at {:.1f} s", events_path.string(), last_t));
  assign_slots(run.placements);
  for (const auto& name : run.job_names) run.jobs.push_back(tracks[name].figures);

  // summary.json: the scheduler's own figures, where the run wrote them.
  if (fs::is_regular_file(summary_path)) {
    std::ifstream in(summary_path);
    nlohmann::json s = nlohmann::json::parse(in, nullptr, false);
    if (s.is_discarded() || !s.is_object()) {
      run.notes.push_back(fmt::format("{}: not JSON (truncated?); the per-job figures come from the events",
                                      summary_path.string()));
    } else {
      run.have_summary = true;
      if (run.policy.empty()) run.policy = string_or_empty(s, "policy");
      run.ranks = std::max(run.ranks, s.value("ranks", 0));
      if (s.contains("jobs") && s["jobs"].is_array()) {
        for (const auto& j : s["jobs"]) {
          if (!j.is_object()) continue;
          const std::string name = string_or_empty(j, "name");
          auto it = std::find_if(run.jobs.begin(), run.jobs.end(), [&](const JobFigures& f) { return f.name == name; });
          if (it == run.jobs.end()) {
            run.job_names.push_back(name);
            JobTrack& tr = tracks[name];
            tr.figures.name = name;
            tr.figures.arrival_s = tr.figures.first_start_s = kNaN;
            run.jobs.push_back(tr.figures);
            it = run.jobs.end() - 1;
          }
          JobFigures& f = *it;
          f.state = string_or_empty(j, "state");
          std::vector<std::string> ranks;
          for (int r : int_list(j, "ranks")) ranks.push_back(std::to_string(r));
          if (!ranks.empty()) f.ranks = join(ranks, ",");
          f.steps = j.value("steps", f.steps);
          f.queued_s = number_or_nan(j, "queued_s");
          f.jct_s = number_or_nan(j, "jct_s");
          if (f.jct_s < 0) f.jct_s = kNaN;
          f.samples_per_s_alone = number_or_nan(j, "samples_per_s_alone");
          f.samples_per_s_colocated = number_or_nan(j, "samples_per_s_colocated");
          f.estimate_bytes = number_or_nan(j, "estimate_bytes");
          f.measured_peak_bytes = number_or_nan(j, "measured_peak_bytes");
          f.preemptions = j.value("preemptions", f.preemptions);
          std::vector<std::string> partners;
          if (j.contains("partners") && j["partners"].is_array())
            for (const auto& p : j["partners"])
              if (p.is_string()) partners.push_back(p.get<std::string>());
          f.partners = join(partners, ", ");
          if (j.contains("error") && j["error"].is_string()) f.error = j["error"].get<std::string>();
        }
      }
      if (s.contains("rank_usage") && s["rank_usage"].is_array())
        for (const auto& r : s["rank_usage"])
          if (r.is_object())
            run.rank_figures.push_back({r.value("rank", 0), number_or_nan(r, "busy_share"), number_or_nan(r, "peak_bytes")});
    }
  } else {
    run.notes.push_back(fmt::format("{}: absent (the run is going on, or was interrupted); the per-job figures come "
                                    "from the events", summary_path.string()));
  }

  // Each job's own training run.
  for (const auto& name : run.job_names) {
    const fs::path job_dir = fs::path(dir) / "jobs" / name;
    if (is_training_run(job_dir.string()))
      run.job_runs.push_back(read_training_run(job_dir.string(), name));
    else
      run.notes.push_back(fmt::format("{}: no metrics.jsonl or train.log; no curves for job '{}'", job_dir.string(), name));
  }
  return run;
}

}  // namespace recmix::report
