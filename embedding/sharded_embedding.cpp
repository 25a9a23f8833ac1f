// The distributed lookup. Message layouts (all-to-all-v, per peer, in plan order of the shards
// the receiving rank owns):
//   indices, requester -> owner (i64): [local_batch][lengths of shard 0 .. k-1, local_batch each]
//                                      [shard 0's indices (shard-local rows)] ... [shard k-1's]
//   pooled, owner -> requester (f32):  [shard 0: dim floats per bag with rows in it] ... [shard k-1]
//   gradients, requester -> owner:     the pooled layout again
// A row-wise shard returns a partial sum per bag; the requester adds the partial sums of a
// table's shards and, for mean pooling, divides by the whole bag's length (and scales the
// gradient by the same factor before sending it back). With one rank and whole tables the
// communication is skipped and the bags are pooled straight into the output.
#include "embedding/sharded_embedding.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <cstdint>
#include <fmt/format.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "core/error.hpp"
#include "device/buffer.hpp"
#include "embedding/device_grouping.hpp"
#include "embedding/kernel_launch.hpp"
#include "embedding/radix_sort.hpp"

namespace recmix::embedding {
namespace {

constexpr std::int64_t kBadBatch = -1;  // sent instead of a message size when a rank's batch is bad

// Tables are read at random rows: on 2 MiB pages a lookup costs one cache miss instead of a miss
// plus a page walk (measured here: the Kaggle-sized forward about 1.5x faster). Only a hint,
// given for large host allocations before their first touch.
void advise_huge_pages(void* p, std::size_t bytes) {
#if defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t(2) << 20;
  if (!p || bytes < 4 * kHuge) return;
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

std::vector<std::size_t> displacements(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> d(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

}  // namespace

struct ShardedEmbedding::Impl {
  comm::Communicator& comm;   // host buffers: batch sizes and indices
  comm::Communicator& dcomm;  // device buffers: pooled vectors and their gradients (device path)
  device::Backend& backend;
  device::MemoryPool& pool;
  std::vector<TableSpec> tables;
  Pooling pooling;
  ShardingPlan plan;
  SparseOptimizerConfig opt;
  SparseOptimizerKind kind;
  std::uint64_t seed;
  int rank, world, num_tables, dim;
  bool on_host;     // weights are host memory (CPU backend): kernels read and write host arrays
  bool local_only;  // one rank and every table whole: no communication at all

  std::vector<int> owned;                       // shard ids this rank owns, plan order
  std::vector<std::int64_t> shard_base;         // per shard: first row in `weights`, -1 if not owned
  std::vector<std::vector<int>> table_shards;   // per table: shard ids by row_begin
  std::vector<std::vector<int>> rank_shards;    // per rank: shard ids it owns, plan order
  std::int64_t local_rows = 0;
  device::Buffer<float> weights, state;

  // Where the layer is in a step: forward_start -> forward_finish -> backward_start ->
  // backward_finish (forward() and backward() run both halves).
  enum class Phase { idle, forward_started, forward_done, backward_started };
  Phase phase = Phase::idle;
  float* pending_out = nullptr;
  std::unique_ptr<comm::Request> pending;
  std::vector<std::size_t> pending_sc, pending_sd, pending_rc, pending_rd;

  // Set by forward, used by backward.
  int batch = 0;
  std::vector<std::int64_t> bag_length;     // [num_tables x batch]: whole-bag lengths (mean pooling)
  std::vector<std::int64_t> from_source;    // owner: non-empty bags pooled for each source rank
  std::vector<std::int64_t> from_owner;     // requester: non-empty bags each owner pools for it
  std::vector<std::int64_t> own_offsets;    // owner side CSR over the bags it pools
  std::vector<std::int64_t> own_rows;       // rows in `weights`
  std::vector<float> own_scale;             // local_only + mean: 1 / bag length per bag
  std::size_t bytes_sent = 0;

  // Scratch reused across steps.
  std::vector<std::vector<std::int64_t>> shard_lengths, shard_indices;  // per shard (requester)
  std::vector<std::int64_t> send_i64, recv_i64;
  std::vector<float> send_f32, recv_f32;
  std::vector<std::int64_t> sort_rows, sort_entry, tmp_rows, tmp_entry, bag_of_entry;
  std::vector<std::int64_t> unique_rows, entry_offsets, entry_grad, group_at;
  std::vector<float> entry_scale;
  device::Buffer<std::int64_t> dev_i64[4];
  device::Buffer<float> dev_f32;
  // The device path (weights not host-accessible: CUDA, cpu-strict): float data stays on the device.
  // Pooled vectors and their gradients leave from dev_send and arrive in dev_recv over dcomm; the
  // host only builds index metadata, from the host batch, and uploads it.
  device::Buffer<float> dev_send, dev_recv;
  std::vector<std::int64_t> combine_offsets, combine_pos;  // per output vector: its parts in recv
  std::vector<float> combine_scale;                        // mean: 1 / bag length per output vector
  std::vector<std::int64_t> gather_src;                    // per gradient sent: its vector in grad_out
  std::vector<float> gather_scale;                         // mean: 1 / bag length per gradient sent
  device::Buffer<std::int64_t> dev_meta_i64[3];
  device::Buffer<float> dev_meta_f32[2];
  device::Buffer<std::int64_t> dev_own_offsets, dev_own_rows;  // the owner CSR, for pooling and grouping
  device::Buffer<float> dev_own_scale;                           // local_only + mean, per bag
  std::unique_ptr<DeviceGrouping> grouping;                      // the device path's update grouping

  Impl(comm::Communicator& c, comm::Communicator& dc, device::Backend& b, device::MemoryPool& p, std::vector<TableSpec> t,
       Pooling pl, ShardingPlan pn, SparseOptimizerConfig o, std::uint64_t s)
      : comm(c), dcomm(dc), backend(b), pool(p), tables(std::move(t)), pooling(pl), plan(std::move(pn)),
        opt(std::move(o)), kind(parse_sparse_optimizer(opt)), seed(s) {}
  ~Impl() {
    // A collective still in flight reads and writes our buffers: let it land first (every rank
    // posted it, so it completes).
    try {
      wait_pending();
    } catch (...) {
    }
  }

  // Host array -> pointer the kernels can use (itself on the CPU backend, a device copy otherwise).
  template <class T>
  const T* stage(const std::vector<T>& host, device::Buffer<T>& scratch, device::Stream& stream) {
    if (on_host || host.empty()) return host.data();
    if (scratch.size() < host.size()) scratch = device::Buffer<T>(pool, host.size(), "embedding scratch");
    backend.copy(scratch.data(), host.data(), host.size() * sizeof(T), stream);
    return scratch.data();
  }

  void all_to_all(const std::vector<std::int64_t>& send, const std::vector<std::size_t>& sc,
                  std::vector<std::int64_t>& recv, const std::vector<std::size_t>& rc) {
    exchange(send.data(), sc, recv, rc, comm::DataType::i64, sizeof(std::int64_t));
  }
  void all_to_all(const std::vector<float>& send, const std::vector<std::size_t>& sc,
                  std::vector<float>& recv, const std::vector<std::size_t>& rc) {
    exchange(send.data(), sc, recv, rc, comm::DataType::f32, sizeof(float));
  }
  template <class T>
  void exchange(const T* send, const std::vector<std::size_t>& sc, std::vector<T>& recv,
                const std::vector<std::size_t>& rc, comm::DataType type, std::size_t elem) {
    std::size_t total = 0;
    for (auto c : rc) total += c;
    recv.resize(std::max<std::size_t>(total, 1));
    const auto sd = displacements(sc), rd = displacements(rc);
    comm.all_to_all_v(send, sc, sd, recv.data(), rc, rd, type);
    for (int q = 0; q < world; ++q)
      if (q != rank) bytes_sent += sc[q] * elem;
  }

  // The non-blocking twin of exchange(): counts and displacements live here until wait_pending().
  template <class T>
  void post(const T* send, const std::vector<std::size_t>& sc, std::vector<T>& recv,
            const std::vector<std::size_t>& rc, comm::DataType type, std::size_t elem) {
    std::size_t total = 0;
    for (auto c : rc) total += c;
    recv.resize(std::max<std::size_t>(total, 1));
    pending_sc = sc;
    pending_rc = rc;
    pending_sd = displacements(sc);
    pending_rd = displacements(rc);
    pending = comm.iall_to_all_v(send, pending_sc, pending_sd, recv.data(), pending_rc, pending_rd, type);
    for (int q = 0; q < world; ++q)
      if (q != rank) bytes_sent += sc[q] * elem;
  }
  // The device path's post: device buffers over dcomm, ordered on stream.
  void post_device(device::Stream& stream, std::size_t send_vectors, const std::vector<std::size_t>& sc,
                   const std::vector<std::size_t>& rc) {
    std::size_t total = 0;
    for (auto c : rc) total += c;
    grow(dev_send, std::max<std::size_t>(send_vectors * dim, 1), "embedding vectors sent");
    grow(dev_recv, std::max<std::size_t>(total, 1), "embedding vectors received");
    pending_sc = sc;
    pending_rc = rc;
    pending_sd = displacements(sc);
    pending_rd = displacements(rc);
    pending = dcomm.iall_to_all_v(dev_send.data(), pending_sc, pending_sd, dev_recv.data(), pending_rc, pending_rd,
                                  comm::DataType::f32, &stream);
    for (int q = 0; q < world; ++q)
      if (q != rank) bytes_sent += sc[q] * sizeof(float);
  }
  template <class T>
  void grow(device::Buffer<T>& buffer, std::size_t count, const char* what) {
    if (buffer.size() < count) buffer = device::Buffer<T>(pool, count, what);
  }
  void wait_pending() {
    if (pending) pending->wait();
    pending.reset();
  }

  void check_batch(std::span<const Bags> bags, int local_batch, std::string& error,
                   bool check_indices = true) const;
  // One rank, CPU, whole tables, one index per bag: the table-by-table path (cpu::one_hot_*).
  bool one_hot_step = false;
  std::vector<std::int64_t> one_hot_rows, one_hot_base, one_hot_table_rows, one_hot_scratch;
  std::vector<const std::int64_t*> one_hot_indices;
  const std::int32_t* one_hot_packed = nullptr;  // OneHotRows input, used instead of one_hot_indices
  // A OneHotRows batch on the other paths, as one CSR per table.
  std::vector<std::vector<std::int64_t>> expanded_offsets, expanded_indices;
  std::vector<Bags> expanded_bags;
  // Whether the one-hot CPU path can run a batch whose bags each hold one index.
  bool one_hot_path(int local_batch) const { return local_only && on_host && local_batch > 0; }
  static bool is_one_hot(std::span<const Bags> bags, int local_batch);
  cpu::OneHotTables one_hot_tables();
  void begin_forward(float* out);
  // The one-hot CPU path's forward, over one_hot_indices or one_hot_packed.
  void forward_one_hot(int local_batch, float* out);
  void forward_local(device::Stream& stream, std::span<const Bags> bags, float* out);
  void forward_distributed(device::Stream& stream, std::span<const Bags> bags, bool bad_batch,
                           const std::string& error);
  void combine_pooled(device::Stream& stream);
  void plan_combine();
  void group_rows(std::int64_t n_bags, const std::int64_t* grad_pos, const float* scale);
  void update(device::Stream& stream, const float* dev_grad);
  // The device path's update: entries grouped on the device from the staged owner CSR.
  void update_on_device(device::Stream& stream, const float* dev_grad, bool scaled);
};

bool ShardedEmbedding::Impl::is_one_hot(std::span<const Bags> bags, int local_batch) {
  for (const Bags& bag : bags) {
    const std::int64_t* off = bag.offsets.data();
    for (int b = 0; b < local_batch; ++b)
      if (off[b + 1] != off[b] + 1) return false;
  }
  return true;
}

cpu::OneHotTables ShardedEmbedding::Impl::one_hot_tables() {
  return {weights.data(), state.empty() ? nullptr : state.data(), dim, num_tables, batch,
          one_hot_indices.data(), one_hot_packed, one_hot_base.data(), one_hot_table_rows.data(),
          one_hot_rows.data(), one_hot_scratch.data()};
}

void ShardedEmbedding::Impl::begin_forward(float* out) {
  RECMIX_REQUIRE(phase != Phase::forward_started && phase != Phase::backward_started, Error,
                 "embedding: forward_start() while a forward or backward is in flight");
  phase = Phase::idle;
  bytes_sent = 0;
  pending_out = out;
}

void ShardedEmbedding::Impl::forward_one_hot(int local_batch, float* out) {
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
  const std::int64_t bad = cpu::one_hot_forward(backend.num_threads(), f, out);
  if (bad >= 0) {
    const int t = static_cast<int>(bad / local_batch), b = static_cast<int>(bad % local_batch);
    throw DataError(fmt::format("embedding table {}: index {} out of range [0, {}) in bag {} of the local "
                                "batch (rank {})",
                                t, f.index(b, t), tables[t].rows, b, rank));
  }
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
          return fail(fmt::format("embedding table {}: index {} out of range [0, {}) in bag {} of "
                                  "the local batch (rank {})",
                                  t, idx[k], rows, b, rank));
  }
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
  kernels::PoolBags f{weights.data(), dim, stage(own_offsets, dev_own_offsets, stream),
                      stage(own_rows, dev_own_rows, stream), nullptr, out, mean};
  launch(backend, stream, n_bags, f);
  if (mean) stage(own_scale, dev_own_scale, stream);
}

void ShardedEmbedding::Impl::forward_distributed(device::Stream& stream, std::span<const Bags> bags,
                                                 bool bad_batch, const std::string& error) {
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
  const std::int64_t n_bags = static_cast<std::int64_t>(own_offsets.size()) - 1;

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
  launch(backend, stream, n_bags, f);

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

// Groups the entries of the owner CSR by row. A stable LSD radix sort on the row (11 bits a pass,
// linear in the entries) finds each row's entries in CSR order, which is the order of the global
// batch, so duplicates are summed in the same order whatever the thread or rank count. The groups
// are then emitted in the order of their first entry: the update reads the gradient vectors
// almost sequentially and only the weight rows at random (prefetched), where row order would make
// both streams random (measured: about 1.5x slower on the Kaggle tables).
void ShardedEmbedding::Impl::group_rows(std::int64_t n_bags, const std::int64_t* grad_pos,
                                        const float* scale) {
  const std::int64_t n = own_offsets[n_bags];
  // Raw pointers: stores through the vectors' int64 elements would otherwise make the compiler
  // reload every vector's data pointer inside the loops.
  sort_rows.resize(n);
  sort_entry.resize(n);
  tmp_rows.resize(n);
  tmp_entry.resize(n);
  std::int64_t* rows = sort_rows.data();
  std::int64_t* entry = sort_entry.data();
  std::int64_t* rows_tmp = tmp_rows.data();
  std::int64_t* entry_tmp = tmp_entry.data();
  std::copy(own_rows.begin(), own_rows.begin() + n, rows);
  for (std::int64_t e = 0; e < n; ++e) entry[e] = e;
  std::vector<std::int64_t> count;
  std::tie(rows, entry) = detail::radix_sort(rows, entry, rows_tmp, entry_tmp, n, detail::bits_below(local_rows), 11, count);
  // Bag of every entry.
  bag_of_entry.resize(n);
  std::int64_t* bag = bag_of_entry.data();
  const std::int64_t* off = own_offsets.data();
  for (std::int64_t j = 0; j < n_bags; ++j)
    for (std::int64_t k = off[j]; k < off[j + 1]; ++k) bag[k] = j;
  // group_at[e] = start (in sorted order) of the group whose first entry is e, or -1; scanning e
  // upwards then lists the groups by first entry.
  group_at.assign(n, -1);
  std::int64_t* first = group_at.data();
  std::int64_t groups = 0;
  for (std::int64_t i = 0; i < n; ++i)
    if (i == 0 || rows[i] != rows[i - 1]) {
      first[entry[i]] = i;
      ++groups;
    }
  unique_rows.resize(groups);
  entry_offsets.resize(groups + 1);
  entry_grad.resize(n);
  entry_scale.resize(scale ? n : 0);
  std::int64_t* unique = unique_rows.data();
  std::int64_t* offsets = entry_offsets.data();
  std::int64_t* grad = entry_grad.data();
  float* scales = entry_scale.data();
  offsets[0] = 0;
  std::int64_t out = 0, g = 0;
  for (std::int64_t e = 0; e < n; ++e) {
    std::int64_t i = first[e];
    if (i < 0) continue;
    const std::int64_t row = rows[i];
    unique[g] = row;
    for (; i < n && rows[i] == row; ++i, ++out) {
      const std::int64_t j = bag[entry[i]];
      grad[out] = grad_pos ? grad_pos[j] : j;
      if (scale) scales[out] = scale[j];
    }
    offsets[++g] = out;
  }
}

void ShardedEmbedding::Impl::update_on_device(device::Stream& stream, const float* dev_grad, bool scaled) {
  if (!grouping) grouping = std::make_unique<DeviceGrouping>(backend, pool);
  const std::int64_t n_bags = static_cast<std::int64_t>(own_offsets.size()) - 1;
  grouping->group(stream, dev_own_offsets.data(), dev_own_rows.data(), n_bags, own_offsets[n_bags],
                  detail::bits_below(local_rows), scaled ? dev_own_scale.data() : nullptr);
  kernels::UpdateRows f{weights.data(), state.data(), dim, kind, opt.lr, opt.eps, nullptr, nullptr, nullptr, nullptr,
                        dev_grad};
  grouping->fill(f);
  launch(backend, stream, grouping->launch_size(), f);
}

// grad: the gradient vectors where the kernels read them (device memory; host memory on the CPU).
void ShardedEmbedding::Impl::update(device::Stream& stream, const float* dev_grad) {
  kernels::UpdateRows f{weights.data(), state.data(), dim, kind, opt.lr, opt.eps,
                        stage(unique_rows, dev_i64[0], stream), stage(entry_offsets, dev_i64[1], stream),
                        stage(entry_grad, dev_i64[2], stream),
                        entry_scale.empty() ? nullptr : stage(entry_scale, dev_f32, stream), dev_grad};
  launch(backend, stream, static_cast<std::int64_t>(unique_rows.size()), f);
}

ShardedEmbedding::ShardedEmbedding(comm::Communicator& comm, device::Backend& backend,
                                   device::MemoryPool& pool, std::vector<TableSpec> tables,
                                   Pooling pooling, ShardingPlan plan, SparseOptimizerConfig optimizer,
                                   std::uint64_t seed, comm::Communicator* device_comm)
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
  m.on_host = backend.kind() == device::BackendKind::cpu;

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

  const std::size_t per_row = state_per_row(m.kind, m.dim);
  m.weights = device::Buffer<float>(pool, std::size_t(m.local_rows) * m.dim,
                                    fmt::format("embedding weights (rank {})", m.rank));
  if (per_row > 0)
    m.state = device::Buffer<float>(pool, std::size_t(m.local_rows) * per_row,
                                    fmt::format("embedding optimizer state (rank {})", m.rank));
  if (m.on_host) {
    advise_huge_pages(m.weights.data(), m.weights.bytes());
    advise_huge_pages(m.state.data(), m.state.bytes());
  }
  auto stream = backend.create_stream();
  for (int s : m.owned) {
    const Shard& sh = shards[s];
    kernels::InitShard f{m.weights.data() + m.shard_base[s] * m.dim, seed, sh.table,
                         m.tables[sh.table].rows, m.dim, sh.row_begin};
    launch(backend, *stream, (sh.row_end - sh.row_begin) * m.dim, f);
  }
  if (per_row > 0)
    launch(backend, *stream, static_cast<std::int64_t>(m.state.size()),
           kernels::Fill{m.state.data(), m.opt.initial_accumulator});
  stream->synchronize();
}

ShardedEmbedding::~ShardedEmbedding() = default;

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
  if (m.one_hot_path(local_batch)) {  // read in place, checked as they are read
    m.begin_forward(out);
    m.one_hot_step = true;
    m.one_hot_packed = rows.indices.data();
    m.forward_one_hot(local_batch, out);
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
    m.forward_one_hot(local_batch, out);
  } else if (m.local_only) {
    if (!error.empty()) throw DataError(error);
    m.batch = local_batch;
    m.forward_local(stream, bags, out);
  } else {
    m.batch = error.empty() ? local_batch : 0;
    if (error.empty() && m.pooling == Pooling::mean) {
      m.bag_length.resize(std::size_t(m.num_tables) * local_batch);
      for (int t = 0; t < m.num_tables; ++t)
        for (int b = 0; b < local_batch; ++b)
          m.bag_length[std::size_t(t) * local_batch + b] = bags[t].offsets[b + 1] - bags[t].offsets[b];
    }
    m.forward_distributed(stream, bags, !error.empty(), error);
  }
  m.phase = Impl::Phase::forward_started;
}

void ShardedEmbedding::forward_finish(device::Stream& stream) {
  Impl& m = *impl_;
  RECMIX_REQUIRE(m.phase == Impl::Phase::forward_started, Error,
                 "embedding: forward_finish() without forward_start()");
  m.phase = Impl::Phase::idle;
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
    cpu::one_hot_update(m.backend.num_threads(), m.one_hot_tables(), m.kind, m.opt.lr, m.opt.eps, grad_out);
    m.phase = Impl::Phase::backward_started;
    return;
  }
  if (m.local_only) {  // nothing travels: the whole update runs here
    const std::int64_t n_bags = std::int64_t(T) * B;
    if (m.on_host) {
      m.group_rows(n_bags, nullptr, m.own_scale.empty() ? nullptr : m.own_scale.data());
      m.update(stream, grad_out);
    } else {
      m.update_on_device(stream, grad_out, !m.own_scale.empty());
    }
    m.phase = Impl::Phase::backward_started;
    return;
  }
  // Gradients of the pooled vectors to the owners, in the pooled layout (mean: scaled by 1/length).
  std::vector<std::size_t> send_counts(m.world), recv_counts(m.world);
  std::size_t total = 0;
  for (int q = 0; q < m.world; ++q) total += static_cast<std::size_t>(m.from_owner[q]);
  if (!m.on_host) {  // the device path: one gather kernel into the send buffer, planned here
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
    m.grow(m.dev_send, std::max<std::size_t>(total * D, 1), "embedding vectors sent");
    kernels::GatherRows f{grad_out, D, m.stage(m.gather_src, m.dev_meta_i64[2], stream),
                          m.gather_scale.empty() ? nullptr : m.stage(m.gather_scale, m.dev_meta_f32[1], stream),
                          m.dev_send.data()};
    launch(m.backend, stream, static_cast<std::int64_t>(total), f);
    m.post_device(stream, total, send_counts, recv_counts);
    m.phase = Impl::Phase::backward_started;
    return;
  }
  const float* grad = grad_out;
  m.send_f32.resize(std::max<std::size_t>(total * D, 1));
  float* o = m.send_f32.data();
  for (int q = 0; q < m.world; ++q) {
    send_counts[q] = static_cast<std::size_t>(m.from_owner[q] * D);
    recv_counts[q] = static_cast<std::size_t>(m.from_source[q] * D);
    for (int s : m.rank_shards[q]) {
      const int t = m.plan.shards()[s].table;
      for (int b = 0; b < B; ++b) {
        if (m.shard_lengths[s][b] == 0) continue;
        const float* g = grad + (std::size_t(b) * T + t) * D;
        float scale = 1.f;
        if (m.pooling == Pooling::mean) {
          const std::int64_t len = m.bag_length[std::size_t(t) * B + b];
          scale = len > 0 ? 1.0f / static_cast<float>(len) : 0.f;
        }
        for (int d = 0; d < D; ++d) o[d] = g[d] * scale;
        o += D;
      }
    }
  }
  m.post(m.send_f32.data(), send_counts, m.recv_f32, recv_counts, comm::DataType::f32, sizeof(float));
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
    m.update(stream, m.recv_f32.data());
  } else {
    m.update_on_device(stream, m.dev_recv.data(), false);
  }
}

std::vector<LocalShardView> ShardedEmbedding::local_shards() {
  Impl& m = *impl_;
  std::vector<LocalShardView> views;
  const std::size_t per_row = state_per_row(m.kind, m.dim);
  for (int s : m.owned) {
    const Shard& sh = m.plan.shards()[s];
    LocalShardView v{sh.table, sh.row_begin, sh.row_end, m.dim,
                     m.weights.data() + m.shard_base[s] * m.dim, {}, {}};
    if (per_row > 0) {
      v.state.emplace_back(state_name(m.kind), m.state.data() + m.shard_base[s] * per_row);
      v.state_counts.push_back(std::size_t(sh.row_end - sh.row_begin) * per_row);
    }
    views.push_back(std::move(v));
  }
  return views;
}

const ShardingPlan& ShardedEmbedding::plan() const { return impl_->plan; }
int ShardedEmbedding::num_tables() const { return impl_->num_tables; }
int ShardedEmbedding::dim() const { return impl_->dim; }
Pooling ShardedEmbedding::pooling() const { return impl_->pooling; }
SparseOptimizerKind ShardedEmbedding::optimizer_kind() const { return impl_->kind; }
std::size_t ShardedEmbedding::bytes_sent_last_step() const { return impl_->bytes_sent; }
std::size_t ShardedEmbedding::local_bytes() const {
  return impl_->weights.bytes() + impl_->state.bytes();
}

}  // namespace recmix::embedding
