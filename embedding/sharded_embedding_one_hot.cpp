// ShardedEmbedding's one-hot paths: one rank, whole tables, one index per bag (the Criteo case).
// On the CPU backend, flat or tiered, issued through launch_one_hot_forward
// (embedding/cpu/one_hot.hpp); on a device, untiered, the packed indices uploaded as read and the
// owner CSR built there (kernels::OneHotCsr), so the host does no per-index work but the check.
#include <cstdint>

#include <fmt/format.h>

#include "core/error.hpp"
#include "embedding/sharded_embedding.hpp"
#include "embedding/sharded_embedding_impl.hpp"

namespace recmix::embedding {

DataError ShardedEmbedding::Impl::index_error(int t, std::int64_t index, std::int64_t b) const {
  return DataError(fmt::format("embedding table {}: index {} out of range [0, {}) in bag {} of the local batch (rank {})",
                               t, index, tables[t].rows, b, rank));
}

bool ShardedEmbedding::Impl::is_one_hot(std::span<const Bags> bags, int local_batch) {
  for (const Bags& bag : bags) {
    const std::int64_t* off = bag.offsets.data();
    for (int b = 0; b < local_batch; ++b)
      if (off[b + 1] != off[b] + 1) return false;
  }
  return true;
}

cpu::OneHotTables ShardedEmbedding::Impl::one_hot_tables() {
  if (half_tables()) one_hot_half = half_update({});
  return {weights.data(),          state.empty() ? nullptr : state.data(),
          dim,                     num_tables,
          batch,                   one_hot_indices.data(),
          one_hot_packed,          one_hot_base.data(),
          one_hot_table_rows.data(), one_hot_rows.data(),
          one_hot_scratch.data(),  half_tables() ? &one_hot_half : nullptr};
}

void ShardedEmbedding::Impl::forward_one_hot(device::Stream& stream, int local_batch, float* out) {
  batch = local_batch;
  one_hot_rows.resize(std::size_t(num_tables) * local_batch);
  one_hot_scratch.resize(3 * std::size_t(num_tables) * local_batch);
  one_hot_base.resize(num_tables);
  one_hot_table_rows.resize(num_tables);
  for (int t = 0; t < num_tables; ++t) {
    one_hot_base[t] = shard_base[table_shards[t][0]];
    one_hot_table_rows[t] = tables[t].rows;
  }
  const cpu::OneHotTables f = one_hot_tables();
  const std::int64_t bad = launch_one_hot_forward(backend, stream, f, out);
  if (bad >= 0) {
    const int t = static_cast<int>(bad / local_batch), b = static_cast<int>(bad % local_batch);
    throw index_error(t, f.index(b, t), b);
  }
}

// Tiered, one rank, one index per bag: the lookups as local rows (checked), staged and remapped
// to slots, then the one-hot path over the device tier with every table at base 0.
void ShardedEmbedding::Impl::forward_tiered_one_hot(device::Stream& stream, const std::int32_t* packed,
                                                    int local_batch, float* out) {
  const int T = num_tables;
  const std::size_t n = std::size_t(local_batch) * T;
  own_rows.resize(n);
  for (int b = 0; b < local_batch; ++b)
    for (int t = 0; t < T; ++t) {
      const std::int64_t idx = packed[std::size_t(b) * T + t];
      if (idx < 0 || idx >= tables[t].rows)
        throw index_error(t, idx, b);
      own_rows[std::size_t(b) * T + t] = shard_base[table_shards[t][0]] + idx;
    }
  tiers->stage(stream, own_rows.data(), static_cast<std::int64_t>(n));
  one_hot_slots.resize(n);
  for (std::size_t j = 0; j < n; ++j) one_hot_slots[j] = static_cast<std::int32_t>(own_rows[j]);
  one_hot_step = true;
  one_hot_packed = one_hot_slots.data();
  batch = local_batch;
  one_hot_rows.resize(n);
  one_hot_scratch.resize(3 * n);
  one_hot_base.assign(T, 0);
  one_hot_table_rows.assign(T, device_rows());
  launch_one_hot_forward(backend, stream, one_hot_tables(), out);
}

// The device one-hot forward. The indices are checked on the host first (a bad one names its
// table, index and bag, and nothing has been issued); one index a bag makes a mean's scale 1, a
// factor that changes no bit, so the update runs unscaled for either pooling.
void ShardedEmbedding::Impl::forward_device_one_hot(device::Stream& stream, std::span<const std::int32_t> packed,
                                                    int local_batch, float* out) {
  const int T = num_tables;
  const std::int64_t n = std::int64_t(local_batch) * T;
  one_hot_table_rows.resize(T);
  for (int t = 0; t < T; ++t) one_hot_table_rows[t] = tables[t].rows;
  const std::int64_t* limit = one_hot_table_rows.data();
  bool bad = false;
  for (int b = 0; b < local_batch; ++b) {
    const std::int32_t* row = packed.data() + std::size_t(b) * T;
    for (int t = 0; t < T; ++t)  // unsigned: a negative index is out of range too
      bad |= static_cast<std::uint64_t>(static_cast<std::int64_t>(row[t])) >= static_cast<std::uint64_t>(limit[t]);
  }
  if (bad)
    for (std::int64_t j = 0; j < n; ++j) {
      const int t = static_cast<int>(j % T);
      if (packed[j] < 0 || packed[j] >= limit[t])
        throw index_error(t, packed[j], j / T);
    }
  batch = local_batch;
  own_scale.clear();
  if (dev_one_hot_base.size() < std::size_t(T)) {
    one_hot_base.resize(T);
    for (int t = 0; t < T; ++t) one_hot_base[t] = shard_base[table_shards[t][0]];
    stage(one_hot_base, dev_one_hot_base, stream);
  }
  grow(dev_own_offsets, std::size_t(n) + 1, "embedding scratch");
  grow(dev_own_rows, std::max<std::size_t>(std::size_t(n), 1), "embedding scratch");
  const kernels::OneHotCsr csr{stage(packed.subspan(0, std::size_t(n)), dev_one_hot_indices, stream),
                               dev_one_hot_base.data(), T, n, dev_own_offsets.data(), dev_own_rows.data()};
  const kernels::PoolBags f{weights.data(), dim, dev_own_offsets.data(), dev_own_rows.data(), nullptr, out,
                            pooling == Pooling::mean};
  device_one_hot_kernels = OneHotKernels{csr, f, n};
}

void ShardedEmbedding::Impl::finish_device_one_hot(device::Stream& stream) {
  if (!device_one_hot_kernels) return;
  const OneHotKernels k = *device_one_hot_kernels;
  device_one_hot_kernels.reset();
  launch(backend, stream, k.bags + 1, k.csr);
  pool_bags(stream, k.bags, k.pool);
}

// On the device one-hot path forward_finish() is device work alone (the owner CSR and the pooling).
bool ShardedEmbedding::forward_finish_capturable() const {
  const Impl& m = *impl_;
  return m.phase == Impl::Phase::forward_started && m.device_one_hot_kernels.has_value();
}

void ShardedEmbedding::forward_finish_replayed() {
  Impl& m = *impl_;
  RECMIX_REQUIRE(forward_finish_capturable(), Error,
                 "embedding: forward_finish_replayed() where the forward's finish cannot be captured");
  m.device_one_hot_kernels.reset();
  m.phase = Impl::Phase::forward_done;
}

// The device one-hot path's backward is device work alone: a step may capture and replay it.
bool ShardedEmbedding::backward_capturable() const {
  const Impl& m = *impl_;
  return m.device_one_hot_step && !m.half_tables() && !m.rate_varies && m.phase == Impl::Phase::forward_done;
}

void ShardedEmbedding::backward_start_replayed() {
  Impl& m = *impl_;
  RECMIX_REQUIRE(backward_capturable(), Error,
                 "embedding: backward_start_replayed() where the backward cannot be captured");
  m.phase = Impl::Phase::backward_started;
}

std::uint64_t ShardedEmbedding::device_buffers_generation() const {
  const Impl& m = *impl_;
  return m.buffers_made + (m.grouping ? m.grouping->buffers_made() : 0);
}

}  // namespace recmix::embedding
