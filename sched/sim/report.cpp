#include "sched/sim/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.hpp"

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

// {type: {pair_data, formula}}: co-located groups by where the ground truth took the slowdown.
nlohmann::json ground_truth_groups(const SimResult& r) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [type, use] : r.ground_truth)
    out[type] = {{"pair_data", use.pair_data_groups}, {"formula", use.formula_groups}};
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
          {"ground_truth_groups", ground_truth_groups(r)},
          {"wall_s", r.wall_s},
          {"jct_percentiles_s", percentiles(std::move(jct))},
          {"queued_percentiles_s", percentiles(std::move(queued))}};
}

std::vector<JobTypeTruth> job_type_truth(const SimEnvironment& env, const Workload& workload) {
  std::vector<JobTypeTruth> out;
  for (const auto& [type, jobs] : workload.types) {
    JobTypeTruth t;
    t.type = type;
    t.jobs = jobs;
    t.profile = profile_source(env, type);
    t.ground_truth = env.truth ? env.truth->type_source(env.model.find_type(type)) : "formula";
    for (const auto& [name, mapped] : env.pairs.mapping)
      if (mapped == type) t.measured_as.push_back(name);
    if (const auto m = workload.multi_gpu.find(type); m != workload.multi_gpu.end()) t.multi_gpu = m->second;
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

const GroundTruthUse* use_of(const SimResult& r, const std::string& type) {
  const auto it = r.ground_truth.find(type);
  return it == r.ground_truth.end() ? nullptr : &it->second;
}

}  // namespace

std::string format_ground_truth(const std::vector<JobTypeTruth>& types, const std::vector<SimResult>& results) {
  const std::string header = "job type (formula / co-located groups)";
  std::vector<std::string> names;
  std::size_t width = header.size();
  for (const auto& t : types) {
    std::string name = t.type;
    for (const auto& m : t.measured_as)
      if (m != t.type) name += " (" + m + ")";
    width = std::max(width, name.size());
    names.push_back(std::move(name));
  }
  std::string out = fmt::format("{:<{}} {:>7} {:>9} {:>13} {:>30}", header, width, "jobs", "profile", "ground truth",
                                "k-GPU / scaled / spread meas.");
  for (const auto& r : results) out += fmt::format(" {:>19}", r.policy);
  out += "\n";
  for (std::size_t i = 0; i < types.size(); ++i) {
    const JobTypeTruth& t = types[i];
    const MultiGpuUse& m = t.multi_gpu;
    out += fmt::format("{:<{}} {:>7} {:>9} {:>13} {:>30}", names[i], width, t.jobs, t.profile, t.ground_truth,
                       fmt::format("{} / {} / {}", m.jobs, m.scaled, m.spread_measured));
    for (const auto& r : results) {
      const GroundTruthUse* u = use_of(r, t.type);
      out += fmt::format(" {:>19}", u ? fmt::format("{} / {}", u->formula_groups, u->formula_groups + u->pair_data_groups)
                                      : std::string("0 / 0"));
    }
    out += "\n";
  }
  return out;
}

nlohmann::json ground_truth_json(const std::vector<JobTypeTruth>& types, const std::vector<SimResult>& results) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& t : types) {
    nlohmann::json fallbacks = nlohmann::json::object();
    for (const auto& r : results) {
      const GroundTruthUse* u = use_of(r, t.type);
      fallbacks[r.policy] = t.ground_truth == "formula" || !u ? 0 : u->formula_groups;
    }
    out[t.type] = {{"jobs", t.jobs},
                   {"profile", t.profile},
                   {"ground_truth", t.ground_truth},
                   {"measured_as", t.measured_as},
                   {"formula_fallbacks", fallbacks},
                   {"multi_gpu",
                    {{"jobs", t.multi_gpu.jobs},
                     {"measured_throughput", t.multi_gpu.measured},
                     {"scaling_fallbacks", t.multi_gpu.scaled},
                     {"spread_measured", t.multi_gpu.spread_measured},
                     {"spread_bandwidth_model", t.multi_gpu.jobs - t.multi_gpu.spread_measured}}}};
  }
  return out;
}

std::vector<HeldOutRow> held_out_rows(const std::vector<PairDataset>& datasets, double test_fraction,
                                      std::uint64_t seed) {
  std::vector<HeldOutRow> rows;
  for (const auto& d : datasets) {
    HeldOutRow row;
    row.source = d.source;
    try {
      row.report = evaluate_held_out(d, test_fraction, seed);
    } catch (const Error& e) {
      row.error = e.what();
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string format_held_out(const std::vector<HeldOutRow>& rows) {
  std::string out = fmt::format("{:<12} {:>8} {:>9} {:>11} {:>11} {:>11} {:>7} {:>10}\n", "pair data", "train",
                                "held-out", "MAE mean", "MAE prior", "MAE model", "MAPE", "within 10%");
  for (const auto& r : rows) {
    if (!r.error.empty()) {
      out += fmt::format("{:<12} {}\n", r.source, r.error);
      continue;
    }
    const HeldOutReport& h = r.report;
    out += fmt::format("{:<12} {:>8} {:>9} {:>11.3f} {:>11.3f} {:>11.3f} {:>6.1f}% {:>9.0f}%\n", r.source,
                       h.train_pairs, h.test_pairs, h.mean_baseline_mae, h.prior_mae, h.model_mae,
                       100 * h.model_mape, 100 * h.model_within_10pct);
  }
  return out;
}

nlohmann::json to_json(const HeldOutRow& r) {
  if (!r.error.empty()) return {{"source", r.source}, {"error", r.error}};
  const HeldOutReport& h = r.report;
  return {{"source", r.source},
          {"train_pairs", h.train_pairs},
          {"held_out_pairs", h.test_pairs},
          {"mae_training_mean", h.mean_baseline_mae},
          {"mae_prior", h.prior_mae},
          {"mae_model", h.model_mae},
          {"mape_model", h.model_mape},
          {"within_10pct_model", h.model_within_10pct}};
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
