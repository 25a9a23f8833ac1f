// ShardedEmbedding: the public calls (forward, backward, the lookahead, the local shards for
// checkpoints) and batch checks. Set-up is in sharded_embedding_setup.cpp; the exchanges and
// pooling in embedding_exchange.cpp, the update in embedding_update.cpp, the one-hot paths in
// sharded_embedding_one_hot.cpp; the layer's state and its message layouts in
// sharded_embedding_impl.hpp.
#include "embedding/sharded_embedding.hpp"

#include <algorithm>
#include <numeric>
#include <cstdint>
#include <fmt/format.h>

#include "core/error.hpp"
#include "embedding/cpu/half_rows.hpp"
#include "embedding/sharded_embedding_impl.hpp"

namespace recmix::embedding {

void ShardedEmbedding::Impl::begin_forward(float* out) {
  RECMIX_REQUIRE(phase != Phase::forward_started && phase != Phase::backward_started, Error,
                 "embedding: forward_start() while a forward or backward is in flight");
  phase = Phase::idle;
  bytes_sent = 0;
  pending_out = out;
  device_one_hot_step = false;
  device_one_hot_kernels.reset();
  std::vector<float>().swap(view_weights);  // local_shards()' copies of 16-bit tables
  std::vector<float>().swap(view_state);
}

void ShardedEmbedding::Impl::check_batch(std::span<const Bags> bags, int local_batch,
                                         std::string& error, bool check_indices) const {
  auto fail = [&](std::string msg) {
    if (error.empty()) error = std::move(msg);
  };
  if (local_batch < 0) return fail(fmt::format("embedding: local batch {} is negative", local_batch));
  if (static_cast<int>(bags.size()) != num_tables)
    return fail(fmt::format("embedding: the batch has bags for {} tables, the model has {}",
                            bags.size(), num_tables));
  for (int t = 0; t < num_tables; ++t) {
    const auto& off = bags[t].offsets;
    const auto& idx = bags[t].indices;
    if (static_cast<std::int64_t>(off.size()) != local_batch + 1)
      return fail(fmt::format("embedding table {}: {} bag offsets for a local batch of {} (need {})",
                              t, off.size(), local_batch, local_batch + 1));
    if (off[0] < 0) return fail(fmt::format("embedding table {}: bag offsets start at {}", t, off[0]));
    for (int b = 0; b < local_batch; ++b)
      if (off[b + 1] < off[b])
        return fail(fmt::format("embedding table {}: bag offsets decrease at bag {} ({} then {})", t,
                                b, off[b], off[b + 1]));
    if (off[local_batch] > static_cast<std::int64_t>(idx.size()))
      return fail(fmt::format("embedding table {}: bag offsets end at {} but there are only {} indices",
                              t, off[local_batch], idx.size()));
    if (!check_indices) continue;
    const std::int64_t rows = tables[t].rows;
    for (int b = 0; b < local_batch; ++b)
      for (std::int64_t k = off[b]; k < off[b + 1]; ++k)
        if (idx[k] < 0 || idx[k] >= rows)
          return fail(index_error(t, idx[k], b).what());
  }
}

void ShardedEmbedding::forward(device::Stream& stream, std::span<const Bags> bags, int local_batch,
                               float* out) {
  forward_start(stream, bags, local_batch, out);
  forward_finish(stream);
}

void ShardedEmbedding::backward(device::Stream& stream, const float* grad_out) {
  backward_start(stream, grad_out);
  backward_finish(stream);
}

void ShardedEmbedding::forward(device::Stream& stream, OneHotRows rows, int local_batch, float* out) {
  forward_start(stream, rows, local_batch, out);
  forward_finish(stream);
}

void ShardedEmbedding::forward_start(device::Stream& stream, OneHotRows rows, int local_batch, float* out) {
  Impl& m = *impl_;
  if (rows.tables != m.num_tables)
    throw DataError(fmt::format("embedding: the batch has indices for {} tables, the model has {}", rows.tables,
                                m.num_tables));
  if (local_batch < 0 || rows.indices.size() != std::size_t(local_batch) * std::size_t(m.num_tables))
    throw DataError(fmt::format("embedding: {} one-hot indices for a local batch of {} over {} tables (need {})",
                                rows.indices.size(), local_batch, m.num_tables,
                                std::int64_t(local_batch) * m.num_tables));
  if (m.tiered_one_hot_path(local_batch)) {
    m.begin_forward(out);
    m.last_stream = &stream;
    m.forward_tiered_one_hot(stream, rows.indices.data(), local_batch, out);
    m.phase = Impl::Phase::forward_started;
    return;
  }
  if (m.one_hot_path(local_batch)) {  // read in place, checked as they are read
    m.begin_forward(out);
    m.one_hot_step = true;
    m.one_hot_packed = rows.indices.data();
    m.forward_one_hot(stream, local_batch, out);
    m.phase = Impl::Phase::forward_started;
    return;
  }
  if (m.device_one_hot_path(local_batch)) {
    m.begin_forward(out);
    m.last_stream = &stream;
    m.one_hot_step = false;
    m.one_hot_packed = nullptr;
    m.forward_device_one_hot(stream, rows.indices, local_batch, out);
    m.device_one_hot_step = true;
    m.phase = Impl::Phase::forward_started;
    return;
  }
  // Every other path takes one CSR per table.
  const int T = m.num_tables;
  m.expanded_offsets.resize(T);
  m.expanded_indices.resize(T);
  m.expanded_bags.resize(T);
  for (int t = 0; t < T; ++t) {
    std::vector<std::int64_t>& off = m.expanded_offsets[t];
    std::vector<std::int64_t>& idx = m.expanded_indices[t];
    off.resize(std::size_t(local_batch) + 1);
    std::iota(off.begin(), off.end(), std::int64_t{0});
    idx.resize(std::size_t(local_batch));
    for (int b = 0; b < local_batch; ++b) idx[b] = rows.indices[std::size_t(b) * T + t];
    m.expanded_bags[t] = {off, idx};
  }
  forward_start(stream, m.expanded_bags, local_batch, out);
}

void ShardedEmbedding::forward_start(device::Stream& stream, std::span<const Bags> bags,
                                     int local_batch, float* out) {
  Impl& m = *impl_;
  m.begin_forward(out);
  m.last_stream = &stream;
  m.one_hot_packed = nullptr;
  std::string error;
  // The one-hot CPU path checks the indices as it reads them.
  m.one_hot_step = m.one_hot_path(local_batch) && static_cast<int>(bags.size()) == m.num_tables;
  for (int t = 0; m.one_hot_step && t < m.num_tables; ++t)
    m.one_hot_step = static_cast<std::int64_t>(bags[t].offsets.size()) == local_batch + 1;
  m.one_hot_step = m.one_hot_step && Impl::is_one_hot(bags, local_batch);
  m.check_batch(bags, local_batch, error, !m.one_hot_step);
  if (m.one_hot_step) {
    if (!error.empty()) throw DataError(error);
    m.one_hot_indices.resize(m.num_tables);
    for (int t = 0; t < m.num_tables; ++t) m.one_hot_indices[t] = bags[t].indices.data() + bags[t].offsets[0];
    m.forward_one_hot(stream, local_batch, out);
  } else if (m.local_only) {
    if (!error.empty()) throw DataError(error);
    m.batch = local_batch;
    m.forward_local(stream, bags, out);
  } else {
    m.batch = error.empty() ? local_batch : 0;
    if (error.empty()) m.record_bag_lengths(bags, local_batch);
    m.forward_distributed(stream, bags, !error.empty(), error);
  }
  m.phase = Impl::Phase::forward_started;
}

void ShardedEmbedding::Impl::record_bag_lengths(std::span<const Bags> bags, int local_batch) {
  if (pooling != Pooling::mean) return;
  bag_length.resize(std::size_t(num_tables) * local_batch);
  for (int t = 0; t < num_tables; ++t)
    for (int b = 0; b < local_batch; ++b)
      bag_length[std::size_t(t) * local_batch + b] = bags[t].offsets[b + 1] - bags[t].offsets[b];
}

// The next batch's lookups, ahead: on one rank its rows are known here; on several, its index
// messages are exchanged now (a bad batch anywhere leaves no plan, on every rank, and the forward
// of that batch reports it). Then its cold rows are gathered in the background.
void ShardedEmbedding::Impl::prefetch(std::span<const Bags> bags, int local_batch) {
  std::string error;
  check_batch(bags, local_batch, error);
  next_valid = false;
  if (local_only) {  // forward_local's row order: bag by bag, table by table
    if (!error.empty()) return;
    next.own_rows.clear();
    for (int b = 0; b < local_batch; ++b)
      for (int t = 0; t < num_tables; ++t) {
        const std::int64_t base = shard_base[table_shards[t][0]];
        for (std::int64_t k = bags[t].offsets[b]; k < bags[t].offsets[b + 1]; ++k)
          next.own_rows.push_back(base + bags[t].indices[k]);
      }
    tiers->prefetch(next.own_rows.data(), static_cast<std::int64_t>(next.own_rows.size()));
    return;
  }
  swap_plan();
  batch = error.empty() ? local_batch : 0;
  if (error.empty()) record_bag_lengths(bags, local_batch);
  bool ok = false;
  try {
    ok = exchange_indices(bags, !error.empty(), error, false);
  } catch (...) {
    swap_plan();
    throw;
  }
  swap_plan();
  next_valid = ok;
  if (ok) tiers->prefetch(next.own_rows.data(), static_cast<std::int64_t>(next.own_rows.size()));
}

void ShardedEmbedding::prefetch(std::span<const Bags> bags, int local_batch) {
  if (impl_->tiers) impl_->prefetch(bags, local_batch);
}

void ShardedEmbedding::prefetch(OneHotRows rows, int local_batch) {
  Impl& m = *impl_;
  if (!m.tiers) return;
  const int T = m.num_tables;
  const bool shape_ok = rows.tables == T && local_batch >= 0 &&
                        rows.indices.size() == std::size_t(local_batch) * std::size_t(T);
  m.next_offsets.resize(T);
  m.next_indices.resize(T);
  m.next_bags.assign(T, Bags{});
  for (int t = 0; shape_ok && t < T; ++t) {
    auto& off = m.next_offsets[t];
    auto& idx = m.next_indices[t];
    off.resize(std::size_t(local_batch) + 1);
    std::iota(off.begin(), off.end(), std::int64_t{0});
    idx.resize(std::size_t(local_batch));
    for (int b = 0; b < local_batch; ++b) idx[b] = rows.indices[std::size_t(b) * T + t];
    m.next_bags[t] = {off, idx};
  }
  // A batch of the wrong shape takes part as a bad batch (a negative size), so every rank's
  // collectives still match.
  m.prefetch(m.next_bags, shape_ok ? local_batch : -1);
}

void ShardedEmbedding::forward_start_prefetched(device::Stream& stream, std::span<const Bags> bags, int local_batch,
                                                float* out) {
  Impl& m = *impl_;
  if (!m.next_valid || m.next.batch != local_batch) return forward_start(stream, bags, local_batch, out);
  m.begin_forward(out);
  m.last_stream = &stream;
  m.one_hot_packed = nullptr;
  m.one_hot_step = false;
  m.swap_plan();
  m.next_valid = false;
  m.pool_and_post(stream);
  m.phase = Impl::Phase::forward_started;
}

void ShardedEmbedding::forward_start_prefetched(device::Stream& stream, OneHotRows rows, int local_batch, float* out) {
  Impl& m = *impl_;
  if (!m.next_valid || m.next.batch != local_batch) return forward_start(stream, rows, local_batch, out);
  forward_start_prefetched(stream, std::span<const Bags>(), local_batch, out);
}

void ShardedEmbedding::forward_finish(device::Stream& stream) {
  Impl& m = *impl_;
  RECMIX_REQUIRE(m.phase == Impl::Phase::forward_started, Error,
                 "embedding: forward_finish() without forward_start()");
  m.phase = Impl::Phase::idle;
  m.finish_device_one_hot(stream);
  if (!m.local_only) m.combine_pooled(stream);
  // No synchronisation on device backends: the host arrays the copies read may be reused at once
  // (a copy from pageable host memory has read its source when it returns, on CUDA and here).
  m.phase = Impl::Phase::forward_done;
}

void ShardedEmbedding::backward_start(device::Stream& stream, const float* grad_out) {
  Impl& m = *impl_;
  RECMIX_REQUIRE(m.phase == Impl::Phase::forward_done, Error,
                 "embedding: backward without a completed forward (each forward allows one backward)");
  m.phase = Impl::Phase::idle;
  const int B = m.batch, T = m.num_tables, D = m.dim;
  if (m.one_hot_step) {  // one rank, CPU, one index per bag: table by table
    launch_one_hot_update(m.backend, stream, m.one_hot_tables(), m.kind, m.opt.lr, m.opt.eps, grad_out);
    if (m.tiers) m.tiers->updated(stream);
    m.phase = Impl::Phase::backward_started;
    return;
  }
  if (m.local_only) {  // nothing travels: the whole update runs here
    const std::int64_t n_bags = std::int64_t(T) * B;
    if (m.on_host) {
      m.group_rows(n_bags, nullptr, m.own_scale.empty() ? nullptr : m.own_scale.data());
      m.update_on_host(stream, grad_out);
    } else {
      m.update_on_device(stream, grad_out, !m.own_scale.empty());
    }
    m.phase = Impl::Phase::backward_started;
    return;
  }
  // Gradients of the pooled vectors to the owners, in the pooled layout (mean: scaled by 1/length),
  // by one gather (kernels::GatherRows) planned here: into host memory on the CPU backend, into
  // the device send buffer elsewhere.
  std::vector<std::size_t> send_counts(m.world), recv_counts(m.world);
  m.gather_src.clear();
  m.gather_scale.clear();
  for (int q = 0; q < m.world; ++q) {
    send_counts[q] = static_cast<std::size_t>(m.from_owner[q] * D);
    recv_counts[q] = static_cast<std::size_t>(m.from_source[q] * D);
    for (int s : m.rank_shards[q]) {
      const int t = m.plan.shards()[s].table;
      for (int b = 0; b < B; ++b) {
        if (m.shard_lengths[s][b] == 0) continue;
        m.gather_src.push_back(std::int64_t(b) * T + t);
        if (m.pooling == Pooling::mean) {
          const std::int64_t len = m.bag_length[std::size_t(t) * B + b];
          m.gather_scale.push_back(len > 0 ? 1.0f / static_cast<float>(len) : 0.f);
        }
      }
    }
  }
  const std::size_t total = m.gather_src.size();
  float* out = nullptr;
  if (m.on_host) {
    m.send_f32.resize(std::max<std::size_t>(total * D, 1));
    out = m.send_f32.data();
  } else {
    m.grow(m.dev_send, std::max<std::size_t>(total * D, 1), "embedding vectors sent");
    out = m.dev_send.data();
  }
  kernels::GatherRows f{grad_out, D, m.stage(m.gather_src, m.dev_meta_i64[2], stream),
                        m.gather_scale.empty() ? nullptr : m.stage(m.gather_scale, m.dev_meta_f32[1], stream), out};
  launch(m.backend, stream, static_cast<std::int64_t>(total), f);
  if (m.on_host)
    m.post(m.send_f32.data(), send_counts, m.recv_f32, recv_counts, comm::DataType::f32, sizeof(float));
  else
    m.post_device(stream, total, send_counts, recv_counts);
  m.phase = Impl::Phase::backward_started;
}

void ShardedEmbedding::backward_finish(device::Stream& stream) {
  Impl& m = *impl_;
  RECMIX_REQUIRE(m.phase == Impl::Phase::backward_started, Error,
                 "embedding: backward_finish() without backward_start()");
  m.phase = Impl::Phase::idle;
  if (m.local_only) return;
  m.wait_pending();
  const std::int64_t n_bags = static_cast<std::int64_t>(m.own_offsets.size()) - 1;
  if (m.on_host) {
    m.group_rows(n_bags, nullptr, nullptr);
    m.update_on_host(stream, m.recv_f32.data());
  } else {
    m.update_on_device(stream, m.dev_recv.data(), false);
  }
}

std::vector<LocalShardView> ShardedEmbedding::local_shards() {
  Impl& m = *impl_;
  std::vector<LocalShardView> views;
  const std::size_t per_row = state_per_row(m.kind, m.dim);
  float* weights = m.weights.data();
  float* state = m.state.data();
  bool host_memory = m.tiers != nullptr;
  if (m.tiers) {  // the host tier holds every row once flushed
    if (m.last_stream) {
      m.tiers->flush(*m.last_stream);
    } else {
      auto stream = m.backend.create_stream();
      m.tiers->flush(*stream);
    }
    state = m.tiers->host_state();
    if (m.half_tables()) {  // widened: exact
      m.view_weights.resize(std::size_t(m.local_rows) * m.dim);
      cpu::widen_half_row(m.storage.type, static_cast<const std::uint16_t*>(m.tiers->host_weights()),
                          m.view_weights.data(), static_cast<std::int64_t>(m.view_weights.size()));
      weights = m.view_weights.data();
    } else {
      weights = static_cast<float*>(m.tiers->host_weights());
    }
  } else if (m.half_tables()) {  // widened on the host: exact
    const std::size_t n = m.half_weights.size();
    std::vector<std::uint16_t> bits(n);
    auto stream = m.backend.create_stream();
    if (m.last_stream) m.last_stream->synchronize();
    if (n > 0) m.backend.copy(bits.data(), m.half_weights.data(), n * sizeof(std::uint16_t), *stream);
    // The views' pointers share one flag: the state comes along to the host where the device's
    // memory is not the host's.
    if (!m.backend.host_accessible(device::Tier::device) && !m.state.empty()) {
      m.view_state.resize(m.state.size());
      m.backend.copy(m.view_state.data(), m.state.data(), m.state.bytes(), *stream);
      state = m.view_state.data();
    }
    stream->synchronize();
    m.view_weights.resize(n);
    cpu::widen_half_row(m.storage.type, bits.data(), m.view_weights.data(), static_cast<std::int64_t>(n));
    weights = m.view_weights.data();
    host_memory = true;
  }
  for (int s : m.owned) {
    const Shard& sh = m.plan.shards()[s];
    LocalShardView v{sh.table, sh.row_begin, sh.row_end, m.dim, weights + m.shard_base[s] * m.dim, {}, {},
                     host_memory};
    if (per_row > 0) {
      v.state.emplace_back(state_name(m.kind), state + m.shard_base[s] * per_row);
      v.state_counts.push_back(std::size_t(sh.row_end - sh.row_begin) * per_row);
    }
    views.push_back(std::move(v));
  }
  return views;
}

void ShardedEmbedding::shards_written() {
  Impl& m = *impl_;
  const std::size_t n_local = std::size_t(m.local_rows) * m.dim;
  if (m.tiers) {  // the host tier was written (through the views, rounded back for 16-bit tables)
    if (m.half_tables() && m.view_weights.size() == n_local && n_local > 0)
      cpu::round_half_row({m.storage.type, false, 0}, static_cast<std::uint16_t*>(m.tiers->host_weights()), 0,
                          m.view_weights.data(), static_cast<std::int64_t>(n_local));  // to nearest
    auto stream = m.backend.create_stream();
    if (m.last_stream) m.last_stream->synchronize();
    m.tiers->reload(*stream);
    return;
  }
  if (m.half_tables() && m.view_weights.size() == n_local && n_local > 0) {
    std::vector<std::uint16_t> bits(m.view_weights.size());
    cpu::round_half_row({m.storage.type, false, 0}, bits.data(), 0, m.view_weights.data(),
                        static_cast<std::int64_t>(bits.size()));  // to nearest
    auto stream = m.backend.create_stream();
    if (m.last_stream) m.last_stream->synchronize();
    m.backend.copy(m.half_weights.data(), bits.data(), bits.size() * sizeof(std::uint16_t), *stream);
    if (m.view_state.size() == m.state.size() && !m.view_state.empty())
      m.backend.copy(m.state.data(), m.view_state.data(), m.state.bytes(), *stream);
    stream->synchronize();
  }
}

bool ShardedEmbedding::tiered() const { return impl_->tiers != nullptr; }
TierStats ShardedEmbedding::take_tier_stats() { return impl_->tiers ? impl_->tiers->take_stats() : TierStats{}; }
std::size_t ShardedEmbedding::host_tier_bytes() const { return impl_->tiers ? impl_->tiers->host_bytes() : 0; }

const ShardingPlan& ShardedEmbedding::plan() const { return impl_->plan; }
int ShardedEmbedding::num_tables() const { return impl_->num_tables; }
int ShardedEmbedding::dim() const { return impl_->dim; }
Pooling ShardedEmbedding::pooling() const { return impl_->pooling; }
SparseOptimizerKind ShardedEmbedding::optimizer_kind() const { return impl_->kind; }
TableStorage ShardedEmbedding::storage() const { return impl_->storage; }
void ShardedEmbedding::set_step(std::int64_t step) { impl_->update_step = step; }
void ShardedEmbedding::set_learning_rate(float lr) {
  RECMIX_REQUIRE(std::isfinite(lr) && lr >= 0.f, ConfigError, fmt::format("embedding: learning rate {} is not usable", lr));
  impl_->opt.lr = lr;
  impl_->rate_varies = true;
}
void ShardedEmbedding::reserve(device::Stream& stream, int local_batch, std::int64_t global_batch,
                               std::int64_t bag_rows) {
  impl_->reserve(stream, local_batch, global_batch, bag_rows);
}
std::size_t ShardedEmbedding::bytes_sent_last_step() const { return impl_->bytes_sent; }
ShardedEmbedding::Region ShardedEmbedding::hot_region() const {
  const Impl& m = *impl_;
  const bool half = m.half_weights.size() > 0;
  const void* base = half ? static_cast<const void*>(m.half_weights.data()) : static_cast<const void*>(m.weights.data());
  const std::size_t row_bytes = static_cast<std::size_t>(m.dim) * (half ? sizeof(std::uint16_t) : sizeof(float));
  const std::int64_t rows = m.tiers ? m.tiers->hot_rows() : m.device_rows();
  return {rows > 0 ? base : nullptr, rows > 0 ? static_cast<std::size_t>(rows) * row_bytes : 0};
}

std::size_t ShardedEmbedding::local_bytes() const {
  return impl_->weights.bytes() + impl_->half_weights.bytes() + impl_->state.bytes();
}

}  // namespace recmix::embedding
