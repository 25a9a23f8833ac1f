#include "embedding/kernel_launch.hpp"

#include <cstdint>
#include <type_traits>

#include "core/env_switch.hpp"
#include "core/error.hpp"
#include "device/fine_grained.hpp"
#include "device/launch.hpp"
#include "embedding/cpu/loops.hpp"
#include "embedding/cpu/one_hot.hpp"

namespace recmix::embedding {
namespace {

using cpu::cpu_prefetched;
using cpu::kGrain;
using cpu::PoolHalfRows;
using cpu::PrefetchPool;
using cpu::PrefetchUpdate;
using cpu::StepHalfRows;

// Whether a launch on `backend` takes a functor's lanes: where it runs what a GPU runs, unless
// the fine items are asked for (device/fine_grained.hpp).
bool takes_lanes(const device::Backend& backend) {
  return device::runs_fine_items(backend) && device::gpu_items() == device::GpuItems::lanes;
}

const kernels::UpdateRows& update_of(const kernels::UpdateRows& f) { return f; }
const kernels::UpdateRows& update_of(const kernels::UpdateRowsHalf& f) { return f.update; }

template <class F>
void run(device::Backend& backend, device::Stream& stream, std::int64_t n, const F& f,
         std::int64_t grain) {
  if (n <= 0) return;
  if constexpr (std::is_same_v<F, kernels::UpdateRows> || std::is_same_v<F, kernels::UpdateRowsHalf>) {
    // Lanes never see a whole row: row-wise Adagrad's state steps first, a row an item.
    if (takes_lanes(backend) && update_of(f).kind == SparseOptimizerKind::rowwise_adagrad)
      run(backend, stream, n, kernels::RowwiseState{update_of(f)}, 64);
  }
  backend.note_launch();
  if (device::runs_kernels_on_host(backend)) {
    const int threads = backend.num_threads();
    if constexpr (device::LaneGrained<F>) {
      // The strict emulator runs what the GPU runs (device/fine_grained.hpp). The item counts are
      // taken on the host, when the kernel is issued, as the CUDA launcher takes its grid.
      if (takes_lanes(backend)) {
        const std::int64_t items = f.lane_items(n);
        backend.run_host_kernel(stream, [threads, items, f, grain] {
          device::cpu::parallel_for(threads, items, device::LaneItems<F>{f}, grain);
        });
        return;
      }
    }
    if constexpr (device::FineGrained<F>) {
      // The strict emulator runs what the GPU runs (device/fine_grained.hpp).
      if (device::runs_fine_items(backend)) {
        const std::int64_t items = f.fine_items(n);
        backend.run_host_kernel(stream, [threads, items, f, grain] {
          device::cpu::parallel_for(threads, items, device::FineItems<F>{f}, grain);
        });
        return;
      }
    }
    // The functor is held by value: a captured launch runs later (device/graph.hpp).
    backend.run_host_kernel(stream, [threads, n, f, grain] {
      if constexpr (std::is_same_v<F, kernels::PoolBags>)
        cpu_prefetched(threads, n, f, PrefetchPool<F>{f}, grain);
      else if constexpr (std::is_same_v<F, kernels::PoolBagsHalf>)
        cpu_prefetched(threads, n, PoolHalfRows{f, cpu::half_rows_vectorised()}, PrefetchPool<F>{f}, grain);
      else if constexpr (std::is_same_v<F, kernels::UpdateRows>)
        cpu_prefetched(threads, n, f, PrefetchUpdate<float>{f, f.weights}, grain);
      else if constexpr (std::is_same_v<F, kernels::UpdateRowsHalf>)
        cpu_prefetched(threads, n, StepHalfRows(f), PrefetchUpdate<std::uint16_t>{f.update, f.weights}, grain);
      else
        device::cpu::parallel_for(threads, n, f, grain);
    });
    return;
  }
#ifdef RECMIX_HAVE_CUDA
  cuda::launch(stream.native(), n, f);
#else
  throw NotCompiledError("embedding kernels: this build has no CUDA backend");
#endif
}

EnvSwitch& prefetch_switch() {
  static EnvSwitch s("RECMIX_EMBEDDING_PREFETCH");
  return s;
}

// The pooling's lanes with the process's prefetch setting.
template <class F>
F with_prefetch(F f) {
  f.prefetch = prefetch_switch().on();
  return f;
}

}  // namespace

bool lane_prefetch() { return prefetch_switch().on(); }
void set_lane_prefetch(bool on) { prefetch_switch().set(on); }

// By reference: these run only where the device memory is the host's, on a backend without
// graphs, so at once.
std::int64_t launch_one_hot_forward(device::Backend& backend, device::Stream& stream, const cpu::OneHotTables& f,
                                    float* out) {
  std::int64_t bad = -1;
  backend.note_launch();
  backend.run_host_kernel(stream, [&] { bad = cpu::one_hot_forward(backend.num_threads(), f, out); });
  return bad;
}

void launch_one_hot_update(device::Backend& backend, device::Stream& stream, const cpu::OneHotTables& f,
                           SparseOptimizerKind kind, float lr, float eps, const float* grad) {
  backend.note_launch();
  backend.run_host_kernel(stream, [&] { cpu::one_hot_update(backend.num_threads(), f, kind, lr, eps, grad); });
}

void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::PoolBags& f) {
  run(b, s, n, with_prefetch(f), kGrain / (f.dim > 0 ? f.dim : 1));
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::UpdateRows& f) {
  run(b, s, n, f, kGrain / (f.dim > 0 ? f.dim : 1));
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::InitShard& f) {
  run(b, s, n, f, 1 << 16);
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::Fill& f) {
  run(b, s, n, f, 1 << 18);
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::CombineParts& f) {
  run(b, s, n, f, kGrain / (f.dim > 0 ? f.dim : 1));
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::GatherRows& f) {
  run(b, s, n, f, kGrain / (f.dim > 0 ? f.dim : 1));
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::PoolBagsHalf& f) {
  run(b, s, n, with_prefetch(f), kGrain / (f.dim > 0 ? f.dim : 1));
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::UpdateRowsHalf& f) {
  run(b, s, n, f, kGrain / (f.update.dim > 0 ? f.update.dim : 1));
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::InitShardHalf& f) {
  run(b, s, n, f, 1 << 16);
}

// Launched over blocks (or one item): each item is a block's worth of work.
#define RECMIX_EMBEDDING_DEFINE_LAUNCH(K) \
  void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::K& f) { run(b, s, n, f, 2); }
RECMIX_EMBEDDING_GROUP_KERNELS(RECMIX_EMBEDDING_DEFINE_LAUNCH)
#undef RECMIX_EMBEDDING_DEFINE_LAUNCH

}  // namespace recmix::embedding
