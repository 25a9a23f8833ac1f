// The report's section for a `recmix run` directory: placements per rank as a Gantt chart,
// utilisation and memory per rank over time, queueing and completion per job, memory estimates
// against measured peaks, and each job's own curves.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "report/sections.hpp"
#include "report/xy_chart.hpp"

namespace recmix::report {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr std::size_t kTimeBins = 300;

// "rank 3", or with several nodes "node 1 (host) rank 3": lanes sort by rank, so a node's ranks
// are together.
std::string lane_name(const SchedRun& run, int rank, int slot) {
  std::string name = fmt::format("rank {}", rank);
  if (run.ranks_per_node > 0 && run.ranks_per_node < run.ranks) {
    const int node = rank / run.ranks_per_node;
    const bool named = node < static_cast<int>(run.node_hosts.size());
    name = fmt::format("node {}{} {}", node, named ? " (" + run.node_hosts[node] + ")" : std::string(), name);
  }
  return slot == 0 ? name : fmt::format("{} (shared, {})", name, slot + 1);
}

// The stops of a resumed run: from each part's last event to the next part's start.
struct Gap {
  double stopped_s, resumed_s;
  bool known;  // false: the next part has no wall-clock time, and was put right after
};

std::vector<Gap> gaps(const SchedRun& run) {
  std::vector<Gap> out;
  for (std::size_t i = 1; i < run.parts.size(); ++i)
    out.push_back({run.parts[i - 1].end_s, run.parts[i].begin_s, !run.parts[i].after_previous});
  return out;
}

// "stopped at 22.0 s, resumed at 25.1 s; ..."
std::string gaps_text(const SchedRun& run) {
  std::string out;
  for (const Gap& g : gaps(run))
    out += fmt::format("{}stopped at {:.1f} s, resumed {}", out.empty() ? "" : "; ", g.stopped_s,
                       g.known ? fmt::format("at {:.1f} s", g.resumed_s) : "after an unknown time (drawn at once)");
  return out;
}

// Triangles at y = 0 where the run stopped and where it resumed, for the charts against time.
void add_gap_markers(const SchedRun& run, XyChart& chart) {
  XySeries marks{"run stopped / resumed", "marker", 7, {}, {}, false};
  for (const Gap& g : gaps(run))
    for (const double at : {g.stopped_s, g.resumed_s}) {
      marks.x.push_back(at);
      marks.y.push_back(0);
    }
  if (marks.x.empty()) return;
  chart.series.push_back(std::move(marks));
  chart.caption += " Black triangles on the time axis: where the run stopped and where it was resumed (nothing ran between).";
}

void gantt(Page& page, const SchedRun& run) {
  // Lanes: each rank's slots, in rank order.
  std::map<std::pair<int, int>, std::size_t> lane_of;
  for (const Placement& p : run.placements) lane_of[{p.rank, p.slot}] = 0;
  Chart chart;
  for (auto& [key, lane] : lane_of) {
    lane = chart.categories.size();
    chart.categories.push_back(lane_name(run, key.first, key.second));
  }
  const bool nodes = run.ranks_per_node > 0 && run.ranks_per_node < run.ranks;
  chart.title = nodes ? "Placements per node and rank" : "Placements per rank";
  chart.x_label = "time since the run started (s)";
  chart.y_label = "rank";
  Series stops{"stop (preemption, move apart, run stop, memory restart)", "marker", {}, {}, {}, 7};
  Series failures{"failure", "failure", {}, {}, {}, 5};
  for (std::size_t j = 0; j < run.job_names.size(); ++j) {
    Series s;
    s.label = run.job_names[j];
    s.style = "range";
    s.color = static_cast<int>(j);
    for (const Placement& p : run.placements)
      if (p.job == run.job_names[j]) s.ranges.push_back({p.begin_s, p.end_s, lane_of[{p.rank, p.slot}]});
    if (!s.ranges.empty()) chart.series.push_back(std::move(s));
  }
  for (const Placement& p : run.placements) {
    const double lane = static_cast<double>(lane_of[{p.rank, p.slot}]);
    if (p.ended_by == "failed" || p.ended_by == "stuck") {
      failures.x.push_back(p.ended_at_s);
      failures.y.push_back(lane);
    } else if (p.ended_by != "finished" && p.ended_by != "running") {
      stops.x.push_back(p.ended_at_s);
      stops.y.push_back(lane);
    }
  }
  if (!stops.x.empty()) chart.series.push_back(std::move(stops));
  if (!failures.x.empty()) chart.series.push_back(std::move(failures));
  // The run's own stops: a grey band over every lane, from the last event before to the resume.
  Series stopped{"run stopped (resumed with --resume)", "band", {}, {}, {}, 7};
  for (const Gap& g : gaps(run))
    for (std::size_t lane = 0; lane < chart.categories.size(); ++lane) stopped.ranges.push_back({g.stopped_s, g.resumed_s, lane});
  chart.caption = "One bar per job and rank, from its start to when it left the rank; jobs that share a rank at once are "
                  "stacked on its extra lanes. Triangles: a stop asked for (the bar ends at its checkpoint); crosses: failures.";
  if (!stopped.ranges.empty()) {
    chart.series.push_back(std::move(stopped));
    chart.caption += " Grey band: the run was stopped (" + gaps_text(run) + ").";
  }
  Table t;
  t.caption = "Placements";
  t.columns = {"job", "rank", "lane", "start (s)", "end (s)", "duration (s)", "ended by", "resumed"};
  std::vector<const Placement*> order;
  for (const Placement& p : run.placements) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const Placement* a, const Placement* b) { return a->begin_s < b->begin_s; });
  for (const Placement* p : order)
    t.rows.push_back({p->job, integer(p->rank), integer(p->slot + 1), figure(p->begin_s), figure(p->end_s),
                      figure(p->end_s - p->begin_s), p->ended_by, p->resumed ? "yes" : "no"});
  t.collapsed = t.rows.size() > 25;
  page.chart_with_table(chart, t);
}

// Per rank, in bins of time: the sum over its jobs of their mean busy share and of their pool
// bytes in use (each job's largest sample in the bin).
void utilisation_and_memory(Page& page, const SchedRun& run) {
  if (run.samples.empty() || run.ranks <= 0) {
    page.note(fmt::format("{}: no sample events; utilisation and memory over time are skipped", run.dir));
    return;
  }
  const double span = std::max(run.span_s, 1e-3);
  // Bins no narrower than a job's samples are apart (median gap), or most would hold none.
  std::map<std::pair<int, int>, double> last_sample;
  std::vector<double> gaps;
  for (const RankSample& s : run.samples) {
    auto [it, first] = last_sample.try_emplace({s.job, s.rank}, s.t);
    if (!first && s.t > it->second) gaps.push_back(s.t - it->second);
    it->second = s.t;
  }
  double gap = 0.2;
  if (!gaps.empty()) {
    std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
    gap = gaps[gaps.size() / 2];
  }
  const double width = std::max(span / static_cast<double>(kTimeBins), gap);
  const auto bins = static_cast<std::size_t>(std::ceil(span / width)) + 1;
  const std::size_t jobs = run.job_names.size();
  const auto ranks = static_cast<std::size_t>(run.ranks);
  // [rank][bin][job]
  std::vector<double> busy_sum(ranks * bins * jobs, 0), busy_n(ranks * bins * jobs, 0), pool(ranks * bins * jobs, -1),
      gpu(ranks * bins, -1);
  for (const RankSample& s : run.samples) {
    if (s.rank < 0 || static_cast<std::size_t>(s.rank) >= ranks || s.job < 0 || static_cast<std::size_t>(s.job) >= jobs) continue;
    const auto b = std::min(bins - 1, static_cast<std::size_t>(s.t / width));
    const std::size_t at = (static_cast<std::size_t>(s.rank) * bins + b) * jobs + static_cast<std::size_t>(s.job);
    if (std::isfinite(s.busy_share)) {
      busy_sum[at] += s.busy_share;
      busy_n[at] += 1;
    }
    if (std::isfinite(s.pool_current_bytes)) pool[at] = std::max(pool[at], s.pool_current_bytes);
    if (std::isfinite(s.gpu_util)) gpu[s.rank * bins + b] = std::max(gpu[s.rank * bins + b], s.gpu_util);
  }
  XyChart util, memory;
  util.title = "Utilisation per rank over time";
  util.x_label = "time since the run started (s)";
  util.x_name = "time (s)";
  util.y_label = "busy share (sum over the rank's jobs)";
  util.y_name = "busy share";
  util.caption = fmt::format("Sample events' busy_share (CPU time of a job's threads over wall time), averaged per job "
                             "in bins of {:.2f} s (a job still placed keeps its last sample through a bin without one) and summed "
                             "over the jobs on the rank.", width);
  memory.title = "Device memory per rank over time";
  memory.x_label = "time since the run started (s)";
  memory.x_name = "time (s)";
  memory.y_label = memory.y_name = "memory pools in use (MiB)";
  memory.y_from_zero = true;
  util.y_from_zero = true;
  memory.caption = fmt::format("Sum over the rank's jobs of their pool bytes in use (the largest sample per job in "
                               "bins of {:.2f} s).", width);
  bool any_gpu = false;
  for (std::size_t r = 0; r < ranks; ++r) {
    XySeries u{fmt::format("rank {}", r), "line", static_cast<int>(r), {}, {}, true};
    XySeries m{fmt::format("rank {}", r), "line", static_cast<int>(r), {}, {}, true};
    XySeries g{fmt::format("rank {} GPU (NVML)", r), "dashed", static_cast<int>(r), {}, {}, true};
    // A job placed on the rank through a bin without a sample of its own keeps its last one.
    std::vector<double> last_busy(jobs, 0), last_pool(jobs, 0);
    std::vector<char> placed_in(bins * jobs, 0);  // [bin][job]: the job is on this rank at the bin's centre
    for (const Placement& p : run.placements) {
      if (p.rank != static_cast<int>(r)) continue;
      const auto j = static_cast<std::size_t>(
          std::find(run.job_names.begin(), run.job_names.end(), p.job) - run.job_names.begin());
      for (std::size_t b = static_cast<std::size_t>(std::max(0.0, p.begin_s / width)); j < jobs && b < bins; ++b) {
        const double t = std::min(span, (static_cast<double>(b) + 0.5) * width);
        if (t >= p.end_s) break;
        if (t >= p.begin_s) placed_in[b * jobs + j] = 1;
      }
    }
    for (std::size_t b = 0; b < bins; ++b) {
      double busy = 0, bytes = 0;
      const double t = std::min(span, (static_cast<double>(b) + 0.5) * width);
      for (std::size_t j = 0; j < jobs; ++j) {
        const std::size_t at = (r * bins + b) * jobs + j;
        const bool placed = placed_in[b * jobs + j] != 0;
        if (busy_n[at] > 0)
          last_busy[j] = busy_sum[at] / busy_n[at];
        else if (!placed)
          last_busy[j] = 0;
        if (pool[at] >= 0)
          last_pool[j] = pool[at];
        else if (!placed)
          last_pool[j] = 0;
        busy += last_busy[j];
        bytes += last_pool[j];
      }
      u.x.push_back(t);
      u.y.push_back(busy);
      m.x.push_back(t);
      m.y.push_back(bytes / kMiB);
      if (gpu[r * bins + b] >= 0) {
        g.x.push_back(t);
        g.y.push_back(gpu[r * bins + b]);
      }
    }
    util.series.push_back(std::move(u));
    memory.series.push_back(std::move(m));
    if (!g.x.empty()) {
      any_gpu = true;
      util.series.push_back(std::move(g));
    }
  }
  if (any_gpu) util.caption += " Dashed: NVML's GPU utilisation (a share of the whole GPU).";
  if (std::isfinite(run.memory_capacity_bytes) && run.memory_capacity_bytes > 0)
    memory.caption += fmt::format(" The scheduler's memory_capacity per rank: {}.", bytes(run.memory_capacity_bytes));
  add_gap_markers(run, util);
  add_gap_markers(run, memory);
  add_xy_chart(page, util);
  add_xy_chart(page, memory);
}

void job_tables(Page& page, const SchedRun& run) {
  BarChart times;
  times.title = "Queueing and completion time per job";
  times.x_label = "job";
  times.y_label = "seconds";
  times.series_labels = {"queued (s)", "job completion time (s)"};
  times.values.resize(2);
  BarChart memory;
  memory.title = "Memory estimate against measured peak per job";
  memory.x_label = "job";
  memory.y_label = "device memory per rank (MiB)";
  memory.series_labels = {"estimate (MiB)", "measured peak (MiB)"};
  memory.values.resize(2);
  memory.caption = "The scheduler's analytic estimate (sched/memory_estimator) against the largest pool peak any of "
                   "the job's ranks reported.";
  for (const JobFigures& j : run.jobs) {
    times.categories.push_back(j.name);
    times.values[0].push_back(j.queued_s);
    times.values[1].push_back(j.jct_s);
    memory.categories.push_back(j.name);
    memory.values[0].push_back(j.estimate_bytes / kMiB);
    memory.values[1].push_back(j.measured_peak_bytes / kMiB);
  }
  times.caption = run.parts.size() > 1
                      ? "From the events of every part of the resumed run: time queued while a part ran (before the "
                        "first start and after each stop) and job completion time (finish - first arrival, the "
                        "stops of the run included)."
                  : run.have_summary ? "From summary.json: time queued (before the first start and after each stop) and "
                                       "job completion time (finish - arrival)."
                                     : "From the events (summary.json is absent).";
  if (!run.jobs.empty()) {
    add_bar_chart(page, times);
    add_bar_chart(page, memory);
  }
  Table t;
  t.caption = "Jobs";
  t.columns = {"job", "state", "ranks", "steps", "arrival (s)", "first start (s)", "queued (s)", "JCT (s)",
               "alone (samples/s)", "co-located (samples/s)", "estimate", "measured peak", "peak / estimate",
               "stops", "partners", "error"};
  for (const JobFigures& j : run.jobs)
    t.rows.push_back({j.name, j.state, j.ranks, integer(j.steps), figure(j.arrival_s), figure(j.first_start_s),
                      figure(j.queued_s), figure(j.jct_s), figure(j.samples_per_s_alone), figure(j.samples_per_s_colocated),
                      bytes(j.estimate_bytes), bytes(j.measured_peak_bytes),
                      j.estimate_bytes > 0 ? fmt::format("{:.3f}", j.measured_peak_bytes / j.estimate_bytes) : "n/a",
                      integer(j.preemptions), j.partners, j.error});
  page.table(t);
  if (!run.rank_figures.empty()) {
    Table r;
    // summary.json is rewritten by each part and covers it alone: the figures are the last part's.
    const bool resumed = run.parts.size() > 1;
    r.caption = resumed ? fmt::format("Ranks (summary.json: the last part only, from {:.1f} s)", run.parts.back().begin_s)
                        : "Ranks (summary.json)";
    r.columns = {"rank", resumed ? "busy share of the last part" : "busy share of the run", "peak memory"};
    for (const RankFigures& f : run.rank_figures) r.rows.push_back({integer(f.rank), figure(f.busy_share), bytes(f.peak_bytes)});
    page.table(r);
  }
}

// A resumed run: its parts, each at its place on the report's time axis.
void parts_table(Page& page, const SchedRun& run) {
  Table t;
  t.caption = "Parts of the run (each recmix run over the directory)";
  t.columns = {"part", "start (s)", "last event (s)", "duration (s)", "placed by"};
  for (std::size_t i = 0; i < run.parts.size(); ++i) {
    const RunPart& p = run.parts[i];
    t.rows.push_back({integer(static_cast<long long>(i + 1)), figure(p.begin_s), figure(p.end_s),
                      figure(p.end_s - p.begin_s),
                      i == 0 ? "first" : p.after_previous ? "after the previous part (no wall-clock time)"
                                                          : "its wall-clock time (run_start's unix_s)"});
  }
  page.table(t);
}

}  // namespace

void add_sched_run_section(Page& page, const SchedRun& run) {
  page.heading(2, "recmix run: " + run.dir);
  page.paragraph(fmt::format("Policy {}, {} ranks, {} jobs, {:.1f} s from the first event to the last{}{}.",
                             run.policy.empty() ? "?" : run.policy, run.ranks, run.job_names.size(), run.span_s,
                             run.parts.size() > 1 ? fmt::format(" in {} parts ({})", run.parts.size(), gaps_text(run)) : "",
                             std::isfinite(run.memory_capacity_bytes) && run.memory_capacity_bytes > 0
                                 ? fmt::format(", memory capacity {} per rank", bytes(run.memory_capacity_bytes))
                                 : ""));
  if (run.parts.size() > 1)
    page.paragraph("The run was stopped and resumed (recmix run --resume): each part's events start their clock at 0, "
                   "and are drawn here at the part's wall-clock start after the first part's. summary.json covers "
                   "the last part only: the jobs' times and stops come from the events of every part, the ranks' "
                   "figures are the last part's.");
  for (const std::string& n : run.notes) page.note(n);
  if (run.parts.size() > 1) parts_table(page, run);
  if (!run.placements.empty()) gantt(page, run);
  utilisation_and_memory(page, run);
  job_tables(page, run);
  add_training_section(page, run.job_runs, "Jobs of " + run.dir + ": their own curves");
}

}  // namespace recmix::report
