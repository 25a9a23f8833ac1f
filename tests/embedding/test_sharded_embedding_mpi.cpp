// The distributed lookup at 1, 2 and 4 ranks: every rank computes the unsharded reference
// (reference.hpp) on the whole global batch from the same seed, trains its contiguous slice of
// the batch through ShardedEmbedding, and checks its outputs and the rows it owns.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "comm/mpi/mpi_communicator.hpp"
#include "comm/staged/staged_communicator.hpp"
#include "core/error.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharded_embedding.hpp"
#include "mpi_plans.hpp"
#include "reference.hpp"
#include "self_communicator.hpp"

using namespace recmix;
using namespace recmix::embedding;
using recmix::embedding::test::ReferenceEmbedding;
using recmix::half::Storage;

namespace {

struct Case {
  std::string name;
  std::string plan;  // "auto", "rowwise" (every table), "mixed"
  bool one_hot;
  bool mean;
  std::string optimizer;
  Storage storage = Storage::fp32;  // 16-bit tables: checked against one rank bit for bit
  bool stochastic = true;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

const std::vector<TableSpec>& kTables = test::kMpiTables;
using test::make_plan;

class DistributedEmbedding : public testing::TestWithParam<Case> {};

TEST_P(DistributedEmbedding, EqualsTheUnshardedReference) {
  const Case& c = GetParam();
  auto comm = comm::make_mpi_world_communicator();
  const int rank = comm->rank(), world = comm->size();
  auto backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  SparseOptimizerConfig opt{test::sparse_kind(c.optimizer), 0.1f, 1e-8f, c.optimizer == "sgd" ? 0.f : 0.01f};
  const std::uint64_t seed = 2024;
  const TableStorage storage{c.storage, c.stochastic};
  const bool half_tables = c.storage != Storage::fp32;
  ShardedEmbedding emb(*comm, *backend, pool, kTables, c.mean ? Pooling::mean : Pooling::sum,
                       make_plan(c.plan, world), opt, seed, nullptr, {}, storage);
  ReferenceEmbedding ref(kTables, c.mean, c.optimizer, opt.lr, opt.eps, opt.initial_accumulator, seed);
  // The same layer on one rank (its own one-rank communicator) over the whole global batch.
  test::SelfCommunicator self;
  ShardedEmbedding one_rank(self, *backend, pool, kTables, c.mean ? Pooling::mean : Pooling::sum,
                            ShardingPlan::automatic(kTables, 1), opt, seed, nullptr, {}, storage);
  // 16-bit tables differ from the fp32 reference by their roundings: at most a unit in the last
  // place a rounding (bf16: 2^-8 relative, 2^-9 at weights near 0.3), over the initial rounding and
  // 4 updates of the up to 4 rows of a bag; checked loosely (the bits are checked against one rank).
  const double rtol = half_tables ? 0.03 : 1e-5, atol = half_tables ? 0.02 : 1e-6;
  const int T = static_cast<int>(kTables.size()), D = kTables[0].dim;
  std::mt19937_64 rng(7);  // same stream on every rank: the same global batches
  const int global_batches[] = {23, 8, 1, 16};  // uneven slices, and a rank with an empty slice
  for (int step = 0; step < 4; ++step) {
    const int G = global_batches[step];
    auto batch = test::random_batch(kTables, G, 4, c.one_hot, rng);
    auto grad = test::random_vector(std::size_t(G) * T * D, rng);
    const int begin = G * rank / world, end = G * (rank + 1) / world, B = end - begin;
    std::vector<test::TableBatch> mine;
    std::vector<Bags> bags;
    for (auto& tb : batch) mine.push_back(tb.slice(begin, end));
    for (auto& tb : mine) bags.push_back(tb.view());
    std::vector<float> out(std::size_t(B) * T * D + 1, -3.f);
    emb.set_step(step);
    one_rank.set_step(step);
    emb.forward(*stream, bags, B, out.data());
    auto expected = ref.forward(batch);
    for (std::size_t i = 0; i < std::size_t(B) * T * D; ++i)
      ASSERT_TRUE(test::close(out[i], expected[std::size_t(begin) * T * D + i], rtol, atol))
          << "rank " << rank << " step " << step << " element " << i << ": " << out[i] << " vs "
          << expected[std::size_t(begin) * T * D + i];
    emb.backward(*stream, grad.data() + std::size_t(begin) * T * D);
    ref.backward(batch, grad);
    std::vector<Bags> all_bags;
    for (auto& tb : batch) all_bags.push_back(tb.view());
    std::vector<float> one_out(std::size_t(G) * T * D);
    one_rank.forward(*stream, all_bags, G, one_out.data());
    for (std::size_t i = 0; i < std::size_t(B) * T * D; ++i)
      ASSERT_TRUE(test::close(out[i], one_out[std::size_t(begin) * T * D + i], 1e-5, 1e-7))
          << "rank " << rank << " step " << step << " element " << i << " differs from one rank";
    one_rank.backward(*stream, grad.data());
    if (world > 1 && B > 0) {
      EXPECT_GT(emb.bytes_sent_last_step(), 0u);
    }
    if (world == 1) {
      EXPECT_EQ(emb.bytes_sent_last_step(), 0u);
    }
  }
  // N ranks equal one rank: every owned row against the one-rank layer's (1e-5 relative).
  const auto whole = one_rank.local_shards();
  for (const auto& v : emb.local_shards()) {
    const LocalShardView* w = nullptr;
    for (const auto& x : whole)
      if (x.table == v.table) w = &x;
    ASSERT_NE(w, nullptr);
    for (std::int64_t i = 0; i < (v.row_end - v.row_begin) * D && half_tables; ++i)  // the rounding's key is the table row
      ASSERT_EQ(half::bits_of(v.weights[i]), half::bits_of(w->weights[v.row_begin * D + i]))
          << "rank " << rank << " table " << v.table << " element " << i << ": " << v.weights[i] << " on " << world
          << " rank(s), " << w->weights[v.row_begin * D + i] << " on one";
    for (std::int64_t i = 0; i < (v.row_end - v.row_begin) * D; ++i)
      ASSERT_TRUE(test::close(v.weights[i], w->weights[v.row_begin * D + i], 1e-5, 1e-7))
          << "rank " << rank << " table " << v.table << " element " << i << " differs from one rank";
  }
  for (const auto& v : emb.local_shards()) {
    for (std::int64_t r = v.row_begin; r < v.row_end; ++r)
      for (int d = 0; d < D; ++d)
        ASSERT_TRUE(test::close(v.weights[(r - v.row_begin) * D + d], ref.weight(v.table, r, d), rtol, atol))
            << "rank " << rank << " table " << v.table << " row " << r << " col " << d;
    if (c.optimizer == "sgd") continue;
    const std::size_t per_row = c.optimizer == "adagrad" ? D : 1;
    for (std::size_t i = 0; i < v.state_counts[0]; ++i)
      ASSERT_TRUE(test::close(v.state[0].second[i], ref.state(v.table)[v.row_begin * per_row + i]))
          << "rank " << rank << " state of table " << v.table << " element " << i;
  }
  // Together the ranks hold every row exactly once.
  std::int64_t mine_rows = 0, all_rows = 0, expected_rows = 0;
  for (const auto& v : emb.local_shards()) mine_rows += v.row_end - v.row_begin;
  comm->all_reduce_sum(&mine_rows, &all_rows, 1, comm::DataType::i64);
  for (auto& t : kTables) expected_rows += t.rows;
  EXPECT_EQ(all_rows, expected_rows);
}

INSTANTIATE_TEST_SUITE_P(
    Plans, DistributedEmbedding,
    testing::Values(Case{"tablewise_onehot_sgd", "auto", true, false, "sgd"},
                    Case{"tablewise_multihot_rowwise_adagrad", "auto", false, false, "rowwise_adagrad"},
                    Case{"rowwise_onehot_rowwise_adagrad", "rowwise", true, false, "rowwise_adagrad"},
                    Case{"rowwise_multihot_sgd", "rowwise", false, false, "sgd"},
                    Case{"mixed_multihot_sgd", "mixed", false, false, "sgd"},
                    Case{"mixed_multihot_mean_rowwise_adagrad", "mixed", false, true, "rowwise_adagrad"},
                    Case{"mixed_onehot_adagrad", "mixed", true, false, "adagrad"},
                    Case{"mixed_multihot_bf16_stochastic_sgd", "mixed", false, false, "sgd", Storage::bf16, true},
                    Case{"rowwise_onehot_fp16_stochastic_rowwise_adagrad", "rowwise", true, false, "rowwise_adagrad",
                         Storage::fp16, true},
                    Case{"mixed_multihot_mean_bf16_nearest_adagrad", "mixed", false, true, "adagrad", Storage::bf16,
                         false},
                    Case{"tablewise_onehot_fp16_stochastic_sgd", "auto", true, false, "sgd", Storage::fp16, true}),
    [](const testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(DistributedEmbeddingErrors, ABadIndexOnOneRankFailsEveryRankWithoutHanging) {
  auto comm = comm::make_mpi_world_communicator();
  const int rank = comm->rank(), world = comm->size();
  auto backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  ShardedEmbedding emb(*comm, *backend, pool, kTables, Pooling::sum, make_plan("mixed", world), {}, 3);
  std::vector<std::vector<std::int64_t>> offsets(kTables.size(), {0, 1, 2}), indices(kTables.size(), {0, 1});
  const int bad_rank = world - 1;
  if (rank == bad_rank) indices[2][1] = 200;  // table 2 has rows [0, 200)
  std::vector<Bags> bags;
  for (std::size_t t = 0; t < kTables.size(); ++t) bags.push_back({offsets[t], indices[t]});
  std::vector<float> out(2 * kTables.size() * 6);
  try {
    emb.forward(*stream, bags, 2, out.data());
    FAIL() << "rank " << rank << " got no error";
  } catch (const DataError& e) {
    std::string what = e.what();
    if (rank == bad_rank) {
      EXPECT_NE(what.find("table 2"), std::string::npos) << what;
      EXPECT_NE(what.find("index 200"), std::string::npos) << what;
      EXPECT_NE(what.find("bag 1"), std::string::npos) << what;
    } else {
      EXPECT_NE(what.find("rank " + std::to_string(bad_rank)), std::string::npos) << what;
    }
  }
  // Every rank can go on with good batches afterwards.
  if (rank == bad_rank) indices[2][1] = 199;
  bags.clear();
  for (std::size_t t = 0; t < kTables.size(); ++t) bags.push_back({offsets[t], indices[t]});
  EXPECT_NO_THROW(emb.forward(*stream, bags, 2, out.data()));
  std::vector<float> grad(out.size(), 0.5f);
  EXPECT_NO_THROW(emb.backward(*stream, grad.data()));
}

// The split API (start, other work, finish) gives exactly what forward()/backward() give.
TEST(DistributedEmbeddingSplit, StartAndFinishEqualTheBlockingCalls) {
  auto comm = comm::make_mpi_world_communicator();
  const int rank = comm->rank(), world = comm->size();
  auto backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  SparseOptimizerConfig opt{SparseOptimizerKind::rowwise_adagrad, 0.1f};
  ShardedEmbedding blocking(*comm, *backend, pool, kTables, Pooling::mean, make_plan("mixed", world), opt, 5);
  ShardedEmbedding split(*comm, *backend, pool, kTables, Pooling::mean, make_plan("mixed", world), opt, 5);
  const int T = static_cast<int>(kTables.size()), D = kTables[0].dim;
  std::mt19937_64 rng(17 + rank);
  for (int step = 0; step < 3; ++step) {
    const int B = 5 + rank;
    auto batch = test::random_batch(kTables, B, 3, false, rng);
    std::vector<Bags> bags;
    for (auto& tb : batch) bags.push_back(tb.view());
    auto grad = test::random_vector(std::size_t(B) * T * D, rng);
    std::vector<float> a(grad.size()), b(grad.size(), -1.f);
    blocking.forward(*stream, bags, B, a.data());
    split.forward_start(*stream, bags, B, b.data());
    double busy = 0;  // stands for the bottom MLP
    for (int i = 0; i < 1000; ++i) busy += i * 0.5;
    EXPECT_GT(busy, 0);
    split.forward_finish(*stream);
    EXPECT_EQ(a, b) << "rank " << rank << " step " << step;
    blocking.backward(*stream, grad.data());
    split.backward_start(*stream, grad.data());
    split.backward_finish(*stream);
  }
  auto x = blocking.local_shards(), y = split.local_shards();
  ASSERT_EQ(x.size(), y.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::int64_t k = 0; k < (x[i].row_end - x[i].row_begin) * D; ++k)
      ASSERT_EQ(x[i].weights[k], y[i].weights[k]) << "rank " << rank;
  // Out of order calls are errors, not hangs.
  EXPECT_THROW(split.forward_finish(*stream), Error);
  EXPECT_THROW(split.backward_finish(*stream), Error);
  EXPECT_THROW(split.backward_start(*stream, nullptr), Error);
}

// The device path under the strict emulator, its all-to-alls on a stream of their own (posted
// after an event on the compute stream, waited for by one) and on the compute stream: the same
// outputs and rows, at every rank count.
TEST(DistributedEmbeddingExchangeStream, OwnStreamEqualsTheComputeStream) {
  auto comm = comm::make_mpi_world_communicator();
  const int rank = comm->rank(), world = comm->size();
  auto backend = device::make_backend(device::BackendKind::cpu_strict, 1);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  auto dcomm = comm::make_staged_communicator(*comm, *backend);
  SparseOptimizerConfig opt{SparseOptimizerKind::adagrad, 0.1f};
  ShardedEmbedding own(*comm, *backend, pool, kTables, Pooling::sum, make_plan("mixed", world), opt, 5, dcomm.get());
  ShardedEmbedding shared(*comm, *backend, pool, kTables, Pooling::sum, make_plan("mixed", world), opt, 5, dcomm.get());
  const int T = static_cast<int>(kTables.size()), D = kTables[0].dim;
  std::mt19937_64 rng(23 + rank);
  struct Restore {
    ~Restore() { set_exchange_stream_enabled(true); }
  } restore;
  for (int step = 0; step < 3; ++step) {
    const int B = 4 + rank;
    auto batch = test::random_batch(kTables, B, 3, false, rng);
    std::vector<Bags> bags;
    for (auto& tb : batch) bags.push_back(tb.view());
    const std::size_t n = std::size_t(B) * T * D;
    auto grad = test::random_vector(n, rng);
    auto* out = static_cast<float*>(backend->allocate(2 * n * sizeof(float), device::Tier::device));
    auto* dgrad = static_cast<float*>(backend->allocate(n * sizeof(float), device::Tier::device));
    backend->copy(dgrad, grad.data(), n * sizeof(float), *stream);
    std::vector<float> a(n), b(n);
    for (bool on : {true, false}) {
      set_exchange_stream_enabled(on);
      ShardedEmbedding& layer = on ? own : shared;
      float* o = out + (on ? 0 : n);
      layer.forward_start(*stream, bags, B, o);
      layer.forward_finish(*stream);
      backend->copy((on ? a : b).data(), o, n * sizeof(float), *stream);
      layer.backward_start(*stream, dgrad);
      layer.backward_finish(*stream);
    }
    stream->synchronize();
    EXPECT_EQ(a, b) << "rank " << rank << " step " << step;
    backend->deallocate(out, device::Tier::device);
    backend->deallocate(dgrad, device::Tier::device);
  }
  auto x = own.local_shards(), y = shared.local_shards();
  ASSERT_EQ(x.size(), y.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t count = std::size_t(x[i].row_end - x[i].row_begin) * D;
    std::vector<float> wx(count), wy(count);  // device memory: read through copies
    backend->copy(wx.data(), x[i].weights, count * sizeof(float), *stream);
    backend->copy(wy.data(), y[i].weights, count * sizeof(float), *stream);
    stream->synchronize();
    ASSERT_EQ(wx, wy) << "rank " << rank << ", shard " << i;
  }
}

// Traffic accounting worked out by hand for 2 ranks: table rows [0, 5) on rank 0, [5, 10) on
// rank 1, three one-hot bags per rank. Rank 0 looks up {1, 7, 8}, rank 1 {2, 9, 3}.
// Each rank sends: its message size (8 bytes); to its peer [batch, 3 lengths, 2 rows] (6 x 8);
// the 2 pooled vectors of the peer's bags that fall in its rows (2 x 4 floats); the gradients
// of the 2 vectors the peer pooled for it (2 x 4 floats): 8 + 48 + 32 + 32 = 120 bytes.
// Bags without rows in a shard move no vector either way.
TEST(DistributedEmbeddingTraffic, RowWiseTrafficWorkedOutByHand) {
  auto comm = comm::make_mpi_world_communicator();
  if (comm->size() != 2) GTEST_SKIP() << "worked out for 2 ranks";
  auto backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  std::vector<TableSpec> tables{{10, 4}};
  ShardedEmbedding emb(*comm, *backend, pool, tables, Pooling::sum,
                       ShardingPlan::parse("0:rowwise", tables, 2), {SparseOptimizerKind::sgd, 1.0f}, 9);
  std::vector<std::int64_t> offsets{0, 1, 2, 3};
  std::vector<std::int64_t> indices = comm->rank() == 0 ? std::vector<std::int64_t>{1, 7, 8}
                                                        : std::vector<std::int64_t>{2, 9, 3};
  std::vector<Bags> bags{{offsets, indices}};
  std::vector<float> out(3 * 4), grad(3 * 4, 1.f);
  emb.forward(*stream, bags, 3, out.data());
  for (int b = 0; b < 3; ++b)
    for (int d = 0; d < 4; ++d)
      EXPECT_EQ(out[b * 4 + d], initial_weight(9, 0, 10, 4, indices[b], d));
  emb.backward(*stream, grad.data());
  EXPECT_EQ(emb.bytes_sent_last_step(), 120u);
}

}  // namespace
