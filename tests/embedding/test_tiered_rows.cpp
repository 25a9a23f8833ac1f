// The tiers' counters, growth, re-ranks and errors against hand-worked cases: one rank, one
// table of 10 rows of dim 4 with SGD (16 bytes a row), whole-table plan.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharded_embedding.hpp"
#include "self_communicator.hpp"

using namespace recmix;
using namespace recmix::embedding;

namespace {

const std::vector<TableSpec> kTable{{10, 4}};

struct Layer {
  std::unique_ptr<device::Backend> backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool{*backend, device::Tier::device, "test"};
  device::MemoryPool host_pool;
  std::unique_ptr<device::Stream> stream = backend->create_stream();
  test::SelfCommunicator self;
  std::unique_ptr<ShardedEmbedding> emb;

  explicit Layer(TierOptions o, std::size_t host_capacity = 0)
      : host_pool(*backend, device::Tier::host, "test host", host_capacity) {
    o.host_pool = &host_pool;
    o.global_batch = 4;
    emb = std::make_unique<ShardedEmbedding>(self, *backend, pool, kTable, Pooling::sum,
                                             ShardingPlan::automatic(kTable, 1), SparseOptimizerConfig{"sgd", 0.1f},
                                             7, nullptr, o);
  }
  // One step over bags of the given rows (one bag per list).
  TierStats step(const std::vector<std::vector<std::int64_t>>& bags) {
    std::vector<std::int64_t> offsets{0}, indices;
    for (const auto& b : bags) {
      indices.insert(indices.end(), b.begin(), b.end());
      offsets.push_back(static_cast<std::int64_t>(indices.size()));
    }
    const Bags view{offsets, indices};
    const int B = static_cast<int>(bags.size());
    std::vector<float> out(std::size_t(B) * 4), grad(out.size(), 0.5f);
    emb->forward(*stream, std::span<const Bags>(&view, 1), B, out.data());
    emb->backward(*stream, grad.data());
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
  EXPECT_THROW(Layer l(fraction(1.5)), ConfigError);
  EXPECT_THROW(Layer l(fraction(-0.1)), ConfigError);
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
