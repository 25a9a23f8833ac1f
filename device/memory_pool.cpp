#include "device/memory_pool.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace recmix::device {

MemoryPool::MemoryPool(Backend& backend, Tier tier, std::string owner, std::size_t capacity_bytes)
    : backend_(backend), tier_(tier), owner_(std::move(owner)), capacity_(capacity_bytes) {}

void* MemoryPool::allocate(std::size_t bytes, const std::string& what) {
  if (backend_.capturing()) backend_.refuse_in_capture(fmt::format("allocate '{}'", what).c_str());
  std::size_t before = current_.fetch_add(bytes);
  if (capacity_ != 0 && before + bytes > capacity_) {
    current_.fetch_sub(bytes);
    throw OutOfMemoryError(fmt::format(
        "{} of {} for '{}' does not fit in {} memory: {} in use of a {} capacity", what,
        format_bytes(bytes), owner_, to_string(tier_), format_bytes(before), format_bytes(capacity_)));
  }
  std::size_t now = before + bytes;
  std::size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  try {
    void* p = backend_.allocate(bytes, tier_);
    backend_.name_allocation(p, fmt::format("'{}' of '{}'", what, owner_));
    return p;
  } catch (...) {
    current_.fetch_sub(bytes);
    throw;
  }
}

void MemoryPool::deallocate(void* ptr, std::size_t bytes) noexcept {
  if (!ptr) return;
  backend_.deallocate(ptr, tier_);
  current_.fetch_sub(bytes);
}

std::string format_bytes(std::size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace recmix::device
