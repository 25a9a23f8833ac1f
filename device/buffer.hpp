#pragma once
// Buffer<T>: a typed, counted allocation from a MemoryPool, freed on destruction.
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "device/memory_pool.hpp"

namespace recmix::device {

template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(MemoryPool& pool, std::size_t count, const std::string& what = "buffer")
      : pool_(&pool), size_(count) {
    if (count > 0) data_ = static_cast<T*>(pool.allocate(count * sizeof(T), what));
  }
  ~Buffer() { release(); }
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      swap(o);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }
  bool empty() const { return size_ == 0; }
  // Host access: valid on the CPU backend and for the host tier.
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  std::span<T> span() { return {data_, size_}; }
  std::span<const T> span() const { return {data_, size_}; }

 private:
  void release() noexcept {
    if (data_) pool_->deallocate(data_, size_ * sizeof(T));
    data_ = nullptr;
    size_ = 0;
  }
  void swap(Buffer& o) noexcept {
    std::swap(pool_, o.pool_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }
  MemoryPool* pool_ = nullptr;
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace recmix::device
