// Tiered embedding = untiered embedding, bit for bit, at 1, 2 and 4 ranks: every rank trains the
// same global batches through an untiered layer and a tiered one (hot fraction, device budget,
// online LFU with re-ranks; cold updates on the device and on the host; fp32 tables, and fp16 and
// bf16 tables rounded stochastically, whose random bits follow a row wherever it lies) and
// compares every output, then every owned row and its optimizer state through local_shards(), and
// again after a restore through the views.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/mpi/mpi_communicator.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharded_embedding.hpp"
#include "mpi_plans.hpp"
#include "reference.hpp"

using namespace recmix;
using namespace recmix::embedding;

namespace {

struct Case {
  std::string name;
  std::string plan;  // "auto" (whole tables), "rowwise" (every table split by rows), "mixed"
  std::string optimizer;
  std::string tiers;  // "fraction", "budget", "lfu" (re-ranked every 2 steps), "host" (cold_update host)
  bool mean = false;
  bool one_hot = false;
  half::Storage storage = half::Storage::fp32;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

const std::vector<TableSpec>& kTables = test::kMpiTables;
using test::make_plan;

TierOptions tier_options(const std::string& kind, int max_global) {
  TierOptions o;
  o.global_batch = max_global;
  o.bag_rows = 1;  // multi-hot batches overflow this: the staging slots grow
  if (kind == "budget") {
    o.device_budget = 5 << 10;  // above the staging slots, below all rows: a real split
  } else {
    o.hot_fraction = 0.25;
  }
  if (kind == "lfu") {
    o.hot_set = HotSet::lfu;
    o.rerank_interval = 2;
  }
  if (kind == "host") o.cold_update = ColdUpdate::host;
  // Counts that rank the high rows first, so the hot set is not the rows the batches favour.
  for (const auto& t : kTables) {
    std::vector<std::int64_t> c(std::size_t(t.rows));
    for (std::int64_t r = 0; r < t.rows; ++r) c[std::size_t(r)] = r;
    o.table_counts.push_back(std::move(c));
  }
  return o;
}

// One global batch of bags and its gradient, and the slice of it this rank looks up.
struct Step {
  std::vector<test::TableBatch> mine;
  std::vector<Bags> bags;   // views of mine
  std::vector<float> grad;  // the whole global batch's
  int B = 0, begin = 0, T = 0, D = 0;
  const float* my_grad() const { return grad.data() + std::size_t(begin) * T * D; }
};

void make_step(Step& st, int global_batch, bool one_hot, int rank, int world, std::mt19937_64& rng) {
  st.T = static_cast<int>(kTables.size());
  st.D = kTables[0].dim;
  auto batch = test::random_batch(kTables, global_batch, 3, one_hot, rng);
  st.grad = test::random_vector(std::size_t(global_batch) * st.T * st.D, rng);
  st.begin = global_batch * rank / world;
  st.B = global_batch * (rank + 1) / world - st.begin;
  for (auto& tb : batch) st.mine.push_back(tb.slice(st.begin, st.begin + st.B));
  for (auto& tb : st.mine) st.bags.push_back(tb.view());
}

void expect_same_rows(ShardedEmbedding& a, ShardedEmbedding& b, const std::string& where) {
  const auto x = a.local_shards(), y = b.local_shards();
  ASSERT_EQ(x.size(), y.size());
  for (std::size_t k = 0; k < x.size(); ++k) {
    const std::size_t n = std::size_t(x[k].row_end - x[k].row_begin) * std::size_t(x[k].dim);
    ASSERT_EQ(std::memcmp(x[k].weights, y[k].weights, n * sizeof(float)), 0) << where << ": shard " << k << " weights";
    ASSERT_EQ(x[k].state.size(), y[k].state.size());
    for (std::size_t i = 0; i < x[k].state.size(); ++i)
      ASSERT_EQ(std::memcmp(x[k].state[i].second, y[k].state[i].second, x[k].state_counts[i] * sizeof(float)), 0)
          << where << ": shard " << k << " " << x[k].state[i].first;
  }
}

class TieredEmbedding : public testing::TestWithParam<Case> {};

TEST_P(TieredEmbedding, EqualsUntieredBitForBit) {
  const Case& c = GetParam();
  auto comm = comm::make_mpi_world_communicator();
  const int rank = comm->rank(), world = comm->size();
  auto backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool(*backend, device::Tier::device, "untiered"), tier_pool(*backend, device::Tier::device, "tiered");
  device::MemoryPool host_pool(*backend, device::Tier::host, "tiered host");
  auto stream = backend->create_stream();
  SparseOptimizerConfig opt{test::sparse_kind(c.optimizer), 0.1f, 1e-8f, c.optimizer == "sgd" ? 0.f : 0.01f};
  const std::uint64_t seed = 99;
  const Pooling pooling = c.mean ? Pooling::mean : Pooling::sum;
  const int global_batches[] = {23, 8, 1, 16, 30, 5, 12};
  TierOptions tiers = tier_options(c.tiers, 30);
  tiers.host_pool = &host_pool;
  const TableStorage storage{c.storage, true};
  ShardedEmbedding plain(*comm, *backend, pool, kTables, pooling, make_plan(c.plan, world), opt, seed, nullptr, {},
                         storage);
  ShardedEmbedding tiered(*comm, *backend, tier_pool, kTables, pooling, make_plan(c.plan, world), opt, seed, nullptr,
                          tiers, storage);
  ASSERT_TRUE(tiered.tiered());
  EXPECT_LT(tiered.local_bytes(), plain.local_bytes() + 1) << "the device tier holds hot rows and staging only";
  expect_same_rows(plain, tiered, "at start");
  const int T = static_cast<int>(kTables.size()), D = kTables[0].dim;
  std::mt19937_64 rng(11);
  std::vector<Step> steps(7);
  for (int step = 0; step < 7; ++step) make_step(steps[step], global_batches[step], c.one_hot, rank, world, rng);
  auto eval_batch = test::random_batch(kTables, 6, 3, c.one_hot, rng);
  TierStats total;
  for (int step = 0; step < 7; ++step) {
    Step& st = steps[step];
    const int B = st.B;
    std::vector<float> a(std::size_t(B) * T * D + 1, -1.f), b(a.size(), -2.f);
    plain.forward(*stream, st.bags, B, a.data());
    // The tiered layer looks one batch ahead (from the second step on, the batch it prefetched).
    if (step == 0)
      tiered.forward_start(*stream, st.bags, B, b.data());
    else
      tiered.forward_start_prefetched(*stream, st.bags, B, b.data());
    if (step + 1 < 7) tiered.prefetch(steps[step + 1].bags, steps[step + 1].B);
    tiered.forward_finish(*stream);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), std::size_t(B) * T * D * sizeof(float)), 0)
        << "rank " << rank << " step " << step << ": pooled vectors differ";
    plain.backward(*stream, st.my_grad());
    tiered.backward(*stream, st.my_grad());
    if (step == 2) {  // an evaluation between a prefetch and its step: both layers look up, no update
      const int begin = 6 * rank / world, end = 6 * (rank + 1) / world, n = end - begin;
      std::vector<test::TableBatch> mine;
      std::vector<Bags> bags;
      for (auto& tb : eval_batch) mine.push_back(tb.slice(begin, end));
      for (auto& tb : mine) bags.push_back(tb.view());
      std::vector<float> x(std::size_t(n) * T * D + 1, -1.f), y(x.size(), -2.f);
      plain.forward(*stream, bags, n, x.data());
      tiered.forward(*stream, bags, n, y.data());
      ASSERT_EQ(std::memcmp(x.data(), y.data(), std::size_t(n) * T * D * sizeof(float)), 0) << "evaluation";
    }
    total.add(tiered.take_tier_stats());
    if (step == 4) expect_same_rows(plain, tiered, "after step 5 (a flush mid-run, a lookahead pending)");
  }
  if (total.rows_staged > 0) {
    EXPECT_GT(total.rows_ahead, 0) << "the lookahead never staged a row";
  }
  expect_same_rows(plain, tiered, "after 7 steps");
  EXPECT_EQ(total.steps, 8);  // 7 steps and the evaluation
  EXPECT_GT(total.lookups, 0);
  EXPECT_LE(total.hot_hits, total.lookups);
  if (c.tiers == "lfu") {
    EXPECT_EQ(total.reranks, 3);  // every second stage: before the 3rd, 5th and 7th of 8
    EXPECT_EQ(total.rows_promoted, total.rows_demoted);
  }

  // A restore through the views: the untiered layer's rows written into the tiered one (after
  // the tiered one trained on alone), then both train on: still equal.
  for (int step = 0; step < 2; ++step) {
    Step st;
    make_step(st, 9, c.one_hot, rank, world, rng);
    std::vector<float> out(std::size_t(st.B) * T * D + 1);
    tiered.forward(*stream, st.bags, st.B, out.data());
    tiered.backward(*stream, st.my_grad());
  }
  {
    auto from = plain.local_shards(), to = tiered.local_shards();
    for (std::size_t k = 0; k < from.size(); ++k) {
      ASSERT_TRUE(to[k].host_memory);
      std::memcpy(to[k].weights, from[k].weights, std::size_t(from[k].row_end - from[k].row_begin) * D * sizeof(float));
      for (std::size_t i = 0; i < from[k].state.size(); ++i)
        std::memcpy(to[k].state[i].second, from[k].state[i].second, from[k].state_counts[i] * sizeof(float));
    }
    tiered.shards_written();
  }
  for (int step = 0; step < 3; ++step) {
    Step st;
    make_step(st, 17, c.one_hot, rank, world, rng);
    const int B = st.B;
    std::vector<float> a(std::size_t(B) * T * D + 1, -1.f), b(a.size(), -2.f);
    plain.forward(*stream, st.bags, B, a.data());
    tiered.forward(*stream, st.bags, B, b.data());
    ASSERT_EQ(std::memcmp(a.data(), b.data(), std::size_t(B) * T * D * sizeof(float)), 0)
        << "rank " << rank << " step " << step << " after the restore";
    plain.backward(*stream, st.my_grad());
    tiered.backward(*stream, st.my_grad());
  }
  expect_same_rows(plain, tiered, "after the restore and 3 more steps");
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* plan : {"auto", "rowwise", "mixed"})
    for (const char* optimizer : {"sgd", "adagrad", "rowwise_adagrad"})
      for (const char* tiers : {"fraction", "budget", "lfu", "host"}) {
        Case c{std::string(plan) + "_" + optimizer + "_" + tiers, plan, optimizer, tiers};
        c.mean = std::string(tiers) == "lfu";
        c.one_hot = std::string(tiers) == "budget";
        out.push_back(c);
      }
  // 16-bit tables: every plan and tier kind, each optimizer, both types.
  const struct {
    const char *plan, *optimizer, *tiers;
    half::Storage storage;
  } halves[] = {{"auto", "sgd", "fraction", half::Storage::fp16},       {"auto", "adagrad", "budget", half::Storage::bf16},
                {"rowwise", "rowwise_adagrad", "lfu", half::Storage::bf16}, {"rowwise", "sgd", "host", half::Storage::fp16},
                {"mixed", "adagrad", "host", half::Storage::bf16},      {"mixed", "rowwise_adagrad", "fraction", half::Storage::fp16}};
  for (const auto& h : halves) {
    Case c{std::string(h.plan) + "_" + h.optimizer + "_" + h.tiers + "_" + half::to_string(h.storage), h.plan,
           h.optimizer, h.tiers};
    c.mean = std::string(h.tiers) == "lfu";
    c.one_hot = std::string(h.tiers) == "budget";
    c.storage = h.storage;
    out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Tiers, TieredEmbedding, testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
