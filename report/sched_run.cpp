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
#include "sched/run_events.hpp"

namespace recmix::report {

namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

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

// A SchedRun built from events.jsonl, one event at a time, one method per kind of event; each
// job's figures are kept in its track until the events end. Each run_start opens a part (a
// resumed run appends one, its times from 0 again): its events are moved by the part's offset.
class RunFromEvents {
 public:
  explicit RunFromEvents(SchedRun& run) : run_(run) {}

  // Reads the file into the run; its lines that are not events are skipped and noted.
  void read(const fs::path& events_path) {
    std::ifstream in(events_path);
    if (!in) throw IoError(fmt::format("{}: cannot read", events_path.string()));
    const sched::EventLines read =
        sched::read_event_lines(in, events_path.string(), sched::BadLines::skip, [&](const sched::RunEvent& e) {
          add(e, events_path);
          return sched::AfterEvent::read_on;
        });
    run_.event_lines = read.lines;
    run_.skipped_lines = read.skipped;
    if (read.skipped > 0)
      run_.notes.push_back(fmt::format("{}: skipped {} of {} lines ({}{})", events_path.string(), read.skipped,
                                       read.lines, join(read.reasons, "; "),
                                       read.skipped > static_cast<std::int64_t>(read.reasons.size()) ? "; ..." : ""));
  }

  // After the last event: the span, placements still open drawn to its end, slots, the jobs' figures.
  void finish(const fs::path& events_path) {
    run_.span_s = std::isfinite(run_end_) ? std::max(run_end_, last_t_) : last_t_;
    if (!run_.parts.empty()) run_.parts.back().end_s = run_.span_s;
    for (Placement& p : run_.placements)
      if (p.ended_by == "running") p.end_s = run_.span_s;
    if (!std::isfinite(run_end_) && !run_.placements.empty())
      run_.notes.push_back(fmt::format("{}: no run_end event (the run is going on, or was interrupted); jobs still "
                                       "running are drawn to the last event, at {:.1f} s",
                                       events_path.string(), last_t_));
    assign_slots(run_.placements);
    for (const auto& name : run_.job_names) run_.jobs.push_back(tracks_[name].figures);
  }

 private:
  void add(const sched::RunEvent& e, const fs::path& events_path) {
    if (e.kind == "run_start") run_start(e, events_path);
    const double t = e.t + offset_;
    last_t_ = std::max(last_t_, t);
    if (e.kind == "run_start") return;
    if (e.kind == "run_end") return run_end(e, t);
    if (e.job.empty()) return;  // rejected files, terminating
    if (e.kind == "submitted") return submitted(e);
    if (e.kind == "arrival") return arrival(e, t);
    if (e.kind == "start") return start(e, t);
    if (e.kind == "sample") return sample(e, t);
    if (e.kind == "preempt" || e.kind == "move_apart" || e.kind == "stop") return stop_asked(e, t);
    if (e.kind == "stopped") return stopped(e, t);
    if (e.kind == "finished" || e.kind == "failed" || e.kind == "stuck" || e.kind == "memory_restart") return ended(e, t);
  }

  // A part begins: after a first one, the previous part ends at its last event, and this one is
  // placed at its wall-clock time after the first (or, without one, right after the previous).
  void run_start(const sched::RunEvent& e, const fs::path& events_path) {
    run_.ranks = std::max(run_.ranks, e.fields.value("ranks", 0));
    run_.policy = string_or_empty(e.fields, "policy");
    run_.memory_capacity_bytes = number_or_nan(e.fields, "memory_capacity_bytes");
    if (e.fields.contains("ranks_per_node") && e.fields["ranks_per_node"].is_number_integer())
      run_.ranks_per_node = e.fields["ranks_per_node"].get<int>();
    if (e.fields.contains("node_hosts") && e.fields["node_hosts"].is_array()) {
      run_.node_hosts.clear();
      for (const auto& h : e.fields["node_hosts"])
        if (h.is_string()) run_.node_hosts.push_back(h.get<std::string>());
    }
    RunPart part;
    part.unix_s = number_or_nan(e.fields, "unix_s");
    if (run_.parts.empty()) {
      offset_ = 0;
      first_unix_ = part.unix_s - e.t;
      part.begin_s = e.t;
      run_.parts.push_back(part);
      return;
    }
    const double previous_end = std::isfinite(run_end_) ? std::max(run_end_, last_t_) : last_t_;
    run_.parts.back().end_s = previous_end;
    end_part(previous_end);
    const double by_clock = part.unix_s - first_unix_;  // NaN without both wall clocks
    if (std::isfinite(by_clock) && by_clock >= previous_end) {
      part.begin_s = by_clock;
    } else {
      part.begin_s = previous_end;
      part.after_previous = true;
      run_.notes.push_back(fmt::format(
          "{}: part {} of the run (a resume, line {}) {}; it is drawn right after the previous part's last event, at "
          "{:.1f} s, and the time between the two is unknown",
          events_path.string(), run_.parts.size() + 1, e.line,
          std::isfinite(by_clock) ? "starts before the previous part's last event by the wall clock"
                                  : "has no wall-clock time (unix_s) in its run_start",
          previous_end));
    }
    offset_ = part.begin_s - e.t;
    run_end_ = kNaN;
    run_.parts.push_back(part);
  }

  // What the previous part left open ends with it: its jobs' placements (their events ended
  // there: a killed run) and their time in the queue, which goes on only while a part runs.
  void end_part(double at) {
    for (auto& [name, tr] : tracks_) {
      for (std::size_t i : tr.open) {
        Placement& p = run_.placements[i];
        if (p.ended_by == "running") {
          p.ended_by = "run ended";
          p.ended_at_s = at;
        }
        p.end_s = std::max(p.begin_s, at);
      }
      if (!tr.open.empty() && tr.figures.state == "running") tr.figures.state = "queued";
      tr.open.clear();
      tr.stopping = false;
      if (std::isfinite(tr.queued_since)) tr.figures.queued_s += std::max(0.0, at - tr.queued_since);
      tr.queued_since = kNaN;
    }
  }

  void run_end(const sched::RunEvent& e, double t) {
    run_end_ = number_or_nan(e.fields, "makespan_s") + offset_;
    if (!std::isfinite(run_end_)) run_end_ = t;
  }

  void submitted(const sched::RunEvent& e) {
    JobTrack& tr = track(e.job);
    tr.figures.estimate_bytes = number_or_nan(e.fields, "estimate_bytes");
    if (e.fields.contains("ranks") && e.fields["ranks"].is_number_integer())
      tr.figures.ranks = std::to_string(e.fields["ranks"].get<int>());
  }

  // A job resumed in a later part arrives again: it keeps its first arrival.
  void arrival(const sched::RunEvent& e, double t) {
    JobTrack& tr = track(e.job);
    if (!std::isfinite(tr.figures.arrival_s)) tr.figures.arrival_s = t;
    tr.queued_since = t;
  }

  // A placement opens on each of its ranks.
  void start(const sched::RunEvent& e, double t) {
    JobTrack& tr = track(e.job);
    const std::vector<int> ranks = int_list(e.fields, "ranks");
    if (!std::isfinite(tr.figures.first_start_s)) tr.figures.first_start_s = t;
    if (std::isfinite(tr.queued_since)) tr.figures.queued_s += t - tr.queued_since;
    tr.queued_since = kNaN;
    tr.figures.state = "running";
    if (std::isfinite(number_or_nan(e.fields, "estimate_bytes")))
      tr.figures.estimate_bytes = number_or_nan(e.fields, "estimate_bytes");
    std::vector<std::string> names;
    for (int r : ranks) {
      names.push_back(std::to_string(r));
      Placement p;
      p.job = e.job;
      p.rank = r;
      p.begin_s = p.end_s = t;
      p.ended_by = "running";
      p.resumed = e.fields.value("resume", false);
      tr.open.push_back(run_.placements.size());
      run_.placements.push_back(p);
      run_.ranks = std::max(run_.ranks, r + 1);
    }
    tr.figures.ranks = join(names, ",");
  }

  void sample(const sched::RunEvent& e, double t) {
    track(e.job);
    RankSample s;
    s.t = t;
    s.job = static_cast<int>(std::find(run_.job_names.begin(), run_.job_names.end(), e.job) - run_.job_names.begin());
    s.rank = e.fields.value("rank", 0);
    s.busy_share = number_or_nan(e.fields, "busy_share");
    s.pool_current_bytes = number_or_nan(e.fields, "pool_current_bytes");
    s.pool_peak_bytes = number_or_nan(e.fields, "pool_peak_bytes");
    s.gpu_util = number_or_nan(e.fields, "gpu_util");
    run_.samples.push_back(s);
    run_.ranks = std::max(run_.ranks, s.rank + 1);
  }

  // preempt, move_apart, stop: the job runs on until its checkpoint ("stopped").
  void stop_asked(const sched::RunEvent& e, double t) {
    JobTrack& tr = track(e.job);
    end_open(tr, t, e.kind, false);
    tr.stopping = true;
    ++tr.figures.preemptions;
  }

  void stopped(const sched::RunEvent& e, double t) {
    JobTrack& tr = track(e.job);
    end_open(tr, t, "stop", true);
    tr.stopping = false;
    tr.figures.state = "queued";
    tr.queued_since = t;
  }

  // finished, failed, stuck, memory_restart (which queues the job again).
  void ended(const sched::RunEvent& e, double t) {
    JobTrack& tr = track(e.job);
    end_open(tr, t, e.kind, true);
    if (e.kind == "memory_restart") {
      tr.figures.state = "queued";
      tr.queued_since = t;
      return;
    }
    tr.figures.state = e.kind == "stuck" ? "failed" : e.kind;
    tr.figures.steps = e.fields.value("step", tr.figures.steps);
    if (std::isfinite(number_or_nan(e.fields, "measured_peak_bytes")))
      tr.figures.measured_peak_bytes = number_or_nan(e.fields, "measured_peak_bytes");
    if (e.fields.contains("error") && e.fields["error"].is_string())
      tr.figures.error = e.fields["error"].get<std::string>();
    if (std::isfinite(tr.figures.arrival_s)) tr.figures.jct_s = t - tr.figures.arrival_s;
  }

  // The job's track, a new one (queued, figures unknown) at its first event.
  JobTrack& track(const std::string& name) {
    auto it = tracks_.find(name);
    if (it != tracks_.end()) return it->second;
    run_.job_names.push_back(name);
    JobTrack& t = tracks_[name];
    t.figures.name = name;
    t.figures.state = "queued";
    t.figures.arrival_s = t.figures.first_start_s = t.figures.jct_s = kNaN;
    t.figures.estimate_bytes = t.figures.measured_peak_bytes = kNaN;
    t.figures.samples_per_s_alone = t.figures.samples_per_s_colocated = kNaN;
    return t;
  }

  // Ends the job's open placements at `at`; `why` is kept by those that no earlier event ended.
  void end_open(JobTrack& t, double at, const std::string& why, bool close) {
    for (std::size_t i : t.open) {
      Placement& p = run_.placements[i];
      if (p.ended_by == "running") {
        p.ended_by = why;
        p.ended_at_s = at;
      }
      p.end_s = at;
    }
    if (close) t.open.clear();
  }

  SchedRun& run_;
  std::map<std::string, JobTrack> tracks_;
  double last_t_ = 0, run_end_ = kNaN;
  double offset_ = 0;           // added to the times of the part being read
  double first_unix_ = kNaN;    // the first part's wall clock at its t = 0
};

// One job of summary.json's "jobs": its figures replace those from the events. After a resume
// the summary covers the last part only: the times and stops over every part stay the events'.
void add_summary_job(const nlohmann::json& j, SchedRun& run) {
  const bool resumed = run.parts.size() > 1;
  const std::string name = string_or_empty(j, "name");
  auto it = std::find_if(run.jobs.begin(), run.jobs.end(), [&](const JobFigures& f) { return f.name == name; });
  if (it == run.jobs.end()) {
    run.job_names.push_back(name);
    JobFigures f;
    f.name = name;
    f.arrival_s = f.first_start_s = kNaN;
    run.jobs.push_back(f);
    it = run.jobs.end() - 1;
  }
  JobFigures& f = *it;
  f.state = string_or_empty(j, "state");
  std::vector<std::string> ranks;
  for (int r : int_list(j, "ranks")) ranks.push_back(std::to_string(r));
  if (!ranks.empty()) f.ranks = join(ranks, ",");
  f.steps = j.value("steps", f.steps);
  if (!resumed) {
    f.queued_s = number_or_nan(j, "queued_s");
    f.jct_s = number_or_nan(j, "jct_s");
    if (f.jct_s < 0) f.jct_s = kNaN;
    f.preemptions = j.value("preemptions", f.preemptions);
  }
  // A job that ended in an earlier part did not run in the last: its rates there are unknown, not 0.
  const bool ended_before = resumed && f.state != "queued" && f.state != "running" && number_or_nan(j, "jct_s") < 0;
  f.samples_per_s_alone = ended_before ? kNaN : number_or_nan(j, "samples_per_s_alone");
  f.samples_per_s_colocated = ended_before ? kNaN : number_or_nan(j, "samples_per_s_colocated");
  f.estimate_bytes = number_or_nan(j, "estimate_bytes");
  const double peak = number_or_nan(j, "measured_peak_bytes");
  if (!resumed || !std::isfinite(f.measured_peak_bytes) || peak > f.measured_peak_bytes) f.measured_peak_bytes = peak;
  std::vector<std::string> partners;
  if (j.contains("partners") && j["partners"].is_array())
    for (const auto& p : j["partners"])
      if (p.is_string()) partners.push_back(p.get<std::string>());
  f.partners = join(partners, ", ");
  if (j.contains("error") && j["error"].is_string()) f.error = j["error"].get<std::string>();
}

// summary.json: the scheduler's own figures, where the run wrote them.
void read_summary(const fs::path& summary_path, SchedRun& run) {
  if (!fs::is_regular_file(summary_path)) {
    run.notes.push_back(fmt::format("{}: absent (the run is going on, or was interrupted); the per-job figures come "
                                    "from the events", summary_path.string()));
    return;
  }
  std::ifstream in(summary_path);
  const nlohmann::json s = nlohmann::json::parse(in, nullptr, false);
  if (s.is_discarded() || !s.is_object()) {
    run.notes.push_back(fmt::format("{}: not JSON (truncated?); the per-job figures come from the events",
                                    summary_path.string()));
    return;
  }
  run.have_summary = true;
  if (run.policy.empty()) run.policy = string_or_empty(s, "policy");
  run.ranks = std::max(run.ranks, s.value("ranks", 0));
  if (s.contains("jobs") && s["jobs"].is_array())
    for (const auto& j : s["jobs"])
      if (j.is_object()) add_summary_job(j, run);
  if (s.contains("rank_usage") && s["rank_usage"].is_array())
    for (const auto& r : s["rank_usage"])
      if (r.is_object())
        run.rank_figures.push_back({r.value("rank", 0), number_or_nan(r, "busy_share"), number_or_nan(r, "peak_bytes")});
}

// Each job's own training run, under jobs/<name>/.
void read_job_runs(const std::string& dir, SchedRun& run) {
  for (const auto& name : run.job_names) {
    const fs::path job_dir = fs::path(dir) / "jobs" / name;
    if (is_training_run(job_dir.string()))
      run.job_runs.push_back(read_training_run(job_dir.string(), name));
    else
      run.notes.push_back(fmt::format("{}: no metrics.jsonl or train.log; no curves for job '{}'", job_dir.string(), name));
  }
}

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
  RunFromEvents events(run);
  if (fs::is_regular_file(events_path))
    events.read(events_path);
  else
    run.notes.push_back(fmt::format("{}: absent; no placements, utilisation or memory over time", events_path.string()));
  events.finish(events_path);
  read_summary(summary_path, run);
  read_job_runs(dir, run);
  return run;
}

}  // namespace recmix::report
