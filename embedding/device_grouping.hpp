#pragma once
// DeviceGrouping: the sparse update's grouping of entries by row, on the device, for backends
// whose memory the host cannot touch (CUDA, cpu-strict). Input: a CSR of bags over weight rows in
// device memory; output: the unique rows, each row's entries in CSR order and the gradient vector
// (bag) of each entry, in the layout kernels::UpdateRows reads. Deterministic (group_kernels.hpp);
// groups come in row order, where the host grouping lists them by first entry: the update steps
// each row once with its entries summed in the same order either way, so the weights are the same
// bits. No host synchronisation: the number of groups stays on the device (UpdateRows::unique_count).
// Internal to recmix_embedding.
#include <cstddef>
#include <cstdint>

#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "embedding/kernels.hpp"

namespace recmix::embedding {

class DeviceGrouping {
 public:
  DeviceGrouping(device::Backend& backend, device::MemoryPool& pool) : backend_(backend), pool_(pool) {}

  // offsets [n_bags + 1] and rows [entries] (device memory, rows below 2^key_bits); bag_scale
  // [n_bags] or null (per-entry scales then stay unset). Null offsets say that bag j is entry j
  // alone (one-hot batches; entries == n_bags), which spares the launch that maps entries to bags.
  // Enqueued on stream.
  void group(device::Stream& stream, const std::int64_t* offsets, const std::int64_t* rows, std::int64_t n_bags,
             std::int64_t entries, int key_bits, const float* bag_scale);
  // Makes every buffer of group() at its size for up to `entries` entries now (rows below
  // 2^key_bits; `scaled`: with bag scales), so that such a group() allocates nothing.
  void reserve(device::Stream& stream, std::int64_t entries, int key_bits, bool scaled);
  // Points f's grouping fields at the result; launch f over launch_size() items.
  void fill(kernels::UpdateRows& f) const;
  std::int64_t launch_size() const { return entries_; }
  // How many of its buffers were made anew so far (ShardedEmbedding::device_buffers_generation).
  std::uint64_t buffers_made() const { return buffers_made_; }

 private:
  template <class T>
  T* grow(device::Buffer<T>& buffer, std::int64_t count, const char* what);
  // CUB's scratch bytes for n entries (0 where the backend runs its kernels on the host).
  std::size_t cub_temp_bytes(device::Stream& stream, std::int64_t n, int key_bits);

  device::Backend& backend_;
  device::MemoryPool& pool_;
  std::int64_t entries_ = 0;
  bool scaled_ = false;
  std::uint64_t buffers_made_ = 0;
  device::Buffer<std::int64_t> keys_[2], vals_[2], bag_of_, counts_, head_, group_, unique_, entry_offsets_,
      entry_grad_, groups_;
  device::Buffer<float> entry_scale_;
  device::Buffer<unsigned char> temp_;  // CUB's scratch (CUDA)
};

}  // namespace recmix::embedding
