#pragma once
// Runs an mlp kernel functor on the backend it belongs to: on the CPU on the calling thread or
// its sleeping helper threads (device/cpu/host_workers.hpp), on CUDA through mlp/cuda/launch.cu (or a stub
// that throws NotCompiledError in a build without CUDA). Internal to recmix_mlp.
#include <cstdint>

#include "device/backend.hpp"
#include "device/fine_grained.hpp"
#include "mlp/cpu/bf16.hpp"
#include "mlp/cpu/threading.hpp"
#include "device/cpu/host_workers.hpp"
#include "mlp/cross_kernels.hpp"
#include "mlp/kernels.hpp"

// Every functor type launched on CUDA; launch.cu instantiates the grid-stride kernel for each.
#define RECMIX_MLP_KERNELS(X)                                                                   \
  X(InitRandom) X(BiasActivationForward) X(ActivationBackward) X(ColumnSum)                     \
  X(DotInteractionForward) X(DotInteractionBackward) X(CatInteractionForward)                   \
  X(CatInteractionBackward) X(BceTerms) X(BceBackward) X(SgdStep) X(AdagradStep) X(AdamStep)    \
  X(SgdSteps) X(AdagradSteps) X(AdamSteps)                                                     \
  X(AdamCorrections) X(ScheduleScale)                                                       \
  X(Fill) X(RoundToBf16) X(BlockSums) X(AddBlockSums) X(FlagNonFinite) X(CrossCombine)         \
  X(CrossGradient)

namespace recmix::mlp::detail {

#define RECMIX_MLP_DECLARE_CUDA_LAUNCH(K) \
  void cuda_launch(void* native_stream, kernels::Index n, const kernels::K& f);
RECMIX_MLP_KERNELS(RECMIX_MLP_DECLARE_CUDA_LAUNCH)
#undef RECMIX_MLP_DECLARE_CUDA_LAUNCH

// Threads for a CPU kernel touching `elements` floats (see mlp/cpu/threading.hpp).
inline int cpu_threads_for(const device::Backend& backend, std::int64_t elements) {
  return elements >= cpu_parallel_threshold() ? backend.num_threads() : 1;
}

// Runs f(i) for i in [0, n); `elements` is the work's size in floats (decides threading).
template <class F>
void launch(device::Backend& backend, device::Stream& stream, kernels::Index n, const F& f,
            std::int64_t elements) {
  if (n <= 0) return;
  backend.note_launch();
  if (device::runs_kernels_on_host(backend)) {
    const int threads = cpu_threads_for(backend, elements);
    if constexpr (device::FineGrained<F>) {
      // The strict emulator runs what the GPU runs (device/fine_grained.hpp). The item count is
      // taken on the host, when the kernel is issued, as the CUDA launcher takes its grid.
      if (device::runs_fine_items(backend)) {
        const kernels::Index items = f.fine_items(n);
        backend.run_host_kernel(stream, [threads, items, f] {
          device::cpu::parallel_blocks(threads, items, device::FineItems<F>{f});
        });
        return;
      }
    }
    backend.run_host_kernel(stream, [threads, n, f] { device::cpu::parallel_blocks(threads, n, f); });
  } else {
    cuda_launch(stream.native(), n, f);
  }
}

// Issues a CPU-only fast path (mlp/cpu/) as a kernel, as launch() issues a functor on the host:
// counted, run through the backend (so never outside its device work), f(i) for i in [0, n) on
// the calling thread's pool. f is copied: it must hold what it needs by value.
template <class F>
void launch_host(device::Backend& backend, device::Stream& stream, int threads, kernels::Index n, const F& f) {
  if (n <= 0) return;
  backend.note_launch();
  backend.run_host_kernel(stream, [threads, n, f] { device::cpu::parallel_blocks(threads, n, f); });
}

// launch(), for a pass that also writes bf16 GEMM operands when `bf16`: on the CPU backend of an
// AVX-512 CPU through cpu::run_rounded (mlp/cpu/bf16.hpp), which rounds each block while it is in
// cache, 16 values a vector; elsewhere the functor as it is, rounding one value at a time. Both
// give the same bits.
template <class F>
void launch_rounding(device::Backend& backend, device::Stream& stream, bool bf16, kernels::Index n, const F& f,
                     std::int64_t elements) {
  if (bf16 && device::device_memory_is_host(backend) && cpu::bf16_rounding_vectorised())
    launch_host(backend, stream, cpu_threads_for(backend, elements), n, [f](kernels::Index b) { cpu::run_rounded(f, b); });
  else
    launch(backend, stream, n, f, elements);
}

inline kernels::Index row_blocks(int rows) {
  return (static_cast<kernels::Index>(rows) + kernels::kRowBlock - 1) / kernels::kRowBlock;
}
inline kernels::Index flat_blocks(kernels::Index count) {
  return (count + kernels::kFlatBlock - 1) / kernels::kFlatBlock;
}

}  // namespace recmix::mlp::detail
