#pragma once
// A machine model: the published peak figures of one node type (per-GPU compute and memory,
// host-device link, NVLink, network, host cores and memory), and for a GPU what the host spends
// issuing a step, measured. The step-time roofline and the simulator's clusters are built on it;
// docs/scheduler.md cites the spec sheet of every number, machine_model.cpp the measurements.
#include <string>
#include <string_view>
#include <vector>

namespace recmix::sched {

struct MachineModel {
  std::string name;
  // Per device (one GPU, or the whole CPU for the cpu model).
  double fp32_flops = 0;        // FLOP/s, plain FP32
  double tf32_flops = 0;        // FLOP/s, TF32 tensor cores (dense); = fp32 where absent
  double fp16_flops = 0;        // FLOP/s, FP16 tensor cores (dense)
  double bf16_flops = 0;        // FLOP/s, BF16 tensor cores or instructions (dense); 0 where absent
  double memory_bandwidth = 0;  // device memory bytes/s
  double memory_capacity = 0;   // device memory bytes
  double host_device_bandwidth = 0;  // bytes/s per device, one direction (PCIe)
  double intra_node_bandwidth = 0;   // bytes/s per device to its peers in the node (NVLink)
  double network_bandwidth = 0;      // bytes/s per device to other nodes (NIC share)
  double gemm_workspace_bytes = 0;   // BLAS library workspace held per stream
  double gemm_efficiency = 0.6;      // fraction of peak that DLRM-sized GEMMs reach
  double kernel_launch_s = 6e-6;     // fixed cost per kernel / parallel region (device idle meanwhile)
  // A GPU's step is issued by one host thread, and lasts at least as long as the issuing. Host
  // seconds, measured from real steps; all 0 on the cpu models, whose device is the host.
  double host_launch_s = 0;      // per launch (kernel, library call, copy) of an eager step
  double host_graph_step_s = 0;  // per step replayed from CUDA graphs: its graph launches and those left eager
  double host_index_s = 0;       // per embedding index the host reads and checks for the device
  bool is_gpu() const { return host_launch_s > 0; }
  // Per node.
  int devices_per_node = 1;
  int host_cores = 1;
  double host_memory = 0;       // bytes
  double host_core_flops = 0;   // FLOP/s of one host core
  double host_memory_bandwidth = 0;  // bytes/s of the node's host memory
};

// Built-in models: "cpu-zen3-2vcpu" (this build machine), "v100-dgx1", "a100-dgx", "h100-dgx",
// "h200-dgx".
const std::vector<MachineModel>& machine_models();
// Throws ConfigError naming the unknown model and the known ones.
const MachineModel& machine_model(std::string_view name);

}  // namespace recmix::sched
