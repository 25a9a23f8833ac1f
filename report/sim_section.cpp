// The report's sections for `recmix sim` results: the summary metrics of every policy side by
// side, completion and queueing times, utilisation; and the timeline over simulated time.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "report/sections.hpp"
#include "report/xy_chart.hpp"

namespace recmix::report {

namespace {

// Long simulated spans read better in hours.
struct TimeUnit {
  double divisor;
  const char* name;
};
TimeUnit unit_for(double max_seconds) { return max_seconds > 7200 ? TimeUnit{3600, "h"} : TimeUnit{1, "s"}; }

void metrics_table(Page& page, const SimFile& sim) {
  Table t;
  t.caption = "Summary metrics per policy";
  t.columns = {"metric"};
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const SimPolicy& p : sim.policies) {
    t.columns.push_back(p.name);
    for (const auto& [k, v] : p.metrics)
      if (seen.insert(k).second) keys.push_back(k);
  }
  for (const std::string& k : keys) {
    std::vector<std::string> row = {k};
    for (const SimPolicy& p : sim.policies) row.push_back(figure(p.metric(k)));
    t.rows.push_back(std::move(row));
  }
  page.table(t);
}

void completion_times(Page& page, const SimFile& sim) {
  const bool per_job = std::any_of(sim.policies.begin(), sim.policies.end(), [](const SimPolicy& p) { return !p.jct_s.empty(); });
  double longest = 0;
  for (const SimPolicy& p : sim.policies) longest = std::max({longest, p.metric("p99_jct_s"), p.metric("avg_jct_s")});
  for (const SimPolicy& p : sim.policies)
    for (double v : p.jct_s) longest = std::max(longest, v);
  const TimeUnit u = unit_for(longest);
  if (per_job) {
    XyChart c;
    c.title = "Job completion time CDF per policy";
    c.x_label = fmt::format("job completion time ({})", u.name);
    c.x_name = fmt::format("JCT ({})", u.name);
    c.y_label = c.y_name = "share of jobs completed within";
    const bool from_percentiles =
        std::any_of(sim.policies.begin(), sim.policies.end(), [](const SimPolicy& p) { return p.jct_percentiles; });
    c.caption = from_percentiles
                    ? "CDF of each policy's finished jobs' completion times (finish - arrival), drawn through the "
                      "0th, 1st, ..., 100th percentiles recmix sim writes (every job where the file lists them)."
                    : "Empirical CDF of every finished job's completion time (finish - arrival).";
    for (std::size_t i = 0; i < sim.policies.size(); ++i) {
      std::vector<double> v = sim.policies[i].jct_s;
      std::sort(v.begin(), v.end());
      XySeries s{sim.policies[i].name, "line", static_cast<int>(i), {}, {}, true};
      for (std::size_t k = 0; k < v.size(); ++k) {
        s.x.push_back(v[k] / u.divisor);
        // Percentiles: the k-th of n is at level k / (n - 1); every job: the k-th of n at (k + 1) / n.
        s.y.push_back(sim.policies[i].jct_percentiles ? static_cast<double>(k) / static_cast<double>(v.size() - 1)
                                                      : static_cast<double>(k + 1) / static_cast<double>(v.size()));
      }
      c.series.push_back(std::move(s));
    }
    add_xy_chart(page, c);
  } else {
    // The JSON of recmix sim gives the distribution's mean, median and 99th percentile only.
    XyChart c;
    c.title = "Job completion time CDF per policy (median and 99th percentile)";
    c.x_label = fmt::format("job completion time ({})", u.name);
    c.x_name = fmt::format("JCT ({})", u.name);
    c.y_label = c.y_name = "share of jobs completed within";
    c.caption = "The file holds no per-job times, only the median and the 99th percentile of each policy's "
                "completion times: these two points of each CDF are drawn, joined by a line that is not data.";
    for (std::size_t i = 0; i < sim.policies.size(); ++i) {
      const SimPolicy& p = sim.policies[i];
      c.series.push_back({p.name, "line", static_cast<int>(i),
                          {p.metric("median_jct_s") / u.divisor, p.metric("p99_jct_s") / u.divisor}, {0.5, 0.99}, true});
    }
    add_xy_chart(page, c);
  }
  BarChart b;
  b.title = "Completion and queueing time per policy";
  b.x_label = "policy";
  b.y_label = fmt::format("time ({})", u.name);
  b.series_labels = {fmt::format("mean JCT ({})", u.name), fmt::format("median JCT ({})", u.name),
                     fmt::format("p99 JCT ({})", u.name), fmt::format("mean queueing ({})", u.name)};
  b.values.resize(4);
  for (const SimPolicy& p : sim.policies) {
    b.categories.push_back(p.name);
    b.values[0].push_back(p.metric("avg_jct_s") / u.divisor);
    b.values[1].push_back(p.metric("median_jct_s") / u.divisor);
    b.values[2].push_back(p.metric("p99_jct_s") / u.divisor);
    b.values[3].push_back(p.metric("avg_queueing_s") / u.divisor);
  }
  add_bar_chart(page, b);
}

void utilisation(Page& page, const SimFile& sim) {
  BarChart b;
  b.title = "Utilisation per policy";
  b.x_label = "policy";
  b.y_label = "time-average share of GPUs";
  b.series_labels = {"GPUs holding a job", "effective (progress rate x GPUs)"};
  b.values.resize(2);
  for (const SimPolicy& p : sim.policies) {
    b.categories.push_back(p.name);
    b.values[0].push_back(p.metric("avg_gpu_util"));
    b.values[1].push_back(p.metric("avg_effective_util"));
  }
  add_bar_chart(page, b);
}

}  // namespace

void add_sim_section(Page& page, const SimFile& sim) {
  page.heading(2, "recmix sim: " + sim.path);
  if (!sim.description.empty()) page.paragraph(sim.description + ".");
  for (const std::string& n : sim.notes) page.note(n);
  metrics_table(page, sim);
  completion_times(page, sim);
  utilisation(page, sim);
}

void add_timeline_section(Page& page, const SimTimeline& tl) {
  page.heading(2, "recmix sim timeline: " + tl.path);
  for (const std::string& n : tl.notes) page.note(n);
  double longest = 0;
  for (const TimelineSeries& s : tl.policies)
    if (!s.time_s.empty()) longest = std::max(longest, s.time_s.back());
  const TimeUnit u = unit_for(longest);
  struct Panel {
    const char* title;
    const char* y_label;
    const char* y_name;
    std::vector<double> TimelineSeries::*field;
  };
  for (const Panel& panel :
       {Panel{"GPU utilisation over time", "share of GPUs holding a job", "GPU share", &TimelineSeries::gpu_util},
        Panel{"Effective utilisation over time", "progress rate x GPUs / all GPUs", "effective share",
              &TimelineSeries::effective_util},
        Panel{"Queued jobs over time", "jobs waiting (count)", "queued jobs", &TimelineSeries::queued_jobs},
        Panel{"Running jobs over time", "jobs running (count)", "running jobs", &TimelineSeries::running_jobs}}) {
    XyChart c;
    c.title = panel.title;
    c.x_label = fmt::format("simulated time ({})", u.name);
    c.x_name = fmt::format("time ({})", u.name);
    c.y_label = panel.y_label;
    c.y_name = panel.y_name;
    for (std::size_t i = 0; i < tl.policies.size(); ++i) {
      const TimelineSeries& s = tl.policies[i];
      std::vector<double> x = s.time_s;
      for (double& v : x) v /= u.divisor;
      c.series.push_back({s.policy, "line", static_cast<int>(i), std::move(x), s.*(panel.field), true});
    }
    if (!c.series.empty()) add_xy_chart(page, c);
  }
}

}  // namespace recmix::report
