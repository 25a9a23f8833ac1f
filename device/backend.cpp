// The counted half of Backend: every allocation, copy, fill, stream and event passes here on its
// way to the backend's do_ function, so that the counts (counters.hpp) are taken in one place.
#include "device/backend.hpp"

#include <fmt/format.h>

#include <string>

#include "core/error.hpp"
#include "device/launch.hpp"

namespace recmix::device {
namespace {

// The capture this thread has open, if any (graph.hpp): captures are per thread, as in CUDA's
// thread-local capture mode, so one job capturing never refuses another thread's calls.
struct ThreadCapture {
  const Backend* backend = nullptr;
  const Stream* stream = nullptr;
  std::string refused;  // the first call refused where it could not throw
};
thread_local ThreadCapture this_thread_capture;

}  // namespace

void refuse_wait_in_capture(const Backend* backend, const char* call) {
  if (backend) backend->refuse_in_capture(call);
}

bool Backend::capturing(const Stream& stream) const {
  return this_thread_capture.backend == this && this_thread_capture.stream == &stream;
}

bool Backend::capturing() const { return this_thread_capture.backend == this; }

void Backend::refuse_in_capture(const char* call) const {
  if (capturing())
    throw DeviceError(fmt::format("{} during graph capture on {}: a captured step may not allocate, free, wait "
                                  "on the device or copy through pageable memory",
                                  call, description()));
}

void Backend::note_refused(const char* call) noexcept {
  if (capturing() && this_thread_capture.refused.empty()) this_thread_capture.refused = call;
}

void Backend::begin_capture(Stream& stream) {
  if (!supports_graphs()) throw DeviceError(fmt::format("{} has no graphs", description()));
  if (this_thread_capture.backend)
    throw DeviceError("begin_capture: this thread is capturing a graph already");
  do_begin_capture(stream);
  this_thread_capture = {this, &stream, {}};
}

std::unique_ptr<Graph> Backend::end_capture(Stream& stream) {
  if (!capturing(stream)) throw DeviceError("end_capture: this thread is not capturing that stream");
  const std::string refused = this_thread_capture.refused;
  this_thread_capture = {};
  std::unique_ptr<Graph> graph;
  try {
    graph = do_end_capture(stream);
  } catch (const DeviceError&) {
    if (refused.empty()) throw;  // else CUDA voided the capture for the call named below
  }
  if (!refused.empty())
    throw DeviceError(fmt::format("{} during graph capture on {}: the capture is void", refused, description()));
  graph->counters_ = &counters_;
  return graph;
}

void Backend::host_task(Stream& stream, std::function<void()> task) {
  if (!runs_kernels_on_host())
    throw DeviceError(fmt::format("host_task: {} runs its kernels on a GPU; host work cannot join its streams",
                                  description()));
  if (capturing(stream)) {
    do_record([task = std::move(task)](Stream&) { task(); });
    return;
  }
  task();
}

void Backend::do_begin_capture(Stream&) { throw DeviceError(fmt::format("{} has no graphs", description())); }
std::unique_ptr<Graph> Backend::do_end_capture(Stream&) {
  throw DeviceError(fmt::format("{} has no graphs", description()));
}
void Backend::do_record(std::function<void(Stream&)>) {
  throw DeviceError(fmt::format("{} records no host work for graphs", description()));
}

void* Backend::allocate(std::size_t bytes, Tier tier) {
  refuse_in_capture("allocate");
  counters_.allocation();
  void* p = do_allocate(bytes, tier);
  std::lock_guard lock(allocations_mutex_);
  allocations_[reinterpret_cast<std::uintptr_t>(p)] = {std::max<std::size_t>(bytes, 1), tier};
  return p;
}

void Backend::deallocate(void* ptr, Tier tier) noexcept {
  if (!ptr) return;
  note_refused("deallocate");
  counters_.deallocation();
  {
    std::lock_guard lock(allocations_mutex_);
    allocations_.erase(reinterpret_cast<std::uintptr_t>(ptr));
  }
  do_deallocate(ptr, tier);
}

std::optional<Tier> Backend::tier_of(const void* ptr) const {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(allocations_mutex_);
  auto it = allocations_.upper_bound(p);
  if (it == allocations_.begin()) return std::nullopt;
  --it;
  if (p - it->first >= it->second.first) return std::nullopt;
  return it->second.second;
}

void Backend::copy(void* dst, const void* src, std::size_t bytes, Stream& stream) {
  if (bytes > 0) {
    const std::optional<Tier> from = tier_of(src), to = tier_of(dst);
    if (!from || !to) {
      // A staged communicator's copies stand in for NCCL's, which copy nothing: only their
      // waits are counted, as comm_syncs.
      if (!CommSyncScope::active()) {
        refuse_in_capture("copy through pageable host memory");
        counters_.pageable_copy();
      }
      // From the device into pageable memory: CUDA returns only once the copy has landed.
      if (from == Tier::device && !host_accessible(Tier::device)) counters_.host_wait();
    }
  }
  do_copy(dst, src, bytes, stream);
}

void Backend::fill_zero(void* dst, std::size_t bytes, Stream& stream) {
  if (bytes > 0) counters_.launch();
  do_fill_zero(dst, bytes, stream);
}

std::unique_ptr<Stream> Backend::create_stream() {
  std::unique_ptr<Stream> s = do_create_stream();
  s->counters_ = &counters_;
  s->backend_ = this;
  s->priority_ = stream_priority_;
  return s;
}

std::unique_ptr<Event> Backend::create_event() {
  std::unique_ptr<Event> e = do_create_event();
  e->counters_ = &counters_;
  e->backend_ = this;
  return e;
}

void Backend::do_gemm_epilogue(Stream& stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                               const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc,
                               GemmEpilogue epilogue, float* bias) {
  if (epilogue != GemmEpilogue::none && !runs_kernels_on_host())
    throw DeviceError(fmt::format("gemm epilogue {}: this backend has no host emulation of it", to_string(epilogue)));
  do_gemm(stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (m == 0 || epilogue == GemmEpilogue::none) return;
  const int threads = num_threads();
  if (epilogue == GemmEpilogue::bias_gradient) {
    const epilogue::RowSums f{a, k, lda, trans_a, bias};
    run_host_kernel(stream, [threads, m, f] { cpu::parallel_for(threads, m, f, 64); });
    return;
  }
  const epilogue::AddBias f{c, bias, n, ldc, epilogue == GemmEpilogue::bias_relu};
  const std::int64_t elements = static_cast<std::int64_t>(m) * n;
  run_host_kernel(stream, [threads, elements, f] { cpu::parallel_for(threads, elements, f); });
}

}  // namespace recmix::device
