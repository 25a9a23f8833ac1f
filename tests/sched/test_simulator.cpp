// The simulator: hand-computed JCTs for FIFO and for a co-located pair whose rates change when
// a co-runner arrives and leaves, and invariants of every policy on a slice of the Philly trace
// (no start before arrival, no memory violation, work conserved, nobody faster than solo).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "sched/sim/report.hpp"
#include "sched/sim/simulator.hpp"
#include "sched/sim/workload.hpp"
#include "tests/sched/scratch_dir.hpp"

namespace recmix::sched {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string traces_dir() {
  const char* shared = std::getenv("RECMIX_SHARED_DIR");
  return std::string(shared ? shared : "../shared") + "/traces";
}

ClusterSpec one_node(int gpus) {
  ClusterSpec s;
  s.nodes = 1;
  s.gpus_per_node = gpus;
  s.gpu_memory_bytes = 10 * kGiB;
  return s;
}

Job job(JobId id, double arrival, double work, int gpus, double compute_share = 0) {
  Job j;
  j.id = id;
  j.name = "j" + std::to_string(id);
  j.arrival_s = arrival;
  j.work_s = work;
  j.gpus = gpus;
  j.profile.peak_memory_bytes = 1 * kGiB;
  j.profile.util[Resource::compute] = compute_share;
  return j;
}

const JobOutcome& outcome(const SimResult& r, JobId id) {
  for (const auto& o : r.outcomes)
    if (o.id == id) return o;
  throw std::runtime_error("no outcome");
}

TEST(Simulator, FifoReproducesHandComputedJcts) {
  // 2 GPUs. A(0 s, 100 s, 1 GPU) runs 0-100. B(10 s, 50 s, 2 GPUs) waits for both GPUs: 100-150.
  // C(20 s, 30 s, 1 GPU) is behind B (strict FIFO): 150-180.
  InterferenceOptions io;
  io.alpha = 0;
  InterferenceModel model(io);
  SlowdownTruth truth(model, 0.0, 1);
  auto fifo = make_policy("fifo");
  const SimResult r = simulate(one_node(2), {job(1, 0, 100, 1), job(2, 10, 50, 2), job(3, 20, 30, 1)}, *fifo, truth, model);
  EXPECT_NEAR(outcome(r, 1).finish_s, 100, 1e-6);
  EXPECT_NEAR(outcome(r, 2).finish_s, 150, 1e-6);
  EXPECT_NEAR(outcome(r, 3).finish_s, 180, 1e-6);
  EXPECT_NEAR(r.makespan_s, 180, 1e-6);
  EXPECT_NEAR(r.avg_jct_s, (100 + 140 + 160) / 3.0, 1e-6);
  EXPECT_NEAR(r.avg_queue_s, (0 + 90 + 130) / 3.0, 1e-6);
  EXPECT_NEAR(r.median_jct_s, 140, 1e-6);
  // Busy GPU-seconds: 100 (A) + 100 (B) + 30 (C) over 2 GPUs x 180 s.
  EXPECT_NEAR(r.avg_gpu_util, 230.0 / 360.0, 1e-9);
  EXPECT_EQ(r.memory_violations, 0u);
}

// Priorities: the queue is ordered by priority first (queue_before), so a job of higher priority
// is placed first, and least-attained-service never preempts a job for one of lower priority.
TEST(Simulator, AHigherPriorityJobIsPlacedFirst) {
  // 1 GPU. A(0 s, 100 s) runs 0-100. B(10 s, 50 s) and C(20 s, 30 s, priority 5) wait; C starts
  // first at 100 (130), then B (180). Without the priority, B then C.
  InterferenceOptions io;
  io.alpha = 0;
  InterferenceModel model(io);
  SlowdownTruth truth(model, 0.0, 1);
  for (const char* policy : {"fifo", "las"}) {  // the policies that give a job its GPU alone
    SCOPED_TRACE(policy);
    auto p = make_policy(policy);
    Job c = job(3, 20, 30, 1);
    c.priority = 5;
    const SimResult r = simulate(one_node(1), {job(1, 0, 100, 1), job(2, 10, 50, 1), c}, *p, truth, model);
    EXPECT_NEAR(outcome(r, 3).finish_s, 130, 1e-6);
    EXPECT_NEAR(outcome(r, 2).finish_s, 180, 1e-6);
    auto q = make_policy(policy);
    const SimResult plain =
        simulate(one_node(1), {job(1, 0, 100, 1), job(2, 10, 50, 1), job(3, 20, 30, 1)}, *q, truth, model);
    EXPECT_NEAR(outcome(plain, 2).finish_s, 150, 1e-6);
    EXPECT_NEAR(outcome(plain, 3).finish_s, 180, 1e-6);
  }
  const Job hi = [] {
    Job j = job(1, 0, 0, 1);
    j.priority = 2;
    return j;
  }();
  const Job lo = job(0, 5, 0, 1);
  EXPECT_TRUE(queue_before(&hi, &lo));  // priority before arrival and id
  EXPECT_FALSE(queue_before(&lo, &hi));
}

TEST(Simulator, LeastAttainedServiceNeverPreemptsAHigherPriorityJob) {
  // 1 GPU, LAS demoting at 5 GPU-s with a lease every second. H(0 s, 100 s) is demoted by 5 s;
  // L(10 s, 10 s) then preempts it, unless H has the higher priority: then H runs to 100 and L
  // after it, to 110.
  InterferenceOptions io;
  io.alpha = 0;
  InterferenceModel model(io);
  SlowdownTruth truth(model, 0.0, 1);
  PolicyOptions options;
  options.las_threshold_gpu_s = 5;
  options.las_lease_s = 1;
  options.restart_cost_s = 0;
  for (int priority : {0, 1}) {
    SCOPED_TRACE(priority);
    auto las = make_policy("las", options);
    Job h = job(1, 0, 100, 1);
    h.priority = priority;
    const SimResult r = simulate(one_node(1), {h, job(2, 10, 10, 1)}, *las, truth, model);
    if (priority > 0) {
      EXPECT_NEAR(outcome(r, 1).finish_s, 100, 1e-6);
      EXPECT_NEAR(outcome(r, 2).finish_s, 110, 1e-6);
    } else {
      EXPECT_LT(outcome(r, 2).finish_s, 100);  // L preempted H
      EXPECT_GT(outcome(r, 1).finish_s, 100);
    }
  }
}

TEST(Simulator, FifoOnASmallTraceFileReproducesHandComputedJcts) {
  // The same three jobs as above, read from the simulator's own CSV and mapped by --mix trace.
  const test::ScratchDir scratch;
  const auto path = scratch.path / "recmix_sched_fifo_trace.csv";
  std::ofstream(path) << "arrival_s,duration_s,gpus,type\n"
                         "0,100,1,dlrm-small\n"
                         "10,50,2,dlrm-small\n"
                         "20,30,1,dlrm-medium\n";
  ClusterSpec cluster = one_node(2);
  cluster.gpu_memory_bytes = 80 * kGiB;
  const Trace trace = read_trace(path.string());
  auto env = make_environment(cluster, "/nonexistent");  // DLRM types only
  WorkloadOptions wo;
  wo.mix = "trace";
  const Workload w = build_workload(trace, cluster, *env, wo);
  ASSERT_EQ(w.jobs.size(), 3u);
  auto fifo = make_policy("fifo");
  const SimResult r = simulate(cluster, w.jobs, *fifo, *env->truth, env->model);
  EXPECT_NEAR(outcome(r, 0).finish_s, 100, 1e-6);
  EXPECT_NEAR(outcome(r, 1).finish_s, 150, 1e-6);
  EXPECT_NEAR(outcome(r, 2).finish_s, 180, 1e-6);
  EXPECT_NEAR(r.avg_jct_s, (100 + 140 + 160) / 3.0, 1e-6);
  // An unknown type names the file and line.
  std::ofstream(path) << "arrival_s,duration_s,gpus,type\n0,100,1,no-such-model\n";
  auto env2 = make_environment(cluster, "/nonexistent");
  try {
    build_workload(read_trace(path.string()), cluster, *env2, wo);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("recmix_sched_fifo_trace.csv:2"), std::string::npos) << e.what();
  }
}

TEST(Workload, RepeatedTraceGivesNCopiesShiftedBySpan) {
  // Arrivals 5, 25, 105 s are read as 0, 20, 100: span 100 s. Copy k arrives 100 k s later.
  const test::ScratchDir scratch;
  const auto path = scratch.path / "recmix_sched_repeat_trace.csv";
  std::ofstream(path) << "arrival_s,duration_s,gpus,type\n"
                         "25,70,2,dlrm-small\n"
                         "5,30,1,dlrm-medium\n"
                         "105,90,4,dlrm-small\n";
  ClusterSpec cluster = one_node(4);
  cluster.gpu_memory_bytes = 80 * kGiB;
  const Trace trace = read_trace(path.string());
  auto env = make_environment(cluster, "/nonexistent");
  WorkloadOptions wo;
  wo.mix = "trace";
  wo.repeat_trace = 3;
  const Workload w = build_workload(trace, cluster, *env, wo);
  ASSERT_EQ(w.jobs.size(), 9u);
  const double arrivals[] = {0, 20, 100, 100, 120, 200, 200, 220, 300};
  const double work[] = {30, 70, 90};
  const int gpus[] = {1, 2, 4};
  const char* types[] = {"dlrm-medium", "dlrm-small", "dlrm-small"};
  for (std::size_t i = 0; i < w.jobs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(w.jobs[i].id, static_cast<JobId>(i));
    EXPECT_EQ(w.jobs[i].arrival_s, arrivals[i]);
    EXPECT_EQ(w.jobs[i].work_s, work[i % 3]);
    EXPECT_EQ(w.jobs[i].gpus, gpus[i % 3]);
    EXPECT_EQ(w.jobs[i].profile.type, types[i % 3]);
  }
  EXPECT_EQ(w.types.at("dlrm-small"), 6u);
  // Compressed arrivals divide the shifted times; --max-jobs counts over the copies.
  wo.arrival_scale = 4;
  wo.max_jobs = 5;
  const Workload cut = build_workload(trace, cluster, *env, wo);
  ASSERT_EQ(cut.jobs.size(), 5u);
  EXPECT_EQ(cut.jobs[4].arrival_s, 120.0 / 4);
  wo.repeat_trace = 0;
  EXPECT_THROW(build_workload(trace, cluster, *env, wo), ConfigError);
}

TEST(Workload, PhillyTwiceHasTwiceTheJobsTheSecondCopyOneSpanLater) {
  const std::string dir = traces_dir();
  if (!std::filesystem::exists(dir + "/philly_jobs.csv")) GTEST_SKIP() << "no traces in " << dir;
  ClusterSpec cluster;
  cluster.nodes = 256;
  const Trace trace = read_trace(dir + "/philly_jobs.csv");
  auto env = make_environment(cluster, dir);
  WorkloadOptions wo;
  const Workload once = build_workload(trace, cluster, *env, wo);
  wo.repeat_trace = 2;
  const Workload twice = build_workload(trace, cluster, *env, wo);
  const std::size_t n = trace.jobs.size();
  ASSERT_EQ(once.jobs.size(), n);  // every Philly job fits 256 nodes
  ASSERT_EQ(twice.jobs.size(), 2 * n);
  const double span = trace.jobs.back().arrival_s;
  for (std::size_t i = 0; i < n; i += 997) {
    EXPECT_EQ(twice.jobs[i].arrival_s, once.jobs[i].arrival_s);
    EXPECT_EQ(twice.jobs[n + i].arrival_s, once.jobs[i].arrival_s + span);
    EXPECT_EQ(twice.jobs[n + i].work_s, once.jobs[i].work_s);
    EXPECT_EQ(twice.jobs[n + i].gpus, once.jobs[i].gpus);
  }
  EXPECT_EQ(twice.jobs.back().arrival_s, 2 * span);
}

TEST(Simulator, ProgressRatesChangeWithCoLocation) {
  // 1 GPU, memory-first packs. A (0 s, 100 s of work, compute 1.0) runs alone until B arrives
  // at 50 s; both are compute-bound, so each runs at rate 1/2. A needs 50 s more of work: done
  // at 150. B has 50 s of work done by then and finishes alone at 200.
  InterferenceOptions io;
  io.alpha = 0;
  io.gamma = 1;
  InterferenceModel model(io);
  SlowdownTruth truth(model, 0.0, 1);
  auto packing = make_policy("memory-first");
  const SimResult r = simulate(one_node(1), {job(1, 0, 100, 1, 1.0), job(2, 50, 100, 1, 1.0)}, *packing, truth, model);
  EXPECT_NEAR(outcome(r, 1).finish_s, 150, 1e-6);
  EXPECT_NEAR(outcome(r, 2).finish_s, 200, 1e-6);
  EXPECT_TRUE(outcome(r, 1).colocated);
  EXPECT_NEAR(outcome(r, 2).delivered_s, 100, 1e-6);
  EXPECT_NEAR(r.avg_effective_util, 200.0 / 200.0, 1e-9);  // always one GPU's worth of work
}

TEST(Simulator, ExternalStopsMoveAJobApartAsALiveRunDoes) {
  // 2 GPUs, memory-first packs (first fit), replay rates (1 whoever shares). A (0 s, 100 s) and
  // B (0 s, 100 s) share GPU 0; C (5 s, 10 s) finds GPU 0 full (two jobs) and runs on GPU 1 until
  // 15 s. At 20 s the service moves B apart from A (its GPU is freed, no round), and requeues it
  // at 22 s: GPU 0 has room but holds A, which B avoids, so B starts on GPU 1 with 20 s of work
  // done and finishes at 22 + 80 = 102. The move is not one of the policy's decisions.
  InterferenceOptions io;
  io.alpha = 0;
  InterferenceModel model(io);
  SlowdownTruth truth(model, 0.0, 1);
  auto packing = make_policy("memory-first");
  SimOptions options;
  options.measured_runtimes = true;
  options.restart_overhead_s = 0;
  options.external_stops = {{2, 20.0, 22.0, {1}, 1.5, std::nullopt}};
  const SimResult r =
      simulate(one_node(2), {job(1, 0, 100, 1), job(2, 0, 100, 1), job(3, 5, 10, 1)}, *packing, truth, model, options);
  ASSERT_EQ(r.decisions.size(), 4u);
  EXPECT_EQ(r.decisions[0].decision.gpus, std::vector<int>{0});
  EXPECT_EQ(r.decisions[1].decision.gpus, std::vector<int>{0});
  EXPECT_EQ(r.decisions[2].decision.job, 3);
  EXPECT_EQ(r.decisions[2].decision.gpus, std::vector<int>{1});
  EXPECT_EQ(r.decisions[3].decision.job, 2);
  EXPECT_NEAR(r.decisions[3].time_s, 22.0, 1e-9);
  EXPECT_EQ(r.decisions[3].decision.gpus, std::vector<int>{1});
  EXPECT_NEAR(outcome(r, 2).finish_s, 102.0, 1e-6);
  EXPECT_NEAR(outcome(r, 1).finish_s, 100.0, 1e-6);
}

TEST(SimReport, JsonCarriesThePercentilesOfFinishedJobsCompletionTimes) {
  SimResult r;
  r.policy = "fifo";
  for (double jct : {40.0, 10.0, 30.0, 20.0}) {
    JobOutcome o;
    o.arrival_s = 5;
    o.finish_s = 5 + jct;
    o.queued_s = jct / 10;
    r.outcomes.push_back(o);
  }
  JobOutcome unfinished;
  unfinished.finish_s = -1;
  r.outcomes.push_back(unfinished);
  const auto j = to_json(r);
  const auto p = j.at("jct_percentiles_s").get<std::vector<double>>();
  ASSERT_EQ(p.size(), 101u);
  EXPECT_EQ(p[0], 10);    // the smallest
  EXPECT_EQ(p[25], 10);   // nearest rank: ceil(0.25 x 4) = 1st
  EXPECT_EQ(p[26], 20);
  EXPECT_EQ(p[50], 20);   // 2nd
  EXPECT_EQ(p[75], 30);
  EXPECT_EQ(p[100], 40);  // the largest
  EXPECT_EQ(j.at("queued_percentiles_s").get<std::vector<double>>()[100], 4);
}

TEST(Simulator, RefusesAndCountsStartsPastMemory) {
  // A policy that ignores memory: tries to put every job on GPU 0.
  struct Greedy final : Policy {
    std::string_view name() const override { return "greedy"; }
    void schedule(const SchedulingContext& c, Actions& a) override {
      for (Job* j : c.queue)
        if (!a.start(*j, std::vector<int>{0}) && c.cluster.is_free(1)) a.start(*j, std::vector<int>{1});
    }
  } greedy;
  InterferenceModel model;
  SlowdownTruth truth(model, 0.0, 1);
  Job a = job(1, 0, 10, 1), b = job(2, 0, 10, 1);
  a.profile.peak_memory_bytes = b.profile.peak_memory_bytes = 6 * kGiB;
  const SimResult r = simulate(one_node(2), {a, b}, greedy, truth, model);
  EXPECT_EQ(r.memory_violations, 1u);  // b on GPU 0 refused, then placed on GPU 1
  EXPECT_LE(r.max_memory_fraction, 1.0);
  EXPECT_NEAR(outcome(r, 2).finish_s, 10, 1e-9);
}

TEST(Simulator, InvariantsOfEveryPolicyOnPhilly) {
  const std::string dir = traces_dir();
  if (!std::filesystem::exists(dir + "/philly_jobs.csv")) GTEST_SKIP() << "no traces in " << dir;
  ClusterSpec cluster;
  cluster.nodes = 8;
  cluster.gpus_per_node = 8;
  const Trace trace = read_trace(dir + "/philly_jobs.csv");
  auto env = make_environment(cluster, dir);
  WorkloadOptions wo;
  wo.max_jobs = 3000;
  wo.arrival_scale = 4;
  const Workload w = build_workload(trace, cluster, *env, wo);
  for (const Job& j : w.jobs) ASSERT_LE(j.gpus, cluster.gpu_count());  // wider jobs are left out
  SimOptions so;
  so.restart_overhead_s = 60;
  for (const auto& name : policy_names()) {
    auto policy = make_policy(name);
    const SimResult r = simulate(cluster, w.jobs, *policy, *env->truth, env->model, so);
    SCOPED_TRACE(name);
    EXPECT_EQ(r.memory_violations, 0u);
    EXPECT_EQ(r.refused_starts, 0u);
    EXPECT_LE(r.max_memory_fraction, 1.0);
    ASSERT_EQ(r.outcomes.size(), w.jobs.size());
    for (const auto& o : r.outcomes) {
      ASSERT_GE(o.first_start_s, o.arrival_s - 1e-9) << "job " << o.id;
      // Work conserved: progress integrates to the work plus restart overheads.
      ASSERT_NEAR(o.delivered_s, o.work_s + o.preemptions * so.restart_overhead_s, 1e-6 * o.work_s + 1e-6);
      // Never faster than solo on a consolidated placement.
      ASSERT_GE(o.finish_s - o.first_start_s, o.work_s - 1e-6 * o.work_s);
      ASSERT_GE(o.finish_s - o.arrival_s, o.queued_s + o.work_s - 1e-6 * o.work_s);
    }
    if (name == "fifo" || name == "memory-first" || name == "complementary" || name == "interference-aware") {
      EXPECT_EQ(r.preemptions, 0u);
    }
    std::printf("%-19s avg JCT %.2f h, makespan %.1f h, %zu co-located, %.2f s\n", name.c_str(),
                r.avg_jct_s / 3600, r.makespan_s / 3600, r.colocated_jobs, r.wall_s);
  }
}

}  // namespace
}  // namespace recmix::sched
