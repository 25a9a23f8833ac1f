#include "sched/memory_estimator.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace recmix::sched {

std::vector<RankShard> plan_shards(const DlrmShape& shape, int ranks) {
  std::vector<RankShard> shards(static_cast<std::size_t>(std::max(ranks, 1)));
  const auto n_ranks = static_cast<std::int64_t>(shards.size());
  std::int64_t total_rows = 0;
  for (const auto& t : shape.tables) total_rows += t.rows;
  const std::int64_t even_share = (total_rows + n_ranks - 1) / n_ranks;
  std::vector<int> order(shape.tables.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return shape.tables[a].rows * shape.tables[a].dim > shape.tables[b].rows * shape.tables[b].dim;
  });
  std::vector<double> load(shards.size(), 0.0);
  for (int t : order) {
    const auto& table = shape.tables[t];
    if (n_ranks > 1 && table.rows > even_share) {
      for (std::int64_t r = 0; r < n_ranks; ++r) {
        const std::int64_t begin = table.rows * r / n_ranks;
        const std::int64_t end = table.rows * (r + 1) / n_ranks;
        shards[r].rows.emplace_back(t, end - begin);
        load[r] += static_cast<double>(end - begin) * table.dim;
      }
      continue;
    }
    const auto r = std::min_element(load.begin(), load.end()) - load.begin();
    shards[r].rows.emplace_back(t, table.rows);
    load[r] += static_cast<double>(table.rows) * table.dim;
  }
  return shards;
}

namespace {

// Rows of the shard that live on the device.
double device_rows(const JobSpec& spec, std::int64_t rows) {
  return spec.tiering.enabled ? std::ceil(spec.tiering.hot_fraction * static_cast<double>(rows))
                              : static_cast<double>(rows);
}

double device_embedding_params(const JobSpec& spec, const RankShard& shard) {
  double n = 0;
  for (const auto& [table, rows] : shard.rows) n += device_rows(spec, rows) * spec.shape.tables[table].dim;
  return n;
}

double sum(const std::vector<int>& v, std::size_t from = 0) {
  double s = 0;
  for (std::size_t i = from; i < v.size(); ++i) s += v[i];
  return s;
}

}  // namespace

double parameter_bytes(const JobSpec& spec, const RankShard& shard) {
  return (device_embedding_params(spec, shard) + static_cast<double>(spec.shape.dense_params())) *
         kFloatBytes;
}

double optimizer_state_bytes(const JobSpec& spec, const RankShard& shard) {
  double state = optimizer_state_per_param(spec.optimizer) * static_cast<double>(spec.shape.dense_params());
  for (const auto& [table, rows] : shard.rows)
    state += device_rows(spec, rows) * sparse_state_per_row(spec.sparse_optimizer, spec.shape.tables[table].dim);
  return state * kFloatBytes;
}

double activation_bytes(const JobSpec& spec) {
  const auto& s = spec.shape;
  const double tables = static_cast<double>(s.tables.size());
  const double d = s.embedding_dim();
  // Kept once: dense input, labels, loss gradient. Kept with a gradient of the same size: every
  // MLP layer output, the pooled embeddings, the interaction output (the top MLP's input).
  const double once = s.dense_features() + 2.0;
  const double with_gradient = sum(s.bottom_mlp, 1) + tables * d + s.interaction_width() + sum(s.top_mlp);
  return spec.local_batch() * (once + 2.0 * with_gradient) * kFloatBytes;
}

double all_to_all_bytes(const JobSpec& spec, const RankShard& shard) {
  const auto& s = spec.shape;
  const double b = spec.local_batch();
  const double global = static_cast<double>(spec.local_batch()) * spec.ranks;
  const double tables = static_cast<double>(s.tables.size());
  const double owned = shard.owned_tables();
  const double d = s.embedding_dim();
  const double indices = (b * tables + global * owned) * s.pooling * kIndexBytes;
  // Forward pooled vectors (owner sends, every rank receives) and backward gradients (reverse).
  const double vectors = 2.0 * (b * tables + global * owned) * d * kFloatBytes;
  return indices + vectors;
}

double all_reduce_bytes(const JobSpec& spec) {
  return static_cast<double>(spec.shape.dense_params()) * kFloatBytes;
}

double gemm_workspace_bytes(const MachineModel& machine) { return machine.gemm_workspace_bytes; }

double prefetch_bytes(const JobSpec& spec, const RankShard& shard, const EstimatorOptions& options) {
  const auto& s = spec.shape;
  const double b = spec.local_batch();
  const double per_batch = b * (s.dense_features() * kFloatBytes +
                                static_cast<double>(s.tables.size()) * s.pooling * kIndexBytes + kFloatBytes);
  double cold = 0;
  if (spec.tiering.enabled) {
    const double global = b * spec.ranks;
    cold = global * shard.owned_tables() * s.pooling * (1.0 - spec.tiering.hot_hit_rate) *
           s.embedding_dim() * kFloatBytes;
  }
  return options.prefetch_batches * (per_batch + cold);
}

MemoryEstimate estimate_rank_memory(const JobSpec& spec, const RankShard& shard,
                                    const MachineModel& machine, const EstimatorOptions& options) {
  MemoryEstimate e;
  e.parameters = parameter_bytes(spec, shard);
  e.optimizer_state = optimizer_state_bytes(spec, shard);
  e.activations = activation_bytes(spec);
  e.all_to_all = all_to_all_bytes(spec, shard);
  e.all_reduce = all_reduce_bytes(spec);
  e.gemm_workspace = gemm_workspace_bytes(machine);
  e.prefetch = prefetch_bytes(spec, shard, options);
  e.margin = options.allocator_margin * e.total();
  return e;
}

MemoryEstimate estimate_peak_memory(const JobSpec& spec, const MachineModel& machine,
                                    const EstimatorOptions& options) {
  validate(spec);
  MemoryEstimate peak;
  for (const auto& shard : plan_shards(spec.shape, spec.ranks)) {
    const MemoryEstimate e = estimate_rank_memory(spec, shard, machine, options);
    if (e.total() > peak.total()) peak = e;
  }
  return peak;
}

}  // namespace recmix::sched
