#include "embedding/device_grouping.hpp"

#include <algorithm>

#include "embedding/group_kernels.hpp"
#include "embedding/kernel_launch.hpp"

namespace recmix::embedding {
namespace {

// Entries per block of the grouping kernels, and the most blocks: enough blocks to use the
// device's threads on large batches, few enough that the single-thread scans stay short.
constexpr std::int64_t kEntriesPerBlock = 1024;
constexpr std::int64_t kMaxBlocks = 256;

}  // namespace

template <class T>
T* DeviceGrouping::grow(device::Buffer<T>& buffer, std::int64_t count, const char* what) {
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(count, 1));
  if (buffer.size() < n) buffer = device::Buffer<T>(pool_, n, what);
  return buffer.data();
}

void DeviceGrouping::group(device::Stream& stream, const std::int64_t* offsets, const std::int64_t* rows,
                           std::int64_t n_bags, std::int64_t entries, int key_bits, const float* bag_scale) {
  entries_ = entries;
  scaled_ = bag_scale != nullptr;
  const std::int64_t n = entries;
  const std::int64_t blocks = std::clamp<std::int64_t>(n / kEntriesPerBlock, 1, kMaxBlocks);
  std::int64_t* keys[2] = {grow(keys_[0], n, "embedding grouping keys"), grow(keys_[1], n, "embedding grouping keys")};
  std::int64_t* vals[2] = {grow(vals_[0], n, "embedding grouping entries"),
                           grow(vals_[1], n, "embedding grouping entries")};
  std::int64_t* bag_of = grow(bag_of_, n, "embedding grouping bags");
  std::int64_t* counts = grow(counts_, blocks * kernels::kRadixSize, "embedding grouping counts");
  std::int64_t* unique = grow(unique_, n, "embedding unique rows");
  std::int64_t* entry_offsets = grow(entry_offsets_, n + 1, "embedding entry offsets");
  std::int64_t* entry_grad = grow(entry_grad_, n, "embedding entry gradients");
  std::int64_t* groups = grow(groups_, 1, "embedding unique row count");
  float* entry_scale = scaled_ ? grow(entry_scale_, n, "embedding entry scales") : nullptr;

  if (n_bags > 0) launch(backend_, stream, n_bags, kernels::BagOfEntry{offsets, bag_of});
  launch(backend_, stream, n, kernels::InitSort{rows, keys[0], vals[0]});
  int from = 0;
  for (int shift = 0; shift < std::max(key_bits, 1); shift += kernels::kRadixBits) {
    launch(backend_, stream, blocks, kernels::RadixHistogram{keys[from], n, blocks, shift, counts});
    launch(backend_, stream, 1, kernels::RadixOffsets{counts, blocks});
    launch(backend_, stream, blocks,
           kernels::RadixScatter{keys[from], vals[from], keys[1 - from], vals[1 - from], n, blocks, shift, counts});
    from = 1 - from;
  }
  const std::int64_t* sorted_keys = keys[from];
  const std::int64_t* sorted_vals = vals[from];
  launch(backend_, stream, blocks, kernels::GroupCount{sorted_keys, n, blocks, counts});
  launch(backend_, stream, 1, kernels::GroupBase{counts, blocks, n, groups, entry_offsets});
  launch(backend_, stream, blocks,
         kernels::GroupWrite{sorted_keys, sorted_vals, bag_of, bag_scale, n, blocks, counts, unique, entry_offsets,
                             entry_grad, entry_scale});
}

void DeviceGrouping::fill(kernels::UpdateRows& f) const {
  f.unique_rows = unique_.data();
  f.entry_offsets = entry_offsets_.data();
  f.entry_grad = entry_grad_.data();
  f.entry_scale = scaled_ ? entry_scale_.data() : nullptr;
  f.unique_count = groups_.data();
}

}  // namespace recmix::embedding
