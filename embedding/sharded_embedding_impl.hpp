#pragma once
// The inside of ShardedEmbedding, shared by its source files: sharded_embedding_setup.cpp (set-up:
// shards, weights, 16-bit tables, tiers), sharded_embedding.cpp (the public calls, batch checks),
// sharded_embedding_one_hot.cpp (the one-hot paths), embedding_exchange.cpp (reserve, pooling, the
// all-to-all exchanges, combining partial sums) and embedding_update.cpp (grouping and the sparse
// update). Internal to recmix_embedding.
//
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
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "comm/communicator.hpp"
#include "device/buffer.hpp"
#include "embedding/device_grouping.hpp"
#include "embedding/kernel_launch.hpp"
#include "embedding/sharded_embedding.hpp"

namespace recmix::embedding {

inline constexpr std::int64_t kBadBatch = -1;  // sent instead of a message size when a rank's batch is bad

inline std::vector<std::size_t> displacements(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> d(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

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
  // 16-bit tables: the weights live in half_weights (`weights` stays empty); pooling and updates
  // launch the half kernels (pool_bags(), update_rows()), which locate a local row's table row through
  // shard_rows for the stochastic rounding's key, and update_step is that key's step.
  TableStorage storage;
  bool half_tables() const { return storage.type != half::Storage::fp32; }
  device::Buffer<std::uint16_t> half_weights;
  std::int64_t update_step = 0;
  std::vector<std::int64_t> rows_base, rows_begin;
  std::vector<int> rows_table;
  device::Buffer<std::int64_t> dev_rows_base, dev_rows_begin;
  device::Buffer<int> dev_rows_table;
  kernels::ShardRows shard_rows{};
  std::vector<float> view_weights;  // local_shards() of 16-bit tables: their values in fp32,
  std::vector<float> view_state;    // and their state where device memory is not the host's
  // PoolBags or, for 16-bit tables, PoolBagsHalf over the same bags (f.weights is ignored then).
  void pool_bags(device::Stream& stream, std::int64_t n, const kernels::PoolBags& f);
  // UpdateRows or, for 16-bit tables, UpdateRowsHalf with the same step.
  void update_rows(device::Stream& stream, std::int64_t n, const kernels::UpdateRows& f);
  // The 16-bit tables' form of `step` (its weights unused): their buffer (tiered: the device
  // tier, whose slots map to local rows), rounding and key.
  kernels::UpdateRowsHalf half_update(kernels::UpdateRows step) {
    step.weights = nullptr;
    kernels::ShardRows rows = shard_rows;
    if (tiers) rows.slot_row = tiers->slot_rows();
    return {step, half_weights.data(), storage.type, storage.stochastic, seed, update_step, rows};
  }
  // The same over the host tier of tiered tables (cold updates there), in the local row space.
  kernels::UpdateRowsHalf host_tier_half_update(kernels::UpdateRows step) {
    step.weights = nullptr;
    return {step, static_cast<std::uint16_t*>(tiers->host_weights()), storage.type, storage.stochastic, seed,
            update_step, host_shard_rows};
  }
  kernels::ShardRows host_shard_rows{};  // shard_rows with host pointers
  // The host tier's fp32 weights for UpdateRows (null for 16-bit tables: host_tier_half_update).
  float* host_tier_weights() { return half_tables() ? nullptr : static_cast<float*>(tiers->host_weights()); }
  void init_half_tables(device::Stream& stream);
  void init_shard_rows(device::Stream& stream);
  // Tiered: the device tier is `weights` (or `half_weights`) and `state` (hot slots, then staging
  // slots), own_rows are remapped to its slots by tiers->stage(), and the host tier is tiers' own.
  std::unique_ptr<device::MemoryPool> own_host_pool;
  std::unique_ptr<TieredRows> tiers;
  device::Stream* last_stream = nullptr;  // the stream of the last step (tier flushes wait for it)
  std::int64_t device_rows() const { return tiers ? tiers->device_rows() : local_rows; }

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
  // Host arrays go up through pinned memory (stage()): each device scratch buffer has two pinned
  // slots used in turn, and a slot is rewritten only after its copy, issued two uses before (a
  // step before, as a rule), has finished. A copy from pageable memory would wait for the stream.
  struct PinnedShadow {
    device::Buffer<unsigned char> slot[2];
    std::unique_ptr<device::Event> copied[2];
    int next = 0;
  };
  std::unique_ptr<device::MemoryPool> pinned_pool;  // host tier, made at the first upload
  std::map<const void*, PinnedShadow> shadows;      // by the scratch buffer they feed

  Impl(comm::Communicator& c, comm::Communicator& dc, device::Backend& b, device::MemoryPool& p, std::vector<TableSpec> t,
       Pooling pl, ShardingPlan pn, SparseOptimizerConfig o, std::uint64_t s)
      : comm(c), dcomm(dc), backend(b), pool(p), tables(std::move(t)), pooling(pl), plan(std::move(pn)),
        opt(std::move(o)), kind((check_sparse_optimizer(opt), opt.kind)), seed(s) {}
  ~Impl() {
    // A collective still in flight reads and writes our buffers: let it land first (every rank
    // posted it, so it completes).
    try {
      wait_pending();
      for (auto& r : in_flight) r->wait();
    } catch (...) {
    }
  }

  // stage()'s buffers for up to `count` elements: the device scratch and both pinned slots.
  template <class T>
  void reserve_stage(device::Buffer<T>& scratch, std::size_t count) {
    grow(scratch, std::max<std::size_t>(count, 1), "embedding scratch");
    grow_slots(shadows[&scratch], std::max<std::size_t>(count, 1) * sizeof(T));
  }
  // Both pinned slots of a scratch buffer at `bytes` at least (the host pool made on first use).
  void grow_slots(PinnedShadow& p, std::size_t bytes) {
    if (!pinned_pool)
      pinned_pool = std::make_unique<device::MemoryPool>(backend, device::Tier::host, "embedding index uploads");
    for (auto& slot : p.slot)
      if (slot.size() < bytes) slot = device::Buffer<unsigned char>(*pinned_pool, bytes, "embedding index upload");
  }
  void reserve(device::Stream& stream, int local_batch, std::int64_t global_batch, std::int64_t bag_rows);

  // Host array -> pointer the kernels can use (itself on the CPU backend, a device copy otherwise).
  template <class T>
  const T* stage(const std::vector<T>& host, device::Buffer<T>& scratch, device::Stream& stream) {
    return stage(std::span<const T>(host), scratch, stream);
  }
  template <class T>
  const T* stage(std::span<const T> host, device::Buffer<T>& scratch, device::Stream& stream) {
    if (on_host || host.empty()) return host.data();
    grow(scratch, host.size(), "embedding scratch");
    const std::size_t bytes = host.size() * sizeof(T);
    PinnedShadow& p = shadows[&scratch];
    const int k = p.next;
    p.next ^= 1;
    if (p.copied[k])
      p.copied[k]->synchronize();
    else
      p.copied[k] = backend.create_event();
    if (p.slot[k].size() < bytes) grow_slots(p, bytes);  // both at once: the other is used by the next step
    std::memcpy(p.slot[k].data(), host.data(), bytes);
    backend.copy(scratch.data(), p.slot[k].data(), bytes, stream);
    p.copied[k]->record(stream);
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
    recv.resize(std::max<std::size_t>(hold_counts(sc, rc, elem), 1));
    pending = comm.iall_to_all_v(send, pending_sc, pending_sd, recv.data(), pending_rc, pending_rd, type);
  }
  // The device path's post: device buffers over dcomm, ordered after what `stream` holds. With
  // the exchange stream on (exchange_stream_enabled), the all-to-all runs on a stream of its own,
  // which waits for `stream`'s work so far (the pooling into dev_send) by an event; `stream` goes
  // on at once (the bottom MLP) and waits for the exchange in wait_pending().
  void post_device(device::Stream& stream, std::size_t send_vectors, const std::vector<std::size_t>& sc,
                   const std::vector<std::size_t>& rc) {
    const std::size_t total = hold_counts(sc, rc, sizeof(float));
    grow(dev_send, std::max<std::size_t>(send_vectors * dim, 1), "embedding vectors sent");
    grow(dev_recv, std::max<std::size_t>(total, 1), "embedding vectors received");
    device::Stream* on = &stream;
    pending_compute = nullptr;
    if (exchange_stream_enabled()) {
      if (!exchange_stream) {
        exchange_stream = backend.create_stream();
        send_ready = backend.create_event();
        exchanged = backend.create_event();
      }
      send_ready->record(stream);
      send_ready->wait(*exchange_stream);
      on = exchange_stream.get();
      pending_compute = &stream;
    }
    pending = dcomm.iall_to_all_v(dev_send.data(), pending_sc, pending_sd, dev_recv.data(), pending_rc, pending_rd,
                                  comm::DataType::f32, on);
  }
  std::unique_ptr<device::Stream> exchange_stream;
  std::unique_ptr<device::Event> send_ready, exchanged;
  device::Stream* pending_compute = nullptr;  // set while an exchange runs on exchange_stream
  // Keeps a posted exchange's counts and displacements, counts the bytes it sends to other ranks;
  // returns the elements it receives.
  std::size_t hold_counts(const std::vector<std::size_t>& sc, const std::vector<std::size_t>& rc, std::size_t elem) {
    pending_sc = sc;
    pending_rc = rc;
    pending_sd = displacements(sc);
    pending_rd = displacements(rc);
    for (int q = 0; q < world; ++q)
      if (q != rank) bytes_sent += sc[q] * elem;
    std::size_t total = 0;
    for (auto c : rc) total += c;
    return total;
  }
  template <class T>
  void grow(device::Buffer<T>& buffer, std::size_t count, const char* what) {
    if (buffer.size() < count) {
      buffer = device::Buffer<T>(pool, count, what);
      ++buffers_made;
    }
  }
  // Makes the last exchange's result usable by what follows on the stream. With a communicator
  // that orders its calls on the stream (NCCL) the host does not wait: the request is kept until
  // it has completed (released at a later call, or waited for at destruction).
  void wait_pending() {
    if (pending) {
      if (!on_host && dcomm.orders_on_stream())
        in_flight.push_back(std::move(pending));
      else
        pending->wait();
      if (pending_compute) {  // the compute stream waits for the exchange stream, not the host
        exchanged->record(*exchange_stream);
        exchanged->wait(*pending_compute);
        pending_compute = nullptr;
      }
    }
    pending.reset();
    std::erase_if(in_flight, [](const std::unique_ptr<comm::Request>& r) { return r->test(); });
  }
  std::vector<std::unique_ptr<comm::Request>> in_flight;

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
  bool one_hot_path(int local_batch) const { return local_only && on_host && !tiers && local_batch > 0; }
  // Its device twin (one rank, whole tables, untiered, device memory): the packed indices go up as
  // they are, and OneHotCsr builds the owner CSR there (sharded_embedding_one_hot.cpp).
  bool device_one_hot_path(int local_batch) const { return local_only && !on_host && !tiers && local_batch > 0; }
  // Its host half (the check and the upload) in forward_start(); its device half (the owner CSR
  // and the pooling, device_one_hot_kernels) in forward_finish(), which is then device work alone.
  void forward_device_one_hot(device::Stream& stream, std::span<const std::int32_t> packed, int local_batch,
                              float* out);
  void finish_device_one_hot(device::Stream& stream);
  struct OneHotKernels {
    kernels::OneHotCsr csr;
    kernels::PoolBags pool;
    std::int64_t bags;
  };
  std::optional<OneHotKernels> device_one_hot_kernels;  // set by forward_start, launched by forward_finish
  // The error of index `index` of table t in bag b of the local batch.
  DataError index_error(int t, std::int64_t index, std::int64_t b) const;
  device::Buffer<std::int32_t> dev_one_hot_indices;
  device::Buffer<std::int64_t> dev_one_hot_base;  // per table, uploaded once
  bool device_one_hot_step = false;               // this step's forward took that path (own_offsets unused)
  std::uint64_t buffers_made = 0;                 // device buffers made anew (grow, stage's scratch)
  bool rate_varies = false;  // set_learning_rate() was called: the updates' rate, by value, changes by step
  // The same with tiers (cold updates in staging): the lookups remapped to slots, as int32.
  bool tiered_one_hot_path(int local_batch) const {
    return local_only && on_host && tiers && tiers->cold_update() == ColdUpdate::device && local_batch > 0 &&
           tiers->device_rows() < (std::int64_t(1) << 31) && !half_tables();
  }
  std::vector<std::int32_t> one_hot_slots;
  void forward_tiered_one_hot(device::Stream& stream, const std::int32_t* packed, int local_batch, float* out);
  static bool is_one_hot(std::span<const Bags> bags, int local_batch);
  cpu::OneHotTables one_hot_tables();
  kernels::UpdateRowsHalf one_hot_half{};  // 16-bit tables: what one_hot_tables() points at
  void begin_forward(float* out);
  // The one-hot CPU path's forward, over one_hot_indices or one_hot_packed.
  void forward_one_hot(device::Stream& stream, int local_batch, float* out);
  void forward_local(device::Stream& stream, std::span<const Bags> bags, float* out);
  void forward_distributed(device::Stream& stream, std::span<const Bags> bags, bool bad_batch,
                           const std::string& error);
  bool exchange_indices(std::span<const Bags> bags, bool bad_batch, const std::string& error, bool throw_bad);
  void pool_and_post(device::Stream& stream);
  void record_bag_lengths(std::span<const Bags> bags, int local_batch);

  // The lookahead of tiered tables: the next batch's index plan, exchanged by prefetch() during
  // this step (exchange_indices() into these, swapped with the members above and back), taken by
  // forward_start_prefetched().
  struct IndexPlan {
    int batch = 0;
    std::vector<std::vector<std::int64_t>> shard_lengths, shard_indices;
    std::vector<std::int64_t> bag_length, from_source, own_offsets, own_rows;
  };
  IndexPlan next;
  bool next_valid = false;
  std::vector<std::vector<std::int64_t>> next_offsets, next_indices;  // a OneHotRows batch as CSRs
  std::vector<Bags> next_bags;
  void swap_plan() {
    std::swap(batch, next.batch);
    shard_lengths.swap(next.shard_lengths);
    shard_indices.swap(next.shard_indices);
    bag_length.swap(next.bag_length);
    from_source.swap(next.from_source);
    own_offsets.swap(next.own_offsets);
    own_rows.swap(next.own_rows);
  }
  void prefetch(std::span<const Bags> bags, int local_batch);
  void combine_pooled(device::Stream& stream);
  void plan_combine();
  void group_rows(std::int64_t n_bags, const std::int64_t* grad_pos, const float* scale);
  void update_on_host(device::Stream& stream, const float* grad);
  // cold_update = host: the groups of staged rows updated in the host tier, the rest in place.
  void update_split(device::Stream& stream, const float* grad);
  std::vector<std::int64_t> split_rows[2], split_offsets[2], split_grad[2];
  std::vector<float> split_scale[2];
  void update_cold_on_host(device::Stream& stream, const float* dev_grad, bool scaled);
  std::vector<float> host_grad;  // the device path's gradients on the host (cold_update = host)
  // The device path's update: entries grouped on the device from the staged owner CSR.
  void update_on_device(device::Stream& stream, const float* dev_grad, bool scaled);
};

}  // namespace recmix::embedding
