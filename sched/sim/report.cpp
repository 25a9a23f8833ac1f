#include "sched/sim/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

namespace recmix::sched {

std::string format_table(const std::vector<SimResult>& results) {
  struct Row {
    const char* name;
    std::function<std::string(const SimResult&)> value;
  };
  auto hours = [](double s) { return fmt::format("{:.2f} h", s / 3600.0); };
  const std::vector<Row> rows = {
      {"jobs", [](const SimResult& r) { return fmt::format("{}", r.jobs); }},
      {"makespan", [&](const SimResult& r) { return hours(r.makespan_s); }},
      {"avg JCT", [&](const SimResult& r) { return hours(r.avg_jct_s); }},
      {"median JCT", [&](const SimResult& r) { return hours(r.median_jct_s); }},
      {"p99 JCT", [&](const SimResult& r) { return hours(r.p99_jct_s); }},
      {"avg queueing", [&](const SimResult& r) { return hours(r.avg_queue_s); }},
      {"GPU util (busy)", [](const SimResult& r) { return fmt::format("{:.1f} %", 100 * r.avg_gpu_util); }},
      {"effective util", [](const SimResult& r) { return fmt::format("{:.1f} %", 100 * r.avg_effective_util); }},
      {"throughput", [](const SimResult& r) { return fmt::format("{:.1f} jobs/h", r.throughput_jobs_per_h); }},
      {"FTF rho avg", [](const SimResult& r) { return fmt::format("{:.2f}", r.ftf_avg); }},
      {"FTF rho p99", [](const SimResult& r) { return fmt::format("{:.1f}", r.ftf_p99); }},
      {"co-located jobs", [](const SimResult& r) { return fmt::format("{}", r.colocated_jobs); }},
      {"spread jobs", [](const SimResult& r) { return fmt::format("{}", r.spread_jobs); }},
      {"preemptions", [](const SimResult& r) { return fmt::format("{}", r.preemptions); }},
      {"memory violations", [](const SimResult& r) { return fmt::format("{}", r.memory_violations); }},
      {"peak GPU memory", [](const SimResult& r) { return fmt::format("{:.1f} %", 100 * r.max_memory_fraction); }},
      {"sim wall time", [](const SimResult& r) { return fmt::format("{:.2f} s", r.wall_s); }},
  };
  std::string out = fmt::format("{:<18}", "");
  for (const auto& r : results) out += fmt::format(" {:>19}", r.policy);
  out += "\n";
  for (const auto& row : rows) {
    out += fmt::format("{:<18}", row.name);
    for (const auto& r : results) out += fmt::format(" {:>19}", row.value(r));
    out += "\n";
  }
  return out;
}

namespace {

// The 0th, 1st, ..., 100th percentiles of values (nearest rank on the sorted values): a CDF of
// bounded size however many jobs the trace has. Empty for no values.
std::vector<double> percentiles(std::vector<double> values) {
  std::vector<double> out;
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  for (int p = 0; p <= 100; ++p)
    out.push_back(values[std::min(n - 1, static_cast<std::size_t>(std::ceil(p / 100.0 * n)) - (p > 0 ? 1 : 0))]);
  return out;
}

}  // namespace

nlohmann::json to_json(const SimResult& r) {
  std::vector<double> jct, queued;
  for (const auto& o : r.outcomes) {
    if (o.finish_s < 0) continue;  // did not finish
    jct.push_back(o.finish_s - o.arrival_s);
    queued.push_back(o.queued_s);
  }
  return {{"policy", r.policy},
          {"jobs", r.jobs},
          {"makespan_s", r.makespan_s},
          {"avg_jct_s", r.avg_jct_s},
          {"median_jct_s", r.median_jct_s},
          {"p99_jct_s", r.p99_jct_s},
          {"avg_queueing_s", r.avg_queue_s},
          {"avg_gpu_util", r.avg_gpu_util},
          {"avg_effective_util", r.avg_effective_util},
          {"throughput_jobs_per_h", r.throughput_jobs_per_h},
          {"finish_time_fairness_avg", r.ftf_avg},
          {"finish_time_fairness_p99", r.ftf_p99},
          {"colocated_jobs", r.colocated_jobs},
          {"spread_jobs", r.spread_jobs},
          {"preemptions", r.preemptions},
          {"memory_violations", r.memory_violations},
          {"refused_starts", r.refused_starts},
          {"max_gpu_memory_fraction", r.max_memory_fraction},
          {"events", r.events},
          {"rounds", r.rounds},
          {"online_observations", r.online_observations},
          {"wall_s", r.wall_s},
          {"jct_percentiles_s", percentiles(std::move(jct))},
          {"queued_percentiles_s", percentiles(std::move(queued))}};
}

void write_timeline_csv(std::ostream& out, const std::vector<SimResult>& results, int gpu_count) {
  out << "policy,time_s,busy_gpus,gpu_util,effective_util,running_jobs,queued_jobs\n";
  for (const auto& r : results)
    for (const auto& p : r.timeline)
      out << fmt::format("{},{:.0f},{},{:.4f},{:.4f},{},{}\n", r.policy, p.time_s, p.busy_gpus,
                         static_cast<double>(p.busy_gpus) / gpu_count, p.effective_util, p.running_jobs,
                         p.queued_jobs);
}

}  // namespace recmix::sched
