#include "sched/memory_estimator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "core/hot_rows.hpp"

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

// A row's weights in their storage type and its optimizer state (fp32).
double sparse_row_bytes(const JobSpec& spec) {
  const int d = spec.shape.embedding_dim();
  return d * static_cast<double>(spec.table_bytes) + sparse_state_per_row(spec.sparse_optimizer, d) * kFloatBytes;
}

// `hot` rows shared over the shard's entries in proportion to their rows: entry i gets the
// difference of floor(hot x rows up to and including i / all rows) and the same up to i - 1.
std::vector<std::int64_t> share_by_rows(std::int64_t hot, const RankShard& shard) {
  std::int64_t total = 0;
  for (const auto& [table, rows] : shard.rows) total += rows;
  std::vector<std::int64_t> out;
  std::int64_t through = 0, given = 0;
  for (const auto& [table, rows] : shard.rows) {
    through += rows;
    const auto upto = through == total ? hot
                                       : static_cast<std::int64_t>(std::floor(static_cast<double>(hot) *
                                                                              static_cast<double>(through) /
                                                                              static_cast<double>(total)));
    out.push_back(std::clamp<std::int64_t>(upto - given, 0, rows));
    given += out.back();
  }
  return out;
}

double sum(const std::vector<int>& v, std::size_t from = 0) {
  double s = 0;
  for (std::size_t i = from; i < v.size(); ++i) s += v[i];
  return s;
}

}  // namespace

DeviceTier device_tier(const JobSpec& spec, const RankShard& shard) {
  DeviceTier tier;
  if (!spec.tiering.enabled) {
    for (const auto& [table, rows] : shard.rows) tier.hot_rows.push_back(rows);
    return tier;
  }
  const std::int64_t step_rows = static_cast<std::int64_t>(spec.local_batch()) * spec.ranks * spec.shape.pooling;
  if (spec.tiering.device_budget == 0) {
    for (const auto& [table, rows] : shard.rows) {
      tier.hot_rows.push_back(hot_rows_of_fraction(rows, spec.tiering.hot_fraction));
      tier.staging_rows += std::min(rows - tier.hot_rows.back(), step_rows);
    }
    return tier;
  }
  std::int64_t owned = 0;
  for (const auto& [table, rows] : shard.rows) {
    owned += rows;
    tier.staging_rows += std::min(rows, step_rows);
  }
  const auto row_bytes = static_cast<std::uint64_t>(sparse_row_bytes(spec));
  const auto budget = spec.tiering.device_budget;
  const auto staging = static_cast<std::uint64_t>(tier.staging_rows) * row_bytes;
  RECMIX_REQUIRE(budget >= staging, ConfigError,
                 fmt::format("job '{}': tiering.device_budget of {} bytes is below the {} bytes of a rank's {} "
                             "staging rows",
                             spec.name, budget, staging, tier.staging_rows));
  const auto hot = std::min<std::uint64_t>(static_cast<std::uint64_t>(owned), (budget - staging) / row_bytes);
  tier.hot_rows = share_by_rows(static_cast<std::int64_t>(hot), shard);
  return tier;
}

double parameter_bytes(const JobSpec& spec, const RankShard& shard) {
  const DeviceTier tier = device_tier(spec, shard);
  double rows = 0;
  for (std::size_t i = 0; i < shard.rows.size(); ++i)
    rows += static_cast<double>(tier.hot_rows[i]) * spec.shape.tables[shard.rows[i].first].dim;
  const double dense_bytes = kFloatBytes + (spec.bf16_gemms() ? kHalfBytes : 0.0);
  return static_cast<double>(spec.shape.dense_params()) * dense_bytes + rows * spec.table_bytes;
}

double optimizer_state_bytes(const JobSpec& spec, const RankShard& shard) {
  const DeviceTier tier = device_tier(spec, shard);
  double state = dense_state_per_param(spec.optimizer) * static_cast<double>(spec.shape.dense_params());
  for (std::size_t i = 0; i < shard.rows.size(); ++i)
    state += static_cast<double>(tier.hot_rows[i]) *
             sparse_state_per_row(spec.sparse_optimizer, spec.shape.tables[shard.rows[i].first].dim);
  return state * kFloatBytes;
}

double staging_bytes(const JobSpec& spec, const RankShard& shard) {
  const DeviceTier tier = device_tier(spec, shard);
  double bytes = static_cast<double>(tier.staging_rows) * sparse_row_bytes(spec);
  // Tiered 16-bit tables: the local row in each slot, hot or staging (their rounding keys on it).
  if (spec.tiering.enabled && spec.table_bytes < kFloatBytes)
    bytes += static_cast<double>(std::accumulate(tier.hot_rows.begin(), tier.hot_rows.end(), tier.staging_rows)) *
             kIndexBytes;
  return bytes;
}

double activation_bytes(const JobSpec& spec) {
  const auto& s = spec.shape;
  const double tables = static_cast<double>(s.tables.size());
  const double d = s.embedding_dim();
  // Kept once: dense input, labels, loss gradient, and the loss's per-sample terms (a double, two
  // floats' bytes). Kept with a gradient of the same size: every MLP layer output, the pooled
  // embeddings, the interaction output (the top MLP's input).
  // The cross layers (dcn) keep each layer's input, product and low-rank product, and four
  // gradients of the backward (x_l's, x0's, the product's, the low-rank one's).
  const double n = s.interaction_width(), r = s.cross_rank;
  const double cross = s.cross_layers > 0 ? s.cross_layers * (2.0 * n + r) + 3.0 * n + r : 0.0;
  const double once = s.dense_features() + 4.0 + cross;
  const double with_gradient = sum(s.bottom_mlp, 1) + tables * d + s.interaction_width() + sum(s.top_mlp);
  const double fp32 = spec.local_batch() * (once + 2.0 * with_gradient) * kFloatBytes;
  if (!spec.bf16_gemms()) return fp32;
  // The bf16 GEMMs' operands: each layer's input, kept from forward to backward, and one layer's
  // pre-activation gradient at a time.
  double inputs = s.interaction_width(), widest = 0;
  for (std::size_t i = 0; i + 1 < s.bottom_mlp.size(); ++i) {
    inputs += s.bottom_mlp[i];
    widest = std::max<double>(widest, s.bottom_mlp[i + 1]);
  }
  for (std::size_t i = 0; i < s.top_mlp.size(); ++i) {
    if (i + 1 < s.top_mlp.size()) inputs += s.top_mlp[i];
    widest = std::max<double>(widest, s.top_mlp[i]);
  }
  // The cross layers' (dcn): each layer's input and low-rank product, and the product's and the
  // low-rank gradients of one layer at a time.
  const double cross16 = s.cross_layers > 0 ? s.cross_layers * (n + r) + n + r : 0.0;
  return fp32 + spec.local_batch() * (inputs + widest + cross16) * kHalfBytes;
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

double device_index_bytes(const JobSpec& spec, const RankShard& shard) {
  if (!spec.device_kernels) return 0;
  const auto& s = spec.shape;
  double all_shards = 0;
  for (const RankShard& r : plan_shards(s, spec.ranks)) all_shards += r.owned_tables();
  const double local = spec.local_batch();
  const double bags = local * spec.ranks * shard.owned_tables();
  const double entries = bags * s.pooling;
  const double parts = local * all_shards;
  const double out = local * static_cast<double>(s.tables.size());
  const double staged = (bags + 1 + entries + out + 1 + 2 * parts) * kIndexBytes + (bags + out + parts) * kFloatBytes +
                        20.0 * shard.owned_tables();
  const double blocks = std::clamp(std::floor(entries / 1024), 1.0, 256.0);
  const double grouping = (10 + 2) * entries * kIndexBytes + entries * kFloatBytes + blocks * 256 * kIndexBytes;
  return staged + grouping + entries * kIndexBytes;
}

double gemm_workspace_bytes(const MachineModel& machine) { return machine.gemm_workspace_bytes; }

double prefetch_bytes(const JobSpec& spec, const EstimatorOptions& options) {
  const auto& s = spec.shape;
  const double per_batch = spec.local_batch() * (s.dense_features() * kFloatBytes +
                                                 static_cast<double>(s.tables.size()) * s.pooling * kIndexBytes +
                                                 kFloatBytes);
  return options.prefetch_batches * per_batch;
}

double host_tier_bytes(const JobSpec& spec, const RankShard& shard) {
  if (!spec.tiering.enabled) return 0;
  double owned = 0;
  for (const auto& [table, rows] : shard.rows) owned += static_cast<double>(rows);
  // Where the device tier is not host memory, staged rows pass through pinned host memory too:
  // three buffers of the staging slots' size (gathered ahead, in the copy, written back).
  const double transit = spec.tiering.pinned_transit ? 3.0 * staging_bytes(spec, shard) : 0.0;
  return owned * sparse_row_bytes(spec) + transit;
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
  e.prefetch = prefetch_bytes(spec, options);
  e.staging = staging_bytes(spec, shard);
  e.device_indices = device_index_bytes(spec, shard);
  e.margin = options.allocator_margin * e.total();
  e.host = host_tier_bytes(spec, shard);
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
