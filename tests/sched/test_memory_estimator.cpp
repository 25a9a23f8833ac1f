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

TEST(MemoryEstimator, HalfTablesHalveTheWeightsNotTheState) {
  JobSpec s = tiny();
  s.table_bytes = 2;  // fp16 or bf16 tables
  EXPECT_DOUBLE_EQ(parameter_bytes(s, whole(s)), 64 * 2.0 + 114 * 4.0);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), (114 + 64) * 4.0);  // state stays fp32
  s.table_bytes = 3;
  EXPECT_THROW(validate(s), ConfigError);
}

TEST(MemoryEstimator, Bf16GemmsAddTheirOperandCopies) {
  JobSpec s = tiny();
  const double activations = activation_bytes(s);
  s.gemm_math = GemmMath::bf16;
  // The dense parameters' bf16 copy: 114 x 2 B.
  EXPECT_DOUBLE_EQ(parameter_bytes(s, whole(s)), 64 * 4.0 + 114 * 6.0);
  // Layer inputs 3 + 8 (bottom) + 7 + 5 (top) = 23, widest output 8: 6 x (23 + 8) x 2 B.
  EXPECT_DOUBLE_EQ(activation_bytes(s), activations + 6 * 31 * 2.0);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), (114 + 64) * 4.0);  // master weights' state as it was
}

TEST(MemoryEstimator, TheDevicePathCountsItsIndexArrays) {
  JobSpec s = tiny();
  EXPECT_DOUBLE_EQ(device_index_bytes(s, whole(s)), 0.0);  // the CPU backend reads the host's arrays
  s.device_kernels = true;
  // One rank, one-hot: bags = entries = 6 x 2 owned shards = 12; parts 6 x 2 shards = 12; combine
  // outputs 6 x 2 tables = 12.
  // Staged: (13 offsets + 12 rows + 13 combine offsets + 12 positions + 12 sources) x 8
  //   + (12 bag scales + 12 combine scales + 12 gather scales) x 4 + 2 shards x 20 = 680.
  // Grouping: 12 arrays x 12 x 8 + 12 scales x 4 + 1 block x 256 counts x 8 = 3248; growth 12 x 8.
  EXPECT_DOUBLE_EQ(device_index_bytes(s, whole(s)), 680 + 3248 + 96.0);
  MachineModel m;
  EXPECT_DOUBLE_EQ(estimate_rank_memory(s, whole(s), m).device_indices, 4024.0);
}

TEST(MemoryEstimator, TieringKeepsOnlyHotRowsOnDevice) {
  JobSpec s = tiny();
  s.tiering = {true, 0.5, 0.75};
  // ceil(0.5*10) = 5 and ceil(0.5*6) = 3 rows of dim 4 = 32 elements.
  EXPECT_DOUBLE_EQ(parameter_bytes(s, whole(s)), (32 + 114) * 4.0);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), (32 + 114) * 4.0);
  // Cold rows 5 and 3, both below the 6 lookups of a step: 8 staging rows of (4 + 4) x 4 B.
  EXPECT_DOUBLE_EQ(staging_bytes(s, whole(s)), 8 * 32.0);
  // Prefetch holds only the batches: 2 x 6 x (3*4 + 2*8 + 4).
  EXPECT_DOUBLE_EQ(prefetch_bytes(s, {}), 384.0);
}

// Row bytes below: dim 4 + Adagrad state 4 = 8 floats = 32 B. One rank, global batch 6, one-hot:
// a step looks up at most 6 rows of each table.
TEST(MemoryEstimator, HotFractionStagingIsCappedByColdRowsAndByTheBatch) {
  JobSpec s = tiny();
  s.tiering = {true, 0.25, 0.9};
  // Hot ceil(2.5) = 3 of 10 and ceil(1.5) = 2 of 6; cold 7 and 4; staging min(7, 6) + min(4, 6) = 10.
  const DeviceTier tier = device_tier(s, whole(s));
  EXPECT_EQ(tier.hot_rows, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(tier.staging_rows, 10);
  // Weights (5 hot rows x 4 + 114 dense) x 4; state (114 dense + 5 rows x 4) x 4.
  EXPECT_DOUBLE_EQ(parameter_bytes(s, whole(s)), 536.0);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), 536.0);
  EXPECT_DOUBLE_EQ(staging_bytes(s, whole(s)), 320.0);
  // Host: all 16 owned rows with their state.
  EXPECT_DOUBLE_EQ(host_tier_bytes(s, whole(s)), 512.0);
  MachineModel m;
  m.gemm_workspace_bytes = 1000;
  const MemoryEstimate e = estimate_rank_memory(s, whole(s), m, {2, 0.05});
  // parameters, state, activations, all-to-all, all-reduce, workspace, prefetch, staging.
  const double sum = 536 + 536 + 1752 + 960 + 456 + 1000 + 384 + 320;
  EXPECT_DOUBLE_EQ(e.staging, 320.0);
  EXPECT_DOUBLE_EQ(e.host, 512.0);
  EXPECT_DOUBLE_EQ(e.total(), 1.05 * sum);  // the host tier is not device memory
}

// Where device memory is not host memory, staged rows also pass through pinned host memory: three
// buffers of the staging slots' size.
TEST(MemoryEstimator, PinnedTransitRowsCountWhereDeviceMemoryIsApart) {
  JobSpec s = tiny();
  s.tiering = {true, 0.25, 0.9};
  s.tiering.pinned_transit = true;
  EXPECT_DOUBLE_EQ(host_tier_bytes(s, whole(s)), 512.0 + 3 * 320.0);
  s.tiering.pinned_transit = false;
  EXPECT_DOUBLE_EQ(host_tier_bytes(s, whole(s)), 512.0);
}

// 16-bit tables with tiering. The runtime's device tier (TieredRows::allocate_device,
// embedding/tiered_rows.cpp) is H + S rows of 16-bit weights, H + S rows of fp32 state and, for
// 16-bit tables only, the local row of every slot, hot or staging (one int64 a slot: the
// stochastic rounding keys on it). So the embedding's device bytes are (H + S) x (w + 8), with
// w = dim x 2 + state x 4: the hot rows' weights and state in the first two terms, the staging
// rows and every slot's local row in the staging term. The same sizes are pinned on the runtime's
// side by TieredRows.HalfTablesDeviceTierHoldsEverySlotsLocalRow (tests/embedding).
TEST(MemoryEstimator, TieredHalfTablesCountTheLocalRowOfEverySlot) {
  JobSpec s = tiny();
  s.table_bytes = 2;
  s.tiering = {true, 0.5, 0.75};
  // Hot ceil(5) = 5 of 10 and 3 of 6; cold 5 and 3, both within the 6 lookups of a step.
  const DeviceTier tier = device_tier(s, whole(s));
  EXPECT_EQ(tier.hot_rows, (std::vector<std::int64_t>{5, 3}));
  EXPECT_EQ(tier.staging_rows, 8);
  // Weights: 8 hot rows x 4 x 2 B + 114 dense x 4 B; state stays fp32: (114 + 8 x 4) x 4.
  EXPECT_DOUBLE_EQ(parameter_bytes(s, whole(s)), 64 + 456.0);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), 584.0);
  // Staging: 8 rows of 4 x 2 + 4 x 4 = 24 B, and the local row of 5 + 3 hot and 8 staging slots.
  EXPECT_DOUBLE_EQ(staging_bytes(s, whole(s)), 8 * 24 + 16 * 8.0);
  // The embedding's device bytes: 16 slots x (24 + 8) = 512.
  EXPECT_DOUBLE_EQ(parameter_bytes(s, whole(s)) - 456 + optimizer_state_bytes(s, whole(s)) - 456 +
                       staging_bytes(s, whole(s)),
                   512.0);
  // Host: all 16 owned rows with their state, in the tables' storage; the slots' rows are
  // device-side only. Pinned transit: three buffers of the staging term.
  EXPECT_DOUBLE_EQ(host_tier_bytes(s, whole(s)), 16 * 24.0);
  s.tiering.pinned_transit = true;
  EXPECT_DOUBLE_EQ(host_tier_bytes(s, whole(s)), 16 * 24 + 3 * 320.0);
  s.tiering.pinned_transit = false;
  MachineModel m;
  m.gemm_workspace_bytes = 1000;
  const MemoryEstimate e = estimate_rank_memory(s, whole(s), m, {2, 0.05});
  EXPECT_DOUBLE_EQ(e.staging, 320.0);
  // parameters, state, activations, all-to-all, all-reduce, workspace, prefetch, staging.
  EXPECT_DOUBLE_EQ(e.total(), 1.05 * (520 + 584 + 1752 + 960 + 456 + 1000 + 384 + 320));
  // Row-wise Adagrad (rows of 4 x 2 + 4 = 12 B) and SGD (8 B): the slots' rows do not change.
  s.sparse_optimizer = SparseOptimizer::rowwise_adagrad;
  EXPECT_DOUBLE_EQ(staging_bytes(s, whole(s)), 8 * 12 + 16 * 8.0);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), (114 + 8) * 4.0);
  s.sparse_optimizer = SparseOptimizer::sgd;
  EXPECT_DOUBLE_EQ(staging_bytes(s, whole(s)), 8 * 8 + 16 * 8.0);
  // A hot fraction of 1: no staging slots, but every hot slot still holds its local row.
  s.tiering.hot_fraction = 1.0;
  EXPECT_EQ(device_tier(s, whole(s)).staging_rows, 0);
  EXPECT_DOUBLE_EQ(staging_bytes(s, whole(s)), 16 * 8.0);
  // fp32 tables key no rounding: no local rows.
  s.tiering.hot_fraction = 0.5;
  s.table_bytes = 4;
  EXPECT_DOUBLE_EQ(staging_bytes(s, whole(s)), 8 * 16.0);
}

// The same with a device budget: the budget buys rows of w = 24 B (the runtime's place_hot_rows
// prices a row as its weights and state), and every slot it buys carries its local row besides.
TEST(MemoryEstimator, TieredHalfTablesUnderABudgetCountTheLocalRowOfEverySlot) {
  JobSpec s = tiny();
  s.table_bytes = 2;
  s.tiering.enabled = true;
  // Staging counts every row cold: min(10, 6) + min(6, 6) = 12 rows x 24 B = 288 B. A budget of
  // 418 B leaves floor(130 / 24) = 5 hot rows, by rows 10:6: floor(5 x 10 / 16) = 3 and 2.
  s.tiering.device_budget = 418;
  const DeviceTier tier = device_tier(s, whole(s));
  EXPECT_EQ(tier.hot_rows, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(tier.staging_rows, 12);
  EXPECT_DOUBLE_EQ(parameter_bytes(s, whole(s)), 5 * 4 * 2 + 456.0);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), (114 + 5 * 4) * 4.0);
  // 12 staging rows x 24 B and the local rows of 5 hot and 12 staging slots.
  EXPECT_DOUBLE_EQ(staging_bytes(s, whole(s)), 288 + 17 * 8.0);
  // Below 288 B the job cannot start: the local rows do not enter the staging's price.
  s.tiering.device_budget = 287;
  EXPECT_THROW(device_tier(s, whole(s)), ConfigError);
  s.tiering.device_budget = 288;
  EXPECT_EQ(device_tier(s, whole(s)).hot_rows, (std::vector<std::int64_t>{0, 0}));
  EXPECT_DOUBLE_EQ(staging_bytes(s, whole(s)), 288 + 12 * 8.0);
}

// Two ranks, 16-bit tiered: each rank counts the slots of its own shards. Rank 0 owns rows 0-4 of
// table 0 and table 1, rank 1 rows 5-9 of table 0 (ShardPlanSplitsLargeTablesAndBalances).
TEST(MemoryEstimator, TieredHalfTablesCountEachRanksSlots) {
  JobSpec s = tiny();
  s.table_bytes = 2;
  s.ranks = 2;
  s.tiering = {true, 0.5, 0.9};
  const auto shards = plan_shards(s.shape, 2);
  // Rank 0: hot 3 and 3, staging min(2, 6) + min(3, 6) = 5: 5 x 24 + (6 + 5) x 8.
  EXPECT_DOUBLE_EQ(staging_bytes(s, shards[0]), 120 + 88.0);
  // Rank 1: hot 3, staging 2: 2 x 24 + 5 x 8.
  EXPECT_DOUBLE_EQ(staging_bytes(s, shards[1]), 48 + 40.0);
  EXPECT_DOUBLE_EQ(estimate_peak_memory(s, MachineModel{}).staging, 208.0);
}

TEST(MemoryEstimator, HotFractionRoundsAsTheRuntime) {
  JobSpec s = tiny();
  s.shape.tables[0].rows = 100;
  s.tiering = {true, 0.07, 0.9};
  // 0.07 x 100 is 7.000000000000001 in doubles: 7 hot rows, not 8. 0.07 x 6 = 0.42: 1 row.
  const DeviceTier tier = device_tier(s, whole(s));
  EXPECT_EQ(tier.hot_rows, (std::vector<std::int64_t>{7, 1}));
  EXPECT_EQ(tier.staging_rows, 6 + 5);  // min(93, 6) + min(5, 6)
}

TEST(MemoryEstimator, DeviceBudgetBuysHotRowsAfterTheStaging) {
  JobSpec s = tiny();
  s.tiering.enabled = true;
  // Staging counts every row cold: min(10, 6) + min(6, 6) = 12 rows = 384 B. A budget of
  // 384 + 7 x 32 + 20 = 628 B leaves floor(244 / 32) = 7 hot rows, by rows 10:6:
  // floor(7 x 10 / 16) = 4 and 7 - 4 = 3.
  s.tiering.device_budget = 628;
  DeviceTier tier = device_tier(s, whole(s));
  EXPECT_EQ(tier.hot_rows, (std::vector<std::int64_t>{4, 3}));
  EXPECT_EQ(tier.staging_rows, 12);
  EXPECT_DOUBLE_EQ(parameter_bytes(s, whole(s)), (7 * 4 + 114) * 4.0);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), (114 + 7 * 4) * 4.0);
  EXPECT_DOUBLE_EQ(staging_bytes(s, whole(s)), 384.0);
  EXPECT_DOUBLE_EQ(host_tier_bytes(s, whole(s)), 512.0);
  // Exactly the staging: no hot rows. A budget past every row: all 16 rows hot, staging unchanged.
  s.tiering.device_budget = 384;
  EXPECT_EQ(device_tier(s, whole(s)).hot_rows, (std::vector<std::int64_t>{0, 0}));
  s.tiering.device_budget = 1 << 20;
  tier = device_tier(s, whole(s));
  EXPECT_EQ(tier.hot_rows, (std::vector<std::int64_t>{10, 6}));
  EXPECT_EQ(tier.staging_rows, 12);
  // Below the staging: the job cannot start.
  s.tiering.device_budget = 383;
  EXPECT_THROW(device_tier(s, whole(s)), ConfigError);
  EXPECT_THROW(estimate_peak_memory(s, MachineModel{}), ConfigError);
}

TEST(MemoryEstimator, DeviceBudgetRowsCarryTheirOptimizerState) {
  JobSpec s = tiny();
  s.sparse_optimizer = SparseOptimizer::rowwise_adagrad;  // rows of 4 + 1 floats = 20 B
  s.tiering.enabled = true;
  // Staging 12 rows = 240 B; budget 400 B: floor(160 / 20) = 8 hot rows, 5 and 3 by rows 10:6.
  s.tiering.device_budget = 400;
  EXPECT_EQ(device_tier(s, whole(s)).hot_rows, (std::vector<std::int64_t>{5, 3}));
  EXPECT_DOUBLE_EQ(parameter_bytes(s, whole(s)), (8 * 4 + 114) * 4.0);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(s, whole(s)), (114 + 8) * 4.0);
  EXPECT_DOUBLE_EQ(staging_bytes(s, whole(s)), 240.0);
  EXPECT_DOUBLE_EQ(host_tier_bytes(s, whole(s)), 16 * 20.0);
}

TEST(MemoryEstimator, HostTierHoldsTheRanksOwnedRows) {
  JobSpec s = tiny();
  s.ranks = 2;
  s.tiering = {true, 0.5, 0.9};
  // Rank 0 owns rows 0-4 of table 0 and table 1 (11 rows), rank 1 rows 5-9 of table 0. Local
  // batch 3, so a step looks up at most 6 rows of a shard. Rank 0: hot 3 and 3, staging
  // min(2, 6) + min(3, 6) = 5; rank 1: hot 3, staging 2.
  const auto shards = plan_shards(s.shape, 2);
  EXPECT_EQ(device_tier(s, shards[0]).staging_rows, 5);
  EXPECT_EQ(device_tier(s, shards[1]).staging_rows, 2);
  EXPECT_DOUBLE_EQ(host_tier_bytes(s, shards[0]), 11 * 32.0);
  EXPECT_DOUBLE_EQ(host_tier_bytes(s, shards[1]), 5 * 32.0);
  const MemoryEstimate peak = estimate_peak_memory(s, MachineModel{});
  EXPECT_DOUBLE_EQ(peak.staging, 5 * 32.0);
  EXPECT_DOUBLE_EQ(peak.host, 11 * 32.0);
}

TEST(MemoryEstimator, UntieredHasNoStagingNorHostTier) {
  const JobSpec s = tiny();
  const DeviceTier tier = device_tier(s, whole(s));
  EXPECT_EQ(tier.hot_rows, (std::vector<std::int64_t>{10, 6}));
  EXPECT_EQ(tier.staging_rows, 0);
  const MemoryEstimate e = estimate_rank_memory(s, whole(s), MachineModel{});
  EXPECT_DOUBLE_EQ(e.staging, 0.0);
  EXPECT_DOUBLE_EQ(e.host, 0.0);
}

TEST(MemoryEstimator, ActivationsBuffersAndPrefetch) {
  const JobSpec s = tiny();
  // Per sample: dense 3 + label + loss gradient + the loss term (a double: 2 floats' bytes), and
  // twice (value and gradient) bottom 8+4, pooled 2*4, interaction output 7, top 5+1:
  // 7 + 2 * 33 = 73 floats.
  EXPECT_DOUBLE_EQ(activation_bytes(s), 6 * 73 * 4.0);
  // Indices (6*2 + 6*2) * 8 = 192; vectors and gradients 2 * (12 + 12) * 4 * 4 = 768.
  EXPECT_DOUBLE_EQ(all_to_all_bytes(s, whole(s)), 960.0);
  EXPECT_DOUBLE_EQ(all_reduce_bytes(s), 114 * 4.0);
  EXPECT_DOUBLE_EQ(prefetch_bytes(s, {}), 2 * 6 * (3 * 4 + 2 * 8 + 4.0));
  MachineModel m;
  m.gemm_workspace_bytes = 1000;
  EXPECT_DOUBLE_EQ(gemm_workspace_bytes(m), 1000.0);
}

// Multi-hot bags (pooling L = 3) on 2 ranks (local batch 3, global 6): every term that counts
// lookups scales by L, and the owner side of the all-to-all counts the global batch for the
// tables it owns while the sender side counts the local batch for every table. Rank 0 owns 2
// shards (rows 0-4 of table 0, table 1), rank 1 one (rows 5-9 of table 0): 3 shards in all.
TEST(MemoryEstimator, MultiHotBagsAndRanksScaleTheLookupTerms) {
  JobSpec s = tiny();
  s.shape.pooling = 3;
  s.ranks = 2;
  const auto shards = plan_shards(s.shape, 2);
  // Rank 0: indices (3 x 2 + 6 x 2) x 3 x 8 = 432; vectors and gradients 2 x (6 + 12) x 4 x 4 = 576.
  EXPECT_DOUBLE_EQ(all_to_all_bytes(s, shards[0]), 432 + 576.0);
  // Rank 1: indices (3 x 2 + 6 x 1) x 3 x 8 = 288; vectors 2 x (6 + 6) x 4 x 4 = 384.
  EXPECT_DOUBLE_EQ(all_to_all_bytes(s, shards[1]), 288 + 384.0);
  // Prefetch: 3 samples x (3 dense x 4 + 2 tables x 3 indices x 8 + 4), per batch kept.
  EXPECT_DOUBLE_EQ(prefetch_bytes(s, {}), 2 * 3 * 64.0);
  EXPECT_DOUBLE_EQ(prefetch_bytes(s, {3, 0.03}), 3 * 3 * 64.0);
  // Device index arrays, rank 0: bags G = 6 x 2 = 12, entries N = 36, parts Q = 3 x 3 = 9, combine
  // outputs 3 x 2 = 6. Staged (13 + 36 + 7 + 18) x 8 + (12 + 6 + 9) x 4 + 2 x 20 = 740; grouping
  // 12 x 36 x 8 + 36 x 4 + 1 block x 256 x 8 = 5648; growth 36 x 8 = 288.
  s.device_kernels = true;
  EXPECT_DOUBLE_EQ(device_index_bytes(s, shards[0]), 740 + 5648 + 288.0);
  // Rank 1: G = 6, N = 18, Q = 9: staged (7 + 18 + 7 + 18) x 8 + (6 + 6 + 9) x 4 + 20 = 504;
  // grouping 12 x 18 x 8 + 18 x 4 + 2048 = 3848; growth 144.
  EXPECT_DOUBLE_EQ(device_index_bytes(s, shards[1]), 504 + 3848 + 144.0);
  // Tiered, one rank: a step looks up at most 6 x 3 = 18 rows of a shard. Hot 3 of 10 and 2 of 6;
  // staging min(7, 18) + min(4, 18) = 11 rows of 32 B (one-hot, it was min(7, 6) + 4 = 10).
  s.ranks = 1;
  s.device_kernels = false;
  s.tiering = {true, 0.25, 0.9};
  EXPECT_EQ(device_tier(s, whole(s)).staging_rows, 11);
  EXPECT_DOUBLE_EQ(staging_bytes(s, whole(s)), 11 * 32.0);
}

// The radix sort's counts: 256 per block of 1024 entries, at least one block and at most 256.
TEST(MemoryEstimator, DeviceIndexRadixCountsGrowWithTheEntriesUpToACap) {
  JobSpec s = tiny();
  s.device_kernels = true;
  // Global batch 1024, one rank: bags = entries = parts = combine outputs = 2048: 2 blocks.
  // Staged (2049 + 2048 + 2049 + 2 x 2048) x 8 + 3 x 2048 x 4 + 40 = 106552; grouping
  // 12 x 2048 x 8 + 2048 x 4 + 2 x 256 x 8 = 208896; growth 2048 x 8 = 16384.
  s.global_batch = 1024;
  EXPECT_DOUBLE_EQ(device_index_bytes(s, whole(s)), 106552 + 208896 + 16384.0);
  // Global batch 200000: 400000 of each, floor(400000 / 1024) = 390 blocks, capped at 256.
  // Staged 2000002 x 8 + 1200000 x 4 + 40 = 20800056; grouping 12 x 400000 x 8 + 400000 x 4 +
  // 256 x 256 x 8 = 40524288; growth 3200000.
  s.global_batch = 200000;
  EXPECT_DOUBLE_EQ(device_index_bytes(s, whole(s)), 20800056 + 40524288 + 3200000.0);
}

// The cross network (dcn): the top MLP reads its n = F x dim = 12 values; each of 2 layers of
// rank 3 holds V and W (3 x 12 each) and a bias of 12: 84, or at full rank 12 x 12 + 12 = 156.
TEST(MemoryEstimator, CrossLayersAddParametersAndActivations) {
  JobSpec s = tiny();
  s.shape.cross_layers = 2;
  s.shape.cross_rank = 3;
  EXPECT_EQ(s.shape.interaction_width(), 12);
  EXPECT_EQ(s.shape.cross_params(), 168);
  EXPECT_EQ(s.shape.dense_params(), 139 + 168);  // the cat model's 139
  EXPECT_DOUBLE_EQ(all_reduce_bytes(s), 307 * 4.0);
  // Per sample, the cat model's 7 + 2 x 38, and the layers' 2 x (2 x 12 + 3) + 3 x 12 + 3 = 93.
  EXPECT_DOUBLE_EQ(activation_bytes(s), 6 * (83 + 93) * 4.0);
  s.shape.cross_rank = 0;
  EXPECT_EQ(s.shape.dense_params(), 139 + 312);
  EXPECT_DOUBLE_EQ(activation_bytes(s), 6 * (83 + 2 * 24 + 36) * 4.0);
  // bf16 GEMMs: the MLPs' operands as the cat model's (28 inputs, widest output 8), and the
  // layers' inputs and low-rank products with one layer's two gradients, 2 x (12 + 3) + 12 + 3.
  s.shape.cross_rank = 3;
  s.gemm_math = GemmMath::bf16;
  EXPECT_DOUBLE_EQ(activation_bytes(s), 6 * (83 + 93) * 4.0 + 6 * (36 + 45) * 2.0);
  s.shape.cross_rank = 0;
  EXPECT_DOUBLE_EQ(activation_bytes(s), 6 * (83 + 2 * 24 + 36) * 4.0 + 6 * (36 + 2 * 12 + 12) * 2.0);
}

// The concatenating interaction: the top MLP reads F x dim = 3 x 4 = 12 values, not 4 + 3.
TEST(MemoryEstimator, ConcatInteractionWidensTheTopInput) {
  JobSpec s = tiny();
  s.shape.concat_interaction = true;
  EXPECT_EQ(s.shape.interaction_width(), 12);
  // bottom 68; top 12 x 5 + 5 + 5 x 1 + 1 = 71.
  EXPECT_EQ(s.shape.dense_params(), 139);
  EXPECT_DOUBLE_EQ(parameter_bytes(s, whole(s)), (64 + 139) * 4.0);
  EXPECT_DOUBLE_EQ(all_reduce_bytes(s), 139 * 4.0);
  // Per sample 7 once and twice bottom 8 + 4, pooled 8, interaction 12, top 5 + 1: 7 + 2 x 38.
  EXPECT_DOUBLE_EQ(activation_bytes(s), 6 * 83 * 4.0);
  // bf16 GEMMs: layer inputs 3 + 8 + 12 + 5 = 28, widest output 8.
  s.gemm_math = GemmMath::bf16;
  EXPECT_DOUBLE_EQ(activation_bytes(s), 6 * 83 * 4.0 + 6 * 36 * 2.0);
}

TEST(MemoryEstimator, TotalIsTheSumPlusMargin) {
  const JobSpec s = tiny();
  MachineModel m;
  m.gemm_workspace_bytes = 1000;
  const MemoryEstimate e = estimate_rank_memory(s, whole(s), m, {2, 0.05});
  const double sum = 712 + 712 + 1752 + 960 + 456 + 1000 + 384;
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
  EXPECT_DOUBLE_EQ(activation_bytes(two), 3 * 73 * 4.0);
}

TEST(MemoryEstimator, RejectsBadSpecs) {
  JobSpec s = tiny();
  s.shape.bottom_mlp = {3, 8, 5};  // last width != dim
  EXPECT_THROW(estimate_peak_memory(s, MachineModel{}), ConfigError);
  s = tiny();
  s.tiering = {true, 0.0, 0.5};
  EXPECT_THROW(estimate_peak_memory(s, MachineModel{}), ConfigError);
  s = tiny();
  s.tiering.device_budget = 1 << 20;  // a budget with tiering off
  EXPECT_THROW(estimate_peak_memory(s, MachineModel{}), ConfigError);
}

}  // namespace
}  // namespace recmix::sched
