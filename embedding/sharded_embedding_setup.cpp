// ShardedEmbedding's set-up: the tables checked against the sharding plan, the owned shards laid
// out in the local row space, and the weights and optimizer state made and initialised (fp32 or
// 16-bit tables, or the host and device tiers of tiered ones). The per-step calls are in
// sharded_embedding.cpp; the layer's state in sharded_embedding_impl.hpp.
#include "embedding/sharded_embedding.hpp"

#include <cstdint>
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/half.hpp"
#include "core/huge_pages.hpp"
#include "embedding/sharded_embedding_impl.hpp"

namespace recmix::embedding {

ShardedEmbedding::ShardedEmbedding(comm::Communicator& comm, device::Backend& backend,
                                   device::MemoryPool& pool, std::vector<TableSpec> tables,
                                   Pooling pooling, ShardingPlan plan, SparseOptimizerConfig optimizer,
                                   std::uint64_t seed, comm::Communicator* device_comm, TierOptions tiering,
                                   TableStorage storage)
    : impl_(std::make_unique<Impl>(comm, device_comm ? *device_comm : comm, backend, pool, std::move(tables), pooling, std::move(plan),
                                   std::move(optimizer), seed)) {
  Impl& m = *impl_;
  RECMIX_REQUIRE(!m.tables.empty(), ConfigError, "embedding: the model has no tables");
  m.num_tables = static_cast<int>(m.tables.size());
  m.dim = m.tables[0].dim;
  for (int t = 0; t < m.num_tables; ++t) {
    RECMIX_REQUIRE(m.tables[t].dim == m.dim, ConfigError,
                   fmt::format("embedding: table {} has dim {}, table 0 has {} (all tables must share "
                               "one dim)", t, m.tables[t].dim, m.dim));
    RECMIX_REQUIRE(m.tables[t].rows > 0, ConfigError,
                   fmt::format("embedding: table {} has {} rows", t, m.tables[t].rows));
  }
  RECMIX_REQUIRE(m.dim > 0, ConfigError, "embedding: dim must be > 0");
  m.rank = comm.rank();
  m.world = comm.size();
  RECMIX_REQUIRE(m.plan.world_size() == m.world, ConfigError,
                 fmt::format("embedding: the sharding plan is for {} ranks, the communicator has {}",
                             m.plan.world_size(), m.world));
  RECMIX_REQUIRE(m.plan.tables().size() == m.tables.size(), ConfigError,
                 fmt::format("embedding: the sharding plan has {} tables, the model {}",
                             m.plan.tables().size(), m.tables.size()));
  for (int t = 0; t < m.num_tables; ++t)
    RECMIX_REQUIRE(m.plan.tables()[t].rows == m.tables[t].rows && m.plan.tables()[t].dim == m.dim,
                   ConfigError, fmt::format("embedding: the sharding plan's table {} differs from the model's", t));
  m.on_host = device::device_memory_is_host(backend);

  const auto& shards = m.plan.shards();
  m.shard_base.assign(shards.size(), -1);
  m.rank_shards.resize(m.world);
  for (int q = 0; q < m.world; ++q) m.rank_shards[q] = m.plan.shards_of_rank(q);
  m.owned = m.rank_shards[m.rank];
  for (int s : m.owned) {
    m.shard_base[s] = m.local_rows;
    m.local_rows += shards[s].row_end - shards[s].row_begin;
  }
  m.table_shards.resize(m.num_tables);
  m.local_only = m.world == 1;
  for (int t = 0; t < m.num_tables; ++t) {
    m.table_shards[t] = m.plan.shards_of_table(t);
    if (m.table_shards[t].size() != 1) m.local_only = false;
  }
  m.shard_lengths.resize(shards.size());
  m.shard_indices.resize(shards.size());
  m.next.shard_lengths.resize(shards.size());
  m.next.shard_indices.resize(shards.size());

  const std::size_t per_row = state_per_row(m.kind, m.dim);
  m.storage = storage;
  if (tiering.enabled()) {
    if (!tiering.host_pool) {
      m.own_host_pool = std::make_unique<device::MemoryPool>(backend, device::Tier::host, "embedding host tier");
      tiering.host_pool = m.own_host_pool.get();
    }
    std::vector<TierShard> tier_shards;
    for (int s : m.owned)
      tier_shards.push_back({shards[s].table, shards[s].row_begin, shards[s].row_end, m.shard_base[s]});
    // The host tier starts as the untiered tables would: the same functors, run here on the host.
    auto init = [&](std::size_t k, void* w, float* st) {
      const Shard& sh = shards[m.owned[k]];
      const kernels::InitShard f{static_cast<float*>(w), seed, sh.table, m.tables[sh.table].bound_rows(), m.dim, sh.row_begin};
      const kernels::InitShardHalf h{{nullptr, seed, sh.table, m.tables[sh.table].bound_rows(), m.dim, sh.row_begin},
                                     static_cast<std::uint16_t*>(w), m.storage.type};
      const std::int64_t n = (sh.row_end - sh.row_begin) * m.dim;
      for (std::int64_t i = 0; i < n; ++i) m.half_tables() ? h(i) : f(i);
      const kernels::Fill g{st, m.opt.initial_accumulator};
      if (st)
        for (std::int64_t i = 0, ns = (sh.row_end - sh.row_begin) * std::int64_t(per_row); i < ns; ++i) g(i);
    };
    TierWeights weights{&m.weights};
    if (m.half_tables()) {
      weights = {nullptr, &m.half_weights};
      auto stream = backend.create_stream();
      m.init_shard_rows(*stream);
    }
    m.tiers = std::make_unique<TieredRows>(backend, pool, std::move(tier_shards), m.dim, per_row, std::move(tiering),
                                           m.rank, m.on_host, weights, m.state, init);
    return;
  }
  if (!m.half_tables())
    m.weights = device::Buffer<float>(pool, std::size_t(m.local_rows) * m.dim,
                                      fmt::format("embedding weights (rank {})", m.rank));
  if (per_row > 0)
    m.state = device::Buffer<float>(pool, std::size_t(m.local_rows) * per_row,
                                    fmt::format("embedding optimizer state (rank {})", m.rank));
  if (m.on_host) {  // read at random rows: 2 MiB pages make the Kaggle-sized forward about 1.5x faster here
    advise_huge_pages(m.weights.data(), m.weights.bytes());
    advise_huge_pages(m.state.data(), m.state.bytes());
  }
  auto stream = backend.create_stream();
  if (m.half_tables()) {
    m.init_half_tables(*stream);
  } else {
    for (int s : m.owned) {
      const Shard& sh = shards[s];
      kernels::InitShard f{m.weights.data() + m.shard_base[s] * m.dim, seed, sh.table,
                           m.tables[sh.table].bound_rows(), m.dim, sh.row_begin};
      launch(backend, *stream, (sh.row_end - sh.row_begin) * m.dim, f);
    }
  }
  if (per_row > 0)
    launch(backend, *stream, static_cast<std::int64_t>(m.state.size()),
           kernels::Fill{m.state.data(), m.opt.initial_accumulator});
  stream->synchronize();
}

// 16-bit tables: the weights, rounded to nearest from their fp32 initial values, and the owned
// shards' layout for the half kernels.
void ShardedEmbedding::Impl::init_half_tables(device::Stream& stream) {
  half_weights = device::Buffer<std::uint16_t>(pool, std::size_t(local_rows) * dim,
                                               fmt::format("embedding weights, {} (rank {})", half::to_string(storage.type), rank));
  if (on_host) advise_huge_pages(half_weights.data(), half_weights.bytes());
  const auto& shards = plan.shards();
  for (int s : owned) {
    const Shard& sh = shards[s];
    const kernels::InitShard init{nullptr, seed, sh.table, tables[sh.table].bound_rows(), dim, sh.row_begin};
    launch(backend, stream, (sh.row_end - sh.row_begin) * dim,
           kernels::InitShardHalf{init, half_weights.data() + shard_base[s] * dim, storage.type});
  }
  init_shard_rows(stream);
}

// The owned shards' layout for the half kernels' rounding keys: on the host (host_shard_rows) and
// where the kernels run (shard_rows: on the device where its memory is not the host's).
void ShardedEmbedding::Impl::init_shard_rows(device::Stream& stream) {
  const auto& shards = plan.shards();
  for (int s : owned) {
    rows_base.push_back(shard_base[s]);
    rows_table.push_back(shards[s].table);
    rows_begin.push_back(shards[s].row_begin);
  }
  const auto count = static_cast<std::int64_t>(rows_base.size());
  shard_rows = {stage(rows_base, dev_rows_base, stream), stage(rows_table, dev_rows_table, stream),
                stage(rows_begin, dev_rows_begin, stream), count};
  host_shard_rows = {rows_base.data(), rows_table.data(), rows_begin.data(), count};
  stream.synchronize();
}

ShardedEmbedding::~ShardedEmbedding() = default;

}  // namespace recmix::embedding
