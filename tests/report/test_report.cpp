// recmix report's pieces against values worked out by hand: the per-column min/max reduction,
// the trailing mean, the exact summary figures, the metrics and train.log readers, the slots of
// co-located placements, the input checks, and a page built from a run whose numbers are known.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <sstream>

#include "core/error.hpp"
#include "report/downsample.hpp"
#include "report/format.hpp"
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

// The charts of a page, as its script reads them.
nlohmann::json charts_of(const std::string& html) {
  const std::string tag = "<script type=\"application/json\" id=\"report-data\">";
  const std::size_t at = html.find(tag) + tag.size();
  return nlohmann::json::parse(html.substr(at, html.find("</script>", at) - at));
}

const nlohmann::json& chart_titled(const nlohmann::json& charts, const std::string& title) {
  for (const auto& c : charts)
    if (c["title"] == title) return c;
  throw std::runtime_error("no chart " + title);
}

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
  EXPECT_NE(r.html.find("<td>0.693147</td>"), std::string::npos);  // six significant digits
  EXPECT_EQ(r.html.find("0.6931471805599453</td>"), std::string::npos);
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

TEST(Format, FiguresAsPeopleReadThem) {
  EXPECT_EQ(figure(3.8097000015113736e-05), "0.000038097");
  EXPECT_EQ(figure(0.6931471805599453), "0.693147");
  EXPECT_EQ(figure(2338944.6), "2338945");
  EXPECT_EQ(figure(22.0), "22");
  EXPECT_EQ(figure(-1.25), "-1.25");
  EXPECT_EQ(figure(1234.56789), "1234.57");
  EXPECT_EQ(figure(0.99999999), "1");
  EXPECT_EQ(figure(std::nan("")), "n/a");
  EXPECT_EQ(bytes(2338944.6), "2.23 MiB");
  EXPECT_EQ(bytes(512), "512 B");
  EXPECT_EQ(bytes(43213), "42.2 KiB");
  EXPECT_EQ(bytes(1.5 * 1024 * 1024 * 1024), "1.50 GiB");
  EXPECT_EQ(bytes(300.0 * 1024 * 1024), "300 MiB");
  EXPECT_EQ(bytes(std::nan("")), "n/a");
}

TEST(Metrics, CheckpointAtItsStepsTimeInTheLaunchThatWroteIt) {
  // Launch 1 logs steps 1000..2150 (10 ms a step) and dies without a usable checkpoint; launch 2
  // starts again at step 1000 and writes ckpt-2000 at its own step 2000 (training time 11.51 +
  // 10.01 s). A third launch resumes from ckpt-3000 and logs from step 3100: ckpt-3000 is the
  // second's, at its last record (step 2990); ckpt-2500 is at launch 2's record of step 2500.
  TempDir dir("ckpt");
  std::string metrics;
  const auto train = [&](int step, double elapsed) {
    metrics += fmt::format(R"({{"type":"train","step":{},"loss":{},"elapsed_s":{}}})" "\n", step, 1.0 / step, elapsed);
  };
  for (int s = 1000; s <= 2150; s += 10) train(s, (s - 1000) * 0.01 + 0.01);
  for (int s = 1000; s <= 2990; s += 10) train(s, (s - 1000) * 0.01 + 0.01);
  for (int s = 3100; s <= 3200; s += 10) train(s, (s - 3000) * 0.01);
  write(dir.path / "metrics.jsonl", metrics);
  fs::create_directories(dir.path / "checkpoints");
  for (const char* name : {"ckpt-000002000.h5", "ckpt-000002500.h5", "ckpt-000003000.h5"})
    write(dir.path / "checkpoints" / name, "x");
  const TrainingRun run = read_training_run(dir.path.string(), "r");
  const double launch2 = run.train[115].time_s;  // launch 1's last record
  EXPECT_NEAR(launch2, 11.51, 1e-9);
  ASSERT_EQ(run.checkpoints.size(), 3u);
  EXPECT_NEAR(run.checkpoints[0].time_s, launch2 + 10.01, 1e-9);  // launch 2's step 2000, not launch 1's (10.01 s)
  EXPECT_DOUBLE_EQ(run.checkpoints[0].loss, 1.0 / 2000);
  EXPECT_NEAR(run.checkpoints[1].time_s, launch2 + 15.01, 1e-9);
  EXPECT_NEAR(run.checkpoints[2].time_s, launch2 + 19.91, 1e-9);  // the end of launch 2, which stopped there
  EXPECT_DOUBLE_EQ(run.checkpoints[2].loss, 1.0 / 2990);
  // Between two records of a launch: linear in the step; before every record: unknown.
  EXPECT_NEAR(checkpoint_time_and_loss(run.train, 2005).first, launch2 + 10.06, 1e-9);
  EXPECT_TRUE(std::isnan(checkpoint_time_and_loss(run.train, 500).first));
}

namespace {

// A run stopped at 22.0 s and resumed 3.1 s later (run_start's unix_s), for 20.3 s: a and b
// swap ranks in the second part, each rank's one job keeps it busy (busy_share 1); c ran and
// finished in the first part.
std::string two_part_events(bool with_unix_s) {
  std::string part1 = R"({"event":"run_start","ranks":2,"policy":"fifo","memory_capacity_bytes":1073741824,)";
  part1 += with_unix_s ? R"("unix_s":1000.0,"t":0})" : R"("t":0})";
  part1 += "\n" R"({"event":"submitted","job":"a","ranks":1,"estimate_bytes":2338944.6,"t":0.01}
{"event":"submitted","job":"b","ranks":1,"estimate_bytes":1048576,"t":0.01}
{"event":"submitted","job":"c","ranks":1,"estimate_bytes":1048576,"t":0.01}
{"event":"arrival","job":"a","t":0.02}
{"event":"arrival","job":"b","t":0.02}
{"event":"arrival","job":"c","t":0.02}
{"event":"start","job":"c","ranks":[0],"launch":1,"resume":false,"t":0.05}
{"event":"finished","job":"c","ranks":[0],"step":5,"measured_peak_bytes":524288,"t":0.9}
{"event":"start","job":"a","ranks":[0],"launch":2,"resume":false,"t":1}
{"event":"start","job":"b","ranks":[1],"launch":3,"resume":false,"t":1}
)";
  for (int t = 2; t <= 20; t += 2)
    part1 += fmt::format(R"({{"event":"sample","job":"a","rank":0,"busy_share":1,"pool_current_bytes":1048576,"t":{}}})"
                         "\n"
                         R"({{"event":"sample","job":"b","rank":1,"busy_share":1,"pool_current_bytes":1048576,"t":{}}})"
                         "\n",
                         t, t);
  part1 += R"({"event":"terminating","t":21}
{"event":"stop","job":"a","reason":"terminating","t":21}
{"event":"stop","job":"b","reason":"terminating","t":21}
{"event":"stopped","job":"a","step":50,"t":21.5}
{"event":"stopped","job":"b","step":40,"t":22}
{"event":"run_end","makespan_s":22,"t":22}
)";
  std::string part2 = R"({"event":"run_start","ranks":2,"policy":"fifo","memory_capacity_bytes":1073741824,"resume":true,)";
  part2 += with_unix_s ? R"("unix_s":1025.1,"t":0})" : R"("t":0})";
  part2 += "\n" R"({"event":"submitted","job":"a","ranks":1,"estimate_bytes":2338944.6,"resume":true,"t":0.01}
{"event":"submitted","job":"b","ranks":1,"estimate_bytes":1048576,"resume":true,"t":0.01}
{"event":"resumed_ended","job":"c","state":"finished","t":0.01}
{"event":"arrival","job":"a","t":0.02}
{"event":"arrival","job":"b","t":0.02}
{"event":"start","job":"b","ranks":[0],"launch":1,"resume":true,"t":0.5}
{"event":"start","job":"a","ranks":[1],"launch":2,"resume":true,"t":0.5}
)";
  for (int t = 2; t <= 20; t += 2)
    part2 += fmt::format(R"({{"event":"sample","job":"b","rank":0,"busy_share":1,"pool_current_bytes":1048576,"t":{}}})"
                         "\n"
                         R"({{"event":"sample","job":"a","rank":1,"busy_share":1,"pool_current_bytes":1048576,"t":{}}})"
                         "\n",
                         t, t);
  part2 += R"({"event":"finished","job":"a","ranks":[1],"step":100,"measured_peak_bytes":2097152,"t":20.1}
{"event":"finished","job":"b","ranks":[0],"step":80,"measured_peak_bytes":1048576,"t":20.3}
{"event":"run_end","makespan_s":20.3,"t":20.3}
)";
  return part1 + part2;
}

}  // namespace

TEST(SchedRun, ResumedRunPartsOnOneTimeAxis) {
  TempDir dir("resumed");
  write(dir.path / "events.jsonl", two_part_events(true));
  // summary.json as the second part rewrote it: its times count from the resume.
  write(dir.path / "summary.json", R"({"policy":"fifo","ranks":2,"makespan_s":20.3,"jobs":[
    {"name":"a","state":"finished","ranks":[1],"steps":100,"queued_s":0.48,"jct_s":20.08,"estimate_bytes":2338944.6,
     "measured_peak_bytes":2097152,"preemptions":0},
    {"name":"b","state":"finished","ranks":[0],"steps":80,"queued_s":0.48,"jct_s":20.28,"estimate_bytes":1048576,
     "measured_peak_bytes":1048576,"preemptions":0},
    {"name":"c","state":"finished","ranks":[0],"steps":5,"queued_s":null,"jct_s":-1,"samples_per_s_alone":0,
     "estimate_bytes":1048576,"measured_peak_bytes":0,"preemptions":0}],
    "rank_usage":[{"rank":0,"busy_share":0.97,"peak_bytes":1048576},{"rank":1,"busy_share":0.98,"peak_bytes":2097152}]})");
  const SchedRun run = read_sched_run(dir.path.string());
  ASSERT_EQ(run.parts.size(), 2u);
  EXPECT_EQ(run.parts[0].end_s, 22);
  EXPECT_NEAR(run.parts[1].begin_s, 25.1, 1e-9);
  EXPECT_FALSE(run.parts[1].after_previous);
  EXPECT_NEAR(run.span_s, 22 + 3.1 + 20.3, 1e-9);  // the two parts and the stop between them
  // Every placement on its rank's own lane: none of part 2 beside one of part 1.
  ASSERT_EQ(run.placements.size(), 5u);
  for (const Placement& p : run.placements) {
    EXPECT_EQ(p.slot, 0) << p.job << " on rank " << p.rank << " at " << p.begin_s;
  }
  for (const Placement& p : run.placements)
    for (const Placement& q : run.placements) {
      if (&p == &q || p.rank != q.rank) continue;
      EXPECT_TRUE(p.end_s <= q.begin_s || q.end_s <= p.begin_s);
    }
  EXPECT_NEAR(run.placements[3].begin_s, 25.6, 1e-9);
  // The jobs' times on the same axis, over both parts: JCT from the first arrival, the stop
  // included; queued before the first start (0.98 s) and after the resume (0.48 s), not while stopped.
  ASSERT_EQ(run.jobs.size(), 3u);
  EXPECT_EQ(run.jobs[1].name, "b");
  EXPECT_NEAR(run.jobs[1].jct_s, 25.1 + 20.3 - 0.02, 1e-9);
  EXPECT_NEAR(run.jobs[1].queued_s, 0.98 + 0.48, 1e-9);
  EXPECT_EQ(run.jobs[1].preemptions, 1);
  // c ended in part 1: its figures are part 1's, not the last part's summary (which never ran it).
  EXPECT_NEAR(run.jobs[2].jct_s, 0.88, 1e-9);
  EXPECT_EQ(run.jobs[2].measured_peak_bytes, 524288);
  EXPECT_TRUE(std::isnan(run.jobs[2].samples_per_s_alone));
  for (const std::string& n : run.notes) EXPECT_EQ(n.find("wall-clock"), std::string::npos) << n;

  const Report r = build_report({dir.path.string()}, "");
  EXPECT_NE(r.html.find("45.4 s from the first event to the last in 2 parts (stopped at 22.0 s, resumed at 25.1 s)"),
            std::string::npos);
  EXPECT_NE(r.html.find("Ranks (summary.json: the last part only, from 25.1 s)"), std::string::npos);
  const nlohmann::json charts = charts_of(r.html);
  // The stop: a band over every lane of the placements, triangles on the charts against time.
  bool band = false;
  for (const auto& s : chart_titled(charts, "Placements per rank")["series"])
    if (s["style"] == "band") {
      band = true;
      EXPECT_EQ(s["ranges"].size(), 2u);  // both lanes
      EXPECT_EQ(s["ranges"][0][0], 22);
      EXPECT_NEAR(s["ranges"][0][1].get<double>(), 25.1, 1e-9);
    }
  EXPECT_TRUE(band);
  // One job at a time on each rank, busy all the time: the rank's busy share never passes 1,
  // nor its memory the one job's 1 MiB.
  for (const char* title : {"Utilisation per rank over time", "Device memory per rank over time"}) {
    bool marks = false;
    for (const auto& s : chart_titled(charts, title)["series"]) {
      if (s["style"] == "marker") {
        marks = true;
        EXPECT_EQ(s["x"].size(), 2u);
        continue;
      }
      double top = 0;
      for (const auto& y : s["y"]) top = std::max(top, y.get<double>());
      EXPECT_LE(top, 1.0) << title << ", " << s["label"];
      EXPECT_GE(top, 1.0) << title << ", " << s["label"];
    }
    EXPECT_TRUE(marks) << title;
  }
}

TEST(SchedRun, ResumedRunWithoutWallClockFollowsThePreviousPart) {
  TempDir dir("resumed_old");
  write(dir.path / "events.jsonl", two_part_events(false));
  const SchedRun run = read_sched_run(dir.path.string());
  ASSERT_EQ(run.parts.size(), 2u);
  EXPECT_EQ(run.parts[1].begin_s, 22);
  EXPECT_TRUE(run.parts[1].after_previous);
  EXPECT_NEAR(run.jobs[1].jct_s, 22 + 20.3 - 0.02, 1e-9);
  EXPECT_NEAR(run.span_s, 22 + 20.3, 1e-9);
  for (const Placement& p : run.placements) EXPECT_EQ(p.slot, 0);
  bool noted = false;
  for (const std::string& n : run.notes) noted = noted || n.find("part 2 of the run (a resume, line 38) has no wall-clock time") != std::string::npos;
  EXPECT_TRUE(noted) << run.notes.front();
}

// A run over 2 nodes of 2 ranks: the placement chart's lanes name each rank's node and host.
TEST(SchedRun, PlacementLanesNameTheNodes) {
  TempDir dir("nodes");
  write(dir.path / "events.jsonl", R"({"event":"run_start","ranks":4,"nodes":2,"ranks_per_node":2,"node_hosts":["h#0","h#1"],"policy":"delay","t":0}
{"event":"submitted","job":"a","ranks":1,"t":0}
{"event":"submitted","job":"w","ranks":2,"t":0}
{"event":"start","job":"a","ranks":[0],"nodes":[0],"t":0.1}
{"event":"start","job":"w","ranks":[1,3],"nodes":[0,1],"t":3.0}
{"event":"finished","job":"w","step":20,"t":4.0}
{"event":"finished","job":"a","step":50,"t":5.0}
{"event":"run_end","makespan_s":5.0,"t":5.0}
)");
  const SchedRun run = read_sched_run(dir.path.string());
  EXPECT_EQ(run.ranks_per_node, 2);
  ASSERT_EQ(run.node_hosts.size(), 2u);
  const Report r = build_report({dir.path.string()}, "");
  const nlohmann::json lanes = chart_titled(charts_of(r.html), "Placements per node and rank")["categories"];
  EXPECT_EQ(lanes, nlohmann::json({"node 0 (h#0) rank 0", "node 0 (h#0) rank 1", "node 1 (h#1) rank 3"}));
}
