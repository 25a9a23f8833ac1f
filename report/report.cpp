#include "report/report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "report/html_page.hpp"
#include "report/sections.hpp"

namespace recmix::report {

namespace fs = std::filesystem;

namespace {

const char* const kExpected =
    "expected a training run directory (metrics.jsonl, train.log), a recmix run directory (events.jsonl, "
    "summary.json), a recmix sim --json file or a recmix sim --timeline-csv file";

// The path as the user wrote it, without trailing slashes.
std::string label_of(const std::string& path) {
  const std::size_t last = path.find_last_not_of('/');
  return last == std::string::npos ? path.substr(0, 1) : path.substr(0, last + 1);
}

// The folder a run's file is in, as a label ("." for a file named without a folder).
std::string folder_of(const std::string& file) {
  const std::string parent = fs::path(file).parent_path().string();
  return parent.empty() ? std::string(".") : label_of(parent);
}

}  // namespace

InputKind classify_input(const std::string& path, std::string& run_dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw IoError(fmt::format("{}: no such file or directory", path));
  if (fs::is_directory(st)) {
    run_dir = label_of(path);
    if (is_sched_run(path)) return InputKind::sched_run;
    if (is_training_run(path)) return InputKind::training_run;
    if (fs::is_empty(path, ec)) throw IoError(fmt::format("{}: empty directory; {}", path, kExpected));
    // A folder of runs (runs/): name the runs in it.
    std::vector<std::string> inside;
    for (const auto& entry : fs::directory_iterator(path, ec))
      if (entry.is_directory(ec) && (is_training_run(entry.path().string()) || is_sched_run(entry.path().string())))
        inside.push_back(entry.path().filename().string());
    std::sort(inside.begin(), inside.end());
    if (!inside.empty())
      throw IoError(fmt::format("{}: not a run itself, but holds {} run(s): give them as inputs ({}/{}{})", path,
                                inside.size(), label_of(path), inside.front(), inside.size() > 1 ? " ..." : ""));
    throw IoError(fmt::format("{}: holds none of metrics.jsonl, train.log, events.jsonl, summary.json; {}", path, kExpected));
  }
  if (!fs::is_regular_file(st)) throw IoError(fmt::format("{}: not a regular file or a directory; {}", path, kExpected));
  const std::string name = fs::path(path).filename().string();
  if (name == "metrics.jsonl" || name == "train.log") {
    run_dir = folder_of(path);
    return InputKind::training_run;
  }
  if (name == "events.jsonl" || name == "summary.json") {
    run_dir = folder_of(path);
    return InputKind::sched_run;
  }
  if (fs::file_size(path, ec) == 0) throw DataError(fmt::format("{}: empty file; {}", path, kExpected));
  if (is_sim_json(path)) return InputKind::sim_json;
  if (is_sim_timeline(path)) return InputKind::sim_timeline;
  throw DataError(fmt::format("{}: not a file recmix report reads; {}", path, kExpected));
}

Report build_report(const std::vector<std::string>& inputs, const std::string& title) {
  if (inputs.empty()) throw ConfigError("report: no input given");
  std::vector<TrainingRun> runs;
  std::vector<SchedRun> sched_runs;
  std::vector<SimFile> sims;
  std::vector<SimTimeline> timelines;
  // Every input is classified before any is read: a wrong path fails at once.
  std::vector<std::pair<InputKind, std::string>> kinds;
  for (const std::string& in : inputs) {
    std::string dir;
    const InputKind k = classify_input(in, dir);
    kinds.emplace_back(k, k == InputKind::training_run || k == InputKind::sched_run ? dir : in);
  }
  for (const auto& [kind, path] : kinds) {
    try {
      switch (kind) {
        case InputKind::training_run: runs.push_back(read_training_run(path, path)); break;
        case InputKind::sched_run: sched_runs.push_back(read_sched_run(path)); break;
        case InputKind::sim_json: sims.push_back(read_sim_json(path)); break;
        case InputKind::sim_timeline: timelines.push_back(read_sim_timeline(path)); break;
      }
    } catch (const nlohmann::json::exception& e) {  // a field of another type than recmix writes
      throw DataError(fmt::format("{}: not as recmix writes it: {}", path, e.what()));
    }
  }
  std::string heading = title;
  if (heading.empty()) {
    heading = "recmix report:";
    for (const auto& in : inputs) heading += " " + label_of(in);
  }
  Page page(heading);
  if (!runs.empty()) add_training_section(page, runs, runs.size() == 1 ? "Training run" : "Training runs");
  for (const SchedRun& r : sched_runs) add_sched_run_section(page, r);
  for (const SimFile& s : sims) add_sim_section(page, s);
  for (const SimTimeline& t : timelines) add_timeline_section(page, t);
  Report report;
  report.html = page.render();
  report.charts = page.charts();
  report.notes = page.notes();
  return report;
}

}  // namespace recmix::report
