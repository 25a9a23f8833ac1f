// recmix sim --pairs: measured pair files as the simulator's ground truth and DLRM profiles. A
// file written and read back drives the simulator; a co-located pair of covered types gets
// exactly the measured slowdowns (completion times worked out by hand); a group no pair measures
// falls back to the formula and is counted; conflicting files and unknown type names are named.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "core/error.hpp"
#include "sched/measured_pairs.hpp"
#include "sched/sim/measured_input.hpp"
#include "sched/sim/report.hpp"
#include "sched/sim/simulator.hpp"
#include "sched/sim/workload.hpp"
#include "tests/sched/scratch_dir.hpp"

namespace recmix::sched {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// "small" alone 10 ms (dense 0.4, embedding 0.2, all-reduce 0.1, busy 0.9), "medium" alone
// 40 ms (dense 0.5, embedding 0.3, busy 0.7); small beside medium 1.3, medium beside small 1.6.
MeasuredPairs two_types() {
  MeasuredPairs m;
  m.types.push_back({"medium", 0.040, 0.5, 0.3, 0.0, 0.05, 0.7, 20});
  m.types.push_back({"small", 0.010, 0.4, 0.2, 0.1, 0.05, 0.9, 30});
  m.pairs.push_back({"medium", "small", 0.064, 1.6, 12});
  m.pairs.push_back({"small", "medium", 0.013, 1.3, 12});
  return m;
}

std::string write_file(const test::ScratchDir& scratch, const std::string& name, const std::string& text) {
  const std::string path = (scratch.path / name).string();
  std::ofstream(path) << text;
  return path;
}

std::string write_pairs(const test::ScratchDir& scratch, const std::string& name, const MeasuredPairs& m) {
  std::ostringstream csv;
  write_pairs_csv(m, csv);
  return write_file(scratch, name, csv.str());
}

ClusterSpec one_gpu(int max_jobs) {
  ClusterSpec s;
  s.nodes = 1;
  s.gpus_per_node = 1;
  s.gpu_memory_bytes = 80 * kGiB;
  s.max_jobs_per_gpu = max_jobs;
  return s;
}

const JobOutcome& outcome(const SimResult& r, JobId id) {
  for (const auto& o : r.outcomes)
    if (o.id == id) return o;
  throw std::runtime_error("no outcome");
}

TEST(SimMeasuredPairs, FileRoundTripsAndTheSimulatorUsesIt) {
  const test::ScratchDir scratch;
  const std::string file = write_pairs(scratch, "pairs.csv", two_types());
  const MergedPairs merged = read_pairs_files({file});
  ASSERT_EQ(merged.pairs.types.size(), 2u);
  ASSERT_EQ(merged.pairs.pairs.size(), 2u);
  EXPECT_EQ(merged.pairs.types[1].type, "small");
  EXPECT_NEAR(merged.pairs.types[1].solo_step_s, 0.010, 1e-12);
  EXPECT_NEAR(merged.pairs.types[1].busy_share, 0.9, 1e-9);
  EXPECT_NEAR(merged.pairs.pairs[1].slowdown, 1.3, 1e-12);
  EXPECT_EQ(merged.files_of_type.at("small"), std::vector<std::string>{file});

  const ClusterSpec cluster = one_gpu(2);
  auto env = make_environment(cluster, "/nonexistent");  // DLRM presets only
  const UtilisationVector roofline = env->library.dlrm("dlrm-small", 1).util;
  add_measured_pairs(*env, {file});
  EXPECT_TRUE(env->pairs.warnings.empty());
  // "small" and "medium" are the presets dlrm-small and dlrm-medium.
  EXPECT_EQ(env->pairs.mapping.at("small"), "dlrm-small");
  EXPECT_EQ(env->pairs.mapping.at("medium"), "dlrm-medium");
  ASSERT_EQ(env->pairs.dataset.pairs.size(), 2u);
  EXPECT_EQ(env->pairs.dataset.source, "measured");

  const std::string trace = write_file(scratch, "trace.csv",
                                       "arrival_s,duration_s,gpus,type\n0,100,1,dlrm-small\n0,100,1,dlrm-medium\n"
                                       "0,100,1,dlrm-large\n");
  WorkloadOptions wo;
  wo.mix = "trace";
  const Workload w = build_workload(read_trace(trace), cluster, *env, wo);
  ASSERT_EQ(w.jobs.size(), 3u);
  // The measured profile replaces the roofline's utilisation and solo step time.
  const Job& small = w.jobs[0];
  EXPECT_EQ(small.profile.type, "dlrm-small");
  EXPECT_NEAR(small.profile.util[Resource::compute], 0.6, 1e-9);
  EXPECT_NEAR(small.profile.util[Resource::host_cpu], 0.9, 1e-9);
  EXPECT_NEAR(small.profile.util[Resource::network], 0.1, 1e-9);
  EXPECT_EQ(small.profile.util[Resource::memory_bandwidth], 0.0);
  EXPECT_NE(roofline[Resource::memory_bandwidth], 0.0);  // the roofline's was another vector
  EXPECT_NEAR(small.profile.solo_step_s, 0.010, 1e-12);
  EXPECT_GT(small.profile.peak_memory_bytes, 0);  // memory stays the estimator's
  EXPECT_NEAR(env->model.utilisation(small.type)[Resource::compute], 0.6, 1e-9);
  EXPECT_EQ(profile_source(*env, "dlrm-small"), "measured");
  EXPECT_EQ(profile_source(*env, "dlrm-large"), "roofline");
  // Ground truth: the measured values, each direction its own.
  const Job& medium = w.jobs[1];
  EXPECT_DOUBLE_EQ(env->truth->pair(small, medium), 1.3);
  EXPECT_DOUBLE_EQ(env->truth->pair(medium, small), 1.6);
  EXPECT_EQ(env->truth->type_source(small.type), "measured");
  EXPECT_EQ(env->truth->type_source(w.jobs[2].type), "formula");
  const auto types = job_type_truth(*env, w);
  ASSERT_EQ(types.size(), 3u);
  EXPECT_EQ(types[2].type, "dlrm-small");
  EXPECT_EQ(types[2].measured_as, std::vector<std::string>{"small"});
  EXPECT_EQ(types[2].ground_truth, "measured");
  EXPECT_EQ(types[0].ground_truth, "formula");  // dlrm-large
  // The interference model observed both directions (it had nothing before).
  EXPECT_EQ(env->model.observation_count(), 2u);
}

// Jobs A (dlrm-small, 100 s of work, at 0) and B (dlrm-medium, 60 s, at 20 s) simulated under
// `policy` with the pair file `pairs` as ground truth.
struct TwoJobs {
  std::unique_ptr<SimEnvironment> env;
  Workload w;
  SimResult r;
};
TwoJobs two_jobs(const test::ScratchDir& scratch, const ClusterSpec& cluster, const std::string& pairs,
                 const char* policy) {
  TwoJobs t;
  t.env = make_environment(cluster, "/nonexistent");
  add_measured_pairs(*t.env, {pairs});
  const std::string trace =
      write_file(scratch, "trace.csv", "arrival_s,duration_s,gpus,type\n0,100,1,dlrm-small\n20,60,1,dlrm-medium\n");
  WorkloadOptions wo;
  wo.mix = "trace";
  t.w = build_workload(read_trace(trace), cluster, *t.env, wo);
  auto p = make_policy(policy);
  t.r = simulate(cluster, t.w.jobs, *p, *t.env->truth, t.env->model);
  return t;
}

TEST(SimMeasuredPairs, ACoLocatedPairTakesExactlyTheMeasuredSlowdowns) {
  // One GPU, memory-first packs. A (dlrm-small) arrives at 0 with 100 s of work, B (dlrm-medium)
  // at 20 s with 60 s. A runs alone to 20 s (20 s done). Together A runs at 1/1.3, B at 1/1.6:
  // B needs 60 x 1.6 = 96 s and finishes at 116; A has done 96 / 1.3 = 73.846 s more by then,
  // and its last 100 - 20 - 73.846 = 6.154 s alone: A finishes at 116 + 80 - 96 / 1.3.
  const test::ScratchDir scratch;
  const std::string file = write_pairs(scratch, "pairs.csv", two_types());
  const TwoJobs t = two_jobs(scratch, one_gpu(2), file, "memory-first");
  const SimResult& r = t.r;
  const auto& env = t.env;
  const Workload& w = t.w;
  EXPECT_NEAR(outcome(r, 1).finish_s, 116.0, 1e-6);
  EXPECT_NEAR(outcome(r, 0).finish_s, 116.0 + 80.0 - 96.0 / 1.3, 1e-6);
  EXPECT_TRUE(outcome(r, 0).colocated);
  // One group, each member's slowdown from the measured pairs; no fallback.
  ASSERT_EQ(r.ground_truth.size(), 2u);
  EXPECT_EQ(r.ground_truth.at("dlrm-small").pair_data_groups, 1u);
  EXPECT_EQ(r.ground_truth.at("dlrm-small").formula_groups, 0u);
  EXPECT_EQ(r.ground_truth.at("dlrm-medium").pair_data_groups, 1u);
  const auto j = ground_truth_json(job_type_truth(*env, w), {r});
  EXPECT_EQ(j.at("dlrm-small").at("ground_truth"), "measured");
  EXPECT_EQ(j.at("dlrm-small").at("profile"), "measured");
  EXPECT_EQ(j.at("dlrm-small").at("formula_fallbacks").at("memory-first"), 0);
}

TEST(SimMeasuredPairs, AJobAloneBesideABusyGpuOfItsNodeTakesItsBusyNeighbourSlowdown) {
  // One node of two GPUs, one job per GPU. A (dlrm-small, busy-neighbour slowdown 1.5) arrives at
  // 0 with 100 s of work, B (dlrm-medium, none measured) at 20 s with 60 s, on the other GPU. A
  // does 20 s alone; while B runs (20 to 80) A runs at 1/1.5, 40 s of work; its last 40 s alone:
  // A finishes at 120, B at 80.
  const test::ScratchDir scratch;
  MeasuredPairs m = two_types();
  m.neighbours.push_back({"small", 0.015, 1.5, 10});
  const std::string file = write_pairs(scratch, "pairs.csv", m);
  ClusterSpec cluster = one_gpu(1);
  cluster.gpus_per_node = 2;
  const TwoJobs t = two_jobs(scratch, cluster, file, "fifo");
  EXPECT_NEAR(outcome(t.r, 1).finish_s, 80.0, 1e-6);
  EXPECT_NEAR(outcome(t.r, 0).finish_s, 120.0, 1e-6);
  EXPECT_FALSE(outcome(t.r, 0).colocated);
  // Without the line: both at full speed.
  const TwoJobs plain = two_jobs(scratch, cluster, write_pairs(scratch, "plain.csv", two_types()), "fifo");
  EXPECT_NEAR(outcome(plain.r, 0).finish_s, 100.0, 1e-6);
}

TEST(SimMeasuredPairs, AGroupNoPairMeasuresFallsBackToTheFormulaAndIsCounted) {
  // One GPU holding up to 3 jobs. A (dlrm-small, 0 s) and B (dlrm-medium, 10 s) share it: a
  // measured pair. C (dlrm-large, 20 s, 5 s of work) joins: a group of three, the formula for
  // each. C leaves: A and B are a measured pair again. B leaves, A ends alone.
  const test::ScratchDir scratch;
  const std::string file = write_pairs(scratch, "pairs.csv", two_types());
  const ClusterSpec cluster = one_gpu(3);
  auto env = make_environment(cluster, "/nonexistent");
  add_measured_pairs(*env, {file});
  const std::string trace = write_file(scratch, "trace.csv",
                                       "arrival_s,duration_s,gpus,type\n0,1000,1,dlrm-small\n10,500,1,dlrm-medium\n"
                                       "20,5,1,dlrm-large\n");
  WorkloadOptions wo;
  wo.mix = "trace";
  const Workload w = build_workload(read_trace(trace), cluster, *env, wo);
  ASSERT_EQ(w.jobs.size(), 3u);
  auto packing = make_policy("memory-first");
  const SimResult r = simulate(cluster, w.jobs, *packing, *env->truth, env->model);
  ASSERT_TRUE(outcome(r, 2).colocated);
  EXPECT_LT(outcome(r, 2).finish_s, outcome(r, 1).finish_s);
  EXPECT_LT(outcome(r, 1).finish_s, outcome(r, 0).finish_s);
  EXPECT_EQ(r.ground_truth.at("dlrm-small").pair_data_groups, 2u);
  EXPECT_EQ(r.ground_truth.at("dlrm-small").formula_groups, 1u);
  EXPECT_EQ(r.ground_truth.at("dlrm-medium").pair_data_groups, 2u);
  EXPECT_EQ(r.ground_truth.at("dlrm-medium").formula_groups, 1u);
  EXPECT_EQ(r.ground_truth.at("dlrm-large").pair_data_groups, 0u);
  EXPECT_EQ(r.ground_truth.at("dlrm-large").formula_groups, 1u);
  // A fallback is a formula group of a type the measured pairs cover; dlrm-large has none.
  const auto types = job_type_truth(*env, w);
  const auto j = ground_truth_json(types, {r});
  EXPECT_EQ(j.at("dlrm-small").at("formula_fallbacks").at("memory-first"), 1);
  EXPECT_EQ(j.at("dlrm-medium").at("formula_fallbacks").at("memory-first"), 1);
  EXPECT_EQ(j.at("dlrm-large").at("ground_truth"), "formula");
  EXPECT_EQ(j.at("dlrm-large").at("formula_fallbacks").at("memory-first"), 0);
  const std::string table = format_ground_truth(types, {r});
  EXPECT_NE(table.find("dlrm-small (small)"), std::string::npos) << table;
  EXPECT_NE(table.find("1 / 3"), std::string::npos) << table;
}

TEST(SimMeasuredPairs, FilesThatDisagreeOnAPairAreAnErrorNamingBoth) {
  const test::ScratchDir scratch;
  const std::string a = write_pairs(scratch, "a.csv", two_types());
  MeasuredPairs other = two_types();
  other.pairs[1].slowdown = 1.45;  // small beside medium
  const std::string b = write_pairs(scratch, "b.csv", other);
  try {
    read_pairs_files({a, b});
    FAIL() << "conflicting files accepted";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(a), std::string::npos) << what;
    EXPECT_NE(what.find(b), std::string::npos) << what;
    EXPECT_NE(what.find("'small' beside 'medium'"), std::string::npos) << what;
  }
  // Files that agree merge: solo lines averaged by samples, the pair kept once.
  MeasuredPairs more;
  more.types.push_back({"small", 0.020, 0.4, 0.2, 0.1, 0.05, 0.6, 10});
  more.types.push_back({"large", 0.100, 0.6, 0.3, 0.0, 0.0, 0.5, 5});
  more.pairs.push_back({"small", "medium", 0.026, 1.3, 4});
  more.pairs.push_back({"small", "large", 0.030, 1.5, 4});
  const MergedPairs merged = read_pairs_files({a, write_pairs(scratch, "c.csv", more)});
  ASSERT_EQ(merged.pairs.types.size(), 3u);
  ASSERT_EQ(merged.pairs.pairs.size(), 3u);
  EXPECT_EQ(merged.pairs.types[2].type, "small");
  EXPECT_NEAR(merged.pairs.types[2].solo_step_s, (30 * 0.010 + 10 * 0.020) / 40, 1e-12);
  EXPECT_NEAR(merged.pairs.types[2].busy_share, (30 * 0.9 + 10 * 0.6) / 40, 1e-9);
  EXPECT_EQ(merged.pairs.types[2].samples, 40);
  EXPECT_EQ(merged.files_of_type.at("small").size(), 2u);
}

TEST(SimMeasuredPairs, UnknownTypeNamesAreWarnedAboutAndAliasesMapThem) {
  const test::ScratchDir scratch;
  MeasuredPairs m = two_types();
  m.types.push_back({"kaggle-like", 0.020, 0.5, 0.2, 0.0, 0.0, 0.8, 10});
  m.pairs.push_back({"kaggle-like", "small", 0.03, 1.5, 5});
  m.pairs.push_back({"small", "kaggle-like", 0.012, 1.2, 5});
  const std::string file = write_pairs(scratch, "named.csv", m);
  const ClusterSpec cluster = one_gpu(2);
  {
    auto env = make_environment(cluster, "/nonexistent");
    add_measured_pairs(*env, {file});
    ASSERT_EQ(env->pairs.warnings.size(), 1u);
    EXPECT_NE(env->pairs.warnings[0].find("'kaggle-like'"), std::string::npos) << env->pairs.warnings[0];
    EXPECT_NE(env->pairs.warnings[0].find(file), std::string::npos) << env->pairs.warnings[0];
    EXPECT_FALSE(env->pairs.mapping.count("kaggle-like"));
    EXPECT_EQ(env->pairs.dataset.pairs.size(), 2u);  // its pairs are left out
  }
  {
    auto env = make_environment(cluster, "/nonexistent");
    add_measured_pairs(*env, {file}, parse_type_aliases({"kaggle-like=dlrm-large"}));
    EXPECT_TRUE(env->pairs.warnings.empty());
    EXPECT_EQ(env->pairs.mapping.at("kaggle-like"), "dlrm-large");
    EXPECT_EQ(env->pairs.dataset.pairs.size(), 4u);
    EXPECT_TRUE(env->pairs.profiles.count("dlrm-large"));
  }
  {
    // Two names for one type, an alias to no type, a malformed alias: errors.
    auto env = make_environment(cluster, "/nonexistent");
    EXPECT_THROW(add_measured_pairs(*env, {file}, parse_type_aliases({"kaggle-like=dlrm-small"})), ConfigError);
    EXPECT_THROW(add_measured_pairs(*env, {file}, parse_type_aliases({"kaggle-like=no-such-type"})), ConfigError);
    EXPECT_THROW(parse_type_aliases({"kaggle-like"}), ConfigError);
    EXPECT_THROW(parse_type_aliases({"a=dlrm-small", "a=dlrm-large"}), ConfigError);
  }
}

}  // namespace
}  // namespace recmix::sched
