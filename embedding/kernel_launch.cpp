#include "embedding/kernel_launch.hpp"

#include "core/error.hpp"
#include "device/launch.hpp"

namespace recmix::embedding {
namespace {

// Work items below which a loop stays on the calling thread. Pooling and updates cost about
// dim flops per item, so a few thousand items are needed before a second thread pays off.
constexpr std::int64_t kGrain = 8192;

template <class F>
void run(device::Backend& backend, device::Stream& stream, std::int64_t n, const F& f,
         std::int64_t grain) {
  if (n <= 0) return;
  if (backend.kind() == device::BackendKind::cpu) {
    device::cpu::parallel_for(backend.num_threads(), n, f, grain);
    return;
  }
#ifdef RECMIX_HAVE_CUDA
  cuda::launch(stream.native(), n, f);
#else
  throw NotCompiledError("embedding kernels: this build has no CUDA backend");
#endif
}

}  // namespace

void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::PoolBags& f) {
  run(b, s, n, f, kGrain / (f.dim > 0 ? f.dim : 1) * 4);
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::UpdateRows& f) {
  run(b, s, n, f, kGrain / (f.dim > 0 ? f.dim : 1) * 4);
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::InitShard& f) {
  run(b, s, n, f, 1 << 16);
}
void launch(device::Backend& b, device::Stream& s, std::int64_t n, const kernels::Fill& f) {
  run(b, s, n, f, 1 << 18);
}

}  // namespace recmix::embedding
