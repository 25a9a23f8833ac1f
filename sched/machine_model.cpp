#include "sched/machine_model.hpp"

#include <string>

#include "core/error.hpp"

namespace recmix::sched {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;
constexpr double kTera = 1e12;

// What the host spends issuing a GPU step, fitted to the Kaggle-shape steps (one rank, SGD,
// bench_precision's step on batches held in memory) of commit 8d5a81b on an NVIDIA H200 with 16
// vCPUs of an Intel Xeon, 27 Nov 2026 (bench/RESULTS.md, "The GPU kernels measured, and three
// kernel fixes"): fp32 eagerly 1,971,734 samples/s at batch 2048 (1.039 ms a step) and 2,604,378
// at 16384 (6.291 ms), TF32 with graphs 2,266,872 (0.903 ms) and 2,792,670 (5.867 ms). Those steps
// are the host's: 0.39 ms of kernels in the 1.04 ms step at 2048, the GPU idle about 60%.
// - Per index, 14 ns: the eager steps grow by 5.25 ms for 14,336 more samples of 26 indices. At
//   that commit the host turned every index into per-table row lists (bench/RESULTS.md, "After
//   the lease", which has since moved that work to the device, not yet measured on a GPU).
// - Per launch, 5.8 us: the 1.04 ms eager step at 2048 less its 53,248 indices, over its 50.0
//   launches (that section's counts).
// - Per step with graphs, 0.16 ms: the 0.90 ms TF32 step with graphs at 2048 less its indices;
//   about what the 25 launches and 4 graph launches the emulator counts for such a step
//   (docs/device.md, "Graphs") take at the eager rate, 0.17 ms.
// Taken for every GPU node's host alike (the H100 lease's host was the same kind of Xeon); for the
// older hosts of the V100 and A100 nodes, a lower bound.
void set_measured_host_costs(MachineModel& m) {
  m.host_launch_s = 5.8e-6;
  m.host_graph_step_s = 0.16e-3;
  m.host_index_s = 14e-9;
}

std::vector<MachineModel> build_models() {
  std::vector<MachineModel> models;
  {
    // The 2-vCPU AMD EPYC (Zen 3) build machine: AVX2+FMA at 2.45 GHz = 2 x 78 GFLOP/s,
    // 13-14 GB/s copied (26-27 GB/s read+write), 24 GiB. The "device" is the CPU itself.
    MachineModel m;
    m.name = "cpu-zen3-2vcpu";
    m.fp32_flops = m.tf32_flops = m.fp16_flops = 157e9;
    m.memory_bandwidth = 26 * kGB;
    m.memory_capacity = 24 * kGiB;
    m.host_device_bandwidth = 13 * kGB;  // a "transfer" is a host memcpy
    m.intra_node_bandwidth = 13 * kGB;   // shared-memory MPI between ranks
    m.network_bandwidth = 1.25 * kGB;    // 10 Gb/s Ethernet
    m.gemm_workspace_bytes = 0;
    m.gemm_efficiency = 0.65;
    m.kernel_launch_s = 3e-6;  // OpenMP region wake-up  // OpenBLAS reaches ~100 of 157 GFLOP/s on the DLRM GEMM chain
    m.devices_per_node = 1;
    m.host_cores = 2;
    m.host_memory = 24 * kGiB;
    m.host_core_flops = 78e9;
    m.host_memory_bandwidth = 26 * kGB;
    models.push_back(m);
  }
  {
    // NVIDIA DGX-1 with 8 x V100 SXM2 32 GB: 15.7 TFLOP/s FP32, 125 FP16 tensor (no BF16), 900 GB/s HBM2,
    // NVLink 300 GB/s, PCIe Gen3 x16, 4 x 100 Gb/s InfiniBand EDR, 2 x Xeon E5-2698 v4 (40 cores), 512 GB.
    MachineModel m;
    m.name = "v100-dgx1";
    m.fp32_flops = 15.7 * kTera;
    m.tf32_flops = 15.7 * kTera;  // no TF32 on Volta
    m.fp16_flops = 125 * kTera;
    m.memory_bandwidth = 900 * kGB;
    m.memory_capacity = 32 * kGiB;
    m.host_device_bandwidth = 16 * kGB;
    m.intra_node_bandwidth = 150 * kGB;  // 300 GB/s bidirectional
    m.network_bandwidth = 4 * 12.5 * kGB / 8;
    m.gemm_workspace_bytes = 4.0 * 1024 * 1024;
    m.devices_per_node = 8;
    m.host_cores = 40;
    m.host_memory = 512 * kGB;
    m.host_core_flops = 2.2e9 * 16;  // Broadwell AVX2 FMA: 16 FP32 FLOP/cycle
    m.host_memory_bandwidth = 153 * kGB;
    set_measured_host_costs(m);
    models.push_back(m);
  }
  {
    // NVIDIA DGX A100 with 8 x A100 SXM4 80 GB: 19.5 TFLOP/s FP32, 156 TF32, 312 FP16 and BF16, 2,039 GB/s HBM2e,
    // NVLink 600 GB/s, PCIe Gen4, 8 x 200 Gb/s HDR InfiniBand, 2 x EPYC 7742 (128 cores), 2 TB.
    MachineModel m;
    m.name = "a100-dgx";
    m.fp32_flops = 19.5 * kTera;
    m.tf32_flops = 156 * kTera;
    m.fp16_flops = 312 * kTera;
    m.bf16_flops = 312 * kTera;
    m.memory_bandwidth = 2039 * kGB;
    m.memory_capacity = 80 * kGiB;
    m.host_device_bandwidth = 32 * kGB;
    m.intra_node_bandwidth = 300 * kGB;
    m.network_bandwidth = 25 * kGB;
    m.gemm_workspace_bytes = 4.0 * 1024 * 1024;
    m.devices_per_node = 8;
    m.host_cores = 128;
    m.host_memory = 2000 * kGB;
    m.host_core_flops = 2.25e9 * 32;  // Zen 2: 2 x 256-bit FMA
    m.host_memory_bandwidth = 409 * kGB;
    set_measured_host_costs(m);
    models.push_back(m);
  }
  {
    // NVIDIA DGX H100 with 8 x H100 SXM5 80 GB: 67 TFLOP/s FP32, 494.7 TF32 and 989.4 FP16 and BF16 dense,
    // 3.35 TB/s HBM3, NVLink 900 GB/s, PCIe Gen5, 8 x 400 Gb/s NDR InfiniBand,
    // 2 x Xeon Platinum 8480C (112 cores), 2 TB.
    MachineModel m;
    m.name = "h100-dgx";
    m.fp32_flops = 67 * kTera;
    m.tf32_flops = 494.7 * kTera;
    m.fp16_flops = 989.4 * kTera;
    m.bf16_flops = 989.4 * kTera;
    m.memory_bandwidth = 3350 * kGB;
    m.memory_capacity = 80 * kGiB;
    m.host_device_bandwidth = 64 * kGB;
    m.intra_node_bandwidth = 450 * kGB;
    m.network_bandwidth = 50 * kGB;
    m.gemm_workspace_bytes = 32.0 * 1024 * 1024;  // cuBLAS default on Hopper
    m.devices_per_node = 8;
    m.host_cores = 112;
    m.host_memory = 2000 * kGB;
    m.host_core_flops = 2.0e9 * 64;  // Sapphire Rapids: 2 x AVX-512 FMA
    m.host_memory_bandwidth = 614 * kGB;
    set_measured_host_costs(m);
    models.push_back(m);
  }
  {
    // NVIDIA DGX H200 with 8 x H200 SXM5 141 GB: the H100's compute (67 TFLOP/s FP32, 494.7 TF32 and
    // 989.4 FP16 and BF16 dense), 4.8 TB/s HBM3e, NVLink 900 GB/s, PCIe Gen5, 8 x 400 Gb/s NDR
    // InfiniBand, 2 x Xeon Platinum 8480C (112 cores), 2 TB. The host costs above were measured on one.
    MachineModel m = models.back();  // the h100-dgx node, but for its memory
    m.name = "h200-dgx";
    m.memory_bandwidth = 4800 * kGB;
    m.memory_capacity = 141 * kGB;
    models.push_back(m);
  }
  return models;
}

}  // namespace

const std::vector<MachineModel>& machine_models() {
  static const std::vector<MachineModel> models = build_models();
  return models;
}

const MachineModel& machine_model(std::string_view name) {
  std::string known;
  for (const auto& m : machine_models()) {
    if (m.name == name) return m;
    known += (known.empty() ? "" : ", ") + m.name;
  }
  throw ConfigError("unknown machine model '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace recmix::sched
