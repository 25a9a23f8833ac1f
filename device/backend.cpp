// The counted half of Backend: every allocation, copy, fill, stream and event passes here on its
// way to the backend's do_ function, so that the counts (counters.hpp) are taken in one place.
#include "device/backend.hpp"

namespace recmix::device {

void* Backend::allocate(std::size_t bytes, Tier tier) {
  counters_.allocation();
  void* p = do_allocate(bytes, tier);
  std::lock_guard lock(allocations_mutex_);
  allocations_[reinterpret_cast<std::uintptr_t>(p)] = {std::max<std::size_t>(bytes, 1), tier};
  return p;
}

void Backend::deallocate(void* ptr, Tier tier) noexcept {
  if (!ptr) return;
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
      if (!CommSyncScope::active()) counters_.pageable_copy();
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
  return s;
}

std::unique_ptr<Event> Backend::create_event() {
  std::unique_ptr<Event> e = do_create_event();
  e->counters_ = &counters_;
  return e;
}

}  // namespace recmix::device
