// ClusterState indexes against direct recomputation after a sequence of places and removes.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "sched/cluster_state.hpp"

namespace recmix::sched {
namespace {

Job job(JobId id, int gpus, double mem_gib, int type = 0) {
  Job j;
  j.id = id;
  j.gpus = gpus;
  j.type = type;
  j.profile.peak_memory_bytes = mem_gib * (1ull << 30);
  return j;
}

ClusterSpec small(int nodes, int per_node) {
  ClusterSpec s;
  s.nodes = nodes;
  s.gpus_per_node = per_node;
  s.gpu_memory_bytes = 10.0 * (1ull << 30);
  return s;
}

TEST(ClusterState, IndexesFollowPlacements) {
  ClusterState c(small(3, 4));
  const Job a = job(1, 2, 4), b = job(2, 1, 7, 1), d = job(3, 3, 1);
  ASSERT_TRUE(c.place(a, std::vector<int>{0, 1}, 0));
  ASSERT_TRUE(c.place(b, std::vector<int>{4}, 0));
  EXPECT_EQ(c.free_gpu_count(), 9);
  EXPECT_EQ(c.free_gpus_on_node(0), 2);
  EXPECT_EQ(c.free_gpus_on_node(1), 3);
  // Best fit for 2 GPUs: node 0 (2 free) before node 1 (3) and node 2 (4).
  EXPECT_EQ(c.best_fit_node(2), 0);
  EXPECT_EQ(c.best_fit_node(4), 2);
  EXPECT_EQ(c.free_gpus_of(0, 2), (std::vector<int>{2, 3}));
  // Spread over fewest nodes: emptiest first.
  EXPECT_EQ(c.free_gpus_spread(6), (std::vector<int>{8, 9, 10, 11, 5, 6}));
  // Shareable by free memory: GPU 4 (3 GiB free) before GPUs 0, 1 (6 GiB).
  ASSERT_EQ(c.shareable().size(), 3u);
  EXPECT_EQ(c.shareable().begin()->second, 4);
  ASSERT_NE(c.shareable_with_type(1), nullptr);
  EXPECT_EQ(c.shareable_with_type(1)->size(), 1u);
  // Memory: 7 + 4 > 10 on GPU 4 is refused; a second job on GPU 0 fits.
  EXPECT_FALSE(c.fits(job(9, 1, 4), std::vector<int>{4}));
  EXPECT_TRUE(c.place(d, std::vector<int>{0, 5, 6}, 0));
  EXPECT_EQ(c.jobs_on(0).size(), 2u);
  // Two jobs = max_jobs_per_gpu: GPU 0 is no longer shareable.
  for (const auto& [free, g] : c.shareable()) EXPECT_NE(g, 0);
  EXPECT_FALSE(c.fits(job(10, 1, 0.5), std::vector<int>{0}));
  c.remove(1);
  c.remove(3);
  c.remove(2);
  EXPECT_EQ(c.free_gpu_count(), 12);
  EXPECT_TRUE(c.shareable().empty());
  EXPECT_EQ(c.best_fit_node(4), 0);
  EXPECT_DOUBLE_EQ(c.memory_used(0), 0.0);
}

TEST(ClusterState, CoresAndAvoidedJobsRefusePlacements) {
  ClusterSpec spec = small(1, 2);
  spec.cores_per_gpu = 2;
  ClusterState c(spec);
  Job a = job(1, 1, 1), b = job(2, 1, 1), d = job(3, 1, 1);
  a.cores = 2;
  b.cores = 1;
  d.cores = 1;
  ASSERT_TRUE(c.place(a, std::vector<int>{0}, 0));
  EXPECT_FALSE(c.fits(b, std::vector<int>{0}));  // 2 + 1 cores > 2
  ASSERT_TRUE(c.place(b, std::vector<int>{1}, 0));
  d.avoid = {2};
  EXPECT_FALSE(c.fits(d, std::vector<int>{1}));  // cores fit (1 + 1), but b is avoided
  d.avoid.clear();
  EXPECT_TRUE(c.fits(d, std::vector<int>{1}));
  Job e = job(4, 1, 1);
  e.cores = 1;
  EXPECT_FALSE(c.fits_gpu(e, 0));
  c.remove(1);
  EXPECT_TRUE(c.fits(e, std::vector<int>{0}));  // a's cores are back
  spec.cores_per_gpu = 0;  // not counted
  ClusterState unlimited(spec);
  ASSERT_TRUE(unlimited.place(a, std::vector<int>{0}, 0));
  EXPECT_TRUE(unlimited.fits(b, std::vector<int>{0}));
}

TEST(ClusterState, AMeasuredUtilisationMovesTheDemandOfItsGpus) {
  ClusterState c(small(1, 2));
  Job a = job(1, 2, 1), b = job(2, 1, 1);
  a.profile.util[Resource::compute] = 0.8;
  b.profile.util[Resource::compute] = 0.1;
  ASSERT_TRUE(c.place(a, std::vector<int>{0, 1}, 0));
  ASSERT_TRUE(c.place(b, std::vector<int>{1}, 0));
  UtilisationVector measured = a.profile.util;
  measured[Resource::compute] = 0.3;
  c.set_job_utilisation(a, measured);
  EXPECT_DOUBLE_EQ(a.profile.util[Resource::compute], 0.3);
  EXPECT_NEAR(c.demand(0)[Resource::compute], 0.3, 1e-12);
  EXPECT_NEAR(c.demand(1)[Resource::compute], 0.4, 1e-12);
  c.remove(1);  // removes what it now counts for
  EXPECT_NEAR(c.demand(1)[Resource::compute], 0.1, 1e-12);
  Job idle = job(3, 1, 1);
  c.set_job_utilisation(idle, measured);  // not running: its profile only
  EXPECT_DOUBLE_EQ(idle.profile.util[Resource::compute], 0.3);
  EXPECT_NEAR(c.demand(0)[Resource::compute], 0.0, 1e-12);
}

TEST(ClusterState, RejectsBadSpecs) {
  ClusterSpec s = small(1, 0);
  EXPECT_THROW(ClusterState{s}, ConfigError);
  s = small(0, 8);
  EXPECT_THROW(ClusterState{s}, ConfigError);
}

// A node of more GPUs than one 64-bit word (a live run of 130 ranks on one host): its free GPUs
// are counted and handed out across words, and given back.
TEST(ClusterState, NodesOfMoreThan64Gpus) {
  ClusterState c(small(2, 130));
  EXPECT_EQ(c.free_gpus_on_node(1), 130);
  std::vector<int> first(100);
  for (int i = 0; i < 100; ++i) first[i] = 130 + i;
  ASSERT_TRUE(c.place(job(1, 100, 1), first, 0));
  EXPECT_EQ(c.free_gpus_on_node(1), 30);
  EXPECT_EQ(c.best_fit_node(30), 1);
  const std::vector<int> rest = c.free_gpus_of(1, 30);
  ASSERT_EQ(rest.size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(rest[i], 230 + i);
  ASSERT_TRUE(c.place(job(2, 30, 1), rest, 0));
  EXPECT_EQ(c.free_gpus_on_node(1), 0);
  EXPECT_EQ(c.best_fit_node(1), 0);
  EXPECT_TRUE(c.free_gpus_of(1, 1).empty());
  c.remove(1);
  EXPECT_EQ(c.free_gpus_on_node(1), 100);
  EXPECT_EQ(c.free_gpus_of(1, 100), first);
  EXPECT_EQ(c.free_gpu_count(), 230);
}

}  // namespace
}  // namespace recmix::sched
