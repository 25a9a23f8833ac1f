// Hand-worked placements for every policy on a few GPUs.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "sched/policy.hpp"

namespace recmix::sched {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

ClusterSpec spec(int nodes, int per_node) {
  ClusterSpec s;
  s.nodes = nodes;
  s.gpus_per_node = per_node;
  s.gpu_memory_bytes = 10 * kGiB;
  s.intra_node_bandwidth = 100e9;
  s.inter_node_bandwidth = 10e9;
  return s;
}

Job make_job(JobId id, int gpus, double mem_gib, double arrival = 0, int type = -1) {
  Job j;
  j.id = id;
  j.name = std::to_string(id);
  j.name.insert(j.name.begin(), 'j');
  j.gpus = gpus;
  j.arrival_s = arrival;
  j.type = type;
  j.work_s = 1000;
  j.profile.peak_memory_bytes = mem_gib * kGiB;
  return j;
}

struct Round {
  std::vector<Decision> decisions;
  double wake = INFINITY;
};

Round run(Policy& p, ClusterState& c, std::vector<Job*> queue, const InterferenceModel& m, double now = 0) {
  RecordingActions actions(c, now);
  p.schedule(SchedulingContext{now, c, queue, m}, actions);
  EXPECT_EQ(actions.refused(), 0);
  return {actions.decisions(), actions.wake_time()};
}

Decision start(JobId job, std::vector<int> gpus) { return {Decision::Kind::start, job, std::move(gpus)}; }

bool operator==(const Decision& a, const Decision& b) { return a.kind == b.kind && a.job == b.job && a.gpus == b.gpus; }

TEST(ExclusiveFifo, PlacesInOrderOnBestFitNodesAndBlocksBehindTheHead) {
  ClusterState c(spec(2, 2));
  InterferenceModel m;
  auto p = make_policy("fifo");
  Job a = make_job(1, 1, 1), b = make_job(2, 2, 1), d = make_job(3, 1, 1);
  const Round r = run(*p, c, {&a, &b, &d}, m);
  // a -> GPU 0 (node 0, lowest id of the tie); b -> node 1 (the only node with 2 free); d -> GPU 1.
  ASSERT_EQ(r.decisions.size(), 3u);
  EXPECT_TRUE(r.decisions[0] == start(1, {0}));
  EXPECT_TRUE(r.decisions[1] == start(2, {2, 3}));
  EXPECT_TRUE(r.decisions[2] == start(3, {1}));
  // Head-of-line blocking: a 2-GPU job at the head blocks a 1-GPU job when one GPU is free.
  ClusterState c2(spec(1, 2));
  Job x = make_job(4, 1, 1), big = make_job(5, 2, 1), small = make_job(6, 1, 1);
  ASSERT_TRUE(c2.place(x, std::vector<int>{0}, 0));
  EXPECT_TRUE(run(*p, c2, {&big, &small}, m).decisions.empty());
}

TEST(MemoryFirst, PacksOntoTheFullestGpuThatFits) {
  ClusterState c(spec(1, 4));
  InterferenceModel m;
  auto p = make_policy("memory-first");
  Job x = make_job(1, 1, 4), y = make_job(2, 1, 7);
  ASSERT_TRUE(c.place(x, std::vector<int>{0}, 0));
  ASSERT_TRUE(c.place(y, std::vector<int>{1}, 0));
  // 3 GiB fits GPU 1 exactly (3 free) -> GPU 1; 5 GiB fits only GPU 0 (6 free); 8 GiB needs a free GPU.
  Job a = make_job(3, 1, 3), b = make_job(4, 1, 5), d = make_job(5, 1, 8);
  const Round r = run(*p, c, {&a, &b, &d}, m);
  ASSERT_EQ(r.decisions.size(), 3u);
  EXPECT_TRUE(r.decisions[0] == start(3, {1}));
  EXPECT_TRUE(r.decisions[1] == start(4, {0}));
  EXPECT_TRUE(r.decisions[2] == start(5, {2}));
  for (int g = 0; g < 4; ++g) EXPECT_LE(c.memory_used(g), 10 * kGiB);
}

TEST(Complementary, PairsAJobWithTheCoRunnerWhoseUtilisationComplementsIt) {
  ClusterState c(spec(1, 2));
  InterferenceModel m;
  PolicyOptions o;
  o.dispatch_interval_s = 0;
  auto p = make_policy("complementary", o);
  Job compute = make_job(1, 1, 2, 0, 0), memory = make_job(2, 1, 2, 0, 1);
  compute.profile.util[Resource::compute] = 0.9;
  memory.profile.util[Resource::memory_bandwidth] = 0.9;
  ASSERT_TRUE(c.place(compute, std::vector<int>{0}, 0));
  ASSERT_TRUE(c.place(memory, std::vector<int>{1}, 0));
  Job heavy_memory = make_job(3, 1, 2, 0, 2), heavy_compute = make_job(4, 1, 2, 0, 3);
  heavy_memory.profile.util[Resource::memory_bandwidth] = 0.8;
  heavy_compute.profile.util[Resource::compute] = 0.8;
  const Round r = run(*p, c, {&heavy_memory, &heavy_compute}, m);
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_TRUE(r.decisions[0] == start(3, {0}));  // memory-bound joins the compute-bound job
  EXPECT_TRUE(r.decisions[1] == start(4, {1}));  // and vice versa
  // A third compute-heavy job would contend wherever it goes: no slot left anyway, nothing starts.
  Job more = make_job(5, 1, 1, 0, 3);
  more.profile.util[Resource::compute] = 0.8;
  EXPECT_TRUE(run(*p, c, {&more}, m).decisions.empty());
}

TEST(Complementary, RefusesPairsBelowTheGainThreshold) {
  ClusterState c(spec(1, 1));
  InterferenceModel m;
  PolicyOptions o;
  o.dispatch_interval_s = 0;
  auto p = make_policy("complementary", o);
  Job a = make_job(1, 1, 2, 0, 0), b = make_job(2, 1, 2, 0, 0);
  a.profile.util[Resource::compute] = 1.0;
  b.profile.util[Resource::compute] = 1.0;
  ASSERT_TRUE(c.place(a, std::vector<int>{0}, 0));
  // Two fully compute-bound jobs: each runs at 1/2 (x overhead), summed rate < 1.1.
  EXPECT_TRUE(run(*p, c, {&b}, m).decisions.empty());
}

TEST(InterferenceAware, UsesTheLearnedModelAndTheSlowdownLimit) {
  ClusterState c(spec(1, 2));
  InterferenceOptions io;
  io.alpha = 0;
  InterferenceModel m(io);
  const int ta = m.type_index("a"), tb = m.type_index("b"), tc = m.type_index("c");
  for (int k = 0; k < 4; ++k) {
    m.observe(ta, tc, 2.0);
    m.observe(tc, ta, 2.0);
    m.observe(tb, tc, 1.1);
    m.observe(tc, tb, 1.1);
  }
  m.refit();
  auto p = make_policy("interference-aware");
  Job a = make_job(1, 1, 2, 0, ta), b = make_job(2, 1, 2, 0, tb), newcomer = make_job(3, 1, 2, 0, tc);
  ASSERT_TRUE(c.place(a, std::vector<int>{0}, 0));
  ASSERT_TRUE(c.place(b, std::vector<int>{1}, 0));
  ClusterState copy = c;
  const Round r = run(*p, c, {&newcomer}, m);
  ASSERT_EQ(r.decisions.size(), 1u);
  EXPECT_TRUE(r.decisions[0] == start(3, {1}));  // next to b (predicted ~1.1), not a (~2.0)
  // With a 1.05 limit no placement is acceptable.
  newcomer.slowdown_limit = 1.05;
  EXPECT_TRUE(run(*p, copy, {&newcomer}, m).decisions.empty());
}

TEST(DelayScheduling, WaitsForOneNodeThenSpreadsAndRepacksNetworkSensitiveJobs) {
  ClusterState c(spec(2, 2));
  InterferenceModel m;
  PolicyOptions o;
  o.delay_min_s = 10;
  o.restart_cost_s = 5;
  auto p = make_policy("delay", o);
  Job x = make_job(1, 1, 1), y = make_job(2, 1, 1);
  ASSERT_TRUE(c.place(x, std::vector<int>{0}, 0));
  ASSERT_TRUE(c.place(y, std::vector<int>{2}, 0));
  Job wide = make_job(3, 2, 1, 0);
  wide.profile.comm_fraction = 0.5;  // spreading costs 0.5 x (10 - 1) = 4.5x the work: wait
  const Round first = run(*p, c, {&wide}, m, 0);
  EXPECT_TRUE(first.decisions.empty());
  // Ski-rental timer: the spread penalty (4.5 x 1000 s), clamped to the 4 h default maximum.
  EXPECT_NEAR(first.wake, 4500, 1e-6);
  const Round later = run(*p, c, {&wide}, m, 4500);
  ASSERT_EQ(later.decisions.size(), 1u);
  EXPECT_TRUE(later.decisions[0] == start(3, {1, 3}));
  p->on_start(wide, *c.running(3), 4500);
  // Node 1 frees up: the spread, network-sensitive job is preempted to be re-placed.
  c.remove(2);
  const Round repack = run(*p, c, {}, m, 4600);
  ASSERT_EQ(repack.decisions.size(), 1u);
  EXPECT_EQ(repack.decisions[0].kind, Decision::Kind::preempt);
  EXPECT_EQ(repack.decisions[0].job, 3);
}

TEST(LeastAttainedService, NewJobsPreemptJobsWithMuchAttainedService) {
  ClusterState c(spec(1, 2));
  InterferenceModel m;
  PolicyOptions o;
  o.las_threshold_gpu_s = 3600;
  auto p = make_policy("las", o);
  Job old_job = make_job(1, 1, 1, 0), young = make_job(2, 1, 1, 0), newcomer = make_job(3, 1, 1, 100);
  old_job.attained_gpu_s = 5000;
  ASSERT_TRUE(c.place(old_job, std::vector<int>{0}, 0));
  ASSERT_TRUE(c.place(young, std::vector<int>{1}, 0));
  const Round r = run(*p, c, {&newcomer}, m, 100);
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_EQ(r.decisions[0].kind, Decision::Kind::preempt);
  EXPECT_EQ(r.decisions[0].job, 1);
  EXPECT_TRUE(r.decisions[1] == start(3, {0}));
  EXPECT_NEAR(r.wake, 100 + o.las_lease_s, 1e-9);
}

TEST(Policies, UnknownNameIsAConfigError) {
  EXPECT_THROW(make_policy("random"), ConfigError);
  EXPECT_EQ(policy_names().size(), 6u);
}

// Moving apart by priority: the side of lower priority moves, each job at most once, and a job is
// never moved for one of lower priority.
TEST(MoveApart, TheLowerPriorityMovesAndNobodyTwice) {
  using C = MoveApartCandidate;
  auto move = [](C slowed, std::vector<C> partners) { return jobs_to_move_apart(slowed, partners); };
  // Equal priorities: the slowed job moves itself, once.
  EXPECT_EQ(move({1, 0, false}, {{2, 0, false}}), std::vector<JobId>{1});
  EXPECT_TRUE(move({1, 0, true}, {{2, 0, false}}).empty());
  // A slowed job of higher priority stays; its partners of lower priority move.
  EXPECT_EQ(move({1, 5, false}, {{2, 0, false}, {3, 5, false}, {4, 1, false}}), (std::vector<JobId>{2, 4}));
  // ... and one moved before does not move again, nor does the job that outranks it.
  EXPECT_EQ(move({1, 5, false}, {{2, 0, true}, {4, 1, false}}), std::vector<JobId>{4});
  EXPECT_TRUE(move({1, 5, false}, {{2, 0, true}}).empty());
  // A slowed job of lower priority than every partner moves itself.
  EXPECT_EQ(move({1, 0, false}, {{2, 3, false}, {3, 7, false}}), std::vector<JobId>{1});
}

}  // namespace
}  // namespace recmix::sched
