// recmix report's pieces against values worked out by hand: the per-column min/max reduction,
// the trailing mean, the exact summary figures, the metrics and train.log readers, the slots of
// co-located placements, the input checks, and a page built from a run whose numbers are known.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "report/downsample.hpp"
#include "report/report.hpp"
#include "report/sched_run.hpp"
#include "report/training_run.hpp"

namespace fs = std::filesystem;
using namespace recmix::report;

namespace {

// A fresh folder under the build tree's temporary folder, removed at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) : path(fs::temp_directory_path() / ("recmix_report_" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

}  // namespace

TEST(Downsample, KeepsEachColumnsExtremesAndTheEnds) {
  // 100000 points of a slow ramp with one spike up and one down: 100 columns keep both spikes,
  // the first and the last point, at most 2 points per column plus the ends, in input order.
  std::vector<double> x, y;
  for (int i = 0; i < 100000; ++i) {
    x.push_back(i);
    y.push_back(i * 1e-5);
  }
  y[31337] = 50;
  y[77777] = -50;
  const Points p = min_max_downsample(x, y, 100);
  EXPECT_LE(p.x.size(), 202u);
  EXPECT_GE(p.x.size(), 100u);
  EXPECT_EQ(p.x.front(), 0);
  EXPECT_EQ(p.x.back(), 99999);
  EXPECT_TRUE(std::is_sorted(p.x.begin(), p.x.end()));
  const auto at = [&](double v) { return std::find(p.y.begin(), p.y.end(), v) - p.y.begin(); };
  ASSERT_LT(static_cast<std::size_t>(at(50)), p.y.size());
  EXPECT_EQ(p.x[at(50)], 31337);
  ASSERT_LT(static_cast<std::size_t>(at(-50)), p.y.size());
  EXPECT_EQ(p.x[at(-50)], 77777);
  // Column 0 holds x in [0, 999.99): its smallest y is at 0, its largest at 999.
  EXPECT_EQ(p.x[1], 999);
}

TEST(Downsample, ShortSeriesComeBackWholeLessNonFinitePoints) {
  const double nan = std::nan("");
  const Points p = min_max_downsample({1, 2, 3, 4, nan}, {5, nan, 7, 8, 9}, 10);
  EXPECT_EQ(p.x, (std::vector<double>{1, 3, 4}));
  EXPECT_EQ(p.y, (std::vector<double>{5, 7, 8}));
}

TEST(Downsample, TrailingMeanSkipsNonFiniteValues) {
  const double nan = std::nan("");
  const auto m = trailing_mean({1, 2, 3, nan, 4, 5}, 2);
  EXPECT_EQ(m[0], 1);
  EXPECT_EQ(m[1], 1.5);
  EXPECT_EQ(m[2], 2.5);
  EXPECT_TRUE(std::isnan(m[3]));
  EXPECT_EQ(m[4], 3.5);  // (3 + 4) / 2: the NaN is not in the window
  EXPECT_EQ(m[5], 4.5);
}

TEST(Downsample, SummaryFiguresAreExact) {
  const SeriesStats s = summarize({10, 20, 30, 40}, {0.5, -1, std::nan(""), 3});
  EXPECT_EQ(s.count, 3u);
  EXPECT_EQ(s.first, 0.5);
  EXPECT_EQ(s.last, 3);
  EXPECT_EQ(s.min, -1);
  EXPECT_EQ(s.x_of_min, 20);
  EXPECT_EQ(s.max, 3);
  EXPECT_EQ(s.x_of_max, 40);
  EXPECT_EQ(s.mean, 2.5 / 3);
}

TEST(Metrics, RecordsTruncatedLinesAndResumedTime) {
  TrainingRun run;
  std::string reason;
  ASSERT_TRUE(parse_metrics_line(R"({"type":"train","step":10,"epoch":0,"loss":0.5,"samples_per_s":100,"elapsed_s":2,"device_peak_bytes":64})", run, reason));
  ASSERT_TRUE(parse_metrics_line(R"({"type":"train","step":20,"epoch":0,"loss":0.4,"samples_per_s":100,"elapsed_s":4,"device_peak_bytes":64})", run, reason));
  // A resumed run starts its clock again: the training time goes on from 4 s.
  ASSERT_TRUE(parse_metrics_line(R"({"type":"train","step":30,"epoch":0,"loss":0.3,"samples_per_s":100,"elapsed_s":1.5,"device_peak_bytes":64})", run, reason));
  ASSERT_TRUE(parse_metrics_line(R"({"type":"eval","step":20,"auc":null,"logloss":0.6,"samples":8})", run, reason));
  ASSERT_EQ(run.train.size(), 3u);
  EXPECT_EQ(run.train[1].time_s, 4);
  EXPECT_EQ(run.train[2].time_s, 5.5);
  ASSERT_EQ(run.eval.size(), 1u);
  EXPECT_TRUE(std::isnan(run.eval[0].auc));  // NaN is written as null
  EXPECT_EQ(run.eval[0].logloss, 0.6);
  EXPECT_FALSE(parse_metrics_line(R"({"type":"train","step":40,"lo)", run, reason));
  EXPECT_NE(reason.find("truncated"), std::string::npos) << reason;
  EXPECT_FALSE(parse_metrics_line(R"({"type":"train","loss":1})", run, reason));
  EXPECT_NE(reason.find("step"), std::string::npos) << reason;
  EXPECT_FALSE(parse_metrics_line(R"([1,2])", run, reason));
  EXPECT_TRUE(parse_metrics_line(R"({"type":"tiers","step":1})", run, reason));
  EXPECT_EQ(run.other_records, 1);
}

TEST(Metrics, TrainLogGivesThePlanTheJobAndTheCheckpoints) {
  std::istringstream log(
      "2026-01-01T00:00:00.000 info job 'x': 2 rank(s), cpu, 4 tables, 5 dense features, global batch 128, 10 steps\n"
      "2026-01-01T00:00:00.001 info sharding plan:\n"
      "sharding plan: 4 tables over 2 ranks\n"
      " rank        memory     lookups x dim  shards\n"
      "    0      42.2 KiB             16.53  t1[0,1000) t2 t3[250,500)\n"
      "    1      42.2 KiB             15.47  t0 t1[1000,2000) t3[0,250)\n"
      "\n"
      "2026-01-01T00:00:01.000 info checkpoint written: run/checkpoints/ckpt-000000005.h5\n"
      "2026-01-01T00:00:02.000 info checkpoint written: run/checkpoints/ckpt-000000010.h5\n");
  TrainingRun run;
  std::vector<std::pair<std::int64_t, std::string>> written;
  parse_train_log(log, run, written);
  EXPECT_EQ(run.plans_in_log, 1);
  EXPECT_EQ(run.plan_title, "sharding plan: 4 tables over 2 ranks");
  ASSERT_EQ(run.plan.size(), 2u);
  EXPECT_EQ(run.plan[0].memory, "42.2 KiB");
  EXPECT_EQ(run.plan[0].shards, "t1[0,1000) t2 t3[250,500)");
  EXPECT_EQ(run.plan[1].lookups_x_dim, "15.47");
  EXPECT_EQ(run.job_line.rfind("job 'x': 2 rank(s)", 0), 0u) << run.job_line;
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[1].first, 10);
  EXPECT_EQ(written[1].second, "ckpt-000000010.h5");
}

TEST(SchedRun, CoLocatedPlacementsTakeTheLowestFreeSlot) {
  std::vector<Placement> p(4);
  p[0] = {"a", 0, 0, 0, 10, "finished", 0, false};
  p[1] = {"b", 0, 0, 5, 8, "finished", 0, false};   // overlaps a: slot 1
  p[2] = {"c", 0, 0, 9, 12, "finished", 0, false};  // overlaps a, b has ended: slot 1
  p[3] = {"d", 1, 0, 6, 7, "finished", 0, false};   // another rank: slot 0
  assign_slots(p);
  EXPECT_EQ(p[0].slot, 0);
  EXPECT_EQ(p[1].slot, 1);
  EXPECT_EQ(p[2].slot, 1);
  EXPECT_EQ(p[3].slot, 0);
}

TEST(SchedRun, EventsGivePlacementsStopsAndQueueing) {
  TempDir dir("sched");
  write(dir.path / "events.jsonl",
        R"({"event":"run_start","ranks":2,"policy":"las","memory_capacity_bytes":1024,"t":0}
{"event":"arrival","job":"a","t":0}
{"event":"start","job":"a","ranks":[0,1],"launch":1,"resume":false,"estimate_bytes":100,"t":1}
{"event":"sample","job":"a","rank":0,"busy_share":0.5,"pool_current_bytes":50,"pool_peak_bytes":60,"t":2}
{"event":"preempt","job":"a","ranks":[0,1],"launch":1,"t":3}
{"event":"stopped","job":"a","step":7,"t":3.5}
{"event":"start","job":"a","ranks":[0,1],"launch":2,"resume":true,"estimate_bytes":100,"t":4.5}
{"event":"finished","job":"a","ranks":[0,1],"step":9,"measured_peak_bytes":80,"estimate_bytes":100,"t":6}
{"event":"arrival","job":"b","t":6}
{"event":"start","job":"b","ranks":[1],"launch":3,"resume":false,"estimate_bytes":100,"t":6.25}
{"event":"failed","job":"b","ranks":[1],"step":2,"error":"rank 1: data error: x.h5:/dense row 3","t":7}
{"event":"sample","job":"b","rank":"one","t":6.5}
{"event":"run_e)");
  const SchedRun run = read_sched_run(dir.path.string());
  EXPECT_EQ(run.ranks, 2);
  EXPECT_EQ(run.skipped_lines, 2);  // a rank that is not a number, and the cut last line
  ASSERT_EQ(run.notes.size(), 5u) << run.notes.front();  // also: no run_end, no summary.json, no jobs/a, jobs/b
  EXPECT_NE(run.notes[0].find("line 12: a field of the wrong type"), std::string::npos) << run.notes[0];
  EXPECT_NE(run.notes[0].find("line 13: not JSON"), std::string::npos) << run.notes[0];
  ASSERT_EQ(run.placements.size(), 5u);
  EXPECT_EQ(run.placements[4].ended_by, "failed");
  EXPECT_EQ(run.placements[4].end_s, 7);
  EXPECT_EQ(run.placements[0].ended_by, "preempt");
  EXPECT_EQ(run.placements[0].ended_at_s, 3);
  EXPECT_EQ(run.placements[0].end_s, 3.5);  // it left its ranks at its checkpoint
  EXPECT_EQ(run.placements[2].ended_by, "finished");
  EXPECT_TRUE(run.placements[2].resumed);
  ASSERT_EQ(run.jobs.size(), 2u);
  EXPECT_EQ(run.jobs[1].state, "failed");
  EXPECT_EQ(run.jobs[1].error, "rank 1: data error: x.h5:/dense row 3");
  EXPECT_EQ(run.jobs[1].queued_s, 0.25);
  EXPECT_EQ(run.jobs[0].queued_s, 1 + (4.5 - 3.5));  // before its start and after its stop
  EXPECT_EQ(run.jobs[0].jct_s, 6);
  EXPECT_EQ(run.jobs[0].steps, 9);
  EXPECT_EQ(run.jobs[0].preemptions, 1);
  EXPECT_FALSE(run.have_summary);
}

TEST(ReportInputs, ErrorsNameTheCulprit) {
  TempDir dir("inputs");
  std::string run_dir;
  const auto message = [&](const std::string& path) -> std::string {
    try {
      classify_input(path, run_dir);
    } catch (const recmix::Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message((dir.path / "nope").string()).find("nope: no such file or directory"), std::string::npos);
  fs::create_directories(dir.path / "empty");
  EXPECT_NE(message((dir.path / "empty").string()).find("empty: empty directory"), std::string::npos);
  write(dir.path / "x.txt", "hello\n");
  EXPECT_NE(message((dir.path / "x.txt").string()).find("x.txt: not a file recmix report reads"), std::string::npos);
  write(dir.path / "blank.json", "");
  EXPECT_NE(message((dir.path / "blank.json").string()).find("blank.json: empty file"), std::string::npos);
  // A sim file whose cluster is not as recmix writes it: one error naming the file.
  write(dir.path / "odd.json", R"({"policies":[{"policy":"fifo"}],"cluster":{"nodes":"two"}})");
  try {
    build_report({(dir.path / "odd.json").string()}, "");
    ADD_FAILURE() << "no error";
  } catch (const recmix::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("odd.json: not as recmix writes it"), std::string::npos) << e.what();
  }
  fs::create_directories(dir.path / "runs" / "a");
  write(dir.path / "runs" / "a" / "metrics.jsonl", "{}\n");
  EXPECT_NE(message((dir.path / "runs").string()).find("runs: not a run itself, but holds 1 run(s)"), std::string::npos)
      << message((dir.path / "runs").string());
  write(dir.path / "metrics.jsonl", "{}\n");
  EXPECT_EQ(classify_input((dir.path / "metrics.jsonl").string(), run_dir), InputKind::training_run);
  EXPECT_EQ(run_dir, dir.path.string());
}

TEST(ReportPage, TablesHoldTheRunsNumbers) {
  TempDir dir("page");
  const fs::path run = dir.path / "run";
  fs::create_directories(run);
  write(run / "metrics.jsonl",
        "{\"type\":\"train\",\"step\":1,\"epoch\":0,\"loss\":0.6931471805599453,\"samples_per_s\":1000,\"elapsed_s\":0.5,\"device_peak_bytes\":1048576}\n"
        "{\"type\":\"train\",\"step\":2,\"epoch\":0,\"loss\":0.25,\"samples_per_s\":2000,\"elapsed_s\":1,\"device_peak_bytes\":2097152}\n"
        "{\"type\":\"eval\",\"step\":2,\"auc\":0.8125,\"logloss\":0.375,\"samples\":64}\n"
        "not json\n");
  const Report r = build_report({run.string()}, "");
  EXPECT_EQ(r.charts, 8u);
  EXPECT_NE(r.html.find("<td>0.6931471805599453</td>"), std::string::npos);
  EXPECT_NE(r.html.find("<td>0.8125</td>"), std::string::npos);
  EXPECT_NE(r.html.find("skipped 1 of 4 lines (line 4: not JSON"), std::string::npos);
  EXPECT_NE(r.html.find("train.log: absent"), std::string::npos);
  EXPECT_EQ(r.html.find("<script src"), std::string::npos);  // nothing to fetch
  EXPECT_NE(r.html.find("Chart.js v3"), std::string::npos);
  ASSERT_EQ(r.notes.size(), 2u);
}

TEST(ReportPage, SimulationPercentilesDrawTheCdfThroughThem) {
  // recmix sim's 101 percentiles of the completion times (here 10 s x p): the k-th is at level k/100.
  TempDir dir("simp");
  std::string pct;
  for (int p = 0; p <= 100; ++p) {
    if (p > 0) pct += ',';
    pct += std::to_string(10 * p);
  }
  write(dir.path / "sim.json", R"({"trace":"t.csv","policies":[{"policy":"las","jobs":9,"avg_jct_s":500,)"
                               R"("median_jct_s":500,"p99_jct_s":990,"jct_percentiles_s":[)" + pct + "]}]}");
  const Report r = build_report({(dir.path / "sim.json").string()}, "sim");
  EXPECT_NE(r.html.find("drawn through the 0th, 1st, ..., 100th percentiles"), std::string::npos);
  EXPECT_NE(r.html.find("<tr><td>las</td><td>500</td><td>0.5</td></tr>"), std::string::npos);
  EXPECT_NE(r.html.find("<tr><td>las</td><td>1000</td><td>1</td></tr>"), std::string::npos);
  EXPECT_NE(r.html.find("<tr><td>las</td><td>0</td><td>0</td></tr>"), std::string::npos);
}

TEST(ReportPage, SimulationWithPerJobTimesGetsItsWholeCdf) {
  // Three jobs' completion times: the CDF steps through 1/3, 2/3 and 1 at 10, 20 and 60 s.
  TempDir dir("sim");
  write(dir.path / "sim.json",
        R"({"trace":"t.csv","policies":[{"policy":"fifo","jobs":3,"avg_jct_s":30,"median_jct_s":20,"p99_jct_s":60,
            "job_outcomes":[{"jct_s":20},{"arrival_s":5,"finish_s":65},{"jct_s":10}]}]})");
  const Report r = build_report({(dir.path / "sim.json").string()}, "sim");
  // A run's name (its path) that is not UTF-8 is drawn with a replacement character, not refused.
  const fs::path latin1 = dir.path / "caf\xe9";
  fs::create_directories(latin1);
  write(latin1 / "metrics.jsonl", "{\"type\":\"train\",\"step\":1,\"loss\":0.5}\n");
  EXPECT_NE(build_report({latin1.string()}, "").html.find("caf\xef\xbf\xbd"), std::string::npos);
  EXPECT_NE(r.html.find("Job completion time CDF per policy</figcaption>"), std::string::npos);
  EXPECT_NE(r.html.find("<tr><td>fifo</td><td>10</td><td>0.333333</td></tr>"), std::string::npos);
  EXPECT_NE(r.html.find("<tr><td>fifo</td><td>60</td><td>1</td></tr>"), std::string::npos);
  EXPECT_NE(r.html.find("<tr><td>avg_jct_s</td><td>30</td></tr>"), std::string::npos);
}
