#include "runtime/train/job_spec_sched.hpp"

#include <algorithm>

namespace recmix::runtime {

sched::JobSpec to_sched_spec(const JobSpec& s, const data::DatasetInfo& info, int ranks, int priority,
                             double arrival_s) {
  sched::JobSpec out;
  out.name = s.name;
  for (auto rows : info.table_rows) out.shape.tables.push_back({rows, s.model.embedding_dim});
  out.shape.bottom_mlp = {info.num_dense};
  out.shape.bottom_mlp.insert(out.shape.bottom_mlp.end(), s.model.bottom_mlp.begin(), s.model.bottom_mlp.end());
  out.shape.top_mlp = s.model.top_mlp;
  out.shape.concat_interaction = s.model.interaction == mlp::InteractionKind::cat;
  if (s.model.interaction == mlp::InteractionKind::dcn) {
    out.shape.cross_layers = s.model.cross_layers;
    out.shape.cross_rank = s.model.cross_rank;
  }
  // Indices per bag: the data's longest bag (1 for one-hot; a multi-hot file without its max_bag
  // attribute counts as one-hot, docs/scheduler.md, Limits).
  out.shape.pooling = static_cast<int>(std::max<std::int64_t>(1, info.max_bag_rows()));
  const bool on_device = s.device.kind != device::BackendKind::cpu;
  out.tiering.enabled = s.embedding.tiered();
  out.tiering.pinned_transit = s.embedding.tiered() && on_device;
  out.device_kernels = on_device;
  out.tiering.hot_fraction = s.embedding.hot_fraction > 0 ? s.embedding.hot_fraction : 1.0;
  out.tiering.device_budget = s.embedding.device_budget;
  out.table_bytes = half::storage_bytes(s.precision.embedding);
  // "auto" counted as bf16 (the device backends take it; on the cpu backend an upper bound).
  switch (s.precision.dense) {
    case DensePrecision::fp32: out.gemm_math = sched::GemmMath::fp32; break;
    case DensePrecision::tf32: out.gemm_math = sched::GemmMath::tf32; break;
    case DensePrecision::bf16:
    case DensePrecision::automatic: out.gemm_math = sched::GemmMath::bf16; break;
  }
  out.graphs = s.device.graphs == AutoSwitch::on ||
               (s.device.graphs == AutoSwitch::automatic && device::graphs_by_default(s.device.kind));
  out.global_batch = static_cast<int>(s.train.batch_size);
  out.optimizer = s.optimizer.dense;
  out.sparse_optimizer = s.optimizer.sparse;
  out.ranks = ranks;
  const std::int64_t per_epoch = info.rows / std::max<std::int64_t>(1, s.train.batch_size);
  out.steps = total_steps(s, per_epoch);
  out.priority = priority;
  out.arrival_s = arrival_s;
  return out;
}

}  // namespace recmix::runtime
