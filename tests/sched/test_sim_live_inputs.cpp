// What simulating a recmix run from its jobs file needs (bench/run/live_vs_sim.sh): sample means
// weighted by the steps each sample covers, a trace that gives each job's memory, and measured
// types that are no simulator type kept as types of their own (--pairs-type NAME=NAME).
#include <gtest/gtest.h>

#include <fstream>
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

std::string write_file(const test::ScratchDir& scratch, const std::string& name, const std::string& text) {
  const std::string path = (scratch.path / name).string();
  std::ofstream(path) << text;
  return path;
}

std::string sample(const std::string& job, int rank, int launch, int step, double step_s, const std::string& partners) {
  std::ostringstream s;
  s << "{\"event\":\"sample\",\"job\":\"" << job << "\",\"rank\":" << rank << ",\"launch\":" << launch
    << ",\"step\":" << step << ",\"step_s\":" << step_s << ",\"dense_s\":" << step_s / 2
    << ",\"busy_share\":0.9,\"partners\":[" << partners << "]}\n";
  return s.str();
}

TEST(SimLiveInputs, SampleMeansWeighTheStepsEachSampleCovers) {
  const test::ScratchDir scratch;
  std::filesystem::create_directories(scratch.path / "run");
  // a.1 alone: a first sample of 10 slow steps (50 ms, the warm-up), then 100 steps of 10 ms:
  // 1.5 s over 110 steps. Beside b: 20 steps of 30 ms, then 60 of 15 ms (another launch starts
  // its count again: 40 steps at 20 ms). Rank 1 counts its own steps.
  write_file(scratch, "run/events.jsonl",
             sample("a.1", 0, 1, 10, 0.050, "") + sample("a.1", 0, 1, 110, 0.010, "") +
                 sample("a.1", 1, 1, 110, 0.010, "") + sample("a.1", 0, 1, 130, 0.030, "\"b.1\"") +
                 sample("a.1", 0, 1, 190, 0.015, "\"b.1\"") + sample("a.1", 0, 2, 40, 0.020, "\"b.1\""));
  const MeasuredPairs m = measure_pairs({(scratch.path / "run").string()});
  ASSERT_EQ(m.types.size(), 1u);
  // Alone: rank 0's 110 steps and rank 1's 110 steps.
  EXPECT_NEAR(m.types[0].solo_step_s, (1.5 + 1.1) / 220, 1e-12);
  EXPECT_NEAR(m.types[0].dense_share, 0.5, 1e-12);
  EXPECT_EQ(m.types[0].samples, 3);
  ASSERT_EQ(m.pairs.size(), 1u);
  const double beside = (20 * 0.030 + 60 * 0.015 + 40 * 0.020) / 120;
  EXPECT_NEAR(m.pairs[0].colocated_step_s, beside, 1e-12);
  EXPECT_NEAR(m.pairs[0].slowdown, beside / ((1.5 + 1.1) / 220), 1e-9);
  EXPECT_EQ(m.pairs[0].samples, 3);
}

TEST(SimLiveInputs, TheTraceGivesEachJobsMemory) {
  const test::ScratchDir scratch;
  ClusterSpec cluster;
  cluster.nodes = 1;
  cluster.gpus_per_node = 2;
  cluster.gpu_memory_bytes = 8 * kGiB;
  auto env = make_environment(cluster, "/nonexistent");
  // dlrm-large's own estimate does not fit 8 GiB: without memory_gib it would become a smaller preset.
  const Trace trace = read_trace(write_file(scratch, "t.csv",
                                            "arrival_s,duration_s,gpus,type,memory_gib\n0,10,2,dlrm-large,0.25\n"
                                            "1,10,1,dlrm-small,0\n"));
  ASSERT_EQ(trace.jobs.size(), 2u);
  EXPECT_DOUBLE_EQ(trace.jobs[0].memory_bytes, 0.25 * kGiB);
  WorkloadOptions wo;
  wo.mix = "trace";
  const Workload w = build_workload(trace, cluster, *env, wo);
  ASSERT_EQ(w.jobs.size(), 2u);
  EXPECT_EQ(w.jobs[0].profile.type, "dlrm-large");
  EXPECT_DOUBLE_EQ(w.jobs[0].profile.peak_memory_bytes, 0.25 * kGiB);
  EXPECT_DOUBLE_EQ(w.jobs[1].profile.peak_memory_bytes, env->library.dlrm("dlrm-small", 1).peak_memory_bytes);
  EXPECT_THROW(read_trace(write_file(scratch, "bad.csv", "arrival_s,duration_s,gpus,type,memory_gib\n0,10,1,x,-1\n")),
               DataError);
}

TEST(SimLiveInputs, AMeasuredTypeNamedAfterItselfIsATypeOfItsOwn) {
  const test::ScratchDir scratch;
  MeasuredPairs m;
  m.types.push_back({"heavy", 0.003, 0.8, 0.1, 0.05, 0.05, 0.9, 10});
  m.types.push_back({"multihot", 0.004, 0.3, 0.5, 0.0, 0.2, 0.5, 10});
  m.pairs.push_back({"heavy", "multihot", 0.006, 2.0, 5});
  m.pairs.push_back({"multihot", "heavy", 0.005, 1.25, 5});
  std::ostringstream csv;
  write_pairs_csv(m, csv);
  const std::string file = write_file(scratch, "pairs.csv", csv.str());
  ClusterSpec cluster;
  cluster.nodes = 1;
  cluster.gpus_per_node = 1;
  cluster.gpu_memory_bytes = 8 * kGiB;
  cluster.max_jobs_per_gpu = 2;
  auto env = make_environment(cluster, "/nonexistent");
  add_measured_pairs(*env, {file}, parse_type_aliases({"heavy=heavy", "multihot=multihot"}));
  EXPECT_TRUE(env->pairs.warnings.empty());
  EXPECT_EQ(env->pairs.mapping.at("heavy"), "heavy");
  EXPECT_EQ(env->pairs.mapping.at("multihot"), "multihot");
  ASSERT_NE(env->library.find("heavy"), nullptr);
  EXPECT_NEAR(env->library.find("heavy")->comm_fraction, 0.05, 1e-12);
  EXPECT_EQ(profile_source(*env, "heavy"), "measured");

  // heavy (0 s, 100 s of work) and multihot (20 s, 50 s) share the GPU: multihot runs at 1/1.25
  // and ends at 20 + 62.5; heavy at 1/2 meanwhile (31.25 s done), then alone: 100 - 20 - 31.25 more.
  const std::string trace = write_file(scratch, "t.csv",
                                       "arrival_s,duration_s,gpus,type,memory_gib\n0,100,1,heavy,0.5\n"
                                       "20,50,1,multihot,0.2\n");
  WorkloadOptions wo;
  wo.mix = "trace";
  const Workload w = build_workload(read_trace(trace), cluster, *env, wo);
  ASSERT_EQ(w.jobs.size(), 2u);
  EXPECT_NEAR(w.jobs[0].profile.solo_step_s, 0.003, 1e-12);
  EXPECT_NEAR(w.jobs[0].profile.util[Resource::compute], 0.9, 1e-12);
  EXPECT_DOUBLE_EQ(w.jobs[0].profile.peak_memory_bytes, 0.5 * kGiB);
  auto packing = make_policy("memory-first");
  const SimResult r = simulate(cluster, w.jobs, *packing, *env->truth, env->model);
  ASSERT_EQ(r.outcomes.size(), 2u);
  EXPECT_NEAR(r.outcomes[1].finish_s, 82.5, 1e-6);
  EXPECT_NEAR(r.outcomes[0].finish_s, 82.5 + 100 - 20 - 31.25, 1e-6);
  for (const auto& t : job_type_truth(*env, w)) {
    EXPECT_EQ(t.profile, "measured") << t.type;
    EXPECT_EQ(t.ground_truth, "measured") << t.type;
  }

  // Without the alias the names stay unknown (warned about); an alias to itself of a name that no
  // file measures names no type of the simulator: an error, as for any alias to an unknown type.
  auto plain = make_environment(cluster, "/nonexistent");
  add_measured_pairs(*plain, {file});
  EXPECT_EQ(plain->pairs.warnings.size(), 2u);
  auto absent = make_environment(cluster, "/nonexistent");
  EXPECT_THROW(add_measured_pairs(*absent, {file}, parse_type_aliases({"heavy=heavy", "other=other"})), ConfigError);
}

}  // namespace
}  // namespace recmix::sched
