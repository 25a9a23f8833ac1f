#pragma once
// Analytic peak device memory of one rank of a DLRM job, term by term, so each term can be
// matched against what the runtime's memory pools hold: weights and optimizer state of the
// shards the rank owns (their hot rows and the staging rows when tiering is on), layer
// activations and their gradients for the local batch, all-to-all and all-reduce buffers, GEMM
// workspace and the prefetched batches; and, apart, the host memory of the tiered rows.
// docs/scheduler.md gives the formula of every term.
#include <cstdint>
#include <utility>
#include <vector>

#include "sched/job_spec.hpp"
#include "sched/machine_model.hpp"

namespace recmix::sched {

// The rows of each table one rank owns: (table index, owned rows).
struct RankShard {
  std::vector<std::pair<int, std::int64_t>> rows;
  int owned_tables() const { return static_cast<int>(rows.size()); }
};

// Tables go whole to the least-loaded rank, largest first; a table larger than an even share of
// all rows is split by row ranges over every rank (as the sharding plan does for huge tables).
std::vector<RankShard> plan_shards(const DlrmShape& shape, int ranks);

struct EstimatorOptions {
  int prefetch_batches = 2;        // batches the reader keeps ready ahead of the step
  double allocator_margin = 0.03;  // pool rounding and small buffers, as a fraction of the sum
};

constexpr double kFloatBytes = 4;
constexpr double kHalfBytes = 2;
constexpr double kIndexBytes = 8;

// The embedding rows one rank keeps on the device. Untiered: every owned row is hot and nothing
// is staged. Tiered, with B = local batch x ranks and L = pooling:
// - hot_fraction f: a shard of r rows keeps ceil(f x r) hot, at least 1 and at most r (the
//   runtime's rounding); staging = sum over shards of min(r - hot, B x L), the cold rows one
//   step can look up.
// - device_budget: staging = sum over shards of min(r, B x L) (sized before the hot rows are
//   chosen, so every row counts as cold); hot = floor((budget - staging x row bytes) / row bytes)
//   over all shards, at most their rows, shared in proportion to their rows (the runtime shares
//   by access count; the bytes are the same for any split). ConfigError when the budget is below
//   the staging rows.
// Row bytes = dim x table_bytes + sparse state per row x 4: a staging row holds its state too.
struct DeviceTier {
  std::vector<std::int64_t> hot_rows;  // per entry of RankShard::rows
  std::int64_t staging_rows = 0;
};
DeviceTier device_tier(const JobSpec& spec, const RankShard& shard);

// Each term in bytes, for one rank holding `shard`.
// Weights: hot rows x dim x table_bytes + dense params x 4; hot rows are every owned row when
// untiered. With bf16 GEMMs also the dense params' bf16 copy: + dense params x 2.
double parameter_bytes(const JobSpec& spec, const RankShard& shard);
// Optimizer state: dense params x dense state per param (Adagrad 1, Adam 2) x 4 + hot rows x
// sparse state per row (Adagrad dim, row-wise Adagrad 1) x 4.
double optimizer_state_bytes(const JobSpec& spec, const RankShard& shard);
// Staging rows with their optimizer state: staging rows x (dim + sparse state per row) x 4; 0
// when untiered.
double staging_bytes(const JobSpec& spec, const RankShard& shard);
// Activations and their gradients for the local batch: local batch x 4 x (dense input + labels +
// loss gradient + 2 x (bottom widths + tables x dim + interaction width + top widths)): each MLP
// layer output, the pooled embeddings and the interaction output with a gradient each; with
// cross layers (dcn, n wide, rank r, L layers) + local batch x 4 x (L (2n + r) + 3n + r). With bf16
// GEMMs also each MLP layer's input in bf16 and one layer's pre-activation gradient in bf16:
// + local batch x 2 x (sum of layer input widths + widest layer output), and for cross layers
// each layer's input and low-rank product and one layer's two gradients: + local batch x 2 x
// (L (n + r) + n + r).
double activation_bytes(const JobSpec& spec);
// All-to-all send and receive buffers: indices out/in (8 B) and pooled vectors and their
// gradients out/in (4 B); the owner side sizes by the global batch and owned tables.
double all_to_all_bytes(const JobSpec& spec, const RankShard& shard);
// The flat dense-gradient buffer reduced in place by all-reduce: dense params x 4.
double all_reduce_bytes(const JobSpec& spec);
// The embedding layer's index arrays on the device (device_kernels; 0 otherwise). With bags =
// global batch x owned shards, entries = bags x pooling, parts = local batch x the shards of all
// ranks, each term x 8 B but the scales (4 B):
// - staged from the host: bag offsets bags + 1, rows entries, bag scales bags; the combine's
//   offsets local batch x tables + 1, positions parts, scales local batch x tables; the gradient
//   gather's sources parts and scales parts; the owned shards' layout, 20 B a shard;
// - the backward's grouping of entries by row: 10 arrays of entries (keys and entries twice for the
//   radix sort, bags, unique rows, entry offsets, entry gradients, group heads, group numbers),
//   entry scales, radix counts clamp(entries / 1024, 1, 256) x 256, and 2 x entries for CUB's sort
//   scratch on CUDA (counted for cpu-strict too, which has none);
// - entries once more: a buffer that grows is allocated before the smaller one is freed.
double device_index_bytes(const JobSpec& spec, const RankShard& shard);
// BLAS workspace held by the device library.
double gemm_workspace_bytes(const MachineModel& machine);
// Prefetched batches (dense floats, indices, labels): prefetch_batches x local batch x
// (dense x 4 + tables x pooling x 8 + 4). The cold rows a step needs are in staging_bytes.
double prefetch_bytes(const JobSpec& spec, const EstimatorOptions& options);
// Host memory of the tiered rows, not device memory: the host tier holds every owned row with
// its state, owned rows x (dim + sparse state per row) x 4; 0 when untiered. With
// tiering.pinned_transit (cuda, cpu-strict), plus 3 x staging_bytes of pinned rows in transit.
double host_tier_bytes(const JobSpec& spec, const RankShard& shard);

struct MemoryEstimate {
  double parameters = 0;
  double optimizer_state = 0;
  double activations = 0;
  double all_to_all = 0;
  double all_reduce = 0;
  double gemm_workspace = 0;
  double prefetch = 0;
  double staging = 0;
  double device_indices = 0;
  double margin = 0;  // allocator_margin x the sum of the terms above
  double host = 0;    // host memory of the tiered rows: not device memory, not in total()
  // Device bytes.
  double total() const {
    return parameters + optimizer_state + activations + all_to_all + all_reduce + gemm_workspace +
           prefetch + staging + device_indices + margin;
  }
};

MemoryEstimate estimate_rank_memory(const JobSpec& spec, const RankShard& shard,
                                    const MachineModel& machine, const EstimatorOptions& options = {});
// The largest estimate (by device bytes) over the ranks of plan_shards(spec.shape, spec.ranks).
MemoryEstimate estimate_peak_memory(const JobSpec& spec, const MachineModel& machine,
                                    const EstimatorOptions& options = {});

}  // namespace recmix::sched
