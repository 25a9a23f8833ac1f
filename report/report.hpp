#pragma once
// `recmix report`: one self-contained HTML page of charts and tables from what recmix wrote:
// training run directories (several are overlaid), `recmix run` directories, `recmix sim --json`
// files and their --timeline-csv files (docs/report.md).
#include <cstddef>
#include <string>
#include <vector>

namespace recmix::report {

enum class InputKind { training_run, sched_run, sim_json, sim_timeline };

// What a path holds, by its files or first bytes; an IoError or DataError naming the path when
// it is missing, empty or none of these. A run's metrics.jsonl or train.log stands for its run.
InputKind classify_input(const std::string& path, std::string& run_dir);

struct Report {
  std::string html;
  std::size_t charts = 0;
  std::vector<std::string> notes;  // what was skipped or absent, as the page lists it
};

Report build_report(const std::vector<std::string>& inputs, const std::string& title);

}  // namespace recmix::report
