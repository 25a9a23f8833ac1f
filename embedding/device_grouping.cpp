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
  if (buffer.size() < n) {
    buffer = device::Buffer<T>(pool_, n, what);
    ++buffers_made_;
  }
  return buffer.data();
}

std::size_t DeviceGrouping::cub_temp_bytes(device::Stream& stream, std::int64_t n, int key_bits) {
#ifdef RECMIX_HAVE_CUDA
  if (device::runs_kernels_on_host(backend_) || n <= 0) return 0;
  // A query: with no scratch, CUB only says how much it needs.
  return std::max(cuda::sort_pairs(stream.native(), nullptr, 0, keys_[0].data(), keys_[1].data(), vals_[0].data(),
                                   vals_[1].data(), n, std::max(key_bits, 1)),
                  cuda::exclusive_sum(stream.native(), nullptr, 0, counts_.data(), counts_.data(), n));
#else
  (void)stream, (void)n, (void)key_bits;
  return 0;
#endif
}

void DeviceGrouping::reserve(device::Stream& stream, std::int64_t entries, int key_bits, bool scaled) {
  const std::int64_t n = entries;
  for (auto* b : {&keys_[0], &keys_[1], &vals_[0], &vals_[1], &bag_of_, &unique_, &entry_grad_, &head_, &group_})
    grow(*b, n, "embedding grouping");
  grow(entry_offsets_, n + 1, "embedding entry offsets");
  grow(counts_, std::clamp<std::int64_t>(n / kEntriesPerBlock, 1, kMaxBlocks) * kernels::kRadixSize,
       "embedding grouping counts");
  grow(groups_, 1, "embedding unique row count");
  if (scaled) grow(entry_scale_, n, "embedding entry scales");
  if (const std::size_t temp = cub_temp_bytes(stream, n, key_bits); temp > 0)
    grow(temp_, static_cast<std::int64_t>(temp), "embedding grouping scratch");
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

  if (offsets == nullptr)
    bag_of = nullptr;  // GroupScatter takes entry j's bag to be j
  else if (n_bags > 0)
    launch(backend_, stream, n_bags, kernels::BagOfEntry{offsets, bag_of});
  launch(backend_, stream, n, kernels::InitSort{rows, keys[0], vals[0]});
  const int bits = std::max(key_bits, 1);
  int from = 0;
#ifdef RECMIX_HAVE_CUDA
  const bool cub = !device::runs_kernels_on_host(backend_) && n > 0;
  void* temp = nullptr;
  std::size_t temp_bytes = 0;
  if (cub) {
    temp_bytes = cub_temp_bytes(stream, n, bits);
    temp = grow(temp_, static_cast<std::int64_t>(temp_bytes), "embedding grouping scratch");
    cuda::sort_pairs(stream.native(), temp, temp_bytes, keys[0], keys[1], vals[0], vals[1], n, bits);
    backend_.note_launch();
    from = 1;
  }
#else
  constexpr bool cub = false;
#endif
  if (!cub)
    for (int shift = 0; shift < bits; shift += kernels::kRadixBits) {
      launch(backend_, stream, blocks, kernels::RadixHistogram{keys[from], n, blocks, shift, counts});
      launch(backend_, stream, 1, kernels::RadixOffsets{counts, blocks});
      launch(backend_, stream, blocks,
             kernels::RadixScatter{keys[from], vals[from], keys[1 - from], vals[1 - from], n, blocks, shift, counts});
      from = 1 - from;
    }
  const std::int64_t* sorted_keys = keys[from];
  const std::int64_t* sorted_vals = vals[from];
  std::int64_t* head = grow(head_, n, "embedding grouping heads");
  std::int64_t* group = grow(group_, n, "embedding grouping groups");
  launch(backend_, stream, n, kernels::GroupHeads{sorted_keys, head});
#ifdef RECMIX_HAVE_CUDA
  if (cub) {
    cuda::exclusive_sum(stream.native(), temp, temp_bytes, head, group, n);
    backend_.note_launch();
  }
#endif
  if (!cub) launch(backend_, stream, 1, kernels::ExclusiveSum{head, group, n});
  launch(backend_, stream, n,
         kernels::GroupScatter{sorted_keys, sorted_vals, bag_of, bag_scale, head, group, unique, entry_offsets,
                               entry_grad, entry_scale, n, groups});
  if (n == 0) launch(backend_, stream, 1, kernels::GroupTotal{head, group, n, groups, entry_offsets});
}

void DeviceGrouping::fill(kernels::UpdateRows& f) const {
  f.unique_rows = unique_.data();
  f.entry_offsets = entry_offsets_.data();
  f.entry_grad = entry_grad_.data();
  f.entry_scale = scaled_ ? entry_scale_.data() : nullptr;
  f.unique_count = groups_.data();
}

}  // namespace recmix::embedding
