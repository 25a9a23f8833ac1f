// The report's section for training runs: loss, evaluation, throughput and memory against step
// and time, one colour per run; checkpoints on the loss curves; the sharding plans.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/downsample.hpp"
#include "report/sections.hpp"
#include "report/xy_chart.hpp"

namespace recmix::report {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Smoothing: a trailing mean over about the square root of the records (3 of 10, 1000 of 10^6).
std::size_t smoothing_window(std::size_t n) {
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::lround(std::sqrt(static_cast<double>(n)))));
}

template <class Record, class Field>
std::vector<double> column(const std::vector<Record>& records, Field field) {
  std::vector<double> out;
  out.reserve(records.size());
  for (const Record& r : records) out.push_back(static_cast<double>(r.*field));
  return out;
}

void loss_charts(Page& page, const std::vector<TrainingRun>& runs) {
  for (const bool by_time : {false, true}) {
    XyChart c;
    c.title = by_time ? "Training loss against training time" : "Training loss against step";
    c.x_label = by_time ? "training time (s)" : "step";
    c.x_name = by_time ? "time (s)" : "step";
    c.y_label = c.y_name = "loss (binary cross-entropy)";
    std::string windows;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const TrainingRun& r = runs[i];
      if (r.train.empty()) continue;
      const int color = static_cast<int>(i);
      const auto x = by_time ? column(r.train, &TrainRecord::time_s) : column(r.train, &TrainRecord::step);
      const auto y = column(r.train, &TrainRecord::loss);
      const std::size_t w = smoothing_window(y.size());
      c.series.push_back({r.name + " loss", "faint", color, x, y, true});
      c.series.push_back({r.name + " smoothed", "dashed", color, x, trailing_mean(y, w), false});
      windows += fmt::format("{}{}: {}", windows.empty() ? "" : ", ", r.name, w);
      XySeries marks{r.name + " checkpoints", "marker", color, {}, {}, false};
      for (const CheckpointRecord& ck : r.checkpoints) {
        marks.x.push_back(by_time ? ck.time_s : static_cast<double>(ck.step));
        marks.y.push_back(ck.loss);
      }
      if (!marks.x.empty()) c.series.push_back(std::move(marks));
    }
    if (c.series.empty()) continue;
    const bool marks = std::any_of(runs.begin(), runs.end(), [](const TrainingRun& r) { return !r.checkpoints.empty(); });
    c.caption = fmt::format("Loss as logged (metrics.jsonl train records: the last step's loss at each log interval). "
                            "Dashed: trailing mean over the last records (window {}).{}",
                            windows, marks ? " Triangles: checkpoints." : "");
    if (by_time) c.caption += " Training time: elapsed_s, continued across resumes.";
    add_xy_chart(page, c);
  }
}

void eval_charts(Page& page, const std::vector<TrainingRun>& runs) {
  struct Metric {
    const char* title;
    const char* label;
    double EvalRecord::*field;
  };
  for (const Metric m : {Metric{"Eval AUC", "ROC AUC", &EvalRecord::auc}, Metric{"Eval logloss", "logloss", &EvalRecord::logloss}}) {
    for (const bool by_time : {false, true}) {
      XyChart c;
      c.title = fmt::format("{} against {}", m.title, by_time ? "training time" : "step");
      c.x_label = by_time ? "training time (s)" : "step";
      c.x_name = by_time ? "time (s)" : "step";
      c.y_label = c.y_name = m.label;
      for (std::size_t i = 0; i < runs.size(); ++i) {
        const TrainingRun& r = runs[i];
        if (r.eval.empty()) continue;
        c.series.push_back({r.name, "line", static_cast<int>(i),
                            by_time ? column(r.eval, &EvalRecord::time_s) : column(r.eval, &EvalRecord::step),
                            column(r.eval, m.field), true});
      }
      if (c.series.empty()) continue;
      c.caption = "Exact evaluation on the eval set (metrics.jsonl eval records).";
      if (by_time) c.caption += " Time: the training time at the evaluated step, between the train records around it.";
      add_xy_chart(page, c);
    }
  }
}

void throughput_and_memory(Page& page, const std::vector<TrainingRun>& runs) {
  XyChart rate;
  rate.title = "Throughput against training time";
  rate.x_label = "training time (s)";
  rate.x_name = "time (s)";
  rate.y_label = rate.y_name = "samples/s";
  rate.caption = "Samples per second over each log interval (all ranks together).";
  rate.y_from_zero = true;
  XyChart memory;
  memory.title = "Device memory peak against step";
  memory.x_label = "step";
  memory.x_name = "step";
  memory.y_label = memory.y_name = "peak device memory (MiB)";
  memory.caption = "The memory pool's peak on rank 0 so far (device_peak_bytes / 2^20).";
  memory.y_from_zero = true;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const TrainingRun& r = runs[i];
    if (r.train.empty()) continue;
    rate.series.push_back({r.name, "line", static_cast<int>(i), column(r.train, &TrainRecord::time_s),
                           column(r.train, &TrainRecord::samples_per_s), true});
    std::vector<double> mib = column(r.train, &TrainRecord::device_peak_bytes);
    for (double& v : mib) v /= kMiB;
    memory.series.push_back({r.name, "line", static_cast<int>(i), column(r.train, &TrainRecord::step), mib, true});
  }
  if (!rate.series.empty()) add_xy_chart(page, rate);
  if (!memory.series.empty()) add_xy_chart(page, memory);
}

void run_tables(Page& page, const std::vector<TrainingRun>& runs) {
  Table overview;
  overview.caption = "Runs";
  overview.columns = {"run", "directory", "train records", "eval records", "last step", "last loss", "last AUC",
                      "training time (s)", "checkpoints", "job"};
  for (const TrainingRun& r : runs) {
    overview.rows.push_back({r.name, r.dir, integer(static_cast<long long>(r.train.size())),
                             integer(static_cast<long long>(r.eval.size())),
                             r.train.empty() ? "" : integer(r.train.back().step),
                             r.train.empty() ? "" : figure(r.train.back().loss), r.eval.empty() ? "" : figure(r.eval.back().auc),
                             r.train.empty() ? "" : figure(r.train.back().time_s),
                             integer(static_cast<long long>(r.checkpoints.size())), r.job_line});
  }
  page.table(overview);

  Table ck;
  ck.caption = "Checkpoints";
  ck.columns = {"run", "step", "training time (s)", "file", "on disk", "size"};
  for (const TrainingRun& r : runs)
    for (const CheckpointRecord& c : r.checkpoints)
      ck.rows.push_back({r.name, integer(c.step), figure(c.time_s), c.file, c.present ? "yes" : "no (pruned)",
                         c.present ? bytes(static_cast<double>(c.bytes)) : ""});
  if (!ck.rows.empty()) {
    ck.collapsed = ck.rows.size() > 25;
    page.table(ck);
  }

  for (const TrainingRun& r : runs) {
    if (r.plan.empty()) continue;
    Table plan;
    plan.caption = fmt::format("{}: {}{}", r.name, r.plan_title.empty() ? "sharding plan" : r.plan_title,
                               r.plans_in_log > 1 ? fmt::format(" (the last of {} in train.log)", r.plans_in_log) : "");
    plan.columns = {"rank", "memory", "lookups x dim", "shards (t<table>[rows])"};
    for (const PlanRow& p : r.plan) plan.rows.push_back({p.rank, p.memory, p.lookups_x_dim, p.shards});
    page.table(plan);
  }
}

}  // namespace

void add_training_section(Page& page, const std::vector<TrainingRun>& runs, const std::string& title) {
  if (runs.empty()) return;
  page.heading(2, title);
  for (const TrainingRun& r : runs)
    for (const std::string& n : r.notes) page.note(n);
  run_tables(page, runs);
  loss_charts(page, runs);
  eval_charts(page, runs);
  throughput_and_memory(page, runs);
}

}  // namespace recmix::report
