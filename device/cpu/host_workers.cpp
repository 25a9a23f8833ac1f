// HostWorkers: a generation counter wakes the helpers, a pending counter tells the caller when
// they are done; both wait with std::atomic::wait (a futex after a short spin).
#include "device/cpu/host_workers.hpp"

#include <algorithm>

namespace recmix::device::cpu {

HostWorkers& HostWorkers::for_this_thread() {
  thread_local HostWorkers workers;
  return workers;
}

HostWorkers::~HostWorkers() {
  stop_ = true;
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& t : helpers_) t.join();
}

void HostWorkers::grow(int helpers) {
  while (static_cast<int>(helpers_.size()) < helpers) {
    int index = static_cast<int>(helpers_.size()) + 1;  // part 0 is the caller's
    // The generation before the wake-up that follows; a helper that starts late must not
    // mistake that wake-up for its starting point.
    std::uint64_t start = generation_.load(std::memory_order_acquire);
    helpers_.emplace_back([this, index, start] { helper_loop(index, start); });
  }
}

void HostWorkers::helper_loop(int index, std::uint64_t seen) {
  for (;;) {
    generation_.wait(seen, std::memory_order_acquire);
    seen = generation_.load(std::memory_order_acquire);
    if (stop_) return;
    if (index < parts_) {
      std::int64_t b = n_ * index / parts_, e = n_ * (index + 1) / parts_;
      (*body_)(b, e);
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void HostWorkers::run(int threads, std::int64_t n,
                      const std::function<void(std::int64_t, std::int64_t)>& body) {
  int parts = static_cast<int>(std::min<std::int64_t>(threads, n));
  if (parts <= 1) {
    body(0, n);
    return;
  }
  grow(parts - 1);
  body_ = &body;
  n_ = n;
  parts_ = parts;
  pending_.store(static_cast<int>(helpers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  body(0, n / parts);
  for (int left = pending_.load(std::memory_order_acquire); left != 0;
       left = pending_.load(std::memory_order_acquire))
    pending_.wait(left, std::memory_order_acquire);
}

}  // namespace recmix::device::cpu
