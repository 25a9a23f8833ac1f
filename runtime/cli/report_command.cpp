// recmix report: the command-line side of report/.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/h5.hpp"
#include "runtime/cli/commands.hpp"
#include "report/assets.hpp"
#include "report/report.hpp"

namespace recmix::cli {

namespace {

namespace fs = std::filesystem;

struct ReportArgs {
  std::vector<std::string> inputs;
  std::string output = "report.html";
  std::string title;
  bool force = false;
  bool quiet = false;
};

// The data commands' rule: an existing output is replaced only with --force, and never when it
// is not a regular file or when it is one of the inputs.
void check_output(const ReportArgs& a) {
  struct stat st {};
  if (::stat(a.output.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) throw IoError(a.output + ": is a directory; -o names the HTML file to write");
  if (!S_ISREG(st.st_mode)) throw IoError(a.output + ": is not a regular file; only a regular file can be replaced by a report");
  std::error_code ec;
  for (const std::string& in : a.inputs) {
    // The input itself, or a file the report reads in an input directory (or a job's in it).
    std::vector<fs::path> read = {in};
    if (fs::is_directory(in, ec)) {
      for (const char* name : {"metrics.jsonl", "train.log", "events.jsonl", "summary.json", "status.json"})
        read.push_back(fs::path(in) / name);
      for (const auto& job : fs::directory_iterator(fs::path(in) / "jobs", ec))
        for (const char* name : {"metrics.jsonl", "train.log"}) read.push_back(job.path() / name);
    }
    for (const fs::path& p : read)
      if (fs::equivalent(p, a.output, ec)) throw IoError(a.output + ": is one of the inputs (" + p.string() + ")");
  }
  if (!a.force) throw IoError(a.output + ": already exists; --force replaces it");
}

void run_report(const ReportArgs& a) {
  if (report::assets::chart_js().size() < 1000)
    throw Error("recmix was built without Chart.js: install Debian's libjs-chart.js (scripts/install-deps.sh) and rebuild");
  check_output(a);
  const auto start = std::chrono::steady_clock::now();
  const report::Report r = report::build_report(a.inputs, a.title);
  h5::AtomicPath::remove_temporaries_on_signal();
  h5::AtomicPath out(a.output);
  {
    std::ofstream f(out.temp(), std::ios::binary | std::ios::trunc);
    if (!f) throw IoError(fmt::format("{}: cannot write (its folder must exist and be writable)", out.temp()));
    f.write(r.html.data(), static_cast<std::streamsize>(r.html.size()));
    f.close();
    if (!f) throw IoError(fmt::format("{}: write failed (disk full?)", out.temp()));
  }
  out.commit();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (a.quiet) return;
  for (const std::string& n : r.notes) std::fprintf(stderr, "skipped: %s\n", n.c_str());
  fmt::print("wrote {}: {} charts, {:.2f} MB in {:.2f} s{}\n", a.output, r.charts, static_cast<double>(r.html.size()) / 1e6, s,
             r.notes.empty() ? "" : fmt::format(" ({} notes of what was skipped, at the top of the page)", r.notes.size()));
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "Write one self-contained HTML page of charts and tables from runs and simulations");
  cmd->footer(
      "Inputs (any mix; several training runs are overlaid, one colour per run):\n"
      "  a training run directory (recmix train's run_dir: metrics.jsonl, train.log, checkpoints/):\n"
      "      loss (raw, smoothed), eval AUC and logloss against step and time, samples/s, device memory,\n"
      "      checkpoints, the sharding plan\n"
      "  a recmix run directory (RUN_DIR: events.jsonl, summary.json, jobs/<name>/):\n"
      "      placements per rank (Gantt), utilisation and memory per rank over time, queueing and JCT per\n"
      "      job, memory estimate against measured peak, and every job's curves\n"
      "  a recmix sim --json file, and optionally its --timeline-csv file:\n"
      "      summary metrics per policy, JCT and queueing, utilisation over time\n"
      "The page needs no network: Chart.js is inside it. Every chart has a table of its numbers; curves\n"
      "are drawn reduced for large inputs, the tables' figures are exact. Unreadable lines are skipped\n"
      "and listed at the top of the page. See docs/report.md.\n"
      "Examples:\n"
      "  recmix report runs/kaggle -o kaggle.html\n"
      "  recmix report runs/a runs/b -o compare.html\n"
      "  recmix report runs/demo-run -o runs/demo-run/report.html\n"
      "  recmix report sim.json timeline.csv -o sim.html");
  cmd->add_option("inputs", a->inputs, "run directories, recmix sim --json files, --timeline-csv files")->required();
  cmd->add_option("-o,--output", a->output, "the HTML file to write")->capture_default_str();
  cmd->add_flag("--force", a->force, "replace an existing output file (never a directory or an input)");
  cmd->add_option("--title", a->title, "the page's title (default: recmix report: <inputs>)");
  cmd->add_flag("-q,--quiet", a->quiet, "print nothing on success");
  cmd->callback([a] { run_report(*a); });
}

}  // namespace recmix::cli
