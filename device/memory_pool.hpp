#pragma once
// A memory pool counts the bytes one owner (a job) holds in one tier, remembers the peak and
// refuses allocations past a configured capacity with an OutOfMemoryError. This is how a GPU's
// memory limit is emulated on the CPU backend, and what the scheduler's estimates are checked on.
#include <atomic>
#include <cstddef>
#include <string>

#include "device/backend.hpp"

namespace recmix::device {

class MemoryPool {
 public:
  // capacity_bytes == 0 means unlimited.
  MemoryPool(Backend& backend, Tier tier, std::string owner, std::size_t capacity_bytes = 0);
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // what names the allocation in the error ("embedding table 3").
  void* allocate(std::size_t bytes, const std::string& what = "allocation");
  void deallocate(void* ptr, std::size_t bytes) noexcept;

  std::size_t current_bytes() const { return current_.load(); }
  std::size_t peak_bytes() const { return peak_.load(); }
  std::size_t capacity_bytes() const { return capacity_; }
  void set_capacity(std::size_t bytes) { capacity_ = bytes; }
  void reset_peak() { peak_.store(current_.load()); }
  const std::string& owner() const { return owner_; }
  Tier tier() const { return tier_; }
  Backend& backend() const { return backend_; }

 private:
  Backend& backend_;
  Tier tier_;
  std::string owner_;
  std::size_t capacity_;
  std::atomic<std::size_t> current_{0};
  std::atomic<std::size_t> peak_{0};
};

std::string format_bytes(std::size_t bytes);

}  // namespace recmix::device
