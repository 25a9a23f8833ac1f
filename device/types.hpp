#pragma once
// Small vocabulary shared by the device layer and everything above it.
#include <cstdint>
#include <string_view>

#include "core/host_device.hpp"

namespace recmix::device {

// cpu: the fast host backend, where device memory is host memory. cuda: a GPU. cpu_strict: the
// strict device emulator, a test backend that runs every kernel on the host like `cpu` but takes
// the CUDA code paths and keeps device memory out of host code's reach (device/cpu/strict_backend.cpp).
enum class BackendKind { cpu, cuda, cpu_strict };

// Whether device.graphs = "auto" turns graphs on for a backend of this kind: where a replay saves
// real launches (CUDA; on an H200 a TF32 step with graphs ran 1.15-1.26x the eager fp32 one at
// batch 2048), not where they are emulated for tests (cpu-strict) or absent (cpu). One rule for
// the backends (Backend::graphs_by_default) and the scheduler's view of a job.
constexpr bool graphs_by_default(BackendKind k) { return k == BackendKind::cuda; }

// The library behind a CPU backend's GEMM, as asked for. automatic: oneDNN where the build has it
// and the CPU has AVX-512 (F, CD, BW, DQ, VL), OpenBLAS elsewhere. On the 2-core AVX-512 build
// machine oneDNN 2.6's SGEMM runs the DLRM's GEMMs 1.9x as fast as OpenBLAS 0.3.21 with the
// Haswell kernels it is pinned to there (bench/RESULTS.md).
enum class CpuGemm { automatic, openblas, onednn };
// The library a backend's GEMM runs on.
enum class GemmLibrary { openblas, onednn, cublas };

// How a backend's last 16-bit GEMM (Backend::gemm_half) ran. native: on instructions that
// multiply bf16 or fp16 (AVX512_BF16 or AMX under oneDNN, cuBLAS on a GPU). emulated: oneDNN's bf16 kernels on a CPU
// without such instructions, which widen bf16 to fp32 in registers. widened: A and B widened to
// fp32 in the backend's scratch memory and its fp32 GEMM run on them. none: no bf16 GEMM has run.
enum class HalfGemmPath { none, native, emulated, widened };

// The math of fp32 GEMMs (Backend::gemm). fp32: fp32 products and sums. tf32: each operand's
// significand cut to TF32's 10 bits (of an fp32 value, TF32 tensor cores read only the sign, the
// exponent and the first 10 significand bits), the products exact and summed in fp32.
enum class Fp32Math { fp32, tf32 };

// Where an allocation lives: on the device (a GPU's memory, or ordinary memory on the CPU
// backend) or in the host tier (pinned host memory on CUDA) used for cold embedding rows.
enum class Tier { device, host };

inline std::string_view to_string(BackendKind k) {
  return k == BackendKind::cpu ? "cpu" : k == BackendKind::cuda ? "cuda" : "cpu-strict";
}
// The job spec's device.kind ("cpu", "cuda", "cpu-strict", already checked); anything else is cpu.
inline BackendKind parse_backend_kind(std::string_view name) {
  return name == "cuda" ? BackendKind::cuda : name == "cpu-strict" ? BackendKind::cpu_strict : BackendKind::cpu;
}
inline std::string_view to_string(Tier t) { return t == Tier::device ? "device" : "host"; }
inline std::string_view to_string(CpuGemm g) {
  return g == CpuGemm::automatic ? "auto" : g == CpuGemm::openblas ? "openblas" : "onednn";
}
// "auto", "openblas" or "onednn" (the job spec's device.gemm, already checked); anything else is
// automatic.
inline CpuGemm parse_cpu_gemm(std::string_view name) {
  return name == "openblas" ? CpuGemm::openblas : name == "onednn" ? CpuGemm::onednn : CpuGemm::automatic;
}
inline std::string_view to_string(GemmLibrary g) {
  return g == GemmLibrary::openblas ? "OpenBLAS" : g == GemmLibrary::onednn ? "oneDNN" : "cuBLAS";
}

inline std::string_view to_string(HalfGemmPath p) {
  return p == HalfGemmPath::native     ? "native"
         : p == HalfGemmPath::emulated ? "emulated"
         : p == HalfGemmPath::widened  ? "widened"
                                       : "none";
}

}  // namespace recmix::device
