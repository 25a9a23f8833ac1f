// ShardedEmbedding's data path: the step's buffers reserved, pooling, the all-to-all exchanges of
// indices, pooled vectors and gradients, and combining partial sums, on the host path (CPU
// backend) and the device path (CUDA, cpu-strict). The update that follows is in
// embedding_update.cpp. Message layouts: sharded_embedding_impl.hpp.
#include <algorithm>
#include <cstdint>
#include <fmt/format.h>

#include "core/env_switch.hpp"
#include "core/error.hpp"
#include "embedding/radix_sort.hpp"
#include "embedding/sharded_embedding_impl.hpp"

namespace recmix::embedding {
namespace {
EnvSwitch& exchange_stream_switch() {
  static EnvSwitch s("RECMIX_EXCHANGE_STREAM");
  return s;
}
}  // namespace

bool exchange_stream_enabled() { return exchange_stream_switch().on(); }
void set_exchange_stream_enabled(bool on) { exchange_stream_switch().set(on); }

// The largest step's buffers (ShardedEmbedding::reserve), by the bounds of the message layouts:
// an owner pools at most one bag per sample of the global batch for each shard it owns (a
// row-split table's shard gets a partial bag), and a requester receives at most one partial sum
// per sample for each shard of the plan. The pooled vectors go one way and their gradients the
// other, so the send and receive buffers take the larger of the two.
void ShardedEmbedding::Impl::reserve(device::Stream& stream, int local_batch, std::int64_t global_batch,
                                     std::int64_t bag_rows) {
  if (on_host) return;
  const std::size_t b = static_cast<std::size_t>(std::max(local_batch, 1)), T = num_tables;
  const std::size_t bags = local_only ? b * T : static_cast<std::size_t>(std::max<std::int64_t>(global_batch, 1)) * owned.size();
  const std::size_t entries = bags * static_cast<std::size_t>(std::max<std::int64_t>(bag_rows, 1));
  const std::size_t parts = b * plan.shards().size(), out = b * T;
  const bool mean = pooling == Pooling::mean;
  reserve_stage(dev_own_offsets, bags + 1);
  reserve_stage(dev_own_rows, entries);
  if (local_only) {
    if (mean) reserve_stage(dev_own_scale, bags);
    if (!tiers) reserve_stage(dev_one_hot_indices, out);  // the device one-hot path
  } else {
    grow(dev_send, std::max(bags, parts) * dim, "embedding vectors sent");
    grow(dev_recv, std::max(bags, parts) * dim, "embedding vectors received");
    reserve_stage(dev_meta_i64[0], out + 1);
    reserve_stage(dev_meta_i64[1], parts);
    reserve_stage(dev_meta_i64[2], parts);
    if (mean) {
      reserve_stage(dev_meta_f32[0], out);
      reserve_stage(dev_meta_f32[1], parts);
    }
  }
  if (!grouping) grouping = std::make_unique<DeviceGrouping>(backend, pool);
  grouping->reserve(stream, static_cast<std::int64_t>(entries), detail::bits_below(device_rows()), mean && local_only);
}

// One rank, whole tables: bag j = b * num_tables + t pools straight into output vector j, so
// the output is written in order and the gradient of bag j is grad_out's vector j.
void ShardedEmbedding::Impl::forward_local(device::Stream& stream, std::span<const Bags> bags,
                                           float* out) {
  const std::int64_t n_bags = std::int64_t(num_tables) * batch;
  own_offsets.resize(n_bags + 1);
  own_offsets[0] = 0;
  std::int64_t nnz = 0;
  for (int t = 0; t < num_tables; ++t) nnz += bags[t].offsets[batch] - bags[t].offsets[0];
  own_rows.resize(nnz);
  const bool mean = pooling == Pooling::mean;
  own_scale.resize(mean ? n_bags : 0);
  std::vector<std::int64_t> base(num_tables);
  for (int t = 0; t < num_tables; ++t) base[t] = shard_base[table_shards[t][0]];
  std::int64_t j = 0, at = 0;
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < num_tables; ++t, ++j) {
      const auto& off = bags[t].offsets;
      const std::int64_t* idx = bags[t].indices.data();
      for (std::int64_t k = off[b]; k < off[b + 1]; ++k) own_rows[at++] = base[t] + idx[k];
      own_offsets[j + 1] = at;
      if (mean) {
        const std::int64_t len = off[b + 1] - off[b];
        own_scale[j] = len > 0 ? 1.0f / static_cast<float>(len) : 0.f;
      }
    }
  if (tiers) tiers->stage(stream, own_rows.data(), nnz);
  kernels::PoolBags f{weights.data(), dim, stage(own_offsets, dev_own_offsets, stream),
                      stage(own_rows, dev_own_rows, stream), nullptr, out, mean};
  pool_bags(stream, n_bags, f);
  if (mean) stage(own_scale, dev_own_scale, stream);
}

void ShardedEmbedding::Impl::forward_distributed(device::Stream& stream, std::span<const Bags> bags,
                                                 bool bad_batch, const std::string& error) {
  exchange_indices(bags, bad_batch, error, true);
  pool_and_post(stream);
}

// Steps 1-3 of the lookup: the bags split over the shards, the index messages exchanged, the
// owner's CSR built (shard_lengths, shard_indices, from_source, own_offsets, own_rows). A bad
// batch on any rank: every rank learns it from the sizes; throw_bad: DataError, else false.
bool ShardedEmbedding::Impl::exchange_indices(std::span<const Bags> bags, bool bad_batch, const std::string& error,
                                              bool throw_bad) {
  const int B = batch;
  // 1. Split every bag over the shards of its table (requester side).
  if (!bad_batch) {
    for (int t = 0; t < num_tables; ++t) {
      const auto& ids = table_shards[t];
      const auto& off = bags[t].offsets;
      const auto& idx = bags[t].indices;
      for (int s : ids) {
        shard_lengths[s].assign(B, 0);
        shard_indices[s].clear();
      }
      if (ids.size() == 1) {
        const int s = ids[0];
        for (int b = 0; b < B; ++b) shard_lengths[s][b] = off[b + 1] - off[b];
        shard_indices[s].assign(idx.begin() + off[0], idx.begin() + off[B]);
        continue;
      }
      std::vector<std::int64_t> ends;
      for (int s : ids) ends.push_back(plan.shards()[s].row_end);
      for (int b = 0; b < B; ++b)
        for (std::int64_t k = off[b]; k < off[b + 1]; ++k) {
          const int pos = static_cast<int>(std::upper_bound(ends.begin(), ends.end(), idx[k]) - ends.begin());
          const int s = ids[pos];
          ++shard_lengths[s][b];
          shard_indices[s].push_back(idx[k] - plan.shards()[s].row_begin);
        }
    }
  }
  // 2. Message sizes (or the bad-batch mark), then the index messages.
  std::vector<std::size_t> ones(world, 1);
  std::vector<std::int64_t> sizes(world, kBadBatch);
  if (!bad_batch)
    for (int q = 0; q < world; ++q) {
      std::int64_t n = 1;
      for (int s : rank_shards[q]) n += B + static_cast<std::int64_t>(shard_indices[s].size());
      sizes[q] = n;
    }
  std::vector<std::int64_t> recv_sizes;
  all_to_all(sizes, ones, recv_sizes, ones);
  std::vector<int> bad_ranks;
  for (int p = 0; p < world; ++p)
    if (recv_sizes[p] == kBadBatch) bad_ranks.push_back(p);
  if (!bad_ranks.empty()) {
    if (!throw_bad) return false;
    if (bad_batch) throw DataError(error);
    throw DataError(fmt::format("embedding: rank {} received a bad batch (see its error)", bad_ranks[0]));
  }
  std::vector<std::size_t> send_counts(world), recv_counts(world);
  send_i64.clear();
  for (int q = 0; q < world; ++q) {
    send_counts[q] = static_cast<std::size_t>(sizes[q]);
    recv_counts[q] = static_cast<std::size_t>(recv_sizes[q]);
    send_i64.push_back(B);
    for (int s : rank_shards[q]) send_i64.insert(send_i64.end(), shard_lengths[s].begin(), shard_lengths[s].end());
    for (int s : rank_shards[q]) send_i64.insert(send_i64.end(), shard_indices[s].begin(), shard_indices[s].end());
  }
  all_to_all(send_i64, send_counts, recv_i64, recv_counts);

  // 3. Owner: one CSR over the non-empty bags of every source, in (source, shard, bag) order.
  const auto& mine = rank_shards[rank];
  const std::int64_t n_mine = static_cast<std::int64_t>(mine.size());
  from_source.assign(world, 0);
  own_offsets.assign(1, 0);
  own_rows.clear();
  std::size_t at = 0;
  for (int p = 0; p < world; ++p) {
    const std::int64_t* msg = recv_i64.data() + at;
    const std::int64_t bp = msg[0];
    const std::int64_t* lengths = msg + 1;
    const std::int64_t* indices = lengths + n_mine * bp;
    for (std::int64_t k = 0; k < n_mine; ++k) {
      const Shard& sh = plan.shards()[mine[k]];
      const std::int64_t base = shard_base[mine[k]], shard_rows = sh.row_end - sh.row_begin;
      for (std::int64_t b = 0; b < bp; ++b) {
        if (lengths[k * bp + b] == 0) continue;  // nothing of this bag here: nothing sent back
        ++from_source[p];
        for (std::int64_t i = 0; i < lengths[k * bp + b]; ++i) {
          const std::int64_t r = *indices++;
          RECMIX_REQUIRE(r >= 0 && r < shard_rows, CommError,
                         fmt::format("embedding: rank {} sent row {} for table {} rows [{}, {})", p,
                                     r + sh.row_begin, sh.table, sh.row_begin, sh.row_end));
          own_rows.push_back(base + r);
        }
        own_offsets.push_back(static_cast<std::int64_t>(own_rows.size()));
      }
    }
    at += recv_counts[p];
  }
  return true;
}

// Steps 4-5: this step's cold rows staged (tiered), the owner's bags pooled, the pooled vectors
// posted back to the requesters.
void ShardedEmbedding::Impl::pool_and_post(device::Stream& stream) {
  const int B = batch;
  std::vector<std::size_t> send_counts(world), recv_counts(world);
  const std::int64_t n_bags = static_cast<std::int64_t>(own_offsets.size()) - 1;
  if (tiers) tiers->stage(stream, own_rows.data(), static_cast<std::int64_t>(own_rows.size()));

  // 4. Pool (sums; mean is applied by the requester once the partial sums are combined). On the
  //    device path straight into the device send buffer.
  float* pooled = nullptr;
  if (on_host) {
    send_f32.resize(std::max<std::int64_t>(n_bags * dim, 1));
    pooled = send_f32.data();
  } else {
    grow(dev_send, std::max<std::size_t>(std::size_t(n_bags) * dim, 1), "embedding vectors sent");
    pooled = dev_send.data();
  }
  kernels::PoolBags f{weights.data(), dim, stage(own_offsets, dev_own_offsets, stream),
                      stage(own_rows, dev_own_rows, stream), nullptr, pooled, false};
  pool_bags(stream, n_bags, f);

  // 5. Pooled vectors of the non-empty bags back to the requesters; add the partial sums.
  from_owner.assign(world, 0);
  for (int q = 0; q < world; ++q)
    for (int s : rank_shards[q])
      for (int b = 0; b < B; ++b) from_owner[q] += shard_lengths[s][b] > 0;
  for (int p = 0; p < world; ++p) send_counts[p] = static_cast<std::size_t>(from_source[p] * dim);
  for (int q = 0; q < world; ++q) recv_counts[q] = static_cast<std::size_t>(from_owner[q] * dim);
  if (on_host) {
    post(send_f32.data(), send_counts, recv_f32, recv_counts, comm::DataType::f32, sizeof(float));
  } else {
    post_device(stream, static_cast<std::size_t>(n_bags), send_counts, recv_counts);
    plan_combine();
  }
}

// The device path's combine as index metadata: for output vector j = b * num_tables + t, the
// positions in the received vectors of its partial sums, in the order combine_pooled's host loop
// adds them (ranks, then their shards).
void ShardedEmbedding::Impl::plan_combine() {
  const int B = batch;
  const std::int64_t n_out = std::int64_t(B) * num_tables;
  combine_offsets.assign(n_out + 1, 0);
  for (int q = 0; q < world; ++q)
    for (int s : rank_shards[q]) {
      const int t = plan.shards()[s].table;
      for (int b = 0; b < B; ++b)
        if (shard_lengths[s][b] > 0) ++combine_offsets[std::int64_t(b) * num_tables + t + 1];
    }
  for (std::int64_t j = 0; j < n_out; ++j) combine_offsets[j + 1] += combine_offsets[j];
  combine_pos.resize(combine_offsets[n_out]);
  std::vector<std::int64_t> fill(combine_offsets.begin(), combine_offsets.end() - 1);
  std::int64_t part = 0;
  for (int q = 0; q < world; ++q)
    for (int s : rank_shards[q]) {
      const int t = plan.shards()[s].table;
      for (int b = 0; b < B; ++b)
        if (shard_lengths[s][b] > 0) combine_pos[fill[std::int64_t(b) * num_tables + t]++] = part++;
    }
  combine_scale.clear();
  if (pooling == Pooling::mean) {
    combine_scale.resize(n_out);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < num_tables; ++t) {
        const std::int64_t len = bag_length[std::size_t(t) * B + b];
        combine_scale[std::int64_t(b) * num_tables + t] = len > 0 ? 1.0f / static_cast<float>(len) : 1.f;
      }
  }
}

// Adds the partial sums of each table's shards into the output (mean: divides by bag lengths).
void ShardedEmbedding::Impl::combine_pooled(device::Stream& stream) {
  wait_pending();
  const int B = batch;
  float* out = pending_out;
  if (!on_host) {  // the device path: one kernel over the received vectors, planned by plan_combine()
    kernels::CombineParts f{dev_recv.data(), dim, stage(combine_offsets, dev_meta_i64[0], stream),
                            stage(combine_pos, dev_meta_i64[1], stream),
                            combine_scale.empty() ? nullptr : stage(combine_scale, dev_meta_f32[0], stream), out};
    launch(backend, stream, std::int64_t(B) * num_tables, f);
    return;
  }
  float* result = out;
  std::fill(result, result + std::size_t(B) * num_tables * dim, 0.f);
  const float* part = recv_f32.data();
  for (int q = 0; q < world; ++q)
    for (int s : rank_shards[q]) {
      const int t = plan.shards()[s].table;
      for (int b = 0; b < B; ++b) {
        if (shard_lengths[s][b] == 0) continue;
        float* o = result + (std::size_t(b) * num_tables + t) * dim;
        for (int d = 0; d < dim; ++d) o[d] += part[d];
        part += dim;
      }
    }
  if (pooling == Pooling::mean)
    for (int t = 0; t < num_tables; ++t)
      for (int b = 0; b < B; ++b) {
        const std::int64_t len = bag_length[std::size_t(t) * B + b];
        if (len <= 0) continue;
        const float inv = 1.0f / static_cast<float>(len);
        float* o = result + (std::size_t(b) * num_tables + t) * dim;
        for (int d = 0; d < dim; ++d) o[d] *= inv;
      }
}

void ShardedEmbedding::Impl::pool_bags(device::Stream& stream, std::int64_t n, const kernels::PoolBags& f) {
  if (!half_tables()) return launch(backend, stream, n, f);
  launch(backend, stream, n,
         kernels::PoolBagsHalf{half_weights.data(), storage.type, f.dim, f.offsets, f.rows, f.out_pos, f.out, f.mean});
}

}  // namespace recmix::embedding
