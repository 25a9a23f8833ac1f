// The embedding bag and each sparse optimizer against the naive reference (reference.hpp), on one
// rank: the direct path (whole tables) and the general path (row-wise shards, all-to-all to self).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharded_embedding.hpp"
#include "reference.hpp"
#include "self_communicator.hpp"

using namespace recmix;
using namespace recmix::embedding;
using recmix::embedding::test::ReferenceEmbedding;

namespace {

struct Case {
  std::string name;
  std::vector<TableSpec> tables;
  int batch;
  int max_len;
  bool one_hot;
  bool mean;
  std::string optimizer;
  bool rowwise;  // split every table into row ranges (general path) instead of whole tables
  int threads = 1;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

ShardingPlan plan_for(const Case& c) {
  if (!c.rowwise) return ShardingPlan::automatic(c.tables, 1);
  // Three uneven row ranges per table (fewer for tiny tables), all on rank 0.
  std::vector<Shard> shards;
  for (int t = 0; t < static_cast<int>(c.tables.size()); ++t) {
    const std::int64_t n = c.tables[t].rows;
    std::vector<std::int64_t> cuts{0};
    if (n >= 3) cuts.push_back(n / 3);
    if (n >= 2) cuts.push_back(n - 1);
    cuts.push_back(n);
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i)
      if (cuts[i] < cuts[i + 1]) shards.push_back({t, cuts[i], cuts[i + 1], 0});
  }
  return ShardingPlan::from_shards(shards, c.tables, 1);
}

class EmbeddingBag : public testing::TestWithParam<Case> {};

TEST_P(EmbeddingBag, MatchesNaiveReferenceOverSteps) {
  const Case& c = GetParam();
  auto backend = device::make_backend(device::BackendKind::cpu, c.threads);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  test::SelfCommunicator comm;
  SparseOptimizerConfig opt{test::sparse_kind(c.optimizer), 0.05f, 1e-8f, c.optimizer == "sgd" ? 0.f : 0.1f};
  const std::uint64_t seed = 1234;
  ShardedEmbedding emb(comm, *backend, pool, c.tables, c.mean ? Pooling::mean : Pooling::sum,
                       plan_for(c), opt, seed);
  ReferenceEmbedding ref(c.tables, c.mean, c.optimizer, opt.lr, opt.eps, opt.initial_accumulator, seed);
  const int T = static_cast<int>(c.tables.size()), D = c.tables[0].dim;
  std::mt19937_64 rng(99);
  for (int step = 0; step < 3; ++step) {
    auto batch = test::random_batch(c.tables, c.batch, c.max_len, c.one_hot, rng);
    std::vector<Bags> bags;
    for (auto& tb : batch) bags.push_back(tb.view());
    std::vector<float> out(std::size_t(c.batch) * T * D, -7.f);
    emb.forward(*stream, bags, c.batch, out.data());
    auto expected = ref.forward(batch);
    for (std::size_t i = 0; i < out.size(); ++i)
      ASSERT_TRUE(test::close(out[i], expected[i])) << "step " << step << " element " << i << ": "
                                                    << out[i] << " vs " << expected[i];
    auto grad = test::random_vector(out.size(), rng);
    emb.backward(*stream, grad.data());
    ref.backward(batch, grad);
  }
  // Every owned row and its optimizer state equal the reference's.
  std::int64_t rows_seen = 0;
  for (const auto& v : emb.local_shards()) {
    for (std::int64_t r = v.row_begin; r < v.row_end; ++r, ++rows_seen)
      for (int d = 0; d < D; ++d)
        ASSERT_TRUE(test::close(v.weights[(r - v.row_begin) * D + d], ref.weight(v.table, r, d)))
            << "table " << v.table << " row " << r << " col " << d;
    if (c.optimizer == "sgd") {
      EXPECT_TRUE(v.state.empty());
      continue;
    }
    ASSERT_EQ(v.state.size(), 1u);
    const std::size_t per_row = c.optimizer == "adagrad" ? D : 1;
    ASSERT_EQ(v.state_counts[0], std::size_t(v.row_end - v.row_begin) * per_row);
    for (std::size_t i = 0; i < v.state_counts[0]; ++i)
      ASSERT_TRUE(test::close(v.state[0].second[i], ref.state(v.table)[v.row_begin * per_row + i]))
          << "state of table " << v.table << " element " << i;
  }
  std::int64_t total_rows = 0;
  for (auto& t : c.tables) total_rows += t.rows;
  EXPECT_EQ(rows_seen, total_rows);
  EXPECT_EQ(emb.bytes_sent_last_step(), 0u);  // one rank sends nothing to others
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<TableSpec> three{{50, 5}, {7, 5}, {300, 5}};
  const std::vector<TableSpec> wide{{40, 16}, {40, 16}};
  for (const char* opt : {"sgd", "adagrad", "rowwise_adagrad"})
    for (bool rowwise : {false, true}) {
      std::string suffix = std::string(opt) + (rowwise ? "_rowwise" : "_tablewise");
      out.push_back({"multihot_sum_" + suffix, three, 13, 4, false, false, opt, rowwise});
      out.push_back({"multihot_mean_" + suffix, three, 9, 5, false, true, opt, rowwise});
      out.push_back({"onehot_" + suffix, wide, 17, 1, true, false, opt, rowwise});
      out.push_back({"batch1_" + suffix, three, 1, 3, false, false, opt, rowwise});
    }
  out.push_back({"dim1_single_row_table", {{1, 1}, {2, 1}}, 6, 3, false, false, "sgd", false});
  out.push_back({"dim33_mean_rowwise_adagrad", {{20, 33}}, 8, 6, false, true, "rowwise_adagrad", true});
  // Rows that fill or cross the update's chunks of 64 elements (kernels::UpdateRows::kChunk): one
  // whole chunk, one and a bit, just under two, two, two and a bit; every optimizer (row-wise
  // Adagrad sums the whole row's squares before it steps any chunk), on the direct path (whole
  // tables), the general path (row ranges) and the one-hot path.
  for (int dim : {64, 65, 127, 128, 130})
    for (const char* opt : {"rowwise_adagrad", "adagrad", "sgd"}) {
      const std::string name = "dim" + std::to_string(dim) + "_";
      const std::vector<TableSpec> two{{20, dim}, {9, dim}};
      out.push_back({name + "multihot_sum_" + opt + "_tablewise", two, 8, 5, false, false, opt, false});
      out.push_back({name + "multihot_mean_" + opt + "_rowwise", two, 8, 5, false, true, opt, true});
      out.push_back({name + "onehot_" + opt + "_tablewise", two, 12, 1, true, false, opt, false});
    }
  // Large enough to run the kernels on two threads.
  out.push_back({"two_threads_sgd", {{3000, 8}, {2000, 8}}, 4000, 2, false, false, "sgd", false, 2});
  out.push_back({"two_threads_adagrad_rowwise", {{3000, 8}}, 3000, 3, false, true, "adagrad", true, 2});
  // One rank, whole tables, one index per bag: the table-by-table CPU path, on one and two
  // threads, with tables past one radix digit (2^11 rows) and many duplicate rows.
  const std::vector<TableSpec> kaggle_like{{3000, 16}, {5000, 16}, {700, 16}};
  for (const char* opt : {"sgd", "adagrad", "rowwise_adagrad"})
    for (int threads : {1, 2})
      out.push_back({std::string("onehot_big_") + opt + "_threads" + std::to_string(threads), kaggle_like, 6000, 1,
                     true, threads == 2, opt, false, threads});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingBag, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& i) { return i.param.name; });

struct Fixture {
  std::unique_ptr<device::Backend> backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool{*backend, device::Tier::device, "test"};
  std::unique_ptr<device::Stream> stream = backend->create_stream();
  test::SelfCommunicator comm;
};

TEST(EmbeddingBagEdges, EmptyBagsGiveZerosAndLeaveRowsUntouched) {
  Fixture f;
  std::vector<TableSpec> tables{{10, 3}, {10, 3}};
  for (Pooling pooling : {Pooling::sum, Pooling::mean}) {
    ShardedEmbedding emb(f.comm, *f.backend, f.pool, tables, pooling, ShardingPlan::automatic(tables, 1),
                         {SparseOptimizerKind::sgd, 1.0f}, 5);
    std::vector<float> before(emb.local_shards()[0].weights, emb.local_shards()[0].weights + 30);
    std::vector<std::int64_t> offsets{0, 0, 0}, none;
    std::vector<std::int64_t> offsets1{0, 1, 1}, idx1{4};
    std::vector<Bags> bags{{offsets, none}, {offsets1, idx1}};
    std::vector<float> out(2 * 2 * 3, 5.f);
    emb.forward(*f.stream, bags, 2, out.data());
    for (int b = 0; b < 2; ++b)
      for (int d = 0; d < 3; ++d) EXPECT_EQ(out[(b * 2 + 0) * 3 + d], 0.f);
    for (int d = 0; d < 3; ++d) EXPECT_EQ(out[(1 * 2 + 1) * 3 + d], 0.f);  // empty bag of table 1
    std::vector<float> grad(out.size(), 1.f);
    emb.backward(*f.stream, grad.data());
    const float* w0 = emb.local_shards()[0].weights;
    for (int i = 0; i < 30; ++i) EXPECT_EQ(w0[i], before[i]) << "table 0 was not looked up";
  }
}

// Offsets may index into a larger CSR (a slice of a global batch): same result as the
// compacted bags, on the direct path and on the general one.
TEST(EmbeddingBagEdges, OffsetsMayStartInsideALargerCsr) {
  Fixture f;
  std::vector<TableSpec> tables{{30, 5}};
  for (const char* plan : {"0:r0", "0:0-10@r0+10-30@r0"}) {
    ShardedEmbedding a(f.comm, *f.backend, f.pool, tables, Pooling::mean, ShardingPlan::parse(plan, tables, 1), {}, 4);
    std::vector<std::int64_t> off_full{3, 5, 5, 8}, idx_full{29, 29, 29, 1, 12, 7, 7, 25};
    std::vector<std::int64_t> off{0, 2, 2, 5}, idx{1, 12, 7, 7, 25};
    std::vector<float> out_full(3 * 5), out(3 * 5);
    std::vector<Bags> full{{off_full, idx_full}}, compact{{off, idx}};
    a.forward(*f.stream, full, 3, out_full.data());
    a.forward(*f.stream, compact, 3, out.data());
    EXPECT_EQ(out_full, out);
    EXPECT_NE(out[0], 0.f);
  }
}

TEST(EmbeddingBagEdges, InitialWeightsFollowTheFormulaWhateverTheLayout) {
  Fixture f;
  std::vector<TableSpec> tables{{100, 4}, {37, 4}};
  ShardedEmbedding whole(f.comm, *f.backend, f.pool, tables, Pooling::sum,
                         ShardingPlan::automatic(tables, 1), {}, 77);
  ShardedEmbedding split(f.comm, *f.backend, f.pool, tables, Pooling::sum,
                         ShardingPlan::parse("0:0-13@r0+13-100@r0, 1:0-1@r0+1-37@r0", tables, 1), {}, 77);
  for (auto* emb : {&whole, &split})
    for (const auto& v : emb->local_shards())
      for (std::int64_t r = v.row_begin; r < v.row_end; ++r)
        for (int d = 0; d < 4; ++d) {
          const float w = v.weights[(r - v.row_begin) * 4 + d];
          ASSERT_EQ(w, initial_weight(77, v.table, tables[v.table].rows, 4, r, d));
          ASSERT_LE(std::abs(w), std::sqrt(1.0f / tables[v.table].rows));
        }
  // A table standing in for a larger one (TableSpec::init_rows) starts as that one would.
  std::vector<TableSpec> scaled{{100, 4, 40000}, {37, 4}};
  ShardedEmbedding stand_in(f.comm, *f.backend, f.pool, scaled, Pooling::sum, ShardingPlan::automatic(scaled, 1), {},
                            77);
  for (const auto& v : stand_in.local_shards())
    for (std::int64_t r = v.row_begin; r < v.row_end; ++r)
      for (int d = 0; d < 4; ++d) {
        const float w = v.weights[(r - v.row_begin) * 4 + d];
        ASSERT_EQ(w, initial_weight(77, v.table, v.table == 0 ? 40000 : 37, 4, r, d));
        ASSERT_LE(std::abs(w), std::sqrt(1.0f / (v.table == 0 ? 40000 : 37)));
      }
  // Different seeds give different weights; the values are not all equal.
  ShardedEmbedding other(f.comm, *f.backend, f.pool, tables, Pooling::sum,
                         ShardingPlan::automatic(tables, 1), {}, 78);
  EXPECT_NE(other.local_shards()[0].weights[0], whole.local_shards()[0].weights[0]);
  EXPECT_NE(whole.local_shards()[0].weights[0], whole.local_shards()[0].weights[1]);
}

TEST(EmbeddingBagEdges, OutOfRangeIndexIsADataErrorNamingTableIndexAndBag) {
  Fixture f;
  std::vector<TableSpec> tables{{10, 2}, {20, 2}};
  for (const char* plan : {"0:r0,1:r0", "0:r0,1:rowwise", "0:0-5@r0+5-10@r0,1:r0"}) {
    ShardedEmbedding emb(f.comm, *f.backend, f.pool, tables, Pooling::sum,
                         ShardingPlan::parse(plan, tables, 1), {}, 1);
    std::vector<std::int64_t> off0{0, 1, 2, 3}, idx0{1, 2, 3};
    for (std::int64_t bad : {20, -1, 1000000}) {
      std::vector<std::int64_t> off1{0, 2, 2, 4}, idx1{0, 19, 5, bad};
      std::vector<Bags> bags{{off0, idx0}, {off1, idx1}};
      std::vector<float> out(3 * 2 * 2);
      try {
        emb.forward(*f.stream, bags, 3, out.data());
        FAIL() << "no error for index " << bad << " with plan " << plan;
      } catch (const DataError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("table 1"), std::string::npos) << what;
        EXPECT_NE(what.find("index " + std::to_string(bad)), std::string::npos) << what;
        EXPECT_NE(what.find("bag 2"), std::string::npos) << what;
      }
      // A failed forward leaves nothing for backward.
      EXPECT_THROW(emb.backward(*f.stream, out.data()), Error);
    }
    // Broken offsets are data errors too.
    std::vector<std::int64_t> bad_off{0, 2, 1, 3}, idx{1, 1, 1}, neg_off{-1, 0, 1, 2}, long_off{0, 1, 2, 4};
    for (auto* o : {&neg_off, &long_off}) {
      std::vector<Bags> b{{off0, idx0}, {*o, idx}};
      std::vector<float> out(3 * 2 * 2);
      EXPECT_THROW(emb.forward(*f.stream, b, 3, out.data()), DataError);
    }
    std::vector<Bags> bags{{off0, idx0}, {bad_off, idx}};
    std::vector<float> out(3 * 2 * 2);
    EXPECT_THROW(emb.forward(*f.stream, bags, 3, out.data()), DataError);
    std::vector<Bags> one_table{{off0, idx0}};
    EXPECT_THROW(emb.forward(*f.stream, one_table, 3, out.data()), DataError);
    EXPECT_THROW(emb.forward(*f.stream, bags, 2, out.data()), DataError);  // offsets for 3 bags
  }
}

TEST(EmbeddingBagEdges, OutOfRangeIndexInOneHotBagsNamesTheFirstOne) {
  Fixture f;
  std::vector<TableSpec> tables{{10, 2}, {20, 2}};
  ShardedEmbedding emb(f.comm, *f.backend, f.pool, tables, Pooling::sum, ShardingPlan::automatic(tables, 1), {},
                       1);
  std::vector<std::int64_t> off{0, 1, 2, 3}, idx0{1, 2, 3}, good1{0, 19, 5};
  for (std::int64_t bad : {20, -1}) {
    std::vector<std::int64_t> idx1{0, 19, bad}, idx1_twice{bad, 19, bad};
    for (auto* idx : {&idx1, &idx1_twice}) {
      std::vector<Bags> bags{{off, idx0}, {off, *idx}};
      std::vector<float> out(3 * 2 * 2);
      try {
        emb.forward(*f.stream, bags, 3, out.data());
        FAIL() << "no error for index " << bad;
      } catch (const DataError& e) {
        const std::string what = e.what();
        const std::string bag = idx == &idx1 ? "bag 2" : "bag 0";
        EXPECT_NE(what.find("table 1: index " + std::to_string(bad)), std::string::npos) << what;
        EXPECT_NE(what.find(bag), std::string::npos) << what;
      }
      EXPECT_THROW(emb.backward(*f.stream, out.data()), Error);
    }
  }
  // The layer still works after the errors.
  std::vector<Bags> bags{{off, idx0}, {off, good1}};
  std::vector<float> out(3 * 2 * 2);
  emb.forward(*f.stream, bags, 3, out.data());
  emb.backward(*f.stream, out.data());
}

// A batch given as OneHotRows (int32, row-major, as datasets store it) gives the same bits as
// the same indices given as one CSR per table: on the one-rank CPU path that reads them in place
// (whole tables, one and two threads) and on the general path they are turned into CSRs for.
TEST(EmbeddingBagOneHotRows, SameBitsAsPerTableBags) {
  const std::vector<TableSpec> tables{{3000, 8}, {700, 8}, {5, 8}};
  const int T = 3, D = 8, B = 5000;
  for (bool rowwise : {false, true})
    for (int threads : {1, 2}) {
      SCOPED_TRACE((rowwise ? "row-wise shards, threads " : "whole tables, threads ") + std::to_string(threads));
      Case c{"", tables, B, 1, true, false, "adagrad", rowwise, threads};
      auto backend = device::make_backend(device::BackendKind::cpu, threads);
      device::MemoryPool pool(*backend, device::Tier::device, "test");
      auto stream = backend->create_stream();
      test::SelfCommunicator comm;
      SparseOptimizerConfig opt{SparseOptimizerKind::adagrad, 0.05f, 1e-8f, 0.1f};
      ShardedEmbedding bags_emb(comm, *backend, pool, tables, Pooling::sum, plan_for(c), opt, 7);
      ShardedEmbedding rows_emb(comm, *backend, pool, tables, Pooling::sum, plan_for(c), opt, 7);
      std::mt19937_64 rng(5);
      for (int step = 0; step < 3; ++step) {
        auto batch = test::random_batch(tables, B, 1, true, rng);
        std::vector<Bags> bags;
        for (auto& tb : batch) bags.push_back(tb.view());
        const auto packed = test::packed_one_hot(batch, B);
        std::vector<float> out_bags(std::size_t(B) * T * D), out_rows(out_bags.size(), -1.f);
        bags_emb.forward(*stream, bags, B, out_bags.data());
        rows_emb.forward(*stream, OneHotRows{packed, T}, B, out_rows.data());
        ASSERT_EQ(out_rows, out_bags) << "step " << step;
        auto grad = test::random_vector(out_bags.size(), rng);
        bags_emb.backward(*stream, grad.data());
        rows_emb.backward(*stream, grad.data());
      }
      const auto a = bags_emb.local_shards(), b = rows_emb.local_shards();
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t s = 0; s < a.size(); ++s) {
        const std::size_t n = std::size_t(a[s].row_end - a[s].row_begin) * D;
        ASSERT_TRUE(std::equal(a[s].weights, a[s].weights + n, b[s].weights)) << "shard " << s;
        ASSERT_TRUE(std::equal(a[s].state[0].second, a[s].state[0].second + a[s].state_counts[0], b[s].state[0].second));
      }
    }
}

TEST(EmbeddingBagOneHotRows, BadIndicesAndShapesAreDataErrors) {
  Fixture f;
  std::vector<TableSpec> tables{{10, 2}, {20, 2}};
  ShardedEmbedding emb(f.comm, *f.backend, f.pool, tables, Pooling::sum, ShardingPlan::automatic(tables, 1), {},
                       1);
  std::vector<float> out(3 * 2 * 2);
  for (std::int32_t bad : {20, -1}) {
    const std::vector<std::int32_t> rows{1, 0, 2, 19, 3, bad};  // bag 2 of table 1
    try {
      emb.forward(*f.stream, OneHotRows{rows, 2}, 3, out.data());
      FAIL() << "no error for index " << bad;
    } catch (const DataError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("table 1: index " + std::to_string(bad)), std::string::npos) << what;
      EXPECT_NE(what.find("bag 2"), std::string::npos) << what;
    }
  }
  const std::vector<std::int32_t> five{1, 0, 2, 19, 3};
  EXPECT_THROW(emb.forward(*f.stream, OneHotRows{five, 2}, 3, out.data()), DataError);
  EXPECT_THROW(emb.forward(*f.stream, OneHotRows{five, 1}, 5, out.data()), DataError);
  const std::vector<std::int32_t> good{1, 0, 2, 19, 3, 4};
  emb.forward(*f.stream, OneHotRows{good, 2}, 3, out.data());  // still works
  emb.backward(*f.stream, out.data());
}

TEST(EmbeddingBagEdges, BadConfigurationsAreConfigErrors) {
  Fixture f;
  std::vector<TableSpec> tables{{10, 4}, {10, 8}};
  EXPECT_THROW(ShardedEmbedding(f.comm, *f.backend, f.pool, tables, Pooling::sum,
                                ShardingPlan::automatic(tables, 1), {}, 1),
               ConfigError);  // dims differ
  std::vector<TableSpec> same{{10, 4}, {10, 4}};
  EXPECT_THROW(ShardedEmbedding(f.comm, *f.backend, f.pool, same, Pooling::sum,
                                ShardingPlan::automatic(same, 1), {SparseOptimizerKind::sgd, -1.f}, 1),
               ConfigError);  // a negative learning rate
  EXPECT_THROW(ShardedEmbedding(f.comm, *f.backend, f.pool, same, Pooling::sum,
                                ShardingPlan::automatic(same, 2), {}, 1),
               ConfigError);  // plan for 2 ranks, communicator of 1
  std::vector<TableSpec> other{{11, 4}, {10, 4}};
  EXPECT_THROW(ShardedEmbedding(f.comm, *f.backend, f.pool, same, Pooling::sum,
                                ShardingPlan::automatic(other, 1), {}, 1),
               ConfigError);  // plan for other tables
  SparseOptimizerConfig negative{SparseOptimizerKind::sgd, -1.f};
  EXPECT_THROW(check_sparse_optimizer(negative), ConfigError);
}

TEST(EmbeddingBagEdges, MemoryComesFromThePool) {
  Fixture f;
  std::vector<TableSpec> tables{{1000, 16}, {500, 16}};
  {
    ShardedEmbedding emb(f.comm, *f.backend, f.pool, tables, Pooling::sum,
                         ShardingPlan::automatic(tables, 1), {SparseOptimizerKind::rowwise_adagrad}, 1);
    EXPECT_GE(f.pool.current_bytes(), 1500u * 16 * 4 + 1500u * 4);
    EXPECT_EQ(emb.local_bytes(), 1500u * 16 * 4 + 1500u * 4);
  }
  EXPECT_EQ(f.pool.current_bytes(), 0u);
  f.pool.set_capacity(1000);
  EXPECT_THROW(ShardedEmbedding(f.comm, *f.backend, f.pool, tables, Pooling::sum,
                                ShardingPlan::automatic(tables, 1), {}, 1),
               OutOfMemoryError);
}

}  // namespace

namespace {

// One rank, one index per bag: the table-by-table path (whole tables) and the general path
// (every table split into row ranges) update the weights to the same bits, duplicate rows and
// the inlined SGD step for rows looked up once included; for 16-bit tables too, whose stochastic
// rounding takes each element's bits by its table row whichever path runs.
TEST(EmbeddingBagDeterminism, OneHotPathMatchesTheGeneralPathBitForBit) {
  const std::vector<TableSpec> tables{{300, 16}, {5000, 16}, {40, 16}};
  for (const TableStorage storage : {TableStorage{half::Storage::fp32, false}, TableStorage{half::Storage::fp16, true},
                                     TableStorage{half::Storage::bf16, true}, TableStorage{half::Storage::fp16, false}})
  for (const char* optimizer : {"sgd", "adagrad", "rowwise_adagrad"}) {
    SCOPED_TRACE(std::string(optimizer) + " " + half::to_string(storage.type) + (storage.stochastic ? " stochastic" : ""));
    std::vector<std::vector<float>> weights;  // per path: [table][row][dim]
    for (bool rowwise : {false, true}) {
      auto backend = device::make_backend(device::BackendKind::cpu, 1);
      device::MemoryPool pool(*backend, device::Tier::device, "test");
      auto stream = backend->create_stream();
      test::SelfCommunicator comm;
      const Case c{"", tables, 0, 1, true, false, optimizer, rowwise};
      ShardedEmbedding emb(comm, *backend, pool, tables, Pooling::sum, plan_for(c),
                           {test::sparse_kind(optimizer), 0.05f, 1e-8f, 0.1f}, 21, nullptr, {}, storage);
      std::mt19937_64 rng(8);
      for (int step = 0; step < 3; ++step) {
        auto batch = test::random_batch(tables, 700, 1, true, rng);
        std::vector<Bags> bags;
        for (auto& tb : batch) bags.push_back(tb.view());
        std::vector<float> out(700 * tables.size() * 16);
        emb.forward(*stream, bags, 700, out.data());
        auto grad = test::random_vector(out.size(), rng);
        emb.backward(*stream, grad.data());
      }
      std::vector<std::size_t> table_start{0};
      for (const auto& t : tables) table_start.push_back(table_start.back() + std::size_t(t.rows) * 16);
      std::vector<float> w(table_start.back());
      for (const auto& v : emb.local_shards())
        std::copy(v.weights, v.weights + (v.row_end - v.row_begin) * 16,
                  w.begin() + table_start[v.table] + std::size_t(v.row_begin) * 16);
      weights.push_back(w);
    }
    EXPECT_TRUE(weights[0] == weights[1]);
  }
}

// Same batches on 1 and 2 threads: bit-identical outputs and weights (duplicate rows are summed
// in batch order whatever the thread count).
TEST(EmbeddingBagDeterminism, ThreadCountDoesNotChangeAnyBit) {
  std::vector<TableSpec> tables{{20000, 12}, {9000, 12}};
  for (bool one_hot : {false, true}) {
  SCOPED_TRACE(one_hot ? "one-hot" : "multi-hot");
  std::vector<std::vector<float>> weights, outputs;
  for (int threads : {1, 2}) {
    auto backend = device::make_backend(device::BackendKind::cpu, threads);
    device::MemoryPool pool(*backend, device::Tier::device, "test");
    auto stream = backend->create_stream();
    test::SelfCommunicator comm;
    ShardedEmbedding emb(comm, *backend, pool, tables, Pooling::mean, ShardingPlan::automatic(tables, 1),
                         {SparseOptimizerKind::rowwise_adagrad, 0.1f}, 11);
    std::mt19937_64 rng(5);
    std::vector<float> all_out;
    for (int step = 0; step < 2; ++step) {
      auto batch = test::random_batch(tables, 6000, 4, one_hot, rng);
      std::vector<Bags> bags;
      for (auto& tb : batch) bags.push_back(tb.view());
      std::vector<float> out(6000 * 2 * 12);
      emb.forward(*stream, bags, 6000, out.data());
      all_out.insert(all_out.end(), out.begin(), out.end());
      auto grad = test::random_vector(out.size(), rng);
      emb.backward(*stream, grad.data());
    }
    outputs.push_back(all_out);
    std::vector<float> w;
    for (const auto& v : emb.local_shards())
      w.insert(w.end(), v.weights, v.weights + (v.row_end - v.row_begin) * v.dim);
    weights.push_back(w);
  }
  EXPECT_TRUE(outputs[0] == outputs[1]);
  EXPECT_TRUE(weights[0] == weights[1]);
  }
}

}  // namespace
