#pragma once
// The hot/cold tiers of the rows one rank owns. The host tier holds every row of every owned
// shard (weights and optimizer state, in the local row space of ShardedEmbedding: shard after
// shard); it is the backing store. The device tier is one buffer of H + S rows: H hot slots, each
// the device copy of one hot row (authoritative while the row is hot), then S staging slots.
// A step's cold rows are staged into the staging slots before pooling, its lookups remapped to
// slots, and after the update the staged rows are written back to the host tier before the next
// step stages (cold_update = device), or the update of cold rows is applied to the host tier
// itself (cold_update = host). Every row's value therefore follows exactly the
// sequence of updates it would see untiered: tiered training equals untiered training bit for bit.
//
// The split is ShardTiers::by_counts over access counts: the dataset's (/access_counts) or those
// counted here, one per lookup, and re-ranked every rerank_interval steps (rows move with their
// state both ways). This is the design of a software-managed cache over a backing store (FBGEMM's
// UVM cache keeps whole tables in host-mapped memory and a row cache in HBM); the host tier costs
// the hot rows twice, in exchange for checkpoints, re-ranks and restores that never lose a row.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "device/memory_pool.hpp"
#include "device/stream.hpp"
#include "embedding/sparse_optimizer.hpp"
#include "embedding/tiering.hpp"
#include "embedding/types.hpp"  // HotSet, ColdUpdate

namespace recmix::embedding {

struct TierOptions {
  double hot_fraction = 0;           // (0, 1]: each shard's hot share; used when device_budget == 0
  std::uint64_t device_budget = 0;   // bytes of this rank's hot rows and staging slots
  HotSet hot_set = HotSet::counts;
  std::int64_t rerank_interval = 0;  // steps between re-ranks; 0: never
  ColdUpdate cold_update = ColdUpdate::device;
  std::int64_t bag_rows = 1;         // indices per bag expected (sizes the staging slots at start)
  std::int64_t global_batch = 0;     // samples per step over all ranks (sizes the staging slots)
  // Per table, per row access counts (the dataset's); empty for a table: none known.
  std::vector<std::vector<std::int64_t>> table_counts;
  device::MemoryPool* host_pool = nullptr;  // the host tier's pool (host_memory_capacity); required
  bool enabled() const { return hot_fraction != 0 || device_budget > 0; }
};

// Counters since construction (or the last take_stats()).
struct TierStats {
  std::int64_t steps = 0;
  std::int64_t lookups = 0, hot_hits = 0;           // entries looked up here, of which on hot rows
  std::int64_t rows_staged = 0, rows_written_back = 0;  // cold rows host -> device, device -> host
  std::int64_t rows_promoted = 0, rows_demoted = 0;     // moved by re-ranks
  std::int64_t rows_ahead = 0, rows_restaged = 0;       // staged from the lookahead; of them gathered again
  std::int64_t reranks = 0;
  std::size_t bytes_to_device = 0, bytes_to_host = 0;   // weights and state moved between the tiers
  double staging_s = 0;  // time the step waited for staging: the lookahead, writing back, gathering, copying
  double lookahead_wait_s = 0;  // ... of which waiting for the lookahead's thread
  void add(const TierStats& o);
};

// Host memory for rows on their way between the tiers (staged rows gathered ahead, rows written
// back): ordinary memory where the device tier is host memory, pinned memory from the host tier's
// pool otherwise, so that the copies to and from the device are asynchronous DMA. Its contents
// are not kept when it grows; it must not grow while a copy from or to it is in flight.
class TransitRows {
 public:
  TransitRows() = default;
  TransitRows(device::MemoryPool* pinned, std::string what) : pinned_pool_(pinned), what_(std::move(what)) {}
  void resize(std::size_t floats);
  float* data() { return pinned_pool_ ? pinned_.data() : plain_.data(); }
  void swap(TransitRows& o) noexcept;

 private:
  device::MemoryPool* pinned_pool_ = nullptr;
  std::string what_;
  std::vector<float> plain_;
  device::Buffer<float> pinned_;
};

// One owned shard in the local row space.
struct TierShard {
  int table;
  std::int64_t row_begin, row_end;  // the table's rows
  std::int64_t base;                // first local row
};

// The device tier's weights: fp32 rows, or the 16-bit rows (fp16, bf16) of tables stored so.
// Rows move between the tiers as bytes; only the kernels read their values.
struct TierWeights {
  device::Buffer<float>* fp32 = nullptr;
  device::Buffer<std::uint16_t>* half = nullptr;  // set instead of fp32 for 16-bit tables
  std::size_t element_bytes() const { return half ? sizeof(std::uint16_t) : sizeof(float); }
  unsigned char* bytes() const {
    return half ? reinterpret_cast<unsigned char*>(half->data()) : reinterpret_cast<unsigned char*>(fp32->data());
  }
  bool empty() const { return half ? half->empty() : fp32->empty(); }
  // The buffer for `elements` weights (the old one freed first: the two never coexist).
  void allocate(device::MemoryPool& pool, std::size_t elements, const std::string& what) {
    if (half) {
      *half = {};
      *half = device::Buffer<std::uint16_t>(pool, elements, what);
    } else {
      *fp32 = {};
      *fp32 = device::Buffer<float>(pool, elements, what);
    }
  }
};

class TieredRows {
 public:
  // Builds the host tier from init (called once per owned shard with host pointers to fill:
  // weights [rows x dim] of the weights' type (void*), state [rows x state_per_row]), picks the
  // hot rows and allocates the device tier into `weights` and `state` from `pool`. ConfigError for a
  // device_budget below the staging slots (naming both numbers); invalid_argument: a bad hot_fraction.
  template <class Init>
  TieredRows(device::Backend& backend, device::MemoryPool& pool, std::vector<TierShard> shards, int dim,
             std::size_t state_per_row, TierOptions options, int rank, bool on_host, TierWeights weights,
             device::Buffer<float>& state, const Init& init)
      : TieredRows(backend, pool, std::move(shards), dim, state_per_row, std::move(options), rank, on_host, weights,
                   state) {
    for (std::size_t k = 0; k < shards_.size(); ++k)
      init(k, static_cast<void*>(host_w_.data() + std::size_t(shards_[k].base) * wb_),
           state_per_row_ ? host_s_.data() + shards_[k].base * state_per_row_ : nullptr);
    place_hot_rows();
  }

  // Rows of the device tier (hot + staging slots): the row space the kernels index.
  std::int64_t device_rows() const { return hot_ + staging_; }
  std::int64_t hot_rows() const { return hot_; }
  std::int64_t staging_rows() const { return staging_; }
  ColdUpdate cold_update() const { return opt_.cold_update; }

  // One step's lookups: rows[0, n) are local rows on entry, device slots on return. Writes back
  // the previous step's staged rows first (and re-ranks when due), then stages this step's cold
  // rows. Grows the staging slots when a step needs more.
  void stage(device::Stream& stream, std::int64_t* rows, std::int64_t n);
  // The lookahead: the next step's lookups (local rows), known during this step. A background
  // thread maps them to slots (hot slots as they are now; cold rows to staging slots in first-
  // lookup order, as stage() would), counts them, and gathers the cold rows from the host tier
  // into a host buffer, while this step computes. Every change to the row-to-slot map and every
  // write to the host tier happens after joining the thread, so it reads both unraced. The next
  // stage(), given the same rows, waits for it, writes this step's staged rows back, gathers again
  // the rows this step staged too (updated since: the overlap is re-staged), and copies the
  // buffer into the staging slots and the mapping into the lookups. A re-rank due at that stage()
  // drops the lookahead.
  void prefetch(const std::int64_t* rows, std::int64_t n);
  // cold_update = host: the update about to write the host tier waits for the lookahead.
  void before_host_update() { join(); }
  ~TieredRows();
  TieredRows(const TieredRows&) = delete;
  TieredRows& operator=(const TieredRows&) = delete;

  // The staged step's update has been launched on stream (cold_update = device: the staged rows
  // go back to the host tier before the next stage()).
  void updated(device::Stream& stream);
  // cold_update = host: the local row of staging slot `slot` (slot >= hot_rows()).
  std::int64_t staged_row(std::int64_t slot) const { return staged_[static_cast<std::size_t>(slot - hot_)]; }
  // 16-bit tables: per slot of the device tier, the local row in it, where the kernels can read
  // it (the stochastic rounding keys on a row's place in its table); set by each stage().
  const std::int64_t* slot_rows() const { return on_host_ ? slot_row_.data() : dev_slot_row_.data(); }
  // The host tier's weights, of the weights' type, in the local row space.
  void* host_weights() { return host_w_.data(); }
  float* host_state() { return host_s_.empty() ? nullptr : host_s_.data(); }

  // Makes the host tier hold every row's current value (checkpoints read it there).
  void flush(device::Stream& stream);
  // After the host tier was written (a restore): the hot rows are read from it again.
  void reload(device::Stream& stream);

  TierStats take_stats();
  const TierStats& stats() const { return stats_; }
  std::size_t host_bytes() const { return host_w_.bytes() + host_s_.bytes(); }

 private:
  TieredRows(device::Backend& backend, device::MemoryPool& pool, std::vector<TierShard> shards, int dim,
             std::size_t state_per_row, TierOptions options, int rank, bool on_host, TierWeights weights,
             device::Buffer<float>& state);
  void place_hot_rows();
  void retire(device::Stream& stream);
  // The lookahead's retire: the staged rows' updated values copied aside (their slot entries
  // cleared), to be written back by the next lookahead thread.
  void defer_retire(device::Stream& stream);
  // Writes the rows copied aside back to the host tier (when no lookahead thread took them).
  void complete_retire();
  // Host tier rows <- consecutive rows of w (weight rows as bytes) and s.
  void scatter_to_host(const std::vector<std::int64_t>& rows, const unsigned char* w, const float* s);
  // The device tier's weights as bytes, and the floats a transit buffer needs for m weight rows.
  unsigned char* device_weights() { return weights_.bytes(); }
  std::size_t transit_floats(std::size_t m) const { return (m * wb_ + sizeof(float) - 1) / sizeof(float); }
  static unsigned char* bytes(TransitRows& t) { return reinterpret_cast<unsigned char*>(t.data()); }
  // slot_row_ (and its device copy) for slots [from, to).
  void set_slot_rows(device::Stream& stream, std::int64_t from, std::int64_t to);
  void rerank(device::Stream& stream);
  void allocate_device(std::int64_t staging, device::Stream& stream);
  // Device path: the copy stream's next copies wait for everything issued on `stream` so far.
  void copies_after(device::Stream& stream);
  // Hot slots <-> host tier, for every hot row.
  void download_hot(device::Stream& stream);
  void upload_hot(device::Stream& stream);
  std::vector<std::int64_t> shard_counts(std::size_t k) const;
  // Maps n lookups (local rows, in) to device slots (slots, which may be in): hot rows to their
  // slots, cold rows to staging slots in first-lookup order, listed in `cold` and tagged with
  // `pass`; counts them where re-ranked. With previous != 0, the cold rows tagged `previous` (staged
  // by the step before) are added to overlap_ and overlap_from_. Returns the hot hits.
  std::int64_t map_lookups(const std::int64_t* in, std::int64_t* slots, std::int64_t n, std::uint64_t pass,
                           std::uint64_t previous, std::vector<std::int64_t>& cold);
  void join() {
    if (worker_.joinable()) worker_.join();
  }
  bool rerank_due(std::int64_t step) const {
    return opt_.rerank_interval > 0 && step > 1 && (step - 1) % opt_.rerank_interval == 0;
  }

  device::Backend& backend_;
  device::MemoryPool& pool_;
  std::vector<TierShard> shards_;
  int dim_;
  std::size_t wb_;  // bytes of a row's weights
  std::size_t state_per_row_;
  TierOptions opt_;
  int rank_;
  bool on_host_;
  TierWeights weights_;
  device::Buffer<float>& state_;
  std::int64_t local_rows_ = 0;
  device::Buffer<unsigned char> host_w_;           // the host tier: every local row (weights as bytes)
  device::Buffer<float> host_s_;
  std::vector<std::int64_t> slot_row_;             // per device slot: its local row (slot_rows())
  device::Buffer<std::int64_t> dev_slot_row_;      // ... on the device
  std::vector<ShardTiers> tiers_;                  // per shard: which rows are hot
  std::vector<std::int64_t> slot_of_;              // per local row: hot slot, -1 when cold
  std::vector<std::int64_t> hot_row_of_slot_;      // per hot slot: its local row
  std::vector<std::int64_t> counted_;              // per local row: lookups counted here (when re-ranked)
  std::vector<std::int64_t> staged_;               // local rows in the staging slots, by slot
  std::int64_t hot_ = 0, staging_ = 0;
  std::int64_t step_ = 0;                          // stage() calls: the re-rank clock
  bool dirty_ = false;                             // the staged rows were updated
  // Device path: the staged rows' host side (pinned), copied on copy_stream_: host -> device at
  // stage(), after every use of the staging slots issued before it; device -> host after the
  // update (updated()), waited for where the rows are written back. The compute stream waits for
  // the staging copy (staged_copy_) only.
  TransitRows bounce_w_, bounce_s_;
  std::unique_ptr<device::Stream> copy_stream_;
  std::unique_ptr<device::Event> compute_point_, staged_copy_;
  std::vector<unsigned char> hot_w_;               // device path: host side of the hot slots' copies
  std::vector<float> hot_s_;
  TierStats stats_;
  // The lookahead.
  std::thread worker_;
  bool ahead_ = false;                             // a gather for the next stage() was started
  std::vector<std::int64_t> ahead_rows_;           // its cold rows, in first-lookup order
  TransitRows ahead_w_, ahead_s_;                  // their weights and state, gathered by worker_
  std::vector<std::int64_t> ahead_in_;             // the next step's lookups, as given
  std::vector<std::int64_t> ahead_slots_;          // ... mapped to slots by worker_
  std::int64_t ahead_hits_ = 0;
  // Cold rows are listed once per step through tags: per local row, (pass << 32) | its index in
  // the list of the pass that last listed it. Each mapping of a step's lookups (the thread's or
  // stage()'s own) is a pass; the staged rows carry staged_pass_'s tags (0: none staged), so the
  // slot map holds hot rows only and a step writes no per-row entry but its cold rows' tags.
  static constexpr std::uint64_t kIndexMask = 0xffffffffull, kPassMask = ~kIndexMask;
  std::uint64_t next_pass();
  std::vector<std::uint64_t> tag_;
  std::uint64_t pass_ = 0;                         // passes so far
  std::uint64_t staged_pass_ = 0, ahead_pass_ = 0; // the staged rows' pass (<< 32); the thread's
  std::vector<std::size_t> overlap_;               // indices in ahead_rows_ of rows this step staged too
  std::vector<std::size_t> overlap_from_;          // ... and their indices in this step's staged rows
  // The previous step's updated staged rows, kept here after its staging slots are reused, until
  // the next lookahead thread (or anything else that needs the host tier) writes them back.
  std::vector<std::int64_t> retire_rows_;
  TransitRows retire_w_, retire_s_;
  bool retire_pending_ = false;
};

// The staging slots a rank needs for one step: per owned shard, the fewer of its cold rows and
// the global batch's lookups of it (global_batch x bag_rows).
std::int64_t staging_rows_needed(const std::vector<std::int64_t>& cold_rows, std::int64_t global_batch,
                                 std::int64_t bag_rows);

}  // namespace recmix::embedding
