// The tiers' counters, growth, re-ranks and errors against hand-worked cases: one rank, one
// table of 10 rows of dim 4 with SGD (16 bytes a row), whole-table plan. Rows that move between
// the tiers keep their weights and optimizer state (against the naive reference), and the device
// tier of 16-bit tables holds what the memory estimator counts.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/staged/staged_communicator.hpp"
#include "core/error.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharded_embedding.hpp"
#include "reference.hpp"
#include "self_communicator.hpp"

using namespace recmix;
using namespace recmix::embedding;

namespace {

const std::vector<TableSpec> kTable{{10, 4}};

// What a Layer is built with besides its tiers (the defaults: the cases worked out above).
struct LayerSetup {
  const char* optimizer = "sgd";  // learning rate 0.1
  float initial_accumulator = 0.f;
  device::BackendKind backend = device::BackendKind::cpu;
  std::vector<TableSpec> tables = kTable;
  TableStorage storage{};
  std::int64_t global_batch = 4;
};

struct Layer {
  std::unique_ptr<device::Backend> backend;
  device::MemoryPool pool;
  device::MemoryPool host_pool;
  std::unique_ptr<device::Stream> stream;
  test::SelfCommunicator self;
  std::unique_ptr<comm::Communicator> device_comm;  // where device memory is not host memory
  std::vector<TableSpec> tables;
  std::unique_ptr<ShardedEmbedding> emb;

  explicit Layer(TierOptions o, std::size_t host_capacity = 0, LayerSetup setup = {})
      : backend(device::make_backend(setup.backend, 1)), pool(*backend, device::Tier::device, "test"),
        host_pool(*backend, device::Tier::host, "test host", host_capacity), stream(backend->create_stream()),
        tables(setup.tables) {
    if (!device::device_memory_is_host(*backend)) device_comm = comm::make_staged_communicator(self, *backend);
    o.host_pool = &host_pool;
    o.global_batch = setup.global_batch;
    const SparseOptimizerConfig optimizer{test::sparse_kind(setup.optimizer), 0.1f, 1e-8f, setup.initial_accumulator};
    emb = std::make_unique<ShardedEmbedding>(self, *backend, pool, tables, Pooling::sum,
                                             ShardingPlan::automatic(tables, 1), optimizer, 7, device_comm.get(), o,
                                             setup.storage);
  }
  // One step over bags of the given rows (one bag per list) of table 0, the only table; the
  // gradient is `grad` ([bags x dim]), or 0.5 everywhere when empty.
  TierStats step(const std::vector<std::vector<std::int64_t>>& bags, std::vector<float> grad = {}) {
    std::vector<std::int64_t> offsets{0}, indices;
    for (const auto& b : bags) {
      indices.insert(indices.end(), b.begin(), b.end());
      offsets.push_back(static_cast<std::int64_t>(indices.size()));
    }
    const Bags view{offsets, indices};
    const int B = static_cast<int>(bags.size());
    const std::size_t n = std::size_t(B) * std::size_t(tables[0].dim);
    if (grad.empty()) grad.assign(n, 0.5f);
    // The layer's output and gradient are device memory.
    auto* out = static_cast<float*>(backend->allocate(n * sizeof(float), device::Tier::device));
    auto* dev_grad = static_cast<float*>(backend->allocate(n * sizeof(float), device::Tier::device));
    backend->copy(dev_grad, grad.data(), n * sizeof(float), *stream);
    emb->forward(*stream, std::span<const Bags>(&view, 1), B, out);
    emb->backward(*stream, dev_grad);
    stream->synchronize();
    backend->deallocate(out, device::Tier::device);
    backend->deallocate(dev_grad, device::Tier::device);
    return emb->take_tier_stats();
  }
};

TierOptions fraction(double f) {
  TierOptions o;
  o.hot_fraction = f;
  return o;
}

}  // namespace

TEST(TieredRows, CountsHitsAndBytesOfEachStep) {
  Layer l(fraction(0.3));  // hot rows 0, 1, 2 (no counts: the lowest); staging min(7, 4 x 1) = 4 slots
  EXPECT_EQ(l.emb->local_bytes(), (3u + 4u) * 16u);
  EXPECT_EQ(l.emb->host_tier_bytes(), 10u * 16u);
  TierStats s = l.step({{0}, {5}, {5}, {9}});
  EXPECT_EQ(s.lookups, 4);
  EXPECT_EQ(s.hot_hits, 1);           // row 0
  EXPECT_EQ(s.rows_staged, 2);        // rows 5 and 9, once each
  EXPECT_EQ(s.bytes_to_device, 32u);
  EXPECT_EQ(s.rows_written_back, 0);  // written back when the next step stages
  s = l.step({{1}, {2}, {9}, {3}});
  EXPECT_EQ(s.rows_written_back, 2);
  EXPECT_EQ(s.bytes_to_host, 32u);
  EXPECT_EQ(s.hot_hits, 2);
  EXPECT_EQ(s.rows_staged, 2);  // 9 (again, after its write-back) and 3
  EXPECT_EQ(s.steps, 1);
}

TEST(TieredRows, DatasetCountsPickTheHotRows) {
  TierOptions o = fraction(0.2);  // 2 hot rows
  o.table_counts = {{0, 0, 0, 0, 0, 0, 0, 5, 9, 1}};
  Layer l(o);
  const TierStats s = l.step({{8}, {7}, {9}, {8}});
  EXPECT_EQ(s.hot_hits, 3);  // 8, 7, 8
  EXPECT_EQ(s.rows_staged, 1);
}

TEST(TieredRows, LfuReRankMovesRowsBothWays) {
  TierOptions o = fraction(0.3);
  o.hot_set = HotSet::lfu;
  o.rerank_interval = 2;
  o.table_counts = {{9, 9, 9, 9, 9, 9, 9, 9, 9, 9}};  // ignored by lfu
  Layer l(o);
  TierStats s = l.step({{7}, {8}, {9}, {7}});
  EXPECT_EQ(s.hot_hits, 0);
  s = l.step({{8}, {9}, {7}, {8}});  // counted: 7 x3, 8 x3, 9 x2
  EXPECT_EQ(s.reranks, 0);
  s = l.step({{7}, {0}, {8}, {9}});  // re-ranked first: 7, 8, 9 hot; 0, 1, 2 cold
  EXPECT_EQ(s.reranks, 1);
  EXPECT_EQ(s.rows_promoted, 3);
  EXPECT_EQ(s.rows_demoted, 3);
  EXPECT_EQ(s.hot_hits, 3);
  EXPECT_EQ(s.rows_staged, 1);  // row 0
  EXPECT_EQ(s.bytes_to_device, 3u * 16u + 16u);
}

TEST(TieredRows, StagingGrowsForLongBags) {
  Layer l(fraction(0.3));
  const TierStats s = l.step({{3, 4, 5}, {6, 7, 8}});  // 6 cold rows, 4 slots
  EXPECT_EQ(s.rows_staged, 6);
  EXPECT_EQ(l.emb->local_bytes(), (3u + 7u) * 16u);  // grown to every cold row
}

TEST(TieredRows, BadSettingsGiveOneClearError) {
  TierOptions o;
  o.device_budget = 50;  // staging needs min(10, 4) rows x 16 B = 64 B
  try {
    Layer l(o);
    FAIL() << "a budget below the staging slots was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("50 B"), std::string::npos) << what;
    EXPECT_NE(what.find("64 B"), std::string::npos) << what;
  }
  // A fraction outside (0, 1] is the caller's error here (the job spec's parser names the key).
  EXPECT_THROW(Layer l(fraction(1.5)), std::invalid_argument);
  EXPECT_THROW(Layer l(fraction(-0.1)), std::invalid_argument);
  TierOptions host = fraction(0.5);
  host.cold_update = ColdUpdate::host;
  EXPECT_NO_THROW(Layer l(host));  // the CPU backend applies cold updates on the host
}

TEST(TieredRows, HostTierCapacityIsEnforced) {
  try {
    Layer l(fraction(0.3), 100);  // the host tier holds 160 B
    FAIL() << "the host tier ignored host_memory_capacity";
  } catch (const OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("host tier"), std::string::npos) << what;
    EXPECT_NE(what.find("160 B"), std::string::npos) << what;
  }
}

TEST(TieredRows, AWholeTableHotNeedsNoStaging) {
  Layer l(fraction(1.0));
  const TierStats s = l.step({{0}, {9}, {9}, {4}});
  EXPECT_EQ(s.hot_hits, 4);
  EXPECT_EQ(s.rows_staged, 0);
  EXPECT_EQ(l.emb->local_bytes(), 10u * 16u);
}

// A row that turns cold at a re-rank goes back to the host tier with its weights and its
// optimizer state as the hot slot last held them; a row that turns hot takes both from the host
// tier. LFU re-ranks every 2 steps (at the stages of steps 3 and 5), 3 hot rows of 10: rows 0, 1
// and 2 hot at start; rows 7, 8 and 9 updated cold (steps 1, 2), promoted at step 3 and updated
// hot; rows 0 and 1 updated hot (steps 1, 2), demoted at step 3, updated cold (step 4), promoted
// again at step 5 when 7, 8 and 9 are demoted. Every row and its state against the naive
// reference at the end, the demoted rows read from the host tier (local_shards() flushes only
// hot rows): on the CPU backend (the re-rank copies the moving rows itself) and under cpu-strict
// (it moves the hot slots through the host tier whole).
TEST(TieredRows, RowsMovedByReRanksKeepTheirOptimizerState) {
  for (auto kind : {device::BackendKind::cpu, device::BackendKind::cpu_strict})
    for (const char* optimizer : {"adagrad", "rowwise_adagrad"}) {
      SCOPED_TRACE(std::string(optimizer) + (kind == device::BackendKind::cpu ? " on cpu" : " on cpu-strict"));
      TierOptions o = fraction(0.3);
      o.hot_set = HotSet::lfu;
      o.rerank_interval = 2;
      LayerSetup setup;
      setup.optimizer = optimizer;
      setup.initial_accumulator = 0.01f;
      setup.backend = kind;
      Layer l(o, 0, setup);
      test::ReferenceEmbedding ref(kTable, false, optimizer, 0.1f, 1e-8f, 0.01f, 7);
      std::mt19937_64 rng(5);
      auto step = [&](const std::vector<std::vector<std::int64_t>>& bags) {
        test::TableBatch batch;
        batch.offsets.push_back(0);
        for (const auto& b : bags) {
          batch.indices.insert(batch.indices.end(), b.begin(), b.end());
          batch.offsets.push_back(static_cast<std::int64_t>(batch.indices.size()));
        }
        const auto grad = test::random_vector(bags.size() * 4, rng);
        ref.backward({batch}, grad);
        return l.step(bags, grad);
      };
      TierStats s = step({{0}, {7}, {8}, {9}});  // counted: 0, 7, 8, 9 once
      EXPECT_EQ(s.hot_hits, 1);
      step({{7}, {8}, {9}, {1}});  // 7, 8, 9 twice; 0 and 1 once
      s = step({{7}, {8}, {9}, {3}});  // re-ranked first: 7, 8, 9 hot, 0, 1, 2 cold
      EXPECT_EQ(s.reranks, 1);
      EXPECT_EQ(s.rows_demoted, 3);
      EXPECT_EQ(s.hot_hits, 3);
      step({{0, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 2, 2}, {5}});  // 0, 1: 5; 2: 4; 7, 8, 9: 3
      s = step({{4}, {5}, {6}, {4}});  // re-ranked first: 0, 1, 2 hot, 7, 8, 9 cold
      EXPECT_EQ(s.reranks, 1);
      EXPECT_EQ(s.rows_promoted, 3);
      EXPECT_EQ(s.rows_demoted, 3);
      EXPECT_EQ(s.hot_hits, 0);
      const auto views = l.emb->local_shards();
      ASSERT_EQ(views.size(), 1u);
      const auto& v = views[0];
      ASSERT_TRUE(v.host_memory);
      ASSERT_EQ(v.state.size(), 1u);
      const std::size_t per_row = std::string(optimizer) == "adagrad" ? 4 : 1;
      for (std::int64_t r = 0; r < 10; ++r) {
        for (int d = 0; d < 4; ++d)
          EXPECT_TRUE(test::close(v.weights[r * 4 + d], ref.weight(0, r, d)))
              << "row " << r << " weight " << d << ": " << v.weights[r * 4 + d] << " vs " << ref.weight(0, r, d);
        for (std::size_t i = 0; i < per_row; ++i) {
          const std::size_t k = std::size_t(r) * per_row + i;
          EXPECT_TRUE(test::close(v.state[0].second[k], ref.state(0)[k]))
              << "row " << r << " state " << i << ": " << v.state[0].second[k] << " vs " << ref.state(0)[k];
        }
      }
      // The rows' state moved on from its initial value (0.01), so a state left behind is seen.
      for (std::int64_t r : {0, 1, 7, 8, 9}) EXPECT_NE(v.state[0].second[std::size_t(r) * per_row], 0.01f) << "row " << r;
    }
}

// The device tier of 16-bit tables under cpu-strict, where device memory is the pool's: one
// buffer of H + S rows of 16-bit weights, one of H + S rows of fp32 state, and the local row of
// each slot (an int64 a slot, which the stochastic rounding keys on). The shape of the memory
// estimator's tests (tests/sched/test_memory_estimator.cpp): tables of 10 and 6 rows of dim 4,
// Adagrad, hot fraction 0.5, global batch 6: H = 5 + 3 and S = 5 + 3, so 16 slots of
// 4 x 2 + 4 x 4 + 8 = 32 B, the 512 B the estimator's TieredHalfTablesCountTheLocalRowOfEverySlot
// works out; and the owned shards' layout for the 16-bit kernels, 20 B a shard (which the
// estimator counts with the device index arrays).
// Where the device tier is not host memory, the host pool holds the host tier and the staged rows
// in transit: three copies (gathered ahead, in the copy, written back) of the staging slots' rows
// with their state, as the memory estimator counts them (sched/memory_estimator.cpp), and no more.
TEST(TieredRows, HostPoolHoldsTheHostTierAndThreeTransitCopiesOfTheStagingSlots) {
  LayerSetup setup;
  setup.optimizer = "adagrad";
  setup.backend = device::BackendKind::cpu_strict;
  setup.tables = {{10, 4}, {6, 4}};
  setup.global_batch = 6;
  Layer l(fraction(0.5), 0, setup);
  const std::size_t row = 4 * sizeof(float) + 4 * sizeof(float);  // weights and Adagrad state
  EXPECT_EQ(l.emb->host_tier_bytes(), 16u * row);
  const std::size_t slots = l.pool.current_bytes() / row;  // hot and staging slots of the device tier
  const std::size_t staging = slots - 8;                   // half of the 16 rows hot
  EXPECT_EQ(l.host_pool.current_bytes(), 16u * row + 3u * staging * row) << staging << " staging slots";
}

TEST(TieredRows, HalfTablesDeviceTierHoldsEverySlotsLocalRow) {
  for (half::Storage type : {half::Storage::fp16, half::Storage::bf16}) {
    LayerSetup setup;
    setup.optimizer = "adagrad";
    setup.backend = device::BackendKind::cpu_strict;
    setup.tables = {{10, 4}, {6, 4}};
    setup.storage = {type, true};
    setup.global_batch = 6;
    Layer l(fraction(0.5), 0, setup);
    EXPECT_EQ(l.emb->local_bytes(), 16u * (8u + 16u)) << half::to_string(type);
    EXPECT_EQ(l.pool.current_bytes(), 16u * 32u + 2u * 20u) << half::to_string(type);
    // The host tier: every owned row with its state.
    EXPECT_EQ(l.emb->host_tier_bytes(), 16u * 24u) << half::to_string(type);
  }
}
