// Every term of the peak-memory estimator against arithmetic done by hand on a tiny DLRM:
// 2 tables (10 and 6 rows, dim 4), bottom MLP 3-8-4, top MLP 5-1, batch 6.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "sched/memory_estimator.hpp"
#include "tests/sched/tiny_job.hpp"

namespace recmix::sched {
namespace {

JobSpec tiny() { return test::tiny_job(Optimizer::adagrad, SparseOptimizer::adagrad); }

RankShard whole(const JobSpec& s) { return plan_shards(s.shape, 1)[0]; }

TEST(MemoryEstimator, ShapeArithmetic) {
  const JobSpec s = tiny();
  // F = 3 features: interaction = dim 4 + 3*2/2 = 7.
  EXPECT_EQ(s.shape.interaction_width(), 7);
  // bottom 3*8+8 + 8*4+4 = 68; top 7*5+5 + 5*1+1 = 46.
  EXPECT_EQ(s.shape.dense_params(), 114);
  EXPECT_EQ(s.shape.embedding_params(), 64);
}

TEST(MemoryEstimator, ParametersAndOptimizerState) {
  JobSpec s = tiny();
  EXPECT_DOUBLE_EQ(parameter_bytes(s, whole(s)), (64 + 114) * 4.0);
  // Adagrad: one accumulator per dense parameter and per embedding element.
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), (114 + 64) * 4.0);
  s.optimizer = Optimizer::adam;  // two moments per dense parameter
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), (2 * 114 + 64) * 4.0);
  s.sparse_optimizer = SparseOptimizer::rowwise_adagrad;  // one per row: 16 rows
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), (2 * 114 + 16) * 4.0);
  s.optimizer = Optimizer::sgd;
  s.sparse_optimizer = SparseOptimizer::sgd;
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), 0.0);
}

TEST(MemoryEstimator, TieringKeepsOnlyHotRowsOnDevice) {
  JobSpec s = tiny();
  s.tiering = {true, 0.5, 0.75};
  // ceil(0.5*10) = 5 and ceil(0.5*6) = 3 rows of dim 4 = 32 elements.
  EXPECT_DOUBLE_EQ(parameter_bytes(s, whole(s)), (32 + 114) * 4.0);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), (32 + 114) * 4.0);
  // Prefetch: 2 x (6 x (3*4 + 2*8 + 4) + cold rows 6 x 2 tables x 0.25 x 4 dim x 4 B) = 2 x (192 + 48).
  EXPECT_DOUBLE_EQ(prefetch_bytes(s, whole(s), {}), 480.0);
}

TEST(MemoryEstimator, ActivationsBuffersAndPrefetch) {
  const JobSpec s = tiny();
  // Per sample: dense 3 + label + loss gradient, and twice (value and gradient) bottom 8+4,
  // pooled 2*4, interaction output 7, top 5+1: 5 + 2 * 33 = 71 floats.
  EXPECT_DOUBLE_EQ(activation_bytes(s), 6 * 71 * 4.0);
  // Indices (6*2 + 6*2) * 8 = 192; vectors and gradients 2 * (12 + 12) * 4 * 4 = 768.
  EXPECT_DOUBLE_EQ(all_to_all_bytes(s, whole(s)), 960.0);
  EXPECT_DOUBLE_EQ(all_reduce_bytes(s), 114 * 4.0);
  EXPECT_DOUBLE_EQ(prefetch_bytes(s, whole(s), {}), 2 * 6 * (3 * 4 + 2 * 8 + 4.0));
  MachineModel m;
  m.gemm_workspace_bytes = 1000;
  EXPECT_DOUBLE_EQ(gemm_workspace_bytes(m), 1000.0);
}

TEST(MemoryEstimator, TotalIsTheSumPlusMargin) {
  const JobSpec s = tiny();
  MachineModel m;
  m.gemm_workspace_bytes = 1000;
  const MemoryEstimate e = estimate_rank_memory(s, whole(s), m, {2, 0.05});
  const double sum = 712 + 712 + 1704 + 960 + 456 + 1000 + 384;
  EXPECT_DOUBLE_EQ(e.margin, 0.05 * sum);
  EXPECT_DOUBLE_EQ(e.total(), 1.05 * sum);
  EXPECT_DOUBLE_EQ(estimate_peak_memory(s, m, {2, 0.05}).total(), e.total());
}

TEST(MemoryEstimator, ShardPlanSplitsLargeTablesAndBalances) {
  const JobSpec s = tiny();
  const auto shards = plan_shards(s.shape, 2);
  ASSERT_EQ(shards.size(), 2u);
  // 16 rows, even share 8: table 0 (10 rows) is split 5/5, table 1 goes whole to rank 0.
  ASSERT_EQ(shards[0].rows.size(), 2u);
  EXPECT_EQ(shards[0].rows[0], (std::pair<int, std::int64_t>{0, 5}));
  EXPECT_EQ(shards[0].rows[1], (std::pair<int, std::int64_t>{1, 6}));
  ASSERT_EQ(shards[1].rows.size(), 1u);
  EXPECT_EQ(shards[1].rows[0], (std::pair<int, std::int64_t>{0, 5}));
  // Rank 0 is the peak: params (11 rows * 4 + 114) * 4.
  JobSpec two = s;
  two.ranks = 2;
  EXPECT_DOUBLE_EQ(estimate_peak_memory(two, MachineModel{}).parameters, (44 + 114) * 4.0);
  // Local batch 3: activations halve.
  EXPECT_DOUBLE_EQ(activation_bytes(two), 3 * 71 * 4.0);
}

TEST(MemoryEstimator, RejectsBadSpecs) {
  JobSpec s = tiny();
  s.shape.bottom_mlp = {3, 8, 5};  // last width != dim
  EXPECT_THROW(estimate_peak_memory(s, MachineModel{}), ConfigError);
  s = tiny();
  s.tiering = {true, 0.0, 0.5};
  EXPECT_THROW(estimate_peak_memory(s, MachineModel{}), ConfigError);
  EXPECT_THROW(parse_optimizer("lamb"), ConfigError);
}

}  // namespace
}  // namespace recmix::sched
