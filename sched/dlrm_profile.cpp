#include "sched/dlrm_profile.hpp"

#include <algorithm>

#include "sched/memory_estimator.hpp"

namespace recmix::sched {

std::string_view resource_name(Resource r) {
  switch (r) {
    case Resource::compute: return "compute";
    case Resource::memory_bandwidth: return "memory_bw";
    case Resource::host_device: return "host_device";
    case Resource::host_cpu: return "host_cpu";
    case Resource::network: return "network";
  }
  return "?";
}

namespace {
double mlp_macs(const std::vector<int>& widths, int input) {
  double macs = 0;
  double in = input;
  for (int w : widths) {
    macs += in * w;
    in = w;
  }
  return macs;
}
}  // namespace

StepCost dlrm_step_cost(const JobSpec& spec) {
  validate(spec);
  const auto& s = spec.shape;
  const double b = spec.local_batch();
  const double global = b * spec.ranks;
  const double tables = static_cast<double>(s.tables.size());
  const double owned = tables / spec.ranks;  // even share of the lookups
  const double d = s.embedding_dim();
  const double f = tables + 1;
  const double state = dense_state_per_param(spec.optimizer);
  const double sparse_state = static_cast<double>(sparse_state_per_row(spec.sparse_optimizer, s.embedding_dim())) /
                              std::max(1, s.embedding_dim());
  const double hit = spec.tiering.enabled ? spec.tiering.hot_hit_rate : 1.0;
  StepCost c;
  const std::vector<int> bottom(s.bottom_mlp.begin() + 1, s.bottom_mlp.end());
  // The cross layers' products, or the dot interaction's pairs (also counted for cat).
  const double interaction = s.cross_layers > 0 ? s.cross_macs() : f * f * d / 2;
  const double macs = mlp_macs(bottom, s.dense_features()) + mlp_macs(s.top_mlp, s.interaction_width()) + interaction;
  c.gemm_flops = 3.0 * 2.0 * macs * b;  // forward, input gradient, weight gradient
  const double lookups = global * owned * s.pooling;
  // Pooling reads each row once; the sparse update reads the gradient, reads and writes the row
  // (in its storage type) and its optimizer state.
  const double row = spec.table_bytes;
  const double embedding_bytes = lookups * hit * d * (3.0 * row + kFloatBytes * (1.0 + 2.0 * sparse_state));
  const double dense = static_cast<double>(s.dense_params());
  const double activation_traffic = 2.0 * activation_bytes(spec);  // written once, read once
  // With bf16 GEMMs the weights' bf16 copy is written once and read by two GEMMs (activation_bytes
  // already holds the layer inputs' copies).
  const double weight_traffic =
      dense * kFloatBytes * (3.0 + 2.0 * (1.0 + state)) + (spec.bf16_gemms() ? 3.0 * dense * kHalfBytes : 0.0);
  c.device_bytes = embedding_bytes + activation_traffic + weight_traffic;
  const double batch_bytes = b * (s.dense_features() * kFloatBytes + tables * s.pooling * kIndexBytes + kFloatBytes);
  const double cold_rows = lookups * (1.0 - hit);
  c.host_device_bytes = batch_bytes + cold_rows * d * (row + kFloatBytes);  // rows in, gradients out
  // Host: read and assemble the batch, gather cold rows, apply their optimizer update.
  c.host_bytes = 3.0 * batch_bytes + cold_rows * d * kFloatBytes * (2.0 + 2.0 * (1.0 + sparse_state));
  if (spec.ranks > 1) {
    const double others = (spec.ranks - 1.0) / spec.ranks;
    const double a2a = others * (b * tables * s.pooling * kIndexBytes + 2.0 * b * tables * d * kFloatBytes);
    const double all_reduce = 2.0 * others * dense * kFloatBytes;
    c.network_bytes = a2a + all_reduce;
  }
  const double mlp_layers = static_cast<double>(bottom.size() + s.top_mlp.size());
  c.cpu_regions = static_cast<int>(6 * mlp_layers + 4 * owned + 12);
  // On a GPU a layer takes five launches (the forward GEMM with its bias and activation, the
  // activation backward, the two gradient GEMMs, the bias step) and the rest of the step fifteen
  // (uploads, pooling, the grouping's sort and the update, interaction, loss): 50 for the Kaggle
  // shape's 7 layers at one rank, as counted on an H200 (bench/RESULTS.md, "The GPU kernels
  // measured, and three kernel fixes").
  c.gpu_launches = static_cast<int>(5 * mlp_layers + 15);
  c.host_indices = b * tables * s.pooling;
  return c;
}

double gemm_peak_flops(const JobSpec& spec, const MachineModel& machine) {
  switch (spec.gemm_math) {
    case GemmMath::fp32: return machine.fp32_flops;
    case GemmMath::tf32: return machine.tf32_flops > 0 ? machine.tf32_flops : machine.fp32_flops;
    case GemmMath::bf16: return machine.bf16_flops > 0 ? machine.bf16_flops : machine.fp32_flops;
  }
  return machine.fp32_flops;
}

double host_issue_s(const JobSpec& spec, const StepCost& cost, const MachineModel& machine) {
  if (!machine.is_gpu()) return 0;
  const double issue = spec.graphs ? machine.host_graph_step_s : cost.gpu_launches * machine.host_launch_s;
  return issue + cost.host_indices * machine.host_index_s;
}

JobProfile dlrm_profile(const JobSpec& spec, const MachineModel& machine) {
  const StepCost c = dlrm_step_cost(spec);
  const double t_compute = c.gemm_flops / (gemm_peak_flops(spec, machine) * machine.gemm_efficiency);
  const double t_memory = c.device_bytes / machine.memory_bandwidth;
  const int launches = machine.is_gpu() ? c.gpu_launches : c.cpu_regions;
  const double t_launch = launches * machine.kernel_launch_s;
  const double t_device = t_compute + t_memory + t_launch;
  // A GPU runs a step no faster than its host issues it (bench/RESULTS.md: the GPU idles 40-60%
  // of the Kaggle step on an H200).
  const double t_issue = host_issue_s(spec, c, machine);
  const double t_transfer = c.host_device_bytes / machine.host_device_bandwidth;
  const double host_bw_share = machine.host_memory_bandwidth / std::max(machine.devices_per_node, 1);
  const double t_host = c.host_bytes / host_bw_share;
  const double t_network = c.network_bytes / machine.intra_node_bandwidth;
  // The reader and the cold tier overlap the device work; communication is on the critical path.
  const double step = std::max({t_device, t_issue, t_transfer, t_host}) + t_network;
  JobProfile p;
  p.type = spec.name;
  p.dlrm = true;
  p.solo_step_s = step;
  p.util[Resource::compute] = std::min(1.0, t_compute / step);
  p.util[Resource::memory_bandwidth] = std::min(1.0, t_memory / step);
  p.util[Resource::host_device] = std::min(1.0, t_transfer / step);
  p.util[Resource::host_cpu] = std::min(1.0, t_host / step);
  p.util[Resource::network] = std::min(1.0, t_network / step);
  p.comm_fraction = t_network / step;
  p.peak_memory_bytes = estimate_peak_memory(spec, machine).total();
  return p;
}

}  // namespace recmix::sched
