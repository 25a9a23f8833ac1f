#pragma once
// The model-parallel embedding layer: every table (or row range of a large table) lives on the
// rank the sharding plan names. forward() sends each rank's indices to the owners (all-to-all),
// owners pool their rows, pooled vectors come back; backward() sends the pooled gradients to the
// owners, which sum duplicate rows deterministically and apply the sparse optimizer.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharding_plan.hpp"
#include "embedding/sparse_optimizer.hpp"
#include "embedding/tiered_rows.hpp"
#include "embedding/types.hpp"

namespace recmix::embedding {

// Whether the device path's all-to-alls run on a stream of their own, overlapped with the compute
// stream's work until their result is needed (on by default; RECMIX_EXCHANGE_STREAM=off in the
// environment, or this call, puts them on the compute stream): an A/B switch, read at each post.
bool exchange_stream_enabled();
void set_exchange_stream_enabled(bool on);

// The rows one rank owns of one shard, with its optimizer state, for checkpoints: the logical
// table whatever the tiers. weights: [(row_end - row_begin) x dim], row-major; state[i] has
// state_counts[i] elements ("adagrad_sum": rows x dim, "rowwise_adagrad_sum": rows; none for
// SGD). The pointers are the backend's device memory (host memory on the CPU backend), or the
// host tier when the tables are tiered (host_memory), and may be written to restore a step
// (then call ShardedEmbedding::shards_written()).
struct LocalShardView {
  int table;
  std::int64_t row_begin, row_end;
  int dim;
  float* weights;
  std::vector<std::pair<std::string, float*>> state;
  std::vector<std::size_t> state_counts;
  bool host_memory = false;
};

class ShardedEmbedding {
 public:
  // Allocates and initialises this rank's shards (initial_weight(seed, ...), rounded to nearest
  // for 16-bit tables) from `pool`; tiered (`tiering`), the device tier from `pool` and the host
  // tier from its host pool, 16-bit tables too.
  // ConfigError when tables differ in dim, the plan does not match the tables or the
  // communicator's size, or the optimizer config is bad. comm carries host data (batch sizes,
  // indices); device_comm, over the same ranks in the same order, the pooled vectors and their
  // gradients where the backend's memory is not the host's (NCCL on CUDA, the staged
  // communicator under cpu-strict). Null: comm carries both (the CPU backend).
  ShardedEmbedding(comm::Communicator& comm, device::Backend& backend, device::MemoryPool& pool,
                   std::vector<TableSpec> tables, Pooling pooling, ShardingPlan plan,
                   SparseOptimizerConfig optimizer, std::uint64_t seed,
                   comm::Communicator* device_comm = nullptr, TierOptions tiering = {},
                   TableStorage storage = {});
  ~ShardedEmbedding();
  ShardedEmbedding(const ShardedEmbedding&) = delete;
  ShardedEmbedding& operator=(const ShardedEmbedding&) = delete;

  // bags.size() == num_tables(), each over local_batch bags (host memory).
  // out: [local_batch x num_tables x dim] in the backend's device memory.
  // DataError for an index outside [0, rows) naming table, index and bag. Collective.
  void forward(device::Stream& stream, std::span<const Bags> bags, int local_batch, float* out);
  // The same for a batch with one index per bag, in the dataset's row-major layout: read in place
  // by the one-rank CPU path, turned into one CSR per table for the others.
  void forward(device::Stream& stream, OneHotRows rows, int local_batch, float* out);
  // grad_out: same layout as out, gradients of the loss as the trainer scaled it (device memory).
  // Sends them to the owners, which sum duplicate rows deterministically and apply the sparse
  // optimizer to the rows of the last forward() only. Collective: every rank calls it.
  void backward(device::Stream& stream, const float* grad_out);

  // forward() and backward() in two halves, so other work (the bottom MLP, the MLP gradient
  // all-reduce) can run while embedding data travels. forward_start() checks the batch, sends the
  // indices, pools and posts the return of the pooled vectors; forward_finish() waits for them
  // and writes `out` (which must stay untouched in between). backward_start() posts the
  // gradients to the owners; backward_finish() waits, sums duplicates and updates. Every rank
  // calls them in this order; forward()/backward() are start + finish.
  void forward_start(device::Stream& stream, std::span<const Bags> bags, int local_batch, float* out);
  void forward_start(device::Stream& stream, OneHotRows rows, int local_batch, float* out);
  void forward_finish(device::Stream& stream);
  void backward_start(device::Stream& stream, const float* grad_out);
  void backward_finish(device::Stream& stream);
  // Whether the coming backward_start() is device work alone, with the same pointers and sizes
  // for every batch of its shape, so that a step may capture it once and replay it (a step
  // piece, runtime/train/step_graphs.hpp): one rank, whole untiered fp32 tables in device memory, a
  // one-hot batch. (16-bit tables pass the step, which keys their rounding, by value, and a rate
  // set by set_learning_rate() is passed by value too: neither is captured.)
  bool backward_capturable() const;
  // The host side of backward_start() for a step that replays a graph captured from an earlier
  // backward_start() of the same shape instead of issuing one: only where backward_capturable().
  void backward_start_replayed();
  // Whether the coming forward_finish() is device work alone, with the same pointers and sizes
  // for every batch of its shape (one rank, whole untiered tables in device memory, a one-hot
  // batch: the owner CSR and the pooling, whose indices forward_start() uploaded), so that a step
  // may capture it in a piece and replay it.
  bool forward_finish_capturable() const;
  // The host side of forward_finish() for a step that replays a graph captured from an earlier
  // forward_finish() of the same shape: only where forward_finish_capturable().
  void forward_finish_replayed();
  // Changes whenever a device buffer that a captured forward or backward reads is made anew (a larger
  // batch than before): graphs captured before then read freed memory and must be dropped.
  std::uint64_t device_buffers_generation() const;

  // Makes every device buffer of a step at its largest now: for batches of at most `local_batch`
  // samples on this rank and `global_batch` over all ranks, each bag of at most `bag_rows`
  // indices, whatever share of them this rank's shards get. A later step of that kind allocates
  // nothing (docs/device.md); a larger batch or a longer bag still grows what it needs. Nothing
  // on the CPU backend, whose kernels read the host's arrays.
  void reserve(device::Stream& stream, int local_batch, std::int64_t global_batch, std::int64_t bag_rows);

  // The lookahead of tiered tables: the next step's batch, given during this step (after its
  // forward_start()), so that its cold rows are gathered from the host tier in the background
  // while this step computes. Collective on several ranks (the next batch's indices are exchanged
  // now): every rank calls it at the same point, with its share of the same next global batch. A
  // bad batch is reported by its forward. Untiered: nothing. forward_start_prefetched() then
  // starts that batch's forward (give it the same batch); any other forward in between (an
  // evaluation) leaves the prefetched plan in place.
  void prefetch(std::span<const Bags> bags, int local_batch);
  void prefetch(OneHotRows rows, int local_batch);
  void forward_start_prefetched(device::Stream& stream, std::span<const Bags> bags, int local_batch, float* out);
  void forward_start_prefetched(device::Stream& stream, OneHotRows rows, int local_batch, float* out);

  // The step whose update the next backward applies: with 16-bit tables rounded stochastically,
  // the key of the rounding's random numbers (so a resumed run rounds as the first run did).
  void set_step(std::int64_t step);
  // The sparse optimizer's learning rate from the next update on (a schedule's rate for the
  // step; the updates take it by value, so a step with a varying rate is not captured).
  void set_learning_rate(float lr);

  // The rows this rank owns and their optimizer state, in plan order (for checkpoints). Tiered:
  // every hot row is first written to the host tier, which the views then show. 16-bit tables:
  // the views show an fp32 host copy of the weights (exact), and of the optimizer state where
  // device memory is not the host's, valid until the next forward.
  std::vector<LocalShardView> local_shards();
  // After writing through local_shards()' views: tiered, the hot rows are read again; 16-bit
  // tables, the copy is rounded back to nearest.
  void shards_written();

  // Hot/cold tiers (tiered_rows.hpp): whether they are on, their counters since the last call,
  // and the bytes of the host tier.
  bool tiered() const;
  TierStats take_tier_stats();
  std::size_t host_tier_bytes() const;

  const ShardingPlan& plan() const;
  int num_tables() const;
  int dim() const;
  Pooling pooling() const;
  SparseOptimizerKind optimizer_kind() const;
  TableStorage storage() const;
  // Bytes this rank sent to other ranks by all-to-all in the last forward + backward.
  std::size_t bytes_sent_last_step() const;
  // Bytes of weights and optimizer state this rank holds in device memory (tiered: hot rows and staging).
  std::size_t local_bytes() const;

  // The weights the lookups read most, for an L2 persisting window (Backend::set_l2_window):
  // tiered, the hot slots (the device tier's first rows); untiered, every row this rank owns.
  struct Region {
    const void* ptr = nullptr;
    std::size_t bytes = 0;
  };
  Region hot_region() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace recmix::embedding
