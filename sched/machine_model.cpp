#include "sched/machine_model.hpp"

#include <string>

#include "core/error.hpp"

namespace recmix::sched {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;
constexpr double kTera = 1e12;

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
